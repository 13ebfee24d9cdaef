"""The reliability suite prints its fault matrix at the end of the run."""

from __future__ import annotations

from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from .test_fault_matrix import FAULTS, MATRIX
    from .hosts import INSTRUMENTORS

    if not MATRIX:
        return
    write = terminalreporter.write_line
    terminalreporter.section("fault matrix (instrumentor x fault: ok / faults counted / extra ms)")
    notes: dict[str, str] = {}
    for fault in FAULTS:
        for instrumentor in INSTRUMENTORS:
            cell = MATRIX.get((instrumentor, fault))
            if cell is None:
                continue
            ok, counted, extra, note = cell
            mark = f" [{len(notes) + 1}]" if note and note not in notes.values() else ""
            if mark:
                notes[mark.strip()] = note
            elif note:
                mark = " " + next(k for k, v in notes.items() if v == note)
            write(f"{instrumentor:<10} x {fault:<26} {ok:<4} {counted:<48} {extra:>6} ms{mark}")
    for key, note in notes.items():
        write(f"{key} {note}")
