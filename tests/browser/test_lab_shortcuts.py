"""Keyboard shortcuts and copy buttons of the live view, in real JupyterLab (headless Chromium).

With the view focused (a click on it), ``a`` approves the card waiting, ``r`` rejects it and
Escape stops the run; JupyterLab's own command-mode keys (``a`` inserts a cell above) do not fire.
An answer and each of its code blocks have a Copy button that puts their text on the clipboard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def test_a_and_r_answer_the_waiting_card_escape_stops_and_copy_buttons_copy(
        lab: LabServer, browser: Any, artifacts: Path) -> None:
    with _open(lab, browser, "shortcuts.ipynb", CELLS, "perCommTarget") as book:
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
        view.screenshot(path=str(artifacts / "shortcuts-copy.png"))

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
