"""The settings module: every variable read once, validated, never fatal."""

from __future__ import annotations

import logging

import pytest

from otel_tokens import settings
from otel_tokens.settings import Settings, read, with_arguments

BOOLEANS = ["OTEL_TOKENS_OPENAI_INCLUDE_USAGE", "OTEL_TOKENS_COPILOT_JSON",
            "OTEL_TOKENS_COPILOT_USAGE_FILE", "OTEL_TOKENS_BUDGET_ENFORCE", "OTEL_TOKENS_DEBUG",
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "OTEL_TOKENS_EXEMPLARS"]  # fmt: skip
FIELD = {"OTEL_TOKENS_EXEMPLARS": "exemplars",
         "OTEL_TOKENS_OPENAI_INCLUDE_USAGE": "openai_include_usage",
         "OTEL_TOKENS_COPILOT_JSON": "copilot_json",
         "OTEL_TOKENS_COPILOT_USAGE_FILE": "copilot_usage_file", "OTEL_TOKENS_DEBUG": "debug",
         "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "capture_content"}  # fmt: skip


@pytest.mark.parametrize("name", BOOLEANS)
@pytest.mark.parametrize("value, expected", [
    ("true", True), ("TRUE", True), ("1", True), ("yes", True), ("On", True),
    ("false", False), ("False", False), ("0", False), ("NO", False), ("off", False),
    ("", False), ("  ", False),
])  # fmt: skip
def test_booleans_accept_every_usual_spelling_in_any_case(name, value, expected):
    found = read({name: value})
    assert found.problems == ()
    if value.strip() == "":  # unset: the setting's default
        expected = getattr(read({}), FIELD[name]) if name in FIELD else False
    if name in FIELD:
        assert getattr(found, FIELD[name]) is expected
    else:
        assert (found.default_budget is None) or found.default_budget.enforce is expected


@pytest.mark.parametrize("name", BOOLEANS)
@pytest.mark.parametrize("value", ["maybe", "2", "enabled", "tru"])
def test_anything_else_is_a_problem_naming_the_variable_value_and_what_is_accepted(name, value):
    found = read({name: value})
    (problem,) = found.problems
    assert (problem.name, problem.value) == (name, value)
    line = problem.line()
    assert name in line and repr(value) in line and "true/false, 1/0, yes/no or on/off" in line
    assert "\n" not in line


@pytest.mark.parametrize("name, value, field, default", [
    ("OTEL_TOKENS_LEDGER_MAX_HISTORY", "0", "ledger_max_history", 10_000),
    ("OTEL_TOKENS_LEDGER_MAX_HISTORY", "yes", "ledger_max_history", 10_000),
    ("OTEL_TOKENS_MAX_ATTRIBUTE_VALUES", "-3", "max_attribute_values", 200),
    ("OTEL_TOKENS_PROMETHEUS_PORT", "70000", "prometheus_port", 9464),
    ("OTEL_EXPORTER_PROMETHEUS_PORT", "http", "prometheus_port", 9464),
    ("OTEL_METRICS_EXPORTER", "carrier-pigeon", "metrics_exporter", None),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", "traces_protocol", None),
    ("OTEL_TOKENS_EXIT_TIMEOUT", "-1", "exit_timeout", 1.5),
    ("OTEL_TOKENS_EXIT_TIMEOUT", "soon", "exit_timeout", 1.5),
])  # fmt: skip
def test_a_bad_value_keeps_the_default(name, value, field, default):
    found = read({name: value})
    assert getattr(found, field) == default
    assert [p.name for p in found.problems] == [name] or name == "OTEL_EXPORTER_OTLP_PROTOCOL"


def test_good_values_and_defaults():
    assert read({}) == Settings(spike=read({}).spike)
    found = read({"OTEL_TOKENS_LEDGER_MAX_HISTORY": "7", "OTEL_TOKENS_PROMETHEUS_PORT": "0",
                  "OTEL_METRICS_EXPORTER": "OTLP", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                  "OTEL_TOKENS_CLI_NAMES": "my-agent=claude, gemini",
                  "OTEL_TOKENS_BACKENDS": "pkg.mod:Cls.invoke=codex;other:f"})  # fmt: skip
    assert found.problems == ()
    assert (found.ledger_max_history, found.prometheus_port, found.metrics_exporter) == (7, 0, "otlp")
    assert found.metrics_endpoint == found.traces_endpoint == "http://c:4318"
    assert found.cli_names == {"my-agent": "claude", "gemini": "gemini"}
    assert found.backends == (("pkg.mod:Cls.invoke", "codex"), ("other:f", "copilot"))


def test_configure_arguments_are_checked_like_variables(caplog):
    caplog.set_level(logging.WARNING, logger="otel_tokens")
    base = read({})
    applied = with_arguments(base, service_name="svc", prometheus_port=0, prometheus_host=None)
    assert (applied.service_name, applied.prometheus_port) == ("svc", 0)
    bad = with_arguments(base, prometheus_port="9464", service_name="")
    assert (bad.prometheus_port, bad.service_name) == (9464, None)
    assert [p.name for p in bad.problems] == ["configure(prometheus_port=...)", "configure(service_name=...)"]
    assert len([r for r in caplog.records if "configure(" in r.getMessage()]) == 2


def test_read_once_until_reloaded(monkeypatch):
    first = settings.current()
    monkeypatch.setenv("OTEL_TOKENS_LEDGER_MAX_HISTORY", "5")
    assert settings.current() is first  # read once
    assert settings.reload().ledger_max_history == 5
    assert settings.current().ledger_max_history == 5
