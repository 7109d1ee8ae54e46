"""Steering a run from its live view, and approvals with a deadline (jupyter/view.py,
jupyter/transcript.py, jupyter/static_view.py, widgets/agent_view.js).

The Python side runs the widget against the recording comm of ``test_view``; the browser tests
play the view's messages into the real ES module in headless Chromium and send its clicks and
typing back, as ``test_view`` does.
"""

from __future__ import annotations

import asyncio
import html
import time
from collections.abc import Callable
from typing import Any

import pytest

from agent_kernel import Agent, tool
from agent_kernel.events._event import EventType
from agent_kernel.jupyter._protocol import TO_KERNEL, problem
from agent_kernel.jupyter._runner import start_run
from agent_kernel.jupyter._view import STEER_CAP, AgentView
from agent_kernel.models.scripted import ScriptedModel, text, tool_call

from . import test_runner, test_view
from .test_runner import Shown
from .test_view import BrowserPage, Clock, Events, front_end, replay, start

T = EventType
# The fixtures of the view's and the runner's tests, which pytest finds here by these names.
recording_comm = test_view.recording_comm
make_view = test_view.make_view
chromium = test_view.chromium
shown = test_runner.shown


class Controls:
    """Records what the view's steering callbacks were asked to do."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.steer_result: object = True

    def steer(self, text: str) -> object:
        self.calls.append(("steer", text))
        return self.steer_result

    def pause(self) -> None:
        self.calls.append(("pause",))

    def resume(self) -> None:
        self.calls.append(("resume",))

    def view(self, make_view: Callable[..., AgentView], **kwargs: Any) -> AgentView:
        return make_view(on_steer=self.steer, on_pause=self.pause, on_resume=self.resume, **kwargs)


def notices(view: AgentView) -> list[str]:
    return [item.message for item in view.transcript.items if item.kind == "notice"]


# ---- the protocol ------------------------------------------------------------------------------


def test_steer_pause_and_resume_run_are_messages_of_the_protocol_and_malformed_ones_are_not() -> None:
    assert problem({"type": "steer", "text": "Use March."}, TO_KERNEL) is None
    assert problem({"type": "pause"}, TO_KERNEL) is None
    assert problem({"type": "resume_run"}, TO_KERNEL) is None
    assert problem({"type": "steer"}, TO_KERNEL) is not None  # no text
    assert problem({"type": "steer", "text": 42}, TO_KERNEL) is not None
    assert problem({"type": "pause", "now": True}, TO_KERNEL) is not None  # an unknown key


# ---- steering from the view ---------------------------------------------------------------------


def test_a_message_from_the_box_is_queued_then_shown_as_a_user_bubble_where_the_run_took_it_in(make_view):
    controls, ev = Controls(), Events()
    view = controls.view(make_view, clock=Clock())
    start(view, ev)

    front_end(view, {"type": "steer", "text": "  Use the March figures.  "})

    assert controls.calls == [("steer", "Use the March figures.")]
    assert view.transcript.status.queued == 1
    view.handle(ev(T.TEXT_DELTA, text="Reading February."))
    view.handle(ev(T.STEER, text="Use the March figures."))
    view.handle(ev(T.TEXT_DELTA, text="Switching to March."))
    view.close_run()
    kinds = [(item["kind"], item.get("text")) for item in replay(view.comm.batches())["items"]]
    assert kinds == [("text", "Reading February."), ("user", "Use the March figures."),
                     ("text", "Switching to March.")]
    assert view.transcript.status.queued == 0


def test_blank_text_is_ignored_and_text_past_the_cap_is_refused_with_a_notice(make_view):
    controls, ev = Controls(), Events()
    view = controls.view(make_view, clock=Clock())
    start(view, ev)

    front_end(view, {"type": "steer", "text": "   \n "})
    front_end(view, {"type": "steer", "text": "x" * (STEER_CAP + 1)})
    front_end(view, {"type": "steer", "text": "x" * (STEER_CAP + 1)})  # a page repeating itself

    assert controls.calls == []
    [note] = notices(view)
    assert f"more than the {STEER_CAP:,}" in note and "Shorten it" in note


def test_messages_for_a_run_that_has_ended_are_refused_with_a_visible_note(make_view):
    controls, ev = Controls(), Events()
    view = controls.view(make_view, clock=Clock())
    start(view, ev)
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text="Done.", stats={"turns": 1}))

    front_end(view, {"type": "steer", "text": "One more thing"})
    front_end(view, {"type": "pause"})
    front_end(view, {"type": "resume_run"})

    assert controls.calls == []
    said = notices(view)
    assert said[0] == ("The run has ended, so the view could not send a message to it (“One more thing”); "
                       "ask in a new %%agent cell instead.")
    assert any("could not pause it" in note for note in said)
    # The note reaches the front end and the saved snapshot alike.
    assert replay(view.comm.batches())["items"][-1]["kind"] == "notice"
    assert html.escape(said[-1]) in view.snapshot["items"][-1]["html"]


def test_a_message_no_run_took_is_reported_and_no_longer_counted_as_queued(make_view):
    controls, ev = Controls(), Events()
    controls.steer_result = False
    view = controls.view(make_view, clock=Clock())
    start(view, ev)

    front_end(view, {"type": "steer", "text": "Use March."})

    assert view.transcript.status.queued == 0
    assert notices(view) == ["Could not send your message (“Use March.”): no run was in progress to take it."]


def test_pause_shows_pausing_until_the_run_holds_then_paused_until_resume(make_view):
    controls, ev = Controls(), Events()
    view = controls.view(make_view, clock=Clock())
    start(view, ev)

    front_end(view, {"type": "pause"})
    front_end(view, {"type": "pause"})  # a second click while it gets there
    assert controls.calls == [("pause",)]
    assert view.transcript.status.pausing and not view.transcript.status.paused

    view.handle(ev(T.PAUSED, steers=1))
    status = view.transcript.status
    assert status.paused and not status.pausing
    assert notices(view) == ["Paused at the turn boundary (1 steered message waiting)"]

    front_end(view, {"type": "resume_run"})
    view.handle(ev(T.RESUMED, paused_s=12.34))
    assert controls.calls == [("pause",), ("resume",)]
    assert not view.transcript.status.paused
    assert notices(view) == ["Paused for 12.3 s at the turn boundary, then resumed"]
    front_end(view, {"type": "resume_run"})  # not paused any more: nothing to do
    assert controls.calls == [("pause",), ("resume",)]


def test_the_static_transcript_shows_steered_messages_and_pauses_but_no_controls(make_view):
    ev = Events()
    view = Controls().view(make_view, clock=Clock())
    start(view, ev)
    view.handle(ev(T.PAUSED, steers=0))
    view.handle(ev(T.RESUMED, paused_s=2.0))
    view.handle(ev(T.STEER, text="Use <b>March</b>."))
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text="Done.", stats={"turns": 2}))

    html = view.static().html
    assert "Use &lt;b&gt;March&lt;/b&gt;." in html and "You (steered in)" in html
    assert "Paused for 2.0 s at the turn boundary, then resumed" in html
    for control in ("<button", "<textarea", "<input", "ak-steer"):
        assert control not in html


def test_while_paused_the_status_line_says_so_in_both_renderings(make_view):
    from agent_kernel.jupyter._static_view import PAUSED_LABEL, phase_label

    ev = Events()
    view = Controls().view(make_view, clock=Clock())
    start(view, ev)
    view.handle(ev(T.PAUSED, steers=0))
    state = view.transcript.to_json()
    assert phase_label(state["status"], waiting=False) == PAUSED_LABEL == "paused — waiting at the turn boundary"
    assert PAUSED_LABEL in view.static().html


# ---- approvals with a deadline ------------------------------------------------------------------


def test_an_approvals_deadline_reaches_the_card_and_its_expiry_reads_as_a_rejection(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    deadline = time.time() + 30
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c1", tool="bash", arguments={"command": "ls"},
                   key="bash(ls)", reason="bash asks", expires_at=deadline))
    assert view.transcript.card("c1").expires_at == deadline

    view.handle(ev(T.APPROVAL_DECISION, call_id="c1", tool="bash", decision="reject", decided_by="timeout",
                   reason="no decision within 30 s", wait_s=30.02))
    view.handle(ev(T.TOOL_RESULT, call_id="c1", name="bash", content="The call was rejected: no decision within 30 s",
                   is_error=True, duration_s=None))
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text="Done.", stats={"turns": 1}))

    card = replay(view.comm.batches())["items"][0]
    assert (card["status"], card["decided_by"], card["timed_out_s"]) == ("rejected", "timeout", 30.02)
    assert "Rejected: timed out after 30 s" in view.static().html


def test_an_approval_without_a_deadline_or_with_a_malformed_one_has_none(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c1", tool="bash", arguments={}, key="bash()", reason="asks"))
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c2", tool="bash", arguments={}, key="bash()", reason="asks",
                   expires_at=None))
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c3", tool="bash", arguments={}, key="bash()", reason="asks",
                   expires_at="soon"))
    assert [view.transcript.card(c).expires_at for c in ("c1", "c2", "c3")] == [None, None, None]


# ---- a real run, steered through the runner ----------------------------------------------------


async def until(predicate: Callable[[], Any]) -> None:
    """Waits until ``predicate()`` holds, letting the run go on meanwhile."""
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.005)

    await asyncio.wait_for(poll(), 30)


async def test_a_run_steered_and_paused_from_its_view_delivers_the_message_after_resuming(
        shown: Shown) -> None:
    gate = asyncio.Event()

    @tool
    async def hold() -> str:
        """Waits until the test lets it go on."""
        await gate.wait()
        return "went on"

    model = ScriptedModel([[text("Holding."), tool_call("hold", {})], "Done, with March."])
    agent = Agent(model, [hold], journal=None, permissions="bypass")
    handle = start_run(agent, "Hold, then answer", detached=False)
    view = handle.view
    assert view is not None
    front_end(view, {"type": "sync"})
    await until(lambda: (card := view.transcript.card("call_0_1")) is not None and card.status == "running")

    front_end(view, {"type": "steer", "text": "Use the March figures."})
    front_end(view, {"type": "pause"})
    gate.set()
    await until(lambda: view.transcript.status.paused)
    assert agent.paused
    front_end(view, {"type": "resume_run"})
    result = await handle

    assert result.text == "Done, with March."
    kinds = [e.type for e in result.events if e.type in (T.PAUSED, T.RESUMED, T.STEER)]
    assert kinds == [T.PAUSED, T.RESUMED, T.STEER]
    read = model.requests[-1].messages[-1]
    assert any(getattr(block, "text", None) == "Use the March figures." for block in read.content)
    html = view.static().html
    assert "Use the March figures." in html and "then resumed" in html and "<textarea" not in html


async def test_an_approval_nobody_answers_in_time_reads_timed_out_on_its_card(shown: Shown) -> None:
    @tool
    def touch(name: str) -> str:
        """Touches a file (not read-only, so the default mode asks first)."""
        return f"touched {name}"

    model = ScriptedModel([[tool_call("touch", {"name": "x"})], "Not touched."])
    agent = Agent(model, [touch], journal=None, approval_timeout=0.25)
    handle = start_run(agent, "Touch x", detached=False)
    view = handle.view  # a finished run lets its view go; the test keeps it to read the card
    assert view is not None
    front_end(view, {"type": "sync"})  # a person is watching, and does not click

    result = await handle

    [card] = view.transcript.tool_cards
    assert card.expires_at is not None
    assert (card.status, card.decided_by, card.timed_out_s) == ("rejected", "timeout", 0.25)
    assert "Rejected: timed out after 0.2 s" in view.static().html  # 0.25 in tenths, as JS rounds it
    assert "not run" in result.tool_calls[0]["content"]


# ---- the front end ---------------------------------------------------------------------------


@pytest.mark.browser
def test_the_steering_box_sends_on_enter_and_pause_resume_follow_the_runs_state(make_view, chromium):
    controls, ev = Controls(), Events()
    view = controls.view(make_view, clock=Clock())
    browser = BrowserPage(chromium, view)
    page, pump = browser.page, browser.pump
    start(view, ev)
    pump()
    box, pause, resume = page.locator(".ak-steer-input"), page.locator(".ak-pause"), page.locator(".ak-resume")
    assert box.is_visible() and pause.is_enabled() and resume.is_disabled()

    box.fill("Use the March figures.")
    box.press("Enter")
    pump()
    assert controls.calls == [("steer", "Use the March figures.")]
    assert box.input_value() == ""
    assert page.inner_text(".ak-steer-queued") == "1 message waiting for the next turn boundary"

    pause.click()
    pump()
    assert controls.calls[-1] == ("pause",)
    assert page.inner_text(".ak-phase") == "pausing at the next turn boundary…"
    assert pause.is_disabled() and resume.is_disabled()

    view.handle(ev(T.PAUSED, steers=1))
    pump()
    assert page.inner_text(".ak-phase") == "paused — waiting at the turn boundary"
    assert resume.is_enabled()
    resume.click()
    pump()
    assert controls.calls[-1] == ("resume",)
    view.handle(ev(T.RESUMED, paused_s=1.0))
    view.handle(ev(T.STEER, text="Use the March figures."))
    pump()
    assert page.inner_text(".ak-user .ak-user-text") == "Use the March figures."
    assert page.inner_text(".ak-phase") == "running" and page.inner_text(".ak-steer-queued") == ""

    view.handle(ev(T.RUN_FINISH, reason="end_turn", text="Done.", stats={"turns": 2}))
    pump()
    assert page.locator(".ak-steer").is_hidden()  # no dead controls once the run has ended
    assert browser.errors == []
    page.close()


@pytest.mark.browser
def test_an_approval_card_counts_its_deadline_down_then_reads_timed_out(make_view, chromium):
    ev = Events()
    view = make_view(clock=Clock(), on_decision=lambda *args: None)
    browser = BrowserPage(chromium, view)
    page, pump = browser.page, browser.pump
    start(view, ev)
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c1", tool="bash", arguments={"command": "ls"},
                   key="bash(ls)", reason="bash asks", expires_at=time.time() + 95))
    pump()
    expiry = page.locator(".ak-tool .ak-expiry")
    assert expiry.is_visible()
    assert expiry.inner_text() in ("expires in 1:35", "expires in 1:34", "expires in 1:33")

    view.handle(ev(T.APPROVAL_DECISION, call_id="c1", tool="bash", decision="reject", decided_by="timeout",
                   reason="no decision within 95 s", wait_s=95.0))
    pump()
    assert expiry.is_hidden()
    assert page.inner_text(".ak-tool .ak-decision") == "Rejected: timed out after 95 s"
    assert page.inner_text(".ak-tool .ak-badge") == "rejected"
    assert browser.errors == []
    page.close()


def test_a_run_that_cannot_take_messages_says_so_when_one_is_sent(make_view):
    ev = Events()
    view = make_view(clock=Clock())  # a crew's view: no steering callbacks
    start(view, ev)

    front_end(view, {"type": "steer", "text": "Also cover winter"})

    [note] = notices(view)
    assert "cannot take messages while it runs" in note and "new %%agent cell" in note
