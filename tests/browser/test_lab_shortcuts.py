"""Keyboard shortcuts and copy buttons of the live view, in real JupyterLab (headless Chromium).

With the view focused (a click on it), ``a`` approves the card waiting, ``r`` rejects it and
Escape stops the run; JupyterLab's own command-mode keys (``a`` inserts a cell above) do not fire.
An answer and each of its code blocks have a Copy button that puts their text on the clipboard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import LabServer
from .test_lab_approvals import SETUP, _open

CODE = "print('hello')\nprint('again')"
ANSWER = f"Here is the code:\n\n```python\n{CODE}\n```\n\nI will save it."

CELLS = {
    "setup": SETUP,
    "models": (
        f"approving = ScriptedModel([[text({ANSWER!r}), tool_call('write_note', {{'text': 'code'}})], 'Saved.'])\n"
        "rejecting = ScriptedModel([[text('Let me write it.'), tool_call('write_note', {'text': 'no'})], 'Not saved.'])\n"
        "stopping = ScriptedModel([text('Thinking aloud for a long while. ' * 40, chunk=4, delay=0.05)])"
    ),
    "approve": "%%agent -m approving --tools write_note --new\nWrite the code down.",
    "reject": "%%agent -m rejecting --tools write_note --new\nWrite a note.",
    "stop": "%%agent -m stopping --new -o stopped\nThink for a long time.",
    "after": "print(notes, stopped.termination_reason.value)",
}


@pytest.mark.parametrize("app", ["lab", "notebooks"])  # JupyterLab and Notebook 7
def test_a_and_r_answer_the_waiting_card_escape_stops_and_copy_buttons_copy(
        lab: LabServer, browser: Any, artifacts: Path, app: str) -> None:
    with _open(lab, browser, f"shortcuts-{app}.ipynb", CELLS, "perCommTarget", app=app) as book:
        page = book.page
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab.url)
        cells = page.locator(".jp-Notebook .jp-Cell")
        book.run_and_wait("models")

        book.run("approve")
        view = book.view("approve")
        expect(view.locator(".ak-approve")).to_be_visible(timeout=30_000)
        # Copy buttons: the code block's, then the whole answer's (its Markdown).
        block = view.locator(".ak-code-wrap")
        block.hover()
        block.locator(".ak-copy").click()
        expect(block.locator(".ak-copy")).to_have_text("Copied")
        assert page.evaluate("navigator.clipboard.readText()") == CODE
        answer = view.locator(".ak-text")
        answer.hover()
        answer.locator(":scope > .ak-copy").click()
        assert page.evaluate("navigator.clipboard.readText()") == ANSWER
        view.screenshot(path=str(artifacts / f"shortcuts-copy-{app}.png"))

        count = cells.count()
        view.locator(".ak-tool .ak-tool-name").click()  # focus the card, as a person clicks it
        page.keyboard.press("a")
        expect(book.transcript("approve")).to_contain_text("Saved.", timeout=30_000)
        assert cells.count() == count  # JupyterLab did not take the key (insert a cell above)

        book.run("reject")
        view = book.view("reject")
        expect(view.locator(".ak-reject")).to_be_visible(timeout=30_000)
        view.locator(".ak-text").click()  # anywhere in the view: the only card waiting answers
        page.keyboard.press("r")
        transcript = book.transcript("reject")
        expect(transcript).to_contain_text("Not saved.", timeout=30_000)
        expect(transcript.locator(".ak-tool .ak-badge")).to_have_text("rejected")

        book.run("stop")
        view = book.view("stop")
        expect(view.locator(".ak-text")).to_contain_text("Thinking aloud", timeout=30_000)
        view.locator(".ak-statusbar .ak-phase").click()
        page.keyboard.press("Escape")
        book.wait_done("stop")
        assert cells.count() == count
        assert book.run_and_wait("after").strip() == "['code'] user_interrupt"


DIFF_CELLS = {
    "setup": "%load_ext agent_kernel\nfrom pathlib import Path\nfrom agent_kernel.models.scripted import ScriptedModel, tool_call\n"
             "Path('plan.md').write_text('one\\ntwo\\nthree\\n')",
    "model": "writing = ScriptedModel([tool_call('write_file', {'path': 'plan.md', 'content': 'one\\n2\\nthree\\n'}), 'Done.'])",
    "write": "%%agent -m writing --tools write_file --new\nChange two to 2 in plan.md.",
    "check": "print(repr(Path('plan.md').read_text()))",
}


@pytest.mark.parametrize("app", ["lab", "notebooks"])
def test_a_write_waiting_for_approval_shows_the_diff_of_its_file(
        lab: LabServer, browser: Any, artifacts: Path, app: str) -> None:
    with _open(lab, browser, f"write-diff-{app}.ipynb", DIFF_CELLS, "perCommTarget", app=app) as book:
        book.run_and_wait("model")
        book.run("write")
        view = book.view("write")
        expect(view.locator(".ak-approve")).to_be_visible(timeout=30_000)
        diff = view.locator(".ak-diff-view")
        expect(diff).to_be_visible()
        expect(diff.locator(".ak-diff-file").first).to_have_text("--- a/plan.md")
        expect(diff.locator(".ak-diff-del")).to_have_text(["-two"])
        expect(diff.locator(".ak-diff-add")).to_have_text(["+2"])
        assert not view.locator(".ak-args").evaluate("(d) => d.open")  # the JSON is one click away
        colours = diff.locator(".ak-diff-add").evaluate(
            "(n) => [getComputedStyle(n).borderLeftColor, getComputedStyle(n).backgroundColor]")
        assert colours[0] != colours[1] and "0, 0, 0, 0" not in colours[1]  # marked, not plain
        view.screenshot(path=str(artifacts / f"write-diff-card-{app}.png"))
        view.locator(".ak-approve").click()
        expect(book.transcript("write")).to_contain_text("Done.", timeout=30_000)
        assert book.run_and_wait("check").strip() == "'one\\n2\\nthree\\n'"
