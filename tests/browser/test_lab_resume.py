"""An approval that outlives its kernel, in real JupyterLab (headless Chromium through Playwright).

A run asks for approval; the kernel restarts before anyone answers. After the restart
``%agent resume`` brings the session back from its journal and shows the same card again; a
click on Approve runs the call once and the run finishes without asking the model again. A
restart stops the cell's run as the kernel goes, and may record that stop in the journal: it
keeps the call open, so the card comes back however far the recording got.

JupyterLab 4.6 sends widget messages to the old kernel's comm subshell until the page is reloaded,
so each test reloads the page after a restart (``tests/test_view.py`` checks what the card says
when a click goes unanswered).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from .conftest import LabServer
from .test_lab_approvals import _open

SETUP = '''%load_ext agent_kernel
from pathlib import Path
from agent_kernel import tool
from agent_kernel.models.scripted import ScriptedModel, tool_call

@tool
def write_note(text: str) -> str:
    """Writes a note to notes.txt (it changes things, so the default permission mode asks first)."""
    with open("notes.txt", "a") as notes:
        notes.write(text + "\\n")
    return "saved"
'''

CELLS = {
    "setup": SETUP,
    "asking": "asking = ScriptedModel([tool_call('write_note', {'text': 'hello'}, id='call_note1')])",
    "ask": "%%agent -m asking --tools write_note --new\nWrite a note saying hello.",
    "finishing": "finishing = ScriptedModel(['The note is saved.'])\n%agent model finishing",
    "resume": "%agent resume",
    "check": "print(repr(Path('notes.txt').read_text()), len(finishing.requests))",
}


def _restart_kernel(lab: LabServer, notebook: str) -> None:
    """Restarts the notebook's kernel through the server, as Kernel > Restart does."""
    [session] = [s for s in lab.api("/api/sessions") if s["path"].endswith(notebook)]
    lab.api(f"/api/kernels/{session['kernel']['id']}/restart", method="POST")
    lab.wait_for_kernel(notebook)


def _reload(lab: LabServer, book: Any, notebook: str, cells: int) -> None:
    """Reloads the page and waits until its notebook is shown and its kernel idle."""
    book.page.reload()
    expect(book.page.locator(".jp-Notebook .jp-Cell")).to_have_count(cells, timeout=60_000)
    lab.wait_for_kernel(notebook)
    expect(book.page.locator(".jp-Notebook-ExecutionIndicator").first).to_have_attribute("data-status", "idle", timeout=60_000)


def test_a_card_pending_when_the_kernel_restarts_comes_back_with_resume_and_approve_finishes_the_run(
        lab: LabServer, browser: Any, artifacts: Path) -> None:
    name = "resume-after-restart.ipynb"
    with _open(lab, browser, name, CELLS, "perCommTarget") as book:
        book.run_and_wait("asking")
        book.run("ask")
        card = book.view("ask").locator(".ak-approve")
        expect(card).to_be_visible(timeout=30_000)
        assert book.prompt("ask") == "[*]:"

        _restart_kernel(lab, name)  # nobody answered: the approval was pending when the kernel went
        # JupyterLab keeps the comm subshell of the kernel it had before the restart and sends
        # widget messages there, where the new kernel drops them: a page reload starts afresh.
        _reload(lab, book, name, len(CELLS))
        book.run_and_wait("setup")
        book.run_and_wait("finishing")
        book.run("resume")
        expect(book.view("resume").locator(".ak-approve")).to_be_visible(timeout=30_000)
        assert not (lab.root / "notes.txt").exists()

        _restart_kernel(lab, name)  # the continued run is cut too, still waiting
        _reload(lab, book, name, len(CELLS))
        assert not (lab.root / "notes.txt").exists()

        book.run_and_wait("setup")
        book.run_and_wait("finishing")
        book.run("resume")
        view = book.view("resume")
        approve = view.locator(".ak-approve")
        expect(approve).to_be_visible(timeout=30_000)
        expect(view.locator(".ak-tool")).to_contain_text("write_note")
        expect(view.locator(".ak-tool")).to_contain_text("hello")  # the exact arguments, again
        view.screenshot(path=str(artifacts / "resume-card-after-restart.png"))
        approve.click()

        book.wait_done("resume")
        transcript = book.transcript("resume")
        expect(transcript.locator(".ak-tool .ak-badge")).to_have_text("done")
        expect(transcript).to_contain_text("The note is saved.")
        assert re.search(r"waiting for approval \(call_note1\)", book.output("resume"))
        # The note was written once, and the model was asked once more (for the answer only).
        assert book.run_and_wait("check").strip() == "'hello\\n' 1"


SUB_CELLS = {
    "setup": SETUP + "from agent_kernel import Agent\n",
    "asking": (
        "writer = Agent(ScriptedModel([tool_call('write_note', {'text': 'hello'}, id='call_sub1')]), tools=[write_note],\n"
        "               name='writer', journal=None).as_tool()\n"
        "asking = ScriptedModel([tool_call('writer', {'instructions': 'Write a note saying hello.'}, id='call_lead1')])"
    ),
    "ask": "%%agent -m asking --tools writer --new\nHave the writer write a note saying hello.",
    "again": (  # the notebook's cells define the writer again after the restart, as a person reruns them
        "writer = Agent(ScriptedModel(['Wrote it.']), tools=[write_note], name='writer', journal=None).as_tool()\n"
        "finishing = ScriptedModel(['The writer wrote the note.'])\n%agent model finishing"
    ),
    "resume": "%agent resume",
    "check": "print(repr(Path('notes.txt').read_text()), len(finishing.requests))",
}


def test_a_sub_agents_card_pending_when_the_kernel_restarts_comes_back_nested_and_approve_finishes_both(
        lab: LabServer, browser: Any, artifacts: Path) -> None:
    name = "resume-sub-agent.ipynb"
    (lab.root / "notes.txt").unlink(missing_ok=True)  # the server's folder is shared with the test above
    with _open(lab, browser, name, SUB_CELLS, "perCommTarget") as book:
        book.run_and_wait("asking")
        book.run("ask")
        nested = book.view("ask").locator(".ak-agent-card .ak-approve")
        expect(nested).to_be_visible(timeout=30_000)  # the writer's call waits, inside its card

        _restart_kernel(lab, name)
        _reload(lab, book, name, len(SUB_CELLS))  # a click reaches the new kernel only from a reloaded page
        assert not (lab.root / "notes.txt").exists()
        book.run_and_wait("setup")
        book.run_and_wait("again")
        book.run("resume")
        view = book.view("resume")
        card = view.locator(".ak-agent-card")
        approve = card.locator(".ak-approve")
        expect(approve).to_be_visible(timeout=30_000)  # the same call, in the writer's card again
        expect(card.locator(".ak-tool")).to_contain_text("write_note")
        view.screenshot(path=str(artifacts / "resume-sub-agent-card-after-restart.png"))
        approve.click()

        book.wait_done("resume")
        transcript = book.transcript("resume")
        expect(transcript).to_contain_text("The writer wrote the note.")
        assert re.search(r"waiting for approval \(call_sub1\)", book.output("resume"))
        # The note was written once; the lead's model was asked once more, for its answer only.
        assert book.run_and_wait("check").strip() == "'hello\\n' 1"
