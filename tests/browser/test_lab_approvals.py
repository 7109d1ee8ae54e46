"""``%%agent`` in real JupyterLab, clicked by a person (headless Chromium through Playwright).

A scripted model streams text and calls a tool that needs approval. While the cell is still busy
the text grows in the live view, the card asks, and Approve / Reject / Stop decide the run; the
kernel then shows the outcome in later cells. Everything runs twice: with JupyterLab's
``commsOverSubshells`` setting ``disabled`` and at its default (``perCommTarget``, comm messages
sent on kernel subshells). Screenshots of the view go to ``test-artifacts/browser``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from .conftest import KERNEL_SETTINGS, LabServer

STREAMED = "I will stream this answer slowly, a few characters at a time, and then write the note."

SETUP = '''%load_ext agent_kernel
from agent_kernel import tool
from agent_kernel.models.scripted import ScriptedModel, text, tool_call

notes = []
subshells_when_approved = []

@tool
def write_note(text: str) -> str:
    """Writes a note (it changes things, so the default permission mode asks first)."""
    notes.append(text)
    # While the run is live (its view closes, and with it its subshell, once the run ends).
    subshells_when_approved.append(len(get_ipython().kernel.shell_channel_thread.manager.list_subshell()))
    return "saved"
'''

CELLS = {
    "setup": SETUP,
    "approving": (f"approving = ScriptedModel([[text({STREAMED!r}, chunk=3, delay=0.04), "
                  "tool_call('write_note', {'text': 'hello'})], 'The note is saved.'])"),
    "approve": "%%agent -m approving --tools write_note --new -o approved\nWrite a note saying hello.",
    "approved?": "print(notes, approved.text)",
    "rejecting": ("rejecting = ScriptedModel([[text('Let me write it.'), "
                  "tool_call('write_note', {'text': 'bye'})], 'Understood, no note.'])"),
    "reject": "%%agent -m rejecting --tools write_note --new\nWrite a note saying bye.",
    "rejected?": "print(rejecting.requests[-1].messages[-1].content[0].content)",
    "stopping": "stopping = ScriptedModel([text('Thinking aloud for a long while. ' * 40, chunk=4, delay=0.05)])",
    "stop": "%%agent -m stopping --new -o stopped\nThink for a long time.",
    "stopped?": "print(stopped.termination_reason.value, notes)",
    "subshells?": "print('subshells:', subshells_when_approved[-1])",
}


class Notebook:
    """One open notebook page, addressed by cell name."""

    def __init__(self, page: Page, mode: str, names: list[str]) -> None:
        self.page = page
        self.mode = mode
        self.names = names

    def cell(self, name: str) -> Locator:
        return self.page.locator(".jp-Notebook .jp-Cell").nth(self.names.index(name))

    def prompt(self, name: str) -> str:
        return self.cell(name).locator(".jp-InputPrompt").inner_text().strip()

    def run(self, name: str) -> None:
        """Selects the cell and presses Shift+Enter, as a person does."""
        self.cell(name).locator(".jp-InputArea-editor").click()
        self.page.keyboard.press("Shift+Enter")

    def wait_done(self, name: str, timeout: float = 60_000) -> None:
        expect(self.cell(name).locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\d+\]:"), timeout=timeout)

    def run_and_wait(self, name: str) -> str:
        self.run(name)
        self.wait_done(name)
        return self.output(name)

    def output(self, name: str) -> str:
        return self.cell(name).locator(".jp-OutputArea").inner_text()

    def view(self, name: str) -> Locator:
        return self.cell(name).locator(".ak-view")

    def transcript(self, name: str) -> Locator:
        """The static transcript that replaces the live view when the run ends."""
        return self.cell(name).locator(".ak-static")


def _write_notebook(path: Path, cells: dict[str, str]) -> None:
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"cell-{n}",
                   "metadata": {}, "outputs": [], "source": source}
                  for n, source in enumerate(cells.values())],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                    "name": "python3"}, "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook, indent=1))


def _set_comms_over_subshells(lab: LabServer, mode: str) -> None:
    """Sets JupyterLab's ``commsOverSubshells`` as a person would in the Settings Editor (a user
    setting; none for the default, ``perCommTarget``) and checks what a page will load."""
    user = {} if mode == "perCommTarget" else {"commsOverSubshells": mode}
    lab.api(f"/lab/api/settings/{KERNEL_SETTINGS}", method="PUT", body={"raw": json.dumps(user)})
    settings = lab.api(f"/lab/api/settings/{KERNEL_SETTINGS}")
    default = settings["schema"]["properties"]["commsOverSubshells"]["default"]
    assert settings["settings"].get("commsOverSubshells", default) == mode


@contextlib.contextmanager
def _open(lab: LabServer, browser: Any, name: str, cells: dict[str, str], mode: str,
          app: str = "lab") -> Iterator[Notebook]:
    """Writes the notebook, opens it in a fresh page, waits for its kernel, runs the first cell."""
    _set_comms_over_subshells(lab, mode)
    _write_notebook(lab.root / name, cells)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(lab.page_url(name, app))
        expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(len(cells), timeout=60_000)
        # Keys pressed before the page has connected to the kernel are not all honoured.
        lab.wait_for_kernel(name)
        expect(page.locator(".jp-Notebook-ExecutionIndicator").first).to_have_attribute(
            "data-status", "idle", timeout=60_000)
        book = Notebook(page, mode, list(cells))
        book.run_and_wait(next(iter(cells)))
        yield book
    finally:
        context.close()
        lab.shutdown_kernels()


@pytest.fixture(scope="module", params=["disabled", "perCommTarget"])
def notebook(request: pytest.FixtureRequest, lab: LabServer, browser: Any) -> Iterator[Notebook]:
    """The test notebook open in JupyterLab, with ``commsOverSubshells`` as the param says."""
    with _open(lab, browser, f"agent-{request.param}.ipynb", CELLS, request.param) as book:
        yield book


def _record_text_growth(view: Locator) -> None:
    """Records the streamed text's length at every DOM change, in the page itself."""
    view.locator(".ak-items").evaluate("""(items) => {
        window.__lengths = [];
        const measure = () => {
            const text = items.querySelector('.ak-text');
            window.__lengths.push(text ? text.innerText.length : 0);
        };
        new MutationObserver(measure).observe(items, {subtree: true, childList: true, characterData: true});
    }""")


def test_text_streams_in_and_approve_while_the_cell_is_busy_lets_the_run_finish(
        notebook: Notebook, artifacts: Path) -> None:
    notebook.run_and_wait("approving")
    notebook.run("approve")
    view = notebook.view("approve")
    expect(view).to_be_visible(timeout=30_000)
    _record_text_growth(view)

    approve = view.locator(".ak-approve")
    expect(approve).to_be_visible(timeout=30_000)
    lengths = notebook.page.evaluate("window.__lengths")
    growth = [n for n in sorted(set(lengths)) if n > 0]
    assert len(growth) >= 3, f"the text arrived in {len(growth)} steps: {lengths}"
    assert lengths == sorted(lengths)  # it only ever grew
    assert notebook.prompt("approve") == "[*]:"  # the cell is busy while the card asks
    expect(view.locator(".ak-text")).to_contain_text(STREAMED)
    view.screenshot(path=str(artifacts / f"{notebook.mode}-awaiting-approval.png"))

    approve.click()

    notebook.wait_done("approve")
    transcript = notebook.transcript("approve")
    expect(transcript.locator(".ak-tool .ak-badge")).to_have_text("done")
    expect(transcript).to_contain_text("The note is saved.")
    expect(view).to_have_count(0)  # the live view gave way to its transcript
    transcript.screenshot(path=str(artifacts / f"{notebook.mode}-approved.png"))
    assert notebook.run_and_wait("approved?").strip() == "['hello'] The note is saved."
    subshells = notebook.run_and_wait("subshells?").strip()
    if notebook.mode == "disabled":
        assert subshells == "subshells: 0"
    else:  # the clicks really travelled on a subshell
        assert subshells != "subshells: 0"


def test_reject_with_a_reason_sends_the_reason_to_the_model(notebook: Notebook, artifacts: Path) -> None:
    notebook.run_and_wait("rejecting")
    notebook.run("reject")
    view = notebook.view("reject")
    reject = view.locator(".ak-reject")
    expect(reject).to_be_visible(timeout=30_000)
    assert notebook.prompt("reject") == "[*]:"

    view.locator(".ak-reason").fill("no notes today")
    reject.click()

    notebook.wait_done("reject")
    notebook.transcript("reject").screenshot(path=str(artifacts / f"{notebook.mode}-rejected.png"))
    told = notebook.run_and_wait("rejected?")
    assert "The user rejected this call: no notes today" in told


def test_stop_cancels_the_run_and_the_cell_completes(notebook: Notebook, artifacts: Path) -> None:
    notebook.run_and_wait("stopping")
    notebook.run("stop")
    view = notebook.view("stop")
    expect(view.locator(".ak-text")).to_contain_text("Thinking aloud", timeout=30_000)
    assert notebook.prompt("stop") == "[*]:"

    view.locator(".ak-stop").click()

    notebook.wait_done("stop", timeout=30_000)
    expect(notebook.transcript("stop").locator(".ak-phase")).to_contain_text("cancelled")
    notebook.transcript("stop").screenshot(path=str(artifacts / f"{notebook.mode}-stopped.png"))
    assert notebook.run_and_wait("stopped?").strip() == "user_interrupt ['hello']"


# ---- Notebook 7, and a detached run --------------------------------------------------------


def test_in_notebook_7_approve_while_the_cell_is_busy_lets_the_run_finish(
        lab: LabServer, browser: Any, artifacts: Path) -> None:
    cells = {name: CELLS[name] for name in ("setup", "approving", "approve", "approved?")}
    with _open(lab, browser, "agent-notebook7.ipynb", cells, "perCommTarget", app="notebooks") as book:
        book.run_and_wait("approving")
        book.run("approve")
        approve = book.view("approve").locator(".ak-approve")
        expect(approve).to_be_visible(timeout=30_000)
        assert book.prompt("approve") == "[*]:"
        book.view("approve").screenshot(path=str(artifacts / "notebook7-awaiting-approval.png"))

        approve.click()

        book.wait_done("approve")
        assert book.run_and_wait("approved?").strip() == "['hello'] The note is saved."


DETACHED = {
    "setup": SETUP,
    "approving": CELLS["approving"],
    "detached": "%%agent -m approving --tools write_note --detach -o later\nWrite a note saying hello.",
    "wait": "%agent wait\nprint(notes, later.text)",
}


def test_a_detached_cell_returns_at_once_and_a_later_click_still_decides(
        lab: LabServer, browser: Any, artifacts: Path) -> None:
    with _open(lab, browser, "agent-detached.ipynb", DETACHED, "perCommTarget") as book:
        book.run_and_wait("approving")
        book.run("detached")
        book.wait_done("detached")  # the cell has finished; the run goes on
        view = book.view("detached")
        approve = view.locator(".ak-approve")
        expect(approve).to_be_visible(timeout=30_000)
        output = book.cell("detached").locator(".jp-OutputArea")
        expect(output).to_contain_text("its summary appears here when it ends")

        approve.click()

        expect(output.locator(".ak-static")).to_contain_text("The note is saved.", timeout=30_000)
        expect(output).not_to_contain_text("its summary appears here")
        expect(output.locator(".ak-static")).to_have_count(1)
        output.screenshot(path=str(artifacts / "detached-approved.png"))
        assert book.run_and_wait("wait").strip() == "['hello'] The note is saved."
