"""``%agent show RUN`` (jupyter/controls.py): a run's transcript rebuilt from its journal, also
after a kernel restart and for a run the kernel died in."""

from __future__ import annotations

import json
from pathlib import Path

from . import test_magics
from .test_magics import Cells, texts

shell = test_magics.shell  # the fixtures of the magics' tests: a shell with the extension loaded
cells = test_magics.cells


def test_show_last_displays_the_transcript_of_the_latest_run(cells: Cells) -> None:
    cells.run("%%agent -m model\nHello")
    _, captured = cells.run("%agent show last")
    [output] = captured.outputs
    assert output.data["text/plain"].startswith("Answer:\nFirst answer.")
    assert 'class="ak-static"' in output.data["text/html"]
    assert output.data["text/html"].count("First answer.") == 1


def test_after_a_restart_show_rebuilds_a_run_the_kernel_died_in_from_its_journal(
        cells: Cells, tmp_path: Path) -> None:
    cells.run("%%agent -m model\nHello")
    journal = Path(cells.magics.sessions.get().agent.journal.path)
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    run_id = next(r["run_id"] for r in records if r.get("type") == "run_start")
    # The kernel died before the run ended: its journal stops short of run_finish.
    journal.write_text("".join(json.dumps(r) + "\n" for r in records if r.get("type") != "run_finish"))
    cells.run("%unload_ext agent_kernel")
    cells.run("%load_ext agent_kernel")
    cells.run(f"%config AgentMagics.journal_dir = {str(journal.parent)!r}")

    _, captured = cells.run(f"%agent show {run_id}")
    [output] = captured.outputs
    assert "First answer." in output.data["text/html"]
    assert "interrupted (the journal ends here)" in output.data["text/html"]
    assert "ended: interrupted" in texts(captured)[0]


def test_show_of_an_unknown_run_says_where_it_looked_and_how_to_find_run_ids(cells: Cells) -> None:
    error = cells.error("%agent show r_000000000000")
    assert "no run with that id" in str(error) and "%agent events" in str(error)
