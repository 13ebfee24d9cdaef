"""promtool checks the Prometheus configuration and the rules, and runs the alert unit tests;
every alert of the rule files has unit tests that expect it to fire and to stay silent."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess

import yaml

from .conftest import COLLECTOR, GRAFANA, RULE_FILES

_spec = importlib.util.spec_from_file_location("grafana_generate_rules", GRAFANA / "generate.py")

ALERT_TESTS = COLLECTOR / "tests" / "alerts.test.yml"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=COLLECTOR)


def test_promtool_check_config(promtool):
    result = run(promtool, "check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    # the config loads every rule file of rules/
    assert f"SUCCESS: {len(RULE_FILES)} rule files found" in result.stdout


def test_promtool_check_rules(promtool):
    result = run(promtool, "check", "rules", *map(str, RULE_FILES))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests(promtool):
    result = run(promtool, "test", "rules", str(ALERT_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def alerts() -> dict[str, dict]:
    found = {}
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    found[rule["alert"]] = rule
    return found


def test_every_alert_is_tested_firing_and_silent():
    tests = yaml.safe_load(ALERT_TESTS.read_text())
    assert sorted(tests["rule_files"]) == sorted(f"../rules/{p.name}" for p in RULE_FILES)
    fires, silent = set(), set()
    for test in tests["tests"]:
        for case in test.get("alert_rule_test", []):
            (fires if case.get("exp_alerts") else silent).add(case["alertname"])
    assert set(alerts()) - fires == set(), "alerts never expected to fire"
    assert set(alerts()) - silent == set(), "alerts never expected to stay silent"


def test_the_issue_s_alerts_exist_with_annotations():
    rules = alerts()
    assert set(rules) == {
        "OtelTokensAnomalies", "OtelTokensSpendOverBudget", "OtelTokensTokenRateSpike",
        "OtelTokensContextNearlyFull", "OtelTokensPremiumRequestBurn", "OtelTokensBackendRateLimited",
        "OtelTokensBackendErrors", "OtelTokensSlowModel", "OtelTokensEstimateErrorDrift",
        "OtelTokensUnpricedModel", "OtelTokensInstrumentationErrors", "OtelTokensMetricsAbsent",
    }  # fmt: skip
    for name, rule in rules.items():
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        assert {"summary", "description"} <= set(rule["annotations"]), name


def test_a_broken_expectation_fails(promtool, tmp_path):
    """The unit tests can fail: the same file with one expected value changed is rejected."""
    text = ALERT_TESTS.read_text().replace("LLM spend is $30.00 in", "LLM spend is $31.00 in")
    assert text != ALERT_TESTS.read_text()
    broken = COLLECTOR / "tests" / f".broken-{tmp_path.name}.test.yml"
    broken.write_text(text)
    try:
        result = run(promtool, "test", "rules", str(broken))
    finally:
        broken.unlink()
    assert result.returncode != 0
    assert "OtelTokensSpendOverBudget" in result.stdout + result.stderr


def _generate():
    try:
        module = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(module)
    except ImportError as exc:  # grafana-foundation-sdk missing
        import pytest

        pytest.skip(f"grafana/generate.py cannot load: {exc}")
    return module


def rules() -> list[dict]:
    return [rule for path in RULE_FILES for group in yaml.safe_load(path.read_text())["groups"]
            for rule in group["rules"]]  # fmt: skip


def test_counters_are_totalled_with_their_first_samples():
    """No rule reads a counter with bare rate() or increase(): each increase() is part of the
    dashboards' counted() expression for the same selector and window (a process scraped once
    counts)."""
    counted = _generate().counted
    flat = lambda text: " ".join(text.split())  # noqa: E731
    for rule in rules():
        expr = flat(rule["expr"])
        name = rule.get("alert") or rule.get("record")
        assert "rate(" not in expr, name
        for selector, window in re.findall(r"increase\((\S+?\{[^}]*\})\[(\w+)\]\)", expr):
            assert flat(counted(selector, window)) in expr, (name, selector)
            assert 'otel_scope_name="otel_tokens"' in selector, (name, selector)


def test_no_recording_rule_is_unused():
    """Every recording rule is read by an alert (expression or annotation), another rule or a
    dashboard."""
    readers = [json.dumps(rule) for rule in rules()]
    readers += [path.read_text() for path in (GRAFANA / "dashboards").glob("*.json")]
    for rule in rules():
        if "record" in rule:
            name = rule["record"]
            used = [r for r in readers if re.search(re.escape(name) + r"(?![\w:])", r)
                    and f'"record": "{name}"' not in r]  # fmt: skip
            assert used, f"{name} is read by nothing"
