"""docs/coverage.md's table (the README links it) says what the code records, both ways:
each row of ``otel_tokens.coverage`` is in it with the same call styles and verdict, it has no row the code
lacks, and the code's rows agree with the registry (each backend a row names exists; each
library a backend patches has a row; a wire format a row names is one the HTTP layer reads)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from otel_tokens.capture import BACKENDS
from otel_tokens.capture.wire.formats import _FORMATS
from otel_tokens.coverage import CLIENTS, NOT_RECORDED, normalise

TABLE = Path(__file__).resolve().parents[2] / "docs" / "coverage.md"
HEADER = "| library or API | call styles | recorded |"


def readme_rows() -> list[tuple[str, str, str]]:
    """(library or API, call styles, recorded) of each row of docs/coverage.md's table."""
    lines = TABLE.read_text().splitlines()
    start = lines.index(HEADER) + 2  # past the header and its |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        assert len(cells) == 3, f"docs/coverage.md row is not three cells: {line}"
        rows.append((cells[0], cells[1], cells[2]))
    return rows


def test_the_readme_table_is_the_code_table_row_for_row():
    readme = {name: (styles, recorded) for name, styles, recorded in readme_rows()}
    code = {client.name: (client.styles, client.recorded) for client in CLIENTS}
    missing = [f"| {name} | {styles} | {recorded} |" for name, (styles, recorded) in code.items()
               if readme.get(name) != (styles, recorded)]  # fmt: skip
    assert missing == [], "docs/coverage.md's table should have (or correct) these rows"
    assert sorted(set(readme) - set(code)) == [], "docs/coverage.md rows the code does not know"
    assert len(readme_rows()) == len(readme), "a row twice in docs/coverage.md"


def test_each_row_names_what_records_it_and_nothing_the_registry_lacks():
    names = [client.name for client in CLIENTS]
    assert len(names) == len(set(names))
    for client in CLIENTS:
        assert set(client.backends) <= set(BACKENDS), client.name
        if not client.is_recorded:
            assert client.backends == (), f"{client.name}: not recorded, yet names a capture"
        elif client.recorded.startswith("yes: the HTTP layer"):
            assert "http" in client.backends, client.name


def test_every_library_a_backend_patches_has_a_row():
    """A backend added for a library makes it covered: its row must say so."""
    rows: dict[str, set[str]] = {}  # distribution -> the backends its rows name
    for client in CLIENTS:
        rows.setdefault(normalise(client.distribution), set()).update(client.backends)
    for name, module in BACKENDS.items():
        for requirement in importlib.import_module(module).BACKEND.requirements:
            library = normalise(re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0])
            if library.startswith("opentelemetry"):
                continue  # the GenAI agent spans: not a client library
            assert library in rows, f"{name} patches {library}: no coverage row"
            assert name in rows[library], f"no row of {library} names {name}"


def test_a_wire_format_a_row_names_is_one_the_http_layer_reads():
    formats = {module.__name__.rpartition(".")[2] for module in _FORMATS}
    for client in CLIENTS:
        named = re.search(r"\((\w+) format\)", client.recorded)
        if named is not None:
            assert named.group(1).lower() in formats, client.name
    assert NOT_RECORDED == "not recorded"
