"""An MCP server's elicitation answered from the live view in real JupyterLab (headless Chromium).

server-everything's ``trigger-elicitation-request`` asks for a form mid-call; while the cell is
busy the run's view shows it, built from the request's JSON schema, and the person's answer goes
back to the server, whose tool result then quotes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from ..mcp_servers import EVERYTHING, NODE, everything_missing
from .conftest import LabServer
from .test_lab_approvals import Notebook, _open

CELLS = {
    "setup": "%load_ext agent_kernel\nfrom agent_kernel.models.scripted import ScriptedModel, tool_call",
    "server": f"%agent mcp add ev -- {NODE} {EVERYTHING} stdio",
    "asking": ("asking = ScriptedModel([[tool_call('mcp__ev__trigger-elicitation-request', {})], "
               "'Thanks.', [tool_call('mcp__ev__trigger-elicitation-request', {})], 'Fine.'])"),
    "ask": "%%agent -m asking --mode bypass -o answered\nAsk me for my details.",
    "answered?": "print(answered.tool_calls[0]['content'])",
    "decline": "%%agent -m asking --mode bypass -o declined\nAsk me again.",
    "declined?": "print(declined.tool_calls[0]['content'])",
}


@pytest.fixture(scope="module")
def notebook(lab: LabServer, browser: Any) -> Iterator[Notebook]:
    missing = everything_missing()
    if missing:
        pytest.fail(missing)
    with _open(lab, browser, "mcp-elicitation.ipynb", CELLS, "perCommTarget") as book:
        book.run_and_wait("server")
        book.run_and_wait("asking")
        yield book


def test_the_view_shows_the_servers_form_and_accept_sends_the_answer_back(notebook: Notebook, artifacts: Path) -> None:
    notebook.run("ask")
    form = notebook.view("ask").locator(".ak-elicitation")
    expect(form).to_be_visible(timeout=60_000)
    assert notebook.prompt("ask") == "[*]:"  # the call waits for the person
    # Fields follow the schema's types: text, checkbox, number, a choice.
    expect(form.locator("input[name=name]")).to_have_attribute("type", "text")
    expect(form.locator("input[name=check]")).to_have_attribute("type", "checkbox")
    expect(form.locator("input[name=integer]")).to_have_value("42")
    expect(form.locator("select[name=untitledSingleSelectEnum]")).to_have_value("Monica")
    form.locator("input[name=name]").fill("Ada Lovelace")
    form.locator("input[name=check]").check()
    form.locator("select[name=untitledSingleSelectEnum]").select_option("Joey")
    form.screenshot(path=str(artifacts / "mcp-elicitation-form.png"))
    form.locator(".ak-elicit-accept").click()

    notebook.wait_done("ask")
    answer = notebook.run_and_wait("answered?")
    assert "Ada Lovelace" in answer and "Joey" in answer


def test_decline_tells_the_server_the_person_declined(notebook: Notebook) -> None:
    notebook.run("decline")
    form = notebook.view("decline").locator(".ak-elicitation")
    expect(form).to_be_visible(timeout=60_000)
    form.locator(".ak-elicit-decline").click()
    notebook.wait_done("decline")
    assert "decline" in notebook.run_and_wait("declined?").lower()
