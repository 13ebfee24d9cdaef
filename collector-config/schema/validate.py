"""Check an OpenTelemetry Collector config of collector-config/ without a collector binary.

    python collector-config/schema/validate.py collector-config/otel-collector.yaml \
        [--variant OTELCOL_TRACES_EXPORTER=otlp/traces ...]

1. ``${env:NAME:-default}`` references are expanded as the collector does (a value that is one
   whole reference takes the YAML type of its expansion); a reference without a default must
   be set, so every listen address has a default.
2. The result is validated against ``otelcol.schema.json`` (the components otel_tokens uses;
   unknown component types and unknown keys are errors, endpoints must be well formed).
3. Wiring: every component a pipeline names is defined, every defined component is used by a
   pipeline (over the union of the variants given: the default environment plus each
   ``--variant``), every extension is enabled, ``memory_limiter`` is the first processor and
   ``batch`` the last, and each exporter suits its pipeline's signal.

This is not the collector's own validation (``otelcol-contrib validate``), which needs the
binary; it is what the project can check on machines without it. Requires PyYAML, jsonschema.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
from collections.abc import Mapping
from typing import Any

import jsonschema
import yaml

SCHEMA_PATH = pathlib.Path(__file__).with_name("otelcol.schema.json")
_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: exporter/processor types that only make sense for some signals
_SIGNALS = {
    "prometheus": {"metrics"},
    "prometheusremotewrite": {"metrics"},
    "loadbalancing": {"traces", "metrics", "logs"},
    "otlp": {"traces", "metrics", "logs"},
    "otlphttp": {"traces", "metrics", "logs"},
    "debug": {"traces", "metrics", "logs"},
}


class ConfigError(Exception):
    """The config is invalid; ``errors`` lists every problem found."""

    def __init__(self, errors: list[str]):
        super().__init__("\n".join(errors))
        self.errors = errors


def expand(node: Any, env: Mapping[str, str], errors: list[str], where: str = "") -> Any:
    """Expand ``${env:NAME:-default}`` in every string of ``node``."""
    if isinstance(node, dict):
        return {k: expand(v, env, errors, f"{where}.{k}" if where else str(k)) for k, v in node.items()}
    if isinstance(node, list):
        return [expand(v, env, errors, f"{where}[{i}]") for i, v in enumerate(node)]
    if not isinstance(node, str) or "${" not in node:
        return node

    def value(match: re.Match) -> str:
        name, default = match.group(1), match.group(2)
        if name in env:
            return env[name]
        if default is None:
            errors.append(f"{where}: ${{env:{name}}} has no default and {name} is not set")
            return ""
        return default

    whole = _REF.fullmatch(node)
    expanded = _REF.sub(value, node)
    if "${" in expanded:
        errors.append(f"{where}: unsupported reference in {node!r} (use ${{env:NAME:-default}})")
    if whole:  # the collector types a value that is exactly one reference
        try:
            return yaml.safe_load(expanded) if expanded else expanded
        except yaml.YAMLError:
            return expanded
    return expanded


def _type(component_id: str) -> str:
    return component_id.split("/", 1)[0]


def _check_one(config: dict, env: Mapping[str, str]) -> tuple[list[str], set[tuple[str, str]]]:
    errors: list[str] = []
    expanded = expand(config, env, errors)
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
    for error in sorted(validator.iter_errors(expanded), key=lambda e: list(e.path)):
        path = ".".join(str(p) for p in error.path) or "(top)"
        errors.append(f"{path}: {error.message}")
    used: set[tuple[str, str]] = set()
    service = expanded.get("service") or {}
    pipelines = service.get("pipelines") or {}
    if not isinstance(pipelines, dict):
        return errors, used
    for name, pipeline in pipelines.items():
        if not isinstance(pipeline, dict):
            continue
        signal = name.split("/", 1)[0]
        for section in ("receivers", "processors", "exporters"):
            defined = expanded.get(section) or {}
            for component in pipeline.get(section) or []:
                if not isinstance(component, str):
                    continue
                used.add((section, component))
                if component not in defined:
                    errors.append(f"service.pipelines.{name}: {section[:-1]} {component!r} is not defined")
                if section == "exporters":
                    allowed = _SIGNALS.get(_type(component))
                    if allowed is not None and signal not in allowed:
                        errors.append(f"service.pipelines.{name}: exporter {component!r} cannot export {signal}")
        processors = [p for p in pipeline.get("processors") or [] if isinstance(p, str)]
        limiters = [i for i, p in enumerate(processors) if _type(p) == "memory_limiter"]
        if limiters != [0]:
            errors.append(f"service.pipelines.{name}: memory_limiter must be the first processor, once")
        batches = [i for i, p in enumerate(processors) if _type(p) == "batch"]
        if batches and batches != [len(processors) - 1]:
            errors.append(f"service.pipelines.{name}: batch must be the last processor")
        for p in processors:
            statements = (expanded.get("processors") or {}).get(p) or {}
            if _type(p) == "transform" and signal != "metrics" and "metric_statements" in statements:
                errors.append(f"service.pipelines.{name}: {p!r} transforms metrics only")
    extensions = set(expanded.get("extensions") or {})
    enabled = set(service.get("extensions") or [])
    for missing in sorted(enabled - extensions):
        errors.append(f"service.extensions: {missing!r} is not defined")
    for unused in sorted(extensions - enabled):
        errors.append(f"extensions: {unused!r} is defined but not enabled in service.extensions")
    return errors, used


def check(path: str | pathlib.Path, variants: list[Mapping[str, str]] | None = None) -> None:
    """Raise ``ConfigError`` unless the file is valid under the default environment (``{}``,
    every default) and under each variant."""
    config = yaml.safe_load(pathlib.Path(path).read_text())
    if not isinstance(config, dict):
        raise ConfigError([f"{path}: not a YAML mapping"])
    errors: list[str] = []
    used: set[tuple[str, str]] = set()
    for env in [{}, *(variants or [])]:
        found, seen = _check_one(config, env)
        label = "defaults" if not env else ", ".join(f"{k}={v}" for k, v in env.items())
        errors += [f"[{label}] {e}" for e in found if f"[defaults] {e}" not in errors]
        used |= seen
    for section in ("receivers", "processors", "exporters"):
        for component in config.get(section) or {}:
            if (section, component) not in used:
                errors.append(f"{section}: {component!r} is defined but no pipeline uses it")
    if errors:
        raise ConfigError(errors)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("--variant", action="append", default=[],
                        help="NAME=VALUE[,NAME=VALUE]: also check with these variables set")
    args = parser.parse_args(argv)
    variants = [dict(kv.split("=", 1) for kv in v.split(",")) for v in args.variant]
    try:
        check(args.config, variants)
    except ConfigError as exc:
        print(f"{args.config}: invalid", *exc.errors, sep="\n  ", file=sys.stderr)
        return 1
    print(f"{args.config}: valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
