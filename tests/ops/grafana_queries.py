"""Run Grafana dashboard queries the way Grafana's Prometheus datasource would: template
variables resolved in order through the label-values API, macros ($__rate_interval, $__range,
$__interval) computed from the time range and the datasource's scrape interval, and each panel
query sent as a range or instant query."""

from __future__ import annotations

import json
import math
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

#: Grafana's rangeutil.roundInterval: (upper bound in ms, rounded interval in ms)
_ROUND = [(10, 1), (15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500), (1500, 1000),
          (3500, 2000), (7500, 5000), (12500, 10000), (17500, 15000), (25000, 20000),
          (45000, 30000), (90000, 60000), (210000, 120000), (450000, 300000), (750000, 600000),
          (1050000, 900000), (1500000, 1200000), (2700000, 1800000), (5400000, 3600000),
          (9000000, 7200000), (16200000, 10800000), (32400000, 21600000), (86400000, 43200000),
          (604800000, 86400000), (1814400000, 604800000), (3628800000, 1209600000)]  # fmt: skip


def round_interval(ms: float) -> int:
    for bound, value in _ROUND:
        if ms <= bound:
            return value
    return 2592000000


@dataclass
class Grafana:
    """The context of one dashboard view: Prometheus URL, time range, scrape interval."""

    prometheus: str
    start: float
    end: float
    scrape_interval_s: int = 15
    max_data_points: int = 1000
    values: dict[str, list[str] | None] = field(default_factory=dict)  # None: All

    @property
    def interval_ms(self) -> int:
        interval = round_interval((self.end - self.start) * 1000 / self.max_data_points)
        return max(interval, self.scrape_interval_s * 1000)

    def macros(self) -> dict[str, str]:
        interval_s = self.interval_ms / 1000
        rate = max(interval_s + self.scrape_interval_s, 4 * self.scrape_interval_s)
        range_s = round(self.end - self.start)
        return {"__rate_interval": f"{_ms(rate * 1000)}", "__interval": _ms(self.interval_ms),
                "__interval_ms": str(self.interval_ms), "__range": f"{range_s}s",
                "__range_s": str(range_s), "__range_ms": str(range_s * 1000)}  # fmt: skip

    def api(self, path: str, **params) -> dict:
        url = f"{self.prometheus}{path}?{urllib.parse.urlencode(params, doseq=True)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    # --- variables -------------------------------------------------------------------------

    def interpolate(self, text: str, variables: dict[str, dict]) -> str:
        macros = self.macros()

        def value(match: re.Match) -> str:
            name = match.group(1) or match.group(2) or match.group(3)
            if name in macros:
                return macros[name]
            if name == "datasource" or name not in variables:
                return match.group(0)
            var = variables[name]
            chosen = self.values.get(name)
            if chosen is None:  # All
                return var.get("allValue") or "(" + "|".join(map(_regex_escape, self.options[name])) + ")"
            if var.get("multi") or var.get("includeAll"):
                escaped = [_regex_escape(v) for v in chosen]
                return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"
            return chosen[0]

        return re.sub(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)", value, text)

    def resolve_variables(self, dashboard: dict) -> dict[str, list[str]]:
        """Each query variable's options, in order (a variable may use the ones before it)."""
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        self.options: dict[str, list[str]] = {}
        for name, var in variables.items():
            if var["type"] != "query":
                continue
            self.options[name] = self.variable_values(self.interpolate(var["query"], variables),
                                                      var.get("regex") or "")
            if not (var.get("multi") or var.get("includeAll")) and self.values.get(name) is None:
                # a single-value variable without All starts at its first option
                self.values[name] = self.options[name][:1]
        return self.options

    def variable_values(self, query: str, regex: str = "") -> list[str]:
        """A query variable's options: ``label_values(...)`` or ``query_result(...)`` (each
        result line as Grafana writes it, ``name{labels} value time``, through ``regex``'s
        first group)."""
        m = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S)
        if not m:
            return self.label_values(query)
        lines = []
        for series in self.api("/api/v1/query", query=m.group(1), time=self.end)["result"]:
            labels = dict(series["metric"])
            name = labels.pop("__name__", "")
            text = ",".join(f'{k}="{v}"' for k, v in labels.items())
            lines.append(f"{name}{{{text}}} {series['value'][1]} {int(series['value'][0] * 1000)}")
        if regex:
            pattern = re.compile(regex.strip("/"))
            lines = [found.group(1) for line in lines if (found := pattern.search(line))]
        return sorted(set(lines))

    def label_values(self, query: str) -> list[str]:
        m = re.fullmatch(r"\s*label_values\((?:(.*),\s*)?(\w+)\)\s*", query, re.S)
        assert m, f"unsupported variable query {query!r}"
        params = {"start": self.start, "end": self.end}
        if m.group(1):
            params["match[]"] = m.group(1)
        return sorted(self.api(f"/api/v1/label/{m.group(2)}/values", **params))

    # --- panels -----------------------------------------------------------------------------

    def run(self, dashboard: dict, target: dict) -> list[dict]:
        variables = {v["name"]: v for v in dashboard["templating"]["list"]}
        expr = self.interpolate(target["expr"], variables)
        if target.get("instant"):
            return self.api("/api/v1/query", query=expr, time=self.end)["result"]
        step = max(self.interval_ms / 1000, 1)
        return self.api("/api/v1/query_range", query=expr, start=self.start, end=self.end,
                        step=step)["result"]  # fmt: skip

    def failures(self, dashboard: dict) -> list[str]:
        """Every variable and panel query that returns no data (no finite value)."""
        problems = []
        for name, options in self.resolve_variables(dashboard).items():
            if not options:
                problems.append(f"variable {name}: no values")
        for panel in panels(dashboard):
            for target in panel.get("targets", []):
                try:
                    result = self.run(dashboard, target)
                except Exception as exc:  # a query Prometheus rejects
                    problems.append(f"panel {panel['title']!r} {target['refId']}: {exc}")
                    continue
                if not has_data(result):
                    problems.append(f"panel {panel['title']!r} {target['refId']}: no data "
                                    f"for {self.interpolate(target['expr'], {})}")  # fmt: skip
        return problems


def panels(dashboard: dict) -> list[dict]:
    found = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))  # collapsed rows
    return [p for p in found if p.get("type") != "row"]


def has_data(result: list[dict]) -> bool:
    for series in result:
        points = series.get("values") or [series.get("value")]
        if any(p is not None and math.isfinite(float(p[1])) for p in points):
            return True
    return False


def _ms(ms: float) -> str:
    return f"{int(ms // 1000)}s" if ms % 1000 == 0 else f"{int(ms)}ms"


def _regex_escape(value: str) -> str:
    """Grafana's prometheusSpecialRegexEscape for multi-value and All-able variables."""
    return re.sub(r"([\\^$*+?.()|{}\[\]])", r"\\\\\1", value)
