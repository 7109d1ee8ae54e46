"""The notebook tools change the open notebook live, in real JupyterLab and Notebook 7.

A ``%%agent`` cell's scripted model reads the notebook, inserts a code cell below its own cell and
runs it. The person approves the edit and the run on their cards (the default mode asks); the new
cell appears below without a reload, shows what it prints while it still runs, and ends with its
output, execution count and provenance, while the file on disk is left to the person's save. ``%agent undo`` removes the cell from the open notebook;
after a save and a reload the notebook is as it was shown. Screenshots go to ``test-artifacts/browser``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from .conftest import LabServer
from .test_lab_approvals import _open

# The cell prints, then waits until the test lets it finish: what it printed must show meanwhile.
NEW_SOURCE = ("import pathlib, time\nprint('the total is', sum(range(10)), flush=True)\n"
              "while not pathlib.Path('go').exists():\n    time.sleep(0.02)\nprint('finished')")

SETUP = f'''%load_ext agent_kernel
from agent_kernel.models.scripted import ScriptedModel, tool_call

writer = ScriptedModel([
    tool_call('read_notebook', {{}}),
    tool_call('edit_notebook', {{'action': 'insert', 'source': {NEW_SOURCE!r}}}),
    tool_call('run_cell', {{'cell': 2}}),
    'The new cell prints the total.',
])
'''

CELLS = {
    "setup": SETUP,
    "agent": "%%agent -m writer --tools read_notebook,edit_notebook,run_cell --new\nAdd a cell that prints a total, and run it.",
    "undo": "%agent undo",
}


def _cells(page: Page) -> Any:
    return page.locator(".jp-Notebook .jp-Cell")


def _sources(page: Page) -> list[str]:
    """Each cell's source as the page shows it (CodeMirror lines joined)."""
    return page.locator(".jp-Notebook .jp-Cell").evaluate_all(
        "cells => cells.map(c => Array.from(c.querySelectorAll('.cm-line')).map(l => l.textContent).join('\\n'))")


def _approve_each(page: Page, count: int) -> None:
    """Clicks Approve on each card as it asks (the edit, then the run)."""
    for _ in range(count):
        approve = page.locator(".ak-view .ak-approve:visible").first
        expect(approve).to_be_visible(timeout=30_000)
        button = approve.element_handle()
        button.click()
        button.wait_for_element_state("hidden", timeout=30_000)


def _save(page: Page, lab: LabServer, name: str, expected_cells: int) -> dict[str, Any]:
    """Saves with Ctrl+S as a person does and returns the file once it holds what the page shows."""
    _cells(page).first.locator(".jp-InputPrompt").click()  # command mode on the notebook
    page.keyboard.press("Control+s")
    path = lab.root / name
    deadline = time.monotonic() + 30
    while True:
        saved = json.loads(path.read_text())
        if len(saved["cells"]) == expected_cells:
            return saved
        assert time.monotonic() < deadline, f"the save did not reach {path}: {[c['source'] for c in saved['cells']]}"
        time.sleep(0.1)  # polling the file the server writes; nothing to race


@pytest.mark.parametrize("app", ["lab", "notebooks"])
def test_an_inserted_and_run_cell_appears_live_and_undo_removes_it(
        app: str, lab: LabServer, browser: Any, artifacts: Path) -> None:
    name = f"live-{app}.ipynb"
    (lab.root / "go").unlink(missing_ok=True)  # the new cell runs until the test makes it
    with _open(lab, browser, name, CELLS, "perCommTarget", app=app) as book:
        page = book.page
        before_on_disk = (lab.root / name).read_text()
        book.run("agent")
        _approve_each(page, 2)

        # The cell is in the open notebook below the agent's cell, without a reload, and what it
        # prints shows while it still runs.
        expect(_cells(page)).to_have_count(4)
        new = _cells(page).nth(2)
        expect(new.locator(".jp-OutputArea")).to_contain_text("the total is 45")
        expect(new.locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\d+\]:"))
        assert book.prompt("agent") == "[*]:" and "finished" not in new.locator(".jp-OutputArea").inner_text()
        page.screenshot(path=str(artifacts / f"live-{app}-running.png"))
        (lab.root / "go").touch()
        book.wait_done("agent")
        expect(new.locator(".jp-OutputArea")).to_contain_text("finished")
        assert _sources(page)[2] == NEW_SOURCE
        transcript = book.transcript("agent")
        expect(transcript).to_contain_text("The new cell prints the total.")
        expect(transcript).to_contain_text("shows it now")
        page.screenshot(path=str(artifacts / f"live-{app}-inserted.png"))
        # The live edit did not write the file underneath the open notebook.
        assert (lab.root / name).read_text() == before_on_disk

        # Saved, the file holds the cell as shown: its source, output, count and provenance.
        saved = _save(page, lab, name, 4)
        cell = saved["cells"][2]
        assert "".join(cell["source"]) == NEW_SOURCE
        assert "".join(cell["outputs"][0]["text"]) == "the total is 45\nfinished\n"
        assert isinstance(cell["execution_count"], int)
        provenance = cell["metadata"]["agent_kernel"]
        assert provenance["action"] == "insert" and provenance["run_id"] and provenance["call_id"]

        # Reloaded, the page shows the saved cell; the kernel reaches the new page.
        page.reload()
        expect(_cells(page)).to_have_count(4, timeout=60_000)
        expect(_cells(page).nth(2).locator(".jp-OutputArea")).to_contain_text("finished")
        expect(page.locator(".jp-Notebook-ExecutionIndicator").first).to_have_attribute("data-status", "idle", timeout=60_000)

        # %agent undo removes the cell from the open notebook at once.
        undo = _cells(page).last  # the %agent undo cell
        undo.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Control+Enter")  # run in place: no new cell below the last one
        try:
            expect(undo.locator(".jp-OutputArea")).to_contain_text("undone in the open notebook", timeout=30_000)
        finally:
            page.screenshot(path=str(artifacts / f"live-{app}-undo.png"))
        expect(_cells(page)).to_have_count(3)
        assert _sources(page) == list(CELLS.values())
        page.screenshot(path=str(artifacts / f"live-{app}-undone.png"))

        saved = _save(page, lab, name, 3)
        assert ["".join(c["source"]) for c in saved["cells"]] == list(CELLS.values())
        page.reload()
        expect(_cells(page)).to_have_count(3, timeout=60_000)
        assert _sources(page) == list(CELLS.values())
