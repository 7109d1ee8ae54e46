"""Steering an ``%%agent`` run from its live view in real JupyterLab (headless Chromium).

A scripted model calls a tool that waits until the test creates a file. While the cell is busy a
person types a message in the view's box and presses Enter, clicks Pause, sees the run hold at
the turn boundary once the tool ends, and clicks Resume: the run takes the message in, finishes,
and its transcript (which replaces the live view) shows the message and the pause but no
controls. Screenshots go to ``test-artifacts/browser``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from .conftest import LabServer
from .test_lab_approvals import _open

MESSAGE = "Use the March figures."

SETUP = '''%load_ext agent_kernel
import asyncio
from pathlib import Path
from agent_kernel import tool
from agent_kernel.models.scripted import ScriptedModel, text, tool_call

@tool(read_only=True)
async def hold() -> str:
    """Waits until a file named go exists (the test creates it)."""
    while not Path("go").exists():
        await asyncio.sleep(0.05)
    return "went on"
'''

CELLS = {
    "setup": SETUP,
    "model": ("steered = ScriptedModel([[text('Holding until told.'), tool_call('hold', {})], "
              "'Done, with the March figures.'])"),
    "run": "%%agent -m steered --tools hold --new -o out\nHold, then answer.",
    "check": ("agent = %agent session\n"
              "print(out.text, any(getattr(b, 'text', None) == " + repr(MESSAGE) + " "
              "for m in agent.messages if m.role == 'user' for b in m.content))"),
}


def test_a_message_typed_in_the_view_and_a_pause_reach_the_running_agent(
        lab: LabServer, browser: Any, artifacts: Path) -> None:
    with _open(lab, browser, "agent-steer.ipynb", CELLS, "perCommTarget") as book:
        book.run_and_wait("model")
        book.run("run")
        view = book.view("run")
        expect(view.locator(".ak-tool .ak-badge")).to_have_text("running", timeout=30_000)
        assert book.prompt("run") == "[*]:"  # the cell is busy while the run holds in its tool

        box = view.locator(".ak-steer-input")
        box.click()
        box.fill(MESSAGE)
        box.press("Enter")
        expect(view.locator(".ak-steer-queued")).to_have_text("1 message waiting for the next turn boundary")
        expect(box).to_have_value("")

        view.locator(".ak-pause").click()
        expect(view.locator(".ak-phase")).to_have_text("pausing at the next turn boundary…")
        expect(view.locator(".ak-resume")).to_be_disabled()

        (lab.root / "go").write_text("")  # the tool ends: the run reaches the turn boundary
        expect(view.locator(".ak-phase")).to_have_text("paused — waiting at the turn boundary", timeout=30_000)
        expect(view.locator(".ak-resume")).to_be_enabled()
        expect(view.locator(".ak-notice:not(.ak-kernel-gone)")).to_contain_text("Paused at the turn boundary (1 steered message waiting)")
        assert book.prompt("run") == "[*]:"
        view.screenshot(path=str(artifacts / "steer-paused.png"))

        view.locator(".ak-resume").click()

        book.wait_done("run")
        transcript = book.transcript("run")
        expect(transcript.locator(".ak-user")).to_contain_text(MESSAGE)
        expect(transcript).to_contain_text("at the turn boundary, then resumed")
        expect(transcript).to_contain_text("Done, with the March figures.")
        expect(transcript.locator("button, textarea, input")).to_have_count(0)  # no dead controls
        expect(view).to_have_count(0)
        transcript.screenshot(path=str(artifacts / "steer-finished.png"))
        assert book.run_and_wait("check").strip() == "Done, with the March figures. True"
