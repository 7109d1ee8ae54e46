"""``%agent panel`` and per-cell highlighting in real JupyterLab, through the package's extension.

``%agent panel`` opens the session's conversation beside the notebook; a prompt typed there and
sent runs the session's scripted model while the kernel is idle, and the answer, and an approval
card answered there, show in the panel. Then the editor: a ``%%agent`` cell of a Python notebook
is highlighted as Markdown (its words are not Python keywords), and a ``%%python`` cell of the
Agent kernel as Python. Screenshots go to ``test-artifacts/browser``.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from .conftest import LabServer
from .test_lab_approvals import Notebook, _open

SETUP = '''%load_ext agent_kernel
from agent_kernel import tool
from agent_kernel.models.scripted import ScriptedModel, tool_call

notes = []

@tool
def write_note(text: str) -> str:
    """Writes a note (it changes things, so the default permission mode asks first)."""
    notes.append(text)
    return "saved"

panel_model = ScriptedModel(["The answer is 42.", [tool_call("write_note", {"text": "from the panel"})],
                             "The note is saved."])
%agent model panel_model
%agent tools write_note
'''

CELLS = {
    "setup": SETUP,
    "panel": "%agent panel",
    "check": ("agent = %agent session\n"
              "print([e.data['prompt'] for e in agent.events if e.type.value == 'run_start'], notes, "
              "agent.journal.path.exists())"),
    "again": "%agent panel",
}


def _side(page: Page) -> Locator:
    return page.locator(".ak-session-panel")


@pytest.mark.parametrize("app", ["lab", "notebooks"])
def test_agent_panel_opens_beside_the_notebook_and_runs_prompts_sent_from_it(
        app: str, lab: LabServer, browser: Any, artifacts: Path) -> None:
    with _open(lab, browser, f"panel-{app}.ipynb", CELLS, "perCommTarget", app=app) as book:
        page = book.page
        book.run_and_wait("panel")
        side = _side(page)
        expect(side).to_be_visible(timeout=30_000)
        expect(page.locator(".jp-Notebook .ak-session-panel")).to_have_count(0)  # beside it, not in a cell
        if app == "lab":  # JupyterLab splits its main area; Notebook 7 uses its right sidebar
            expect(page.locator("#jp-main-dock-panel .ak-session-panel")).to_be_visible()
        expect(book.cell("panel").locator(".jp-OutputArea")).to_contain_text(
            "The panel of agent session 'default' is beside the notebook")
        expect(side.locator(".ak-panel")).to_contain_text("Agent session 'default'")

        side.locator(".ak-panel-prompt textarea").fill("What is the answer?")
        side.locator(".ak-panel-send").click()
        first = side.locator(".ak-static").first
        expect(first).to_contain_text("The answer is 42.", timeout=30_000)
        expect(side.locator(".ak-panel-prompt-line").first).to_contain_text("What is the answer?")
        expect(side.locator(".ak-panel-prompt textarea")).to_have_value("")

        # Ctrl+Enter sends too; the approval card asks in the panel and a click there decides.
        side.locator(".ak-panel-prompt textarea").fill("Write a note.")
        side.locator(".ak-panel-prompt textarea").press("Control+Enter")
        approve = side.locator(".ak-view .ak-approve")
        expect(approve).to_be_visible(timeout=30_000)
        page.screenshot(path=str(artifacts / f"panel-{app}-approval.png"))
        approve.click()
        expect(side.locator(".ak-static")).to_have_count(2, timeout=30_000)
        expect(side.locator(".ak-static").nth(1)).to_contain_text("The note is saved.")
        expect(side.locator(".ak-view")).to_have_count(0)  # the live view gave way to its transcript
        page.screenshot(path=str(artifacts / f"panel-{app}-answered.png"))

        # The runs went to the session's agent and its journal, as a cell's would.
        assert book.run_and_wait("check").strip() == "['What is the answer?', 'Write a note.'] ['from the panel'] True"

        # %agent panel again shows the same panel, runs and all.
        book.run_and_wait("again")
        expect(side).to_have_count(1)
        expect(side.locator(".ak-static")).to_have_count(2)


# ---- highlighting ----------------------------------------------------------------------------

PROMPT = "# Plan\nfor each import in the notebook, say what it is for"
PYTHON = "for i in range(3):\n    import os"

#: The words of a cell's editor drawn in the colour of a CodeMirror style (a theme variable).
_STYLED = """(content, variable) => {
    const probe = document.createElement('span');
    probe.style.color = `var(${variable})`;
    document.body.appendChild(probe);
    const colour = getComputedStyle(probe).color;
    probe.remove();
    const words = [];
    const walker = document.createTreeWalker(content, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
        const parent = walker.currentNode.parentElement;
        if (parent.tagName === 'SPAN' && getComputedStyle(parent).color === colour) {
            words.push(...walker.currentNode.textContent.split(/\\s+/).filter(Boolean));
        }
    }
    return words;
}"""


def _styled(cell: Locator, variable: str) -> list[str]:
    content = cell.locator(".cm-content")
    return list(content.evaluate(_STYLED, variable))


def _wait_for_styled(cell: Locator, variable: str, word: str, timeout: float = 30) -> list[str]:
    """The cell's words in that style, once ``word`` is among them (the language loads lazily)."""
    deadline = time.monotonic() + timeout
    while True:
        words = _styled(cell, variable)
        if word in words:
            return words
        assert time.monotonic() < deadline, \
            f"{word!r} never took the style {variable}: {words}\n{cell.locator('.cm-content').inner_html()}"
        time.sleep(0.1)  # polling the editor's drawing; nothing to race


def _write(path: Path, cells: list[str], kernel: dict[str, str], language: dict[str, Any]) -> None:
    path.write_text(json.dumps({
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"cell-{n}", "metadata": {},
                   "outputs": [], "source": source} for n, source in enumerate(cells)],
        "metadata": {"kernelspec": kernel, "language_info": language},
        "nbformat": 4, "nbformat_minor": 5}, indent=1))


@contextlib.contextmanager
def _opened(lab: LabServer, browser: Any, name: str, cells: list[str], kernel: dict[str, str],
            language: dict[str, Any]) -> Iterator[Notebook]:
    _write(lab.root / name, cells, kernel, language)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(lab.page_url(name))
        expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(len(cells), timeout=60_000)
        lab.wait_for_kernel(name)  # the kernel's language_info sets the notebook's language
        expect(page.locator(".jp-Notebook-ExecutionIndicator").first).to_have_attribute(
            "data-status", "idle", timeout=60_000)
        yield Notebook(page, "perCommTarget", [str(n) for n in range(len(cells))])
    finally:
        context.close()
        lab.shutdown_kernels()


KEYWORD = "--jp-mirror-editor-keyword-color"
HEADER = "--jp-mirror-editor-header-color"


def test_an_agent_cell_of_a_python_notebook_is_highlighted_as_markdown(
        lab: LabServer, browser: Any, artifacts: Path) -> None:
    python3 = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    with _opened(lab, browser, "highlight-python.ipynb", [f"%%agent\n{PROMPT}", PYTHON],
                 python3, {"name": "python"}) as book:
        python = _wait_for_styled(book.cell("1"), KEYWORD, "import")
        assert {"for", "import"} <= set(python)  # the notebook's own cells: Python
        agent = book.cell("0")
        _wait_for_styled(agent, HEADER, "Plan")  # Markdown: "# Plan" is a heading, not a comment
        assert _styled(agent, KEYWORD) == []  # "for" and "import" are words of the prompt
        book.page.screenshot(path=str(artifacts / "highlight-python-notebook.png"))

        # Typing %%agent on a cell's first line turns its highlighting over at once.
        book.cell("1").locator(".cm-content").click()
        book.page.keyboard.press("Control+Home")
        book.page.keyboard.type("%%agent\n")
        deadline = time.monotonic() + 30
        while _styled(book.cell("1"), KEYWORD):
            assert time.monotonic() < deadline, "the cell kept its Python keywords after %%agent was typed"
            time.sleep(0.1)  # polling the editor's drawing; nothing to race


def test_a_python_cell_of_the_agent_kernel_is_highlighted_as_python(
        lab: LabServer, browser: Any, artifacts: Path) -> None:
    agent = {"display_name": "Agent (Python)", "language": "python", "name": "agent"}
    with _opened(lab, browser, "highlight-agent.ipynb", [f"%%python\n{PYTHON}", PROMPT],
                 agent, {"name": "python", "codemirror_mode": "markdown"}) as book:
        python = _wait_for_styled(book.cell("0"), KEYWORD, "import")
        assert {"for", "import"} <= set(python)
        prompt = book.cell("1")
        _wait_for_styled(prompt, HEADER, "Plan")  # a prompt cell stays Markdown
        assert _styled(prompt, KEYWORD) == []
        book.page.screenshot(path=str(artifacts / "highlight-agent-kernel.png"))
