"""The collector configs against the schema the project keeps (collector-config/schema/), and
the docker-compose file's hardening. No collector binary runs here (docs/ops.md)."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
import yaml

from .conftest import COLLECTOR, ROOT

_spec = importlib.util.spec_from_file_location("otelcol_validate", COLLECTOR / "schema" / "validate.py")
validate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(validate)

GATEWAY = COLLECTOR / "otel-collector.yaml"
AGENT = COLLECTOR / "otel-collector-agent.yaml"
FLEET = COLLECTOR / "otel-collector-fleet.yaml"
RENAME_ENVIRONMENT = ('set(attributes["deployment.environment.name"], attributes["deployment.environment"]) '
                      'where attributes["deployment.environment.name"] == nil')
TRACES_TO_BACKEND = {"OTELCOL_TRACES_EXPORTER": "otlp/traces"}


def errors_of(text: str, tmp_path, variants=(TRACES_TO_BACKEND,)) -> list[str]:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    try:
        validate.check(path, list(variants))
    except validate.ConfigError as exc:
        return exc.errors
    return []


def test_gateway_config_is_valid_under_defaults_and_with_a_traces_backend():
    validate.check(GATEWAY, [TRACES_TO_BACKEND])


def test_agent_config_is_valid():
    validate.check(AGENT)


def test_traces_exporter_default_is_debug_and_backend_is_unused_without_the_variant():
    config = yaml.safe_load(GATEWAY.read_text())
    errors: list[str] = []
    expanded = validate.expand(config, {}, errors)
    assert errors == []
    assert expanded["service"]["pipelines"]["traces"]["exporters"] == ["debug"]
    with pytest.raises(validate.ConfigError, match="'otlp/traces' is defined but no pipeline uses it"):
        validate.check(GATEWAY)


def test_fleet_config_is_valid():
    validate.check(FLEET, [TRACES_TO_BACKEND])


def test_the_fleet_config_folds_processes_and_keeps_the_environment():
    """Short-lived processes: no per-process label, deltas summed into cumulative series, the
    environment (either semconv name) and a bounded writer slot kept."""
    expanded = validate.expand(yaml.safe_load(FLEET.read_text()), {}, [])
    statements = expanded["processors"]["transform/fold"]["metric_statements"][0]["statements"]
    assert statements == [RENAME_ENVIRONMENT, 'keep_keys(attributes, ["service.name", "service.namespace", '
                          '"deployment.environment.name", "otel_tokens.writer"])']
    assert "service.instance.id" not in statements[1]
    processors = expanded["service"]["pipelines"]["metrics"]["processors"]
    assert processors.index("transform/fold") < processors.index("deltatocumulative") < processors.index("batch")
    # a folded series outlives the runs between which it is quiet
    assert expanded["exporters"]["prometheus"]["metric_expiration"] == "2h"
    assert expanded["processors"]["deltatocumulative"]["max_stale"] == "1h"


@pytest.mark.parametrize("path", [GATEWAY, AGENT, FLEET], ids=["gateway", "agent", "fleet"])
def test_listen_addresses_default_to_loopback(path):
    expanded = validate.expand(yaml.safe_load(path.read_text()), {}, [])
    listen = [p["endpoint"] for p in expanded["receivers"]["otlp"]["protocols"].values()]
    listen += [e["endpoint"] for n, e in expanded["exporters"].items() if n.startswith("prometheus")]
    listen += [e["endpoint"] for e in (expanded.get("extensions") or {}).values()]
    assert listen and all(a.startswith("127.0.0.1:") for a in listen), listen


def test_gateway_keeps_service_labels_on_prometheus():
    expanded = validate.expand(yaml.safe_load(GATEWAY.read_text()), {}, [])
    assert expanded["exporters"]["prometheus"]["resource_to_telemetry_conversion"] == {"enabled": True}
    statements = expanded["processors"]["transform/resource_labels"]["metric_statements"][0]["statements"]
    assert statements == [RENAME_ENVIRONMENT, 'keep_keys(attributes, ["service.name", "service.namespace", '
                          '"service.instance.id", "deployment.environment.name"])']
    assert expanded["exporters"]["prometheus"]["enable_open_metrics"] is True  # exemplars
    assert "transform/resource_labels" in expanded["service"]["pipelines"]["metrics"]["processors"]


def test_env_variables_are_expanded_with_types():
    expanded = validate.expand(yaml.safe_load(GATEWAY.read_text()),
                               {"OTELCOL_MEMORY_LIMIT_MIB": "2048", "OTELCOL_TRACES_OTLP_INSECURE": "false"}, [])  # fmt: skip
    assert expanded["processors"]["memory_limiter"]["limit_mib"] == 2048
    assert expanded["exporters"]["otlp/traces"]["tls"]["insecure"] is False


def test_the_commented_remote_write_alternative_is_valid(tmp_path):
    """Uncommenting the prometheusremotewrite block and adding it to the metrics pipeline (as
    the comment says) gives a valid config."""
    text = GATEWAY.read_text()
    block = re.search(r"  # prometheusremotewrite:\n(?:  #.*\n)+", text).group(0)
    text = text.replace(block, re.sub(r"(?m)^  # ", "  ", block))
    text = text.replace("      exporters: [prometheus]", "      exporters: [prometheus, prometheusremotewrite]")
    assert "\n  prometheusremotewrite:\n" in text
    assert errors_of(text, tmp_path) == []


# --- the schema and the wiring checks reject what they should --------------------------------

MUTATIONS = {
    "unknown key": (("    send_batch_size: 8192", "    send_batch_sise: 8192"),
                    "Additional properties are not allowed ('send_batch_sise'"),
    "unknown component type": (("  debug:\n    verbosity: basic", "  zipkin:\n    endpoint: x:1"),
                               "'zipkin' does not match any of the regexes"),
    "endpoint without port": (("${env:OTELCOL_OTLP_GRPC_ENDPOINT:-127.0.0.1:4317}", "localhost"),
                              "'localhost' does not match"),
    "port out of range": (("${env:OTELCOL_PROMETHEUS_ENDPOINT:-127.0.0.1:8889}", "127.0.0.1:70000"),
                          "'127.0.0.1:70000' does not match"),
    "undefined component": (("      exporters: [prometheus]", "      exporters: [prometheus, otlphttp]"),
                            "exporter 'otlphttp' is not defined"),
    "unused component": (("  debug:\n    verbosity: basic",
                          "  debug:\n    verbosity: basic\n  otlphttp:\n    endpoint: http://127.0.0.1:4318"),
                         "exporters: 'otlphttp' is defined but no pipeline uses it"),
    "memory_limiter not first": (("[memory_limiter, transform/resource_labels, batch]",
                                  "[transform/resource_labels, memory_limiter, batch]"),
                                 "memory_limiter must be the first processor"),
    "prometheus exporter on traces": (("        - ${env:OTELCOL_TRACES_EXPORTER:-debug}",
                                       "        - ${env:OTELCOL_TRACES_EXPORTER:-debug}\n        - prometheus"),
                                      "exporter 'prometheus' cannot export traces"),
    "reference without default": (("${env:OTELCOL_OTLP_HTTP_ENDPOINT:-127.0.0.1:4318}", "${env:OTELCOL_NOPE}"),
                                  "${env:OTELCOL_NOPE} has no default and OTELCOL_NOPE is not set"),
    "bad duration": (("    timeout: 5s", "    timeout: 5 seconds"), "'5 seconds' does not match"),
    "extension not enabled": (("  extensions: [health_check]\n", ""),
                              "'health_check' is defined but not enabled"),
}  # fmt: skip


@pytest.mark.parametrize("name", MUTATIONS)
def test_an_invalid_config_is_rejected(name, tmp_path):
    (old, new), expected = MUTATIONS[name]
    text = GATEWAY.read_text()
    assert old in text
    errors = errors_of(text.replace(old, new, 1), tmp_path)
    assert errors, name
    if expected:
        assert any(expected in e for e in errors), errors


def test_a_bad_variant_value_is_rejected(tmp_path):
    errors = errors_of(GATEWAY.read_text(), tmp_path, [{"OTELCOL_TRACES_EXPORTER": "jaeger"}])
    assert any("exporter 'jaeger' is not defined" in e for e in errors), errors


def test_command_line(tmp_path, capsys):
    assert validate.main([str(GATEWAY), "--variant", "OTELCOL_TRACES_EXPORTER=otlp/traces"]) == 0
    broken = tmp_path / "broken.yaml"
    broken.write_text(GATEWAY.read_text().replace("verbosity: basic", "verbosity: loud"))
    assert validate.main([str(broken), "--variant", "OTELCOL_TRACES_EXPORTER=otlp/traces"]) == 1
    assert "'loud' is not one of" in capsys.readouterr().err


# --- docker-compose.yml -----------------------------------------------------------------------

COMPOSE = COLLECTOR / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_runs_the_three_services_with_pinned_images(compose):
    services = compose["services"]
    assert set(services) == {"otelcol", "prometheus", "grafana"}
    for name, service in services.items():
        image = service["image"]
        assert re.fullmatch(r"[\w./-]+:v?\d+\.\d+\.\d+", image), (name, image)
    assert services["otelcol"]["image"].startswith("otel/opentelemetry-collector-contrib:")


def test_compose_mounts_this_repository_s_files(compose):
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (COLLECTOR / source).resolve().exists(), (name, source)
                assert volume.endswith(":ro"), (name, volume)
    mounted = {v.split(":")[0] for s in compose["services"].values() for v in s.get("volumes", [])}
    assert {"./otel-collector.yaml", "./prometheus.yml", "./rules", "../grafana/provisioning",
            "../grafana/dashboards"} <= mounted  # fmt: skip


def test_compose_publishes_on_loopback_only(compose):
    ports = [p for s in compose["services"].values() for p in s.get("ports", [])]
    assert ports
    assert all(str(p).startswith("127.0.0.1:") for p in ports), ports


def test_compose_grafana_is_hardened(compose):
    env = compose["services"]["grafana"]["environment"]
    password = env["GF_SECURITY_ADMIN_PASSWORD"]
    # no default: compose stops with this message when GF_ADMIN_PASSWORD is unset
    assert re.fullmatch(r"\$\{GF_ADMIN_PASSWORD:\?[^}]+\}", password), password
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert env["GF_USERS_ALLOW_SIGN_UP"] == "false"
    assert "tls" in COMPOSE.read_text().lower()


def test_compose_collector_environment_matches_the_config(compose):
    env = compose["services"]["otelcol"]["environment"]
    referenced = set(re.findall(r"\$\{env:([A-Z_]+)", GATEWAY.read_text()))
    assert set(env) <= referenced
    assert env["OTELCOL_PROMETHEUS_ENDPOINT"].endswith(":8889")
    targets = yaml.safe_load((COLLECTOR / "prometheus.yml").read_text())["scrape_configs"]
    assert "otelcol:8889" in [t for job in targets for c in job["static_configs"] for t in c["targets"]]
    assert "127.0.0.1:9464" in [t for job in targets for c in job["static_configs"] for t in c["targets"]]


def test_docs_say_no_collector_binary_runs_here():
    text = (ROOT / "docs" / "ops.md").read_text()
    assert "no collector binary" in text.lower()


# --- Grafana provisioning ---------------------------------------------------------------------

PROVISIONING = ROOT / "grafana" / "provisioning"


def _mounts(service: dict) -> dict[str, str]:
    """A compose service's bind mounts of this repository: container path -> host path."""
    found = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("."):
            found[target] = str((COLLECTOR / source).resolve())
    return found


def _datasources() -> list[dict]:
    return [ds for path in sorted((PROVISIONING / "datasources").glob("*.yml"))
            for ds in yaml.safe_load(path.read_text())["datasources"]]  # fmt: skip


def _datasource_refs(node):
    """Every ``"datasource": {...}`` reference in a dashboard's JSON (panels, targets)."""
    if isinstance(node, dict):
        if isinstance(node.get("datasource"), dict):
            yield node["datasource"]
        node = list(node.values())
    if isinstance(node, list):
        for item in node:
            yield from _datasource_refs(item)


def test_compose_provisions_every_dashboard(compose):
    """Every dashboard JSON of the repository (the chargeback one included) is in a folder a
    provisioned dashboard provider loads, as compose mounts it."""
    mounts = _mounts(compose["services"]["grafana"])
    assert mounts["/etc/grafana/provisioning"] == str(PROVISIONING)
    providers = [p for path in (PROVISIONING / "dashboards").glob("*.yml")
                 for p in yaml.safe_load(path.read_text())["providers"]]  # fmt: skip
    loaded = {mounts.get(p["options"]["path"]) for p in providers}
    dashboards = {str(p.parent) for p in (ROOT / "grafana").rglob("*.json")}
    assert str(ROOT / "grafana" / "ledger") in dashboards
    assert dashboards == loaded


def test_every_datasource_a_dashboard_or_link_names_is_provisioned():
    """Each dashboard's datasource (its $datasource variable's type, or a fixed uid) and each
    exemplar link's datasource uid is a provisioned datasource: no link points nowhere."""
    datasources = _datasources()
    uids = {ds["uid"] for ds in datasources}
    types = {ds["type"] for ds in datasources}
    for path in (ROOT / "grafana").rglob("*.json"):
        dashboard = json.loads(path.read_text())
        variables = {v["name"]: v["query"] for v in dashboard["templating"]["list"]
                     if v["type"] == "datasource"}  # fmt: skip
        refs = list(_datasource_refs(dashboard))
        assert refs, path.name
        for ref in refs:
            uid = ref.get("uid", "")
            if uid.startswith("$"):
                assert variables[uid.strip("${}")] in types, (path.name, uid)
                assert ref["type"] in types, (path.name, ref)
            else:
                assert uid in uids, (path.name, uid)
    links = [d["datasourceUid"] for ds in datasources
             for d in ds.get("jsonData", {}).get("exemplarTraceIdDestinations", [])]  # fmt: skip
    assert set(links) <= uids, "an exemplar link to a datasource that is not provisioned"


def test_the_ledger_datasource_is_configured_from_the_environment(compose):
    """The PostgreSQL datasource's address, database, role and password come from variables
    that compose passes to Grafana (each with a default, the password's empty)."""
    (ledger,) = [ds for ds in _datasources() if ds["type"] == "grafana-postgresql-datasource"]
    text = (PROVISIONING / "datasources" / "ledger.yml").read_text()
    used = set(re.findall(r"\$\{(\w+)\}", text))
    env = compose["services"]["grafana"]["environment"]
    assert used and used <= set(env)
    for name in used:
        assert env[name].startswith(f"${{{name}:-"), name
    assert ledger["url"] == "${OTEL_TOKENS_GRAFANA_LEDGER_HOST}"
    assert ledger["secureJsonData"]["password"] == "${OTEL_TOKENS_GRAFANA_LEDGER_PASSWORD}"
