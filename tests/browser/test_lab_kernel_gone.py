"""What a run leaves behind when its kernel or its page goes, in real JupyterLab and Notebook 7 (Chromium).

No card outlives its kernel silently: Kernel > Restart with an approval pending turns the old
card, at once, into a static transcript that says the kernel went and how to go on (``%agent
resume``, or re-running the cell after ``%load_ext agent_kernel``), with no button left to click.
And every run leaves a static transcript in the saved notebook whatever ended it: a restart, a
page reloaded before the approval, a detached cell. Each test saves as a person does and checks
the file (no widget output without a transcript) and ``jupyter nbconvert --to html``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import LabServer
from .test_lab_approvals import SETUP, Notebook, _open

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

CELLS = {
    "setup": SETUP,
    "asking": ("asking = ScriptedModel([[text('Let me write the note.'), "
               "tool_call('write_note', {'text': 'hello'}, id='call_gone1')], 'The note is saved.'])"),
    "ask": "%%agent -m asking --tools write_note --new\nWrite a note saying hello.",
}

DETACHED_CELLS = {
    "setup": SETUP,
    "slow": "slow = ScriptedModel([text('A detached answer, streamed slowly. ' * 6, chunk=4, delay=0.05)])",
    "detached": "%%agent -m slow --new --detach\nAnswer slowly.",
}


def _restart_from_the_menu(book: Notebook) -> None:
    """Kernel > Restart Kernel…, then Restart in the dialog, as a person does."""
    page = book.page
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Kernel$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Restart Kernel")).first.click()
    page.locator(".jp-Dialog .jp-mod-accept").click()


def _stored(lab: LabServer, name: str) -> dict[str, Any] | None:
    """The notebook as the server has it, or None while a save is still writing it."""
    try:
        return dict(lab.api(f"/api/contents/{name}?content=1")["content"])
    except urllib.error.HTTPError as exc:
        if exc.code in (400, 500):  # read mid-write: not yet a whole notebook
            return None
        raise


def _save(book: Notebook, lab: LabServer, name: str) -> dict[str, Any]:
    """Saves as a person does (Ctrl+S); returns the stored notebook once it holds a transcript."""
    book.cell("setup").locator(".jp-InputArea-editor").click()
    book.page.keyboard.press("Escape")  # command mode: the shortcut saves the notebook
    book.page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while True:
        stored = _stored(lab, name)
        if stored is not None and "ak-static" in json.dumps([c.get("outputs", []) for c in stored["cells"]]):
            return stored
        assert time.monotonic() < deadline, f"the saved notebook holds no transcript: {stored}"
        time.sleep(0.2)  # polling the file the server writes; nothing to race


def _save_as_is(book: Notebook, lab: LabServer, name: str) -> None:
    """Saves (Ctrl+S) while the run waits, and waits until the file holds the live view."""
    book.cell("setup").locator(".jp-InputArea-editor").click()
    book.page.keyboard.press("Escape")
    book.page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while WIDGET_VIEW not in json.dumps(_stored(lab, name)):
        assert time.monotonic() < deadline, "the notebook was not saved"
        time.sleep(0.2)  # polling the file the server writes; nothing to race


def _check_saved(lab: LabServer, stored: dict[str, Any], name: str, cell: int, expected: str) -> str:
    """No output of the saved notebook is a bare widget; ``cell`` holds a transcript containing
    ``expected``, and nbconvert's HTML shows it. Returns that HTML."""
    for number, each in enumerate(stored["cells"]):
        for output in each.get("outputs", []):
            data = output.get("data", {})
            assert WIDGET_VIEW not in data, f"cell {number} was saved as a bare widget: {output}"
    transcript = [o for o in stored["cells"][cell]["outputs"] if "ak-static" in o.get("data", {}).get("text/html", "")]
    assert len(transcript) == 1, stored["cells"][cell]["outputs"]
    assert expected in transcript[0]["data"]["text/html"]
    assert "RunHandle(" not in json.dumps(stored)
    converted = subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "html", "--stdout", str(lab.root / name)],
        capture_output=True, text=True, check=True, timeout=120)
    assert "ak-static" in converted.stdout and expected in converted.stdout
    return converted.stdout


@pytest.mark.parametrize("app", ["lab", "notebooks"])  # JupyterLab and Notebook 7
def test_a_restart_with_a_card_pending_turns_the_card_into_a_transcript_that_says_how_to_go_on(
        lab: LabServer, browser: Any, artifacts: Path, app: str) -> None:
    name = f"kernel-gone-{app}.ipynb"
    with _open(lab, browser, name, CELLS, "perCommTarget", app=app) as book:
        book.run_and_wait("asking")
        book.run("ask")
        expect(book.view("ask").locator(".ak-approve")).to_be_visible(timeout=30_000)

        _restart_from_the_menu(book)

        output = book.cell("ask").locator(".jp-OutputArea")
        gone = output.locator(".ak-kernel-gone")
        expect(gone).to_be_visible(timeout=30_000)
        expect(gone).to_contain_text("%agent resume")
        expect(gone).to_contain_text("%load_ext agent_kernel")
        expect(output.locator("button")).to_have_count(0)  # nothing left that could not be sent
        expect(output.locator(".ak-view")).to_have_count(0)
        transcript = output.locator(".ak-static")
        expect(transcript.locator(".ak-tool")).to_contain_text("write_note")
        expect(transcript.locator(".ak-phase")).to_contain_text("interrupted")
        assert "Sending your decision" not in output.inner_text()
        output.screenshot(path=str(artifacts / f"kernel-gone-card-{app}.png"))
        lab.wait_for_kernel(name)
        stored = _save(book, lab, name)
    page = _check_saved(lab, stored, name, 2, "was restarted or shut down")
    assert "Let me write the note." in page


@pytest.mark.parametrize("app", ["lab", "notebooks"])  # JupyterLab and Notebook 7
def test_a_page_reloaded_before_the_approval_saves_the_finished_run_as_its_transcript(
        lab: LabServer, browser: Any, app: str) -> None:
    name = f"reload-approve-{app}.ipynb"
    with _open(lab, browser, name, CELLS, "perCommTarget", app=app) as book:
        book.run_and_wait("asking")
        book.run("ask")
        expect(book.view("ask").locator(".ak-approve")).to_be_visible(timeout=30_000)

        _save_as_is(book, lab, name)  # the card is saved as a widget, as autosave would
        # The page loaded afresh (as a reload does, but with the layout reset, so no notebook of
        # an earlier test reopens beside this one); the kernel lives on, still waiting.
        book.page.goto(lab.page_url(name, app))
        expect(book.page.locator(".jp-Notebook .jp-Cell")).to_have_count(len(CELLS) + 1, timeout=60_000)
        lab.wait_for_kernel(name)
        approve = book.view("ask").locator(".ak-approve")
        expect(approve).to_be_visible(timeout=30_000)
        approve.click()

        transcript = book.transcript("ask")
        expect(transcript).to_contain_text("The note is saved.", timeout=30_000)
        expect(book.view("ask")).to_have_count(0)
        stored = _save(book, lab, name)
    _check_saved(lab, stored, name, 2, "The note is saved.")


@pytest.mark.parametrize("app", ["lab", "notebooks"])
def test_a_detached_cell_saves_its_finished_run_as_its_transcript_alone(
        lab: LabServer, browser: Any, app: str) -> None:
    name = f"detached-{app}.ipynb"
    with _open(lab, browser, name, DETACHED_CELLS, "perCommTarget", app=app) as book:
        book.run_and_wait("slow")
        book.run_and_wait("detached")  # the cell returns while the run goes on
        transcript = book.transcript("detached")
        expect(transcript.locator(".ak-phase")).to_contain_text("finished", timeout=30_000)
        expect(book.view("detached")).to_have_count(0)
        assert "RunHandle(" not in book.output("detached")
        stored = _save(book, lab, name)
    _check_saved(lab, stored, name, 2, "A detached answer")
