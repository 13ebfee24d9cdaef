"""Two records, each field with one writer (issue 46): capture writes the ``Call`` (its
request and response facts and timings), the handler, the account step and the recorder each
their own fields of the call's ``Tracking``. Read from the source with ``ast``: every
assignment to a field of either record, in every module of the package."""

from __future__ import annotations

import ast
import pathlib

import pytest

from otel_tokens.call import Call
from otel_tokens.tracking import Tracking

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "otel_tokens"

HANDLER, ACCOUNT, EMIT, CAPTURE = ("otel_tokens.handler", "otel_tokens.account",
                                   "otel_tokens.emit", "otel_tokens.capture")  # fmt: skip
#: the one writer of each field of a call's tracking (``handler``: the handler's own subclass)
TRACKING_WRITERS = {
    "agent": HANDLER, "user": HANDLER, "tenant": HANDLER, "conversation_id": HANDLER,
    "ended": HANDLER, "handler": HANDLER,
    "estimate": ACCOUNT, "request_estimate": ACCOUNT, "reservation": ACCOUNT,
    "stream_handle": ACCOUNT, "stream_key": ACCOUNT,
    "emission": EMIT, "trace_id": EMIT, "span_id": EMIT,
}  # fmt: skip
CALL_FIELDS = {name for name in Call.__slots__ if not name.startswith("_")}


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = ast.parse(path.read_text())
    return found


MODULES = _modules()


def _targets(node: ast.AST) -> list[ast.expr]:
    """The attribute targets an assignment writes (tuple targets unpacked)."""
    if isinstance(node, ast.Assign):
        pending = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        pending = [node.target]
    else:
        return []
    out = []
    while pending:
        target = pending.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            pending.extend(target.elts)
        elif isinstance(target, ast.Attribute):
            out.append(target)
    return out


def _record(value: ast.expr) -> str | None:
    """``call`` or ``tracking`` when the expression names one (``call``, ``self.call``...)."""
    name = value.id if isinstance(value, ast.Name) else \
        value.attr if isinstance(value, ast.Attribute) else None  # fmt: skip
    return name if name in ("call", "tracking") else None


def _writes() -> list[tuple[str, str, str, int]]:
    """(module, record, field, line) of every assignment to a record's field outside the
    record's own class."""
    found = []
    for module, tree in MODULES.items():
        for node in ast.walk(tree):
            for target in _targets(node):
                record = _record(target.value)
                if record is not None:
                    found.append((module, record, target.attr, target.lineno))
    return found


def _within(module: str, owner: str) -> bool:
    return module == owner or module.startswith(owner + ".")


def test_the_writers_table_covers_every_field_of_the_tracking():
    assert set(TRACKING_WRITERS) == set(Tracking.__slots__) | {"handler"}
    assert not CALL_FIELDS & set(Tracking.__slots__) - {"conversation_id"}


def test_only_capture_writes_the_call_record():
    """The account step, the recorder and the handler read the Call, never write into it
    (nor any field of the call's tracking onto it)."""
    wrong = [(m, f, line) for m, record, f, line in _writes() if record == "call"
             and (not _within(m, CAPTURE) or f not in CALL_FIELDS)]  # fmt: skip
    assert wrong == []


def test_each_field_of_the_tracking_has_its_one_writer():
    wrong = [(m, f, line) for m, record, f, line in _writes() if record == "tracking"
             and not _within(m, TRACKING_WRITERS.get(f, "?"))]  # fmt: skip
    assert wrong == []


@pytest.mark.parametrize("kind,name", [("Call", "call"), ("Tracking", "tracking")])
def test_a_record_passed_on_is_always_named_for_what_it_is(kind, name):
    """The scan above sees a record by its name: a parameter typed as one is named so."""
    wrong = []
    for module, tree in MODULES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for arg in node.args.args + node.args.kwonlyargs:
                    annotation = ast.unparse(arg.annotation) if arg.annotation else ""
                    if annotation.split(" |")[0] == kind and arg.arg != name:
                        wrong.append((module, node.name, arg.arg))
    assert wrong == []


def test_the_scan_sees_a_write_out_of_place():
    """The scan finds the writes it looks for (a write by the wrong package fails it)."""
    tree = ast.parse("def settle(call, tracking):\n    call.usage = None\n"
                     "    tracking.trace_id, x = 1, 2\n")  # fmt: skip
    seen = [(_record(t.value), t.attr) for n in ast.walk(tree) for t in _targets(n)]
    assert sorted(seen) == [("call", "usage"), ("tracking", "trace_id")]
    assert any(record == "tracking" and f == "agent" and m == HANDLER
               for m, record, f, _ in _writes())  # fmt: skip
