"""What a run leaves in a notebook, and approvals nobody can miss, in real JupyterLab and Notebook 7.

A run's live view gives way to its static transcript when it ends, so a notebook saved, shut
down and reopened shows every run as it was seen (text, tool cards, decisions), once, with no
"Error displaying widget". During Run All an approval far below the fold comes into view, the
tab's title says one is pending and JupyterLab raises a notification. The dark theme keeps both
renderings readable. Screenshots go to ``test-artifacts/browser``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from .conftest import LabServer
from .test_lab_approvals import SETUP, STREAMED, Notebook, _open

ANSWER = "The note is saved as **hello**."

TRANSCRIPT_CELLS = {
    "setup": SETUP,
    "policy": "import os; os.environ['AGENT_KERNEL_APPROVAL'] = 'auto_approve'",
    "model": ("model = ScriptedModel([[text('Let me write the note.', chunk=2, delay=0.1), "
              f"tool_call('write_note', {{'text': 'hello'}})], {ANSWER!r}])"),
    "run": "%%agent -m model --tools write_note --new\nWrite a note saying hello.",
}

#: Tall outputs between the top of the notebook and the cell that will ask for approval.
FILLER = "print('\\n'.join(f'line {i}' for i in range(60)))"

RUN_ALL_CELLS = {
    "setup": SETUP,
    "approving": (f"approving = ScriptedModel([[text({STREAMED!r}, chunk=3, delay=0.02), "
                  "tool_call('write_note', {'text': 'hello'})], 'The note is saved.'])"),
    **{f"filler {n}": FILLER for n in range(3)},
    "approve": "%%agent -m approving --tools write_note --new\nWrite a note saying hello.",
    "after": "print('after', notes)",
}

TITLE_PREFIX = "⏸ approval needed · "


def _save(book: Notebook, lab: LabServer, name: str) -> dict[str, Any]:
    """Saves as a person does (Ctrl+S) and returns the notebook as stored on disk."""
    book.cell("setup").locator(".jp-InputArea-editor").click()
    book.page.keyboard.press("Escape")  # command mode: the shortcut saves the notebook
    book.page.keyboard.press("Control+s")
    deadline = time.monotonic() + 30
    while True:
        stored = lab.api(f"/api/contents/{name}?content=1")["content"]
        outputs = json.dumps([cell.get("outputs", []) for cell in stored["cells"]])
        if "ak-static" in outputs:
            return dict(stored)
        if time.monotonic() > deadline:
            raise AssertionError(f"the saved notebook holds no transcript: {outputs[:2000]}")
        time.sleep(0.2)  # polling the file the server writes; nothing to race


def _reopen(lab: LabServer, browser: Any, name: str, app: str, cells: int) -> tuple[Any, Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(lab.page_url(name, app))
    expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(cells, timeout=60_000)
    return context, page


def test_a_saved_run_reopens_after_kernel_shutdown_as_its_transcript_shown_once(
        lab: LabServer, browser: Any, artifacts: Path) -> None:
    name = "transcript.ipynb"
    with _open(lab, browser, name, TRANSCRIPT_CELLS, "perCommTarget") as book:
        book.run_and_wait("policy")
        book.run_and_wait("model")
        book.run("run")
        expect(book.view("run")).to_be_visible(timeout=30_000)  # live while it runs
        book.wait_done("run")
        output = book.cell("run").locator(".jp-OutputArea")
        expect(output.locator(".ak-static")).to_have_count(1)
        expect(output.locator(".ak-view")).to_have_count(0)
        text = output.inner_text()
        assert text.count("The note is saved as hello.") == 1, text  # no second answer
        assert text.count("Let me write the note.") == 1, text
        assert output.locator("table").count() == 0  # no table repeating the tool cards
        stored = _save(book, lab, name)
    # _open shut the kernel down on leaving.
    assert lab.api("/api/sessions") == []
    outputs = stored["cells"][3]["outputs"]
    # The transcript, and (when the run ended before the page had drawn its view) an empty output
    # where the view was.
    assert [sorted(o["data"]) for o in outputs if o.get("data")] == [["text/html", "text/plain"]]
    assert "application/vnd.jupyter.widget-view+json" not in json.dumps(stored)

    for app in ("lab", "notebooks"):
        context, page = _reopen(lab, browser, name, app, len(stored["cells"]))
        try:
            transcript = page.locator(".jp-Notebook .jp-Cell").nth(3).locator(".ak-static")
            expect(transcript).to_be_visible(timeout=30_000)
            card = transcript.locator(".ak-tool")
            expect(card).to_have_count(1)
            expect(card.locator(".ak-badge")).to_have_text("done")
            expect(card).to_contain_text("write_note")
            expect(card).to_contain_text("Approved by")
            expect(card).to_contain_text("saved")
            expect(transcript.locator("strong")).to_have_text("hello")  # Markdown, rendered
            expect(transcript.locator(".ak-phase")).to_contain_text("finished")
            assert "Error displaying widget" not in page.locator("body").inner_text()
            assert transcript.inner_text().count("The note is saved as hello.") == 1
            transcript.screenshot(path=str(artifacts / f"reopened-{app}-transcript.png"))
        finally:
            context.close()
            lab.shutdown_kernels()


def test_run_all_brings_an_approval_below_the_fold_into_view_and_says_so_in_the_title(
        lab: LabServer, browser: Any, artifacts: Path) -> None:
    with _open(lab, browser, "run-all.ipynb", RUN_ALL_CELLS, "perCommTarget") as book:
        page = book.page
        title = page.title()
        assert not title.startswith(TITLE_PREFIX)
        page.locator(".jp-Notebook").evaluate("(node) => node.scrollTo(0, 0)")
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()

        approve = book.view("approve").locator(".ak-approve")
        expect(approve).to_be_visible(timeout=60_000)
        expect(approve).to_be_in_viewport(timeout=10_000)
        expect(page).to_have_title(re.compile("^" + re.escape(TITLE_PREFIX)))
        toast = page.locator(".Toastify__toast", has_text="waiting for your approval")
        expect(toast).to_be_visible(timeout=10_000)
        assert book.prompt("approve") == "[*]:" and book.prompt("after") == "[*]:"
        page.screenshot(path=str(artifacts / "run-all-approval-in-view.png"))

        approve.click()

        book.wait_done("after")
        expect(page).not_to_have_title(re.compile(re.escape(TITLE_PREFIX)))
        expect(toast).to_have_count(0, timeout=10_000)
        assert book.output("after").strip() == "after ['hello']"


def _luminance(rgb: str) -> float:
    r, g, b = (int(v) / 255 for v in re.findall(r"\d+", rgb)[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_in_the_dark_theme_the_live_view_and_its_transcript_stay_readable(
        lab: LabServer, browser: Any, artifacts: Path) -> None:
    cells = {name: RUN_ALL_CELLS[name] for name in ("setup", "approving", "approve", "after")}
    with _open(lab, browser, "dark.ipynb", cells, "perCommTarget") as book:
        page = book.page
        try:
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Settings$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Theme$")).hover()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^JupyterLab Dark$")).click()
            expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "false",
                                                           timeout=30_000)
            book.run_and_wait("approving")
            book.run("approve")
            view = book.view("approve")
            expect(view.locator(".ak-approve")).to_be_visible(timeout=30_000)
            assert _luminance(view.locator(".ak-text").evaluate(
                "(n) => getComputedStyle(n).color")) > 0.5
            view.screenshot(path=str(artifacts / "dark-awaiting-approval.png"))
            view.locator(".ak-approve").click()
            book.wait_done("approve")
            transcript = book.transcript("approve")
            expect(transcript).to_contain_text("The note is saved.")
            for part in (".ak-text", ".ak-tool", ".ak-statusbar .ak-phase"):
                color = transcript.locator(part).first.evaluate("(n) => getComputedStyle(n).color")
                assert _luminance(color) > 0.5, (part, color)
            transcript.screenshot(path=str(artifacts / "dark-transcript.png"))
        finally:
            lab.api("/lab/api/settings/@jupyterlab/apputils-extension:themes", method="PUT",
                    body={"raw": "{}"})
