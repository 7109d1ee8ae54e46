"""``%agent panel`` (jupyter/panel.py) on a real IPython InteractiveShell, with scripted models.

Send is clicked as a page clicks it: the button's handler hands the run to the loop cells await
on, so the run starts when the next cell awaits, as it starts in an idle kernel.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_kernel.journal import read_events
from agent_kernel.jupyter import _panel
from agent_kernel.jupyter._panel import NO_SIDE_PANEL, PANEL_MIME, SessionPanel
from agent_kernel.jupyter._view import AgentView

from . import test_magics
from .test_magics import Cells

shell = test_magics.shell  # the fixtures of the magics' tests: a shell with the extension loaded
cells = test_magics.cells

# A tool that holds until the notebook sets ``gate``, and ``until(predicate)`` (the magics' tests' cell).
HOLDING = test_magics.STEERING


def _open(cells: Cells) -> tuple[SessionPanel, Any]:
    _, shown = cells.run("%agent panel")
    panel = cells.magics.panel
    assert panel is not None
    return panel, shown


def _texts(panel: SessionPanel) -> list[str]:
    """What each child of the panel's run list shows: an HTML widget's value, or the view's class."""
    return [getattr(child, "value", type(child).__name__) for child in panel.runs.children]


def test_agent_panel_shows_the_panel_for_the_extension_and_inline_for_other_front_ends(cells: Cells) -> None:
    panel, shown = _open(cells)
    (output,) = shown.outputs
    assert output.data[PANEL_MIME] == {"model_id": panel.widget.model_id, "session": "default"}
    inline = output.data["application/vnd.jupyter.widget-view+json"]["model_id"]
    assert inline != panel.widget.model_id  # the inline form: a line saying so, then the panel
    line, body = panel._inline.children
    assert NO_SIDE_PANEL in line.value and body is panel.widget
    assert [panel.title, panel.runs, panel.prompt] == list(panel.widget.children[:3])

    again, shown_again = _open(cells)
    assert again is panel  # the same panel, shown again
    assert shown_again.outputs[0].data[PANEL_MIME]["model_id"] == panel.widget.model_id

    assert "takes no argument" in str(cells.error("%agent panel other"))
    _, helped = cells.run("%agent help")
    assert "%agent panel" in helped.stdout


def test_send_starts_a_run_of_the_session_whose_live_view_then_transcript_the_panel_shows(cells: Cells) -> None:
    cells.run(HOLDING)
    cells.run("held = ScriptedModel([[text('Holding.'), tool_call('hold', {})], 'The panel answer.'])\n"
              "%agent model held\n%agent tools hold")
    panel, _ = _open(cells)

    panel.prompt.value = "Ask from the panel"
    panel.send_button.click()  # as a page's click arrives: on the kernel's loop, not at once
    cells.run("agent = %agent session\nawait until(lambda: agent.running)")

    assert _texts(panel)[1] == "AgentView"
    view = panel.runs.children[1]
    assert isinstance(view, AgentView) and view.comm is not None
    assert "Ask from the panel" in panel.runs.children[0].value
    assert panel.prompt.value == "" and panel.send_button.disabled
    session = cells.magics.sessions.get()
    assert len(session.running) == 1  # %agent wait waits for it, and a cell in this session waits its turn

    cells.run("gate.set()\n%agent wait")

    line, transcript = panel.runs.children
    assert "The panel answer." in transcript.value and 'class="ak-static"' in transcript.value
    assert view.comm is None  # the live view closed once its transcript took its place
    assert not panel.send_button.disabled and panel.notice.value == ""
    journal = session.agent.journal.path
    types = [e.type.value for e in read_events(journal)]
    assert types.count("run_finish") == 1
    assert any(e.data.get("prompt") == "Ask from the panel" for e in read_events(journal) if e.type.value == "run_start")


def test_a_cell_run_shows_in_the_panel_and_the_next_send_continues_its_conversation(cells: Cells) -> None:
    panel, _ = _open(cells)
    cells.run("%agent model model")
    cells.run("%%agent\nFrom a cell")
    assert len(panel.runs.children) == 2
    assert "You, in a cell" in panel.runs.children[0].value and "From a cell" in panel.runs.children[0].value
    assert "First answer." in panel.runs.children[1].value

    panel.prompt.value = "From the panel"
    panel.send_button.click()
    cells.run("import asyncio\nawait asyncio.sleep(0)\n%agent wait")
    assert "Second answer." in panel.runs.children[3].value
    sent = cells.ns["model"].requests[-1].messages
    assert [m.content[0].text for m in sent if m.role == "user"] == ["From a cell", "From the panel"]


def test_send_says_why_it_did_nothing(cells: Cells) -> None:
    cells.run(HOLDING)
    cells.run("held = ScriptedModel([[tool_call('hold', {})], 'Done.'])")
    panel, _ = _open(cells)
    panel.prompt.value = "   "
    panel.send_button.click()
    cells.run("await asyncio.sleep(0)")
    assert "Type a prompt" in panel.notice.value and panel.runs.children == ()

    cells.run("%%agent -m held --tools hold --detach\nHold on")
    panel.prompt.value = "Meanwhile"
    panel.send_button.click()
    cells.run("await asyncio.sleep(0)")
    assert "still running a prompt" in panel.notice.value
    assert "Send again once it has ended" in panel.notice.value
    assert "--session" not in panel.notice.value  # a cell's way out, which the panel has not
    assert panel.prompt.value == "Meanwhile"  # kept, to send once the run ends
    cells.run("gate.set()\n%agent wait")


def test_a_long_session_keeps_the_last_runs_and_says_how_many_were_folded(
        cells: Cells, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_panel, "KEEP_RUNS", 2)
    panel, _ = _open(cells)
    cells.run("%agent model model")
    cells.run("%%agent\nFirst")
    first = panel.runs.children
    cells.run("%%agent\nSecond")
    cells.run("%%agent\nThird")

    folded, *kept = panel.runs.children
    assert folded is panel.folded and "1 earlier run of this panel folded away" in folded.value
    assert "%agent show RUN_ID" in folded.value
    assert len(kept) == 4 and "Second" in kept[0].value and "Third answer." in kept[3].value
    assert all(widget.comm is None for widget in first)  # closed: the kernel keeps none of them

    cells.run("%%agent --no-raise\nFourth")  # the model has no answer left: a run ending in error folds the same
    folded, *kept = panel.runs.children
    assert "2 earlier runs" in folded.value and len(kept) == 4 and "Fourth" in kept[2].value


def test_a_run_whose_task_is_cancelled_before_it_begins_still_settles_in_the_panel(cells: Cells) -> None:
    panel, _ = _open(cells)
    cells.ns["panel"] = panel
    cells.run("import asyncio\nfrom agent_kernel import Agent\nfrom agent_kernel.jupyter._runner import start_run\n"
              "never = start_run(Agent(ScriptedModel(['Unread.']), journal=None), 'Never begun', display=False, host=panel)\n"
              "never.task.cancel()\n"
              "await asyncio.sleep(0)\nawait asyncio.sleep(0)")

    line, body = panel.runs.children
    assert "Never begun" in line.value and 'class="ak-static"' in body.value
    assert not panel.send_button.disabled  # the next prompt can be sent


def test_a_run_ending_after_the_panel_closed_leaves_no_widget_open(cells: Cells) -> None:
    cells.run(HOLDING)
    cells.run("held = ScriptedModel([[tool_call('hold', {})], 'Done.'])")
    panel, _ = _open(cells)
    cells.run("%%agent -m held --tools hold --detach\nHold on")

    panel.close()  # as %unload_ext does, while the run goes on
    cells.run("gate.set()\n%agent wait")

    assert all(child.comm is None for child in panel.runs.children)
    assert all(widget.comm is None for widget in (panel.widget, panel.folded, *panel._inline.children))


def test_a_double_click_on_send_starts_one_run_and_says_nothing_went_wrong(cells: Cells) -> None:
    panel, _ = _open(cells)
    cells.run("%agent model model")
    panel.prompt.value = "Once"
    panel.send_button.click()
    panel.send_button.click()  # the second click arrives before the loop has taken the first

    cells.run("import asyncio\nawait asyncio.sleep(0)\n%agent wait")

    assert [m.content[0].text for m in cells.ns["model"].requests[-1].messages if m.role == "user"] == ["Once"]
    assert len(cells.ns["model"].requests) == 1 and panel.notice.value == ""
