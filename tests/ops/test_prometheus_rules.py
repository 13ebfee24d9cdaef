"""promtool checks the Prometheus configuration and the rules, and runs the alert unit tests;
every alert of the rule files has unit tests that expect it to fire and to stay silent."""

from __future__ import annotations

import subprocess

import yaml

from .conftest import COLLECTOR, RULE_FILES

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
        "OtelTokensSpendOverBudget", "OtelTokensTokenRateSpike", "OtelTokensContextNearlyFull",
        "OtelTokensPremiumRequestBurn", "OtelTokensEstimateErrorDrift", "OtelTokensUnpricedModel",
        "OtelTokensInstrumentationErrors", "OtelTokensMetricsAbsent",
    }  # fmt: skip
    for name, rule in rules.items():
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        assert {"summary", "description"} <= set(rule["annotations"]), name


def test_a_broken_expectation_fails(promtool, tmp_path):
    """The unit tests can fail: the same file with one expected value changed is rejected."""
    text = ALERT_TESTS.read_text().replace("LLM spend is $30.00/h", "LLM spend is $31.00/h")
    assert text != ALERT_TESTS.read_text()
    broken = COLLECTOR / "tests" / f".broken-{tmp_path.name}.test.yml"
    broken.write_text(text)
    try:
        result = run(promtool, "test", "rules", str(broken))
    finally:
        broken.unlink()
    assert result.returncode != 0
    assert "OtelTokensSpendOverBudget" in result.stdout + result.stderr
