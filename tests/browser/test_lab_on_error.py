"""``%agent on-error`` in real JupyterLab (headless Chromium): a failing cell shows an "Ask the
agent" button under its traceback; a click runs the agent under that traceback, where its tool
call is approved as in any live view, and the answer stays there as a static transcript, which is
what the saved notebook holds. Screenshots go to ``test-artifacts/browser``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import LabServer
from .test_lab_approvals import SETUP, _open
from .test_lab_transcripts import _save

ANSWER = "The column is called **price**, not prices."

CELLS = {
    "setup": SETUP,
    "model": ("fixer = ScriptedModel([[text('Let me note the right column.'), "
              f"tool_call('write_note', {{'text': 'price'}})], {ANSWER!r}])"),
    "session": "%agent model fixer\n%agent tools write_note\n%agent on-error on",
    "data": "sales = {'price': [1, 2]}",
    "good": "total = sum(sales['price'])",
    "fail": "total = sum(sales['prices'])",
    "asked?": "print(notes, fixer.requests[-1].messages[0].text.splitlines()[0])",
}


@pytest.mark.parametrize("mode", ["perCommTarget", "disabled"])
def test_a_failing_cells_button_asks_the_agent_and_the_answer_stays_under_the_traceback(
        lab: LabServer, browser: Any, artifacts: Path, mode: str) -> None:
    name = f"on-error-{mode}.ipynb"
    with _open(lab, browser, name, CELLS, mode) as book:
        for cell in ("model", "session", "data", "good"):
            book.run_and_wait(cell)
        expect(book.cell("good").locator(".ak-onerror-button")).to_have_count(0)  # a good cell: no button

        book.run("fail")
        book.wait_done("fail")
        output = book.cell("fail").locator(".jp-Cell-outputArea")
        expect(output.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']")).to_contain_text("KeyError")
        button = output.locator(".ak-onerror-button")
        expect(button).to_be_visible(timeout=30_000)
        expect(button).to_have_text("Ask the agent")
        output.screenshot(path=str(artifacts / f"on-error-{mode}-button.png"))

        button.click()

        view = output.locator(".ak-view")
        approve = view.locator(".ak-approve")
        expect(approve).to_be_visible(timeout=30_000)  # the run's live view, under the traceback
        output.screenshot(path=str(artifacts / f"on-error-{mode}-approval.png"))
        expect(button).to_have_count(0)
        approve.click()

        transcript = output.locator(".ak-static")
        expect(transcript).to_contain_text("The column is called price, not prices.", timeout=30_000)
        expect(transcript.locator("strong")).to_have_text("price")
        expect(transcript.locator(".ak-tool .ak-badge")).to_have_text("done")
        expect(view).to_have_count(0)
        expect(output.locator(".jupyter-widgets")).to_have_count(0)  # no widget left in the cell
        output.screenshot(path=str(artifacts / f"on-error-{mode}-answered.png"))
        assert book.run_and_wait("asked?").strip() == \
            "['price'] A notebook cell failed with KeyError: 'prices'. Explain what went wrong and how to fix it; then fix the cell if you can."

        stored = _save(book, lab, name)
    outputs = stored["cells"][list(CELLS).index("fail")]["outputs"]
    assert [o["output_type"] for o in outputs] == ["error", "display_data"]
    assert sorted(outputs[1]["data"]) == ["text/html", "text/plain"]
    assert "The column is called" in outputs[1]["data"]["text/plain"]
    assert "application/vnd.jupyter.widget-view+json" not in json.dumps(stored)
