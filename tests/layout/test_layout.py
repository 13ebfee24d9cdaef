"""The package's shape, read from its source: capture -> account -> emit, one settings module,
no import cycle, no long function. Imports are read with ``ast`` (function-local and
``TYPE_CHECKING`` ones included), so a rule broken anywhere in a module is found."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import tokenize

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "otel_tokens"


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def imports_of(name: str) -> set[str]:
    """Every module an import statement of ``name`` names (``from pkg import mod`` names
    ``pkg.mod`` when that is a module, else ``pkg``); outside modules by their full name."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in MODULES else target)
    found.discard(name)
    return found


def _internal(target: str) -> str | None:
    """The otel_tokens module ``target`` loads (the closest enclosing one), or None."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def test_wire_formats_import_no_capture_site():
    """One parser per wire format: ``capture/wire/`` is read by the SDK captures, the HTTP,
    gRPC and websocket layers, never the other way round."""
    sites = ("sdk", "http", "grpc", "websocket", "agent_cli", "methods", "frameworks")
    wrong = {name: sorted(m for m in map(_internal, imports_of(name))
                          if m and m.split(".")[2:3] and m.split(".")[2] in sites)  # fmt: skip
             for name in MODULES if name.startswith("otel_tokens.capture.wire")}  # fmt: skip
    assert not {name: found for name, found in wrong.items() if found}


def test_no_import_cycle_among_otel_tokens_modules():
    graph = {name: {m for m in map(_internal, imports_of(name)) if m and m != name} for name in MODULES}
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


def _in(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


LAYER_RULES = {
    # capture only builds call records: no pricing, ledger, state, estimate, recorder or OTel
    "otel_tokens.capture": ("opentelemetry", "otel_tokens.account.pricing",
                            "otel_tokens.account.ledger", "otel_tokens.account.state",
                            "otel_tokens.account.settle", "otel_tokens.account.estimate",
                            "otel_tokens.emit"),
    # account is pure: no OpenTelemetry, nothing of capture or emit
    "otel_tokens.account": ("opentelemetry", "otel_tokens.emit", "otel_tokens.capture",
                            "otel_tokens.handler", "otel_tokens.registry"),
    # emit reads outcomes: it does not price, estimate, settle or write ledgers
    "otel_tokens.emit": ("otel_tokens.account.pricing", "otel_tokens.account.settle",
                         "otel_tokens.account.estimate", "otel_tokens.account.ledger",
                         "otel_tokens.capture", "otel_tokens.handler"),
}  # fmt: skip


@pytest.mark.parametrize("layer", sorted(LAYER_RULES))
def test_layers_import_only_what_the_flow_allows(layer):
    broken = {
        name: sorted(t for t in imports_of(name) if _in(t, *LAYER_RULES[layer]))
        for name in MODULES if _in(name, layer)
    }  # fmt: skip
    assert {k: v for k, v in broken.items() if v} == {}


def test_the_account_step_imports_no_settings():
    """The handler builds the account step's collaborators (pricer, guard, fleet budgets) and
    hands it every value it needs from the settings; the package gives new agents' ledgers
    their options (``account/ledger_options.py``): no module under ``account/`` reads them."""
    reading = sorted(name for name in MODULES if _in(name, "otel_tokens.account")
                     and any(_in(t, "otel_tokens.settings") for t in imports_of(name)))  # fmt: skip
    assert reading == []


#: where a variable may be read: the settings module, and the bootstrap that ``otel-tokens run``
#: puts on PYTHONPATH (it checks its own marker before otel_tokens can be imported)
READS_ALLOWED = {"otel_tokens.settings", "otel_tokens.cli.bootstrap.sitecustomize"}


def _setting_name(key: ast.AST | None) -> bool:
    """A key that is, or may be, a setting's name (``OTEL_...``, or computed)."""
    if isinstance(key, ast.Constant):
        return isinstance(key.value, str) and key.value.startswith("OTEL_")
    return key is not None


def _reads_environment(tree: ast.AST) -> list[int]:
    """Lines reading a setting from the environment (``PATH`` and the like are not settings)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = ast.unparse(node.func.value)
            if ((owner == "os.environ" and node.func.attr in ("get", "__getitem__"))
                    or (owner == "os" and node.func.attr == "getenv")) and node.args:  # fmt: skip
                if _setting_name(node.args[0]):
                    lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            if isinstance(node.ctx, ast.Load) and _setting_name(node.slice):
                lines.append(node.lineno)
    return lines


def test_settings_are_read_in_one_module():
    readers = {name: _reads_environment(ast.parse(path.read_text())) for name, path in MODULES.items()
               if name not in READS_ALLOWED}  # fmt: skip
    assert {k: v for k, v in readers.items() if v} == {}


MAX_LINES = 60
#: functions allowed past the limit, and why
LONG_ALLOWED: dict[str, str] = {}


def test_no_function_is_longer_than_sixty_lines():
    long = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                key = f"{name}:{node.name}"
                if length > MAX_LINES and key not in LONG_ALLOWED:
                    long[key] = length
    assert long == {}


# -- formatted, not compressed -----------------------------------------------------------------
_SUPPRESSION = re.compile(r"#\s*fmt:\s*(skip|off|on)\b")


def test_no_formatter_suppression_in_the_package():
    """The line limit above is met by splitting functions, not by keeping lines compact where
    the formatter would reflow them: no ``fmt: skip``/``fmt: off`` comment in the package."""
    found = []
    for name, path in MODULES.items():
        with tokenize.open(path) as source:
            for token in tokenize.generate_tokens(source.readline):
                if token.type == tokenize.COMMENT and _SUPPRESSION.search(token.string):
                    found.append(f"{name}:{token.start[0]}")
    assert found == []


def test_the_package_is_as_ruff_formats_it():
    """``ruff format --check`` with the project's settings (pyproject.toml) passes: the code is
    read as the formatter writes it, so a function's length is its real length."""
    try:
        from ruff.__main__ import find_ruff_bin
    except ImportError:
        pytest.skip("ruff is not installed (it is in the test extra: pip install -e '.[test]')")
    result = subprocess.run(
        [find_ruff_bin(), "format", "--check", "--diff", str(PACKAGE)],
        cwd=PACKAGE.parent,
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


# -- one description per backend ----------------------------------------------------------------
def _pyproject() -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())


def _descriptions() -> dict:
    import importlib

    from otel_tokens.capture import BACKENDS

    return {name: importlib.import_module(module).BACKEND for name, module in BACKENDS.items()}


def test_every_backend_is_its_patches_module_and_one_entry_point_line():
    """Adding a backend is its capture modules, its request renderer, its tests and its line
    in pyproject.toml (with its extra when it has a library to install): the registry, the
    entry point's class and the checks below all read its ``BACKEND`` description."""
    from otel_tokens import entry_points

    described = _descriptions()
    project = _pyproject()["project"]
    lines = project["entry-points"]["opentelemetry_instrumentor"]
    assert lines == {f"otel_tokens_{name}": f"otel_tokens.entry_points:{backend.instrumentor}"
                     for name, backend in described.items()}  # fmt: skip
    for name, backend in described.items():
        cls = getattr(entry_points, backend.instrumentor)
        assert cls.name == name and cls.__doc__ == backend.summary
        assert tuple(cls().instrumentation_dependencies()) == backend.requirements
        if backend.extra is not None:
            assert project["optional-dependencies"].get(backend.extra), f"{name}: extra {backend.extra}"


def test_every_request_shape_a_backend_describes_has_a_renderer():
    """Each shape is in the renderers' table, registered by a module of ``renderers/``."""
    from otel_tokens.account.estimate.renderers import RENDERERS

    for name, backend in _descriptions().items():
        for api in backend.apis:
            assert api in RENDERERS, f"{name}: no renderer for {api}"


def test_the_renderers_entry_names_no_request_shape():
    """How a request is rendered is its shape's renderer, read from the table: the entry
    every caller uses (``account/estimate/requests.py``) holds no chain over shape names."""
    from otel_tokens.account.estimate.renderers import RENDERERS

    tree = ast.parse(MODULES["otel_tokens.account.estimate.requests"].read_text())
    named = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)}
    assert sorted(named & set(RENDERERS)) == []


def test_one_reader_of_a_urls_host_and_port():
    """A URL's ``server.address`` and ``server.port`` are read, and kept, by
    ``endpoints.server_of`` alone: no capture module parses them itself."""
    found = {}
    for name in MODULES:
        if not name.startswith("otel_tokens.capture"):
            continue
        for node in ast.walk(ast.parse(MODULES[name].read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("hostname", "port", "explicit_port"):
                if not (isinstance(node.value, ast.Name) and node.value.id == "self"):
                    found.setdefault(name, []).append(node.lineno)
    assert found == {}


def test_no_list_of_backends_outside_their_modules():
    """The backends are not listed by hand anywhere but pyproject.toml."""
    for module in ("otel_tokens.capture", "otel_tokens.entry_points", "otel_tokens.registry"):
        source = MODULES[module].read_text()
        assert "class AnthropicInstrumentor" not in source, module
        assert "anthropic_patches" not in source and '"anthropic"' not in source, module


def test_the_architecture_document_names_every_module():
    """``docs/architecture.md`` is true to the code: each module it names exists, and each
    module of the package is named in its table (a package's files may be listed in
    parentheses after its folder)."""
    import re

    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    table = text[text.index("## Modules"):text.index("## One call, step by step")]
    named: set[str] = set()
    for cell in table.split("|"):
        for match in re.finditer(r"`([a-z_/]+/)` \(([^)]*)\)", cell):  # folder/ (a.py, b.py)
            named.update(match.group(1) + f for f in re.findall(r"`([a-z_/]+\.py)`", match.group(2)))
        cell = re.sub(r"`[a-z_/]+/` \([^)]*\)", "", cell)
        named.update(re.findall(r"`([a-z_/]+\.py)`", cell))
    files = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")}
    paths = {n for n in named if not n.startswith("tests/") and ("/" in n or n in files)}
    assert sorted(n for n in paths if n not in files) == [], "named but missing"
    assert sorted(files - paths) == [], "modules the document leaves out"


# -- speed tricks only where measured (issue 46, point 3) --------------------------------------
#: the files where a form kept for speed lives, each named in docs/benchmarks.md ("What stays
#: fast") with what it was measured to buy
KEPT_FOR_SPEED = {"usage.py", "capture/wire/openai.py", "capture/sent.py"}


def _comments(path: pathlib.Path) -> list[str]:
    with path.open("rb") as source:
        return [t.string for t in tokenize.tokenize(source.readline) if t.type == tokenize.COMMENT]


def test_no_comment_argues_in_instruction_counts():
    """The benchmark and docs/benchmarks.md are the record of what code costs, not comments."""
    costly = re.compile(r"\binstruction counts?\b|\d ?k? instructions\b|\bcosts? twice\b|"
                        r"\bsaves? a frame\b|\blookups cost\b|\bper call\)", re.IGNORECASE)  # fmt: skip
    found = [f"{path.relative_to(PACKAGE)}: {text}" for path in PACKAGE.rglob("*.py")
             for text in _comments(path) if costly.search(text)]  # fmt: skip
    assert found == []


def test_speed_tricks_only_in_the_measured_places():
    """No named tuple built by position (``tuple.__new__``) anywhere, and a form "kept for
    speed" only in the files docs/benchmarks.md names, each of them named there."""
    positional = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "tuple.__new__" in p.read_text()]
    assert positional == []
    kept = {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if "kept for speed" in p.read_text()}
    assert kept == KEPT_FOR_SPEED
    record = (PACKAGE.parent / "docs" / "benchmarks.md").read_text()
    section = record.split("## What stays fast", 1)[1].split("\n## ", 1)[0]
    for name in ("usage.py", "capture/wire/openai.py", "capture/sent.py"):
        assert f"`{name}" in section or f"({name.rpartition('/')[2]}" in section or name in section, name
