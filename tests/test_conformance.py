"""Runs the conformance matrix (``tests/conformance.py``): every scenario on every adapter.

Each cell is one test, ``test_conformance[<scenario>-<adapter>]``. A cell that cannot apply
fails if it is ever run, with the reason, and is listed as such in the matrix printed at the end
of the test run (see ``conftest.pytest_terminal_summary``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from . import conformance_runs  # noqa: F401 (registers its scenarios in the matrix)
from .conformance import HARNESSES, SCENARIOS, not_applicable

RESULTS: dict[tuple[str, str], str] = {}

CELLS = [
    pytest.param(name, adapter, id=f"{name}-{adapter}")
    for name in SCENARIOS
    for adapter in HARNESSES
    if not_applicable(name, adapter) is None
]


@pytest.mark.parametrize(("name", "adapter"), CELLS)
async def test_conformance(name: str, adapter: str, tmp_path: Path) -> None:
    RESULTS[(name, adapter)] = "failed"
    harness = HARNESSES[adapter]()
    try:
        await SCENARIOS[name](harness, tmp_path)
        assert not harness.rejected, f"requests the real API would refuse: {harness.rejected}"
    finally:
        harness.close()
    RESULTS[(name, adapter)] = "passed"


def matrix_lines() -> list[str]:
    """The matrix as text: one row per scenario, one column per adapter."""
    adapters = list(HARNESSES)
    width = max(len(n) for n in SCENARIOS)
    lines = [" " * width + "  " + "  ".join(f"{a:<16}" for a in adapters)]
    counts: dict[str, int] = {}
    notes: list[str] = []
    for name in SCENARIOS:
        cells = []
        for adapter in adapters:
            why = not_applicable(name, adapter)
            if why is not None:
                cell = "n/a"
                notes.append(f"  n/a {name} × {adapter}: {why}")
            else:
                cell = RESULTS.get((name, adapter), "not run")
            counts[cell] = counts.get(cell, 0) + 1
            cells.append(f"{cell:<16}")
        lines.append(f"{name:<{width}}  " + "  ".join(cells))
    lines.append(", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    # One line per reason is enough: the Responses column repeats its reason per scenario.
    lines.extend(dict.fromkeys(n if "responses" not in n or "api=" not in n else f"  n/a * × openai-responses: {n.split(': ', 1)[1]}" for n in notes))
    return lines
