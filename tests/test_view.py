"""The live view (jupyter/view.py, jupyter/transcript.py, widgets/agent_view.js).

Python-side tests run the widget against a recording comm: what the front-end would receive is
exactly ``comm.messages``. The browser test at the end plays those messages into the real ES
module in headless Chromium and sends its clicks back.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import comm
import pytest

from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.jupyter._protocol import TO_FRONT_END, TO_KERNEL, problem
from agent_kernel.jupyter._view import AgentView

T = EventType
REPO = Path(__file__).resolve().parents[1]


class RecordingComm:
    """Stands in for a kernel comm; keeps every message the widget sends."""

    comm_id = "recording-comm"
    kernel = "recording"

    def __init__(self, **kwargs: Any) -> None:
        self.opened_with = kwargs
        self.messages: list[dict[str, Any]] = []
        self.on_send: Callable[[], None] | None = None

    def open(self, *args: Any, **kwargs: Any) -> None:
        pass

    def on_msg(self, callback: Any) -> None:
        pass

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        if isinstance(data, dict) and data.get("method") == "custom":  # held to jupyter.protocol
            why = problem(data.get("content"), TO_FRONT_END)
            assert why is None, f"the view sent a message outside jupyter.protocol: {why}"
        self.messages.append(data)
        if self.on_send is not None:
            self.on_send()

    def close(self, *args: Any, **kwargs: Any) -> None:
        pass

    def custom(self) -> list[dict[str, Any]]:
        """The custom messages (batches, snapshots), in order."""
        return [m["content"] for m in self.messages if m["method"] == "custom"]

    def batches(self) -> list[dict[str, Any]]:
        return [c for c in self.custom() if c["type"] == "batch"]

    def bytes_sent(self) -> int:
        return sum(len(json.dumps(m, ensure_ascii=False).encode()) for m in self.messages)


@pytest.fixture(autouse=True)
def recording_comm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: RecordingComm(**kwargs))


@pytest.fixture
def make_view() -> Iterator[Callable[..., AgentView]]:
    views: list[AgentView] = []

    def make(**kwargs: Any) -> AgentView:
        view = AgentView(**kwargs)
        views.append(view)
        return view

    yield make
    for view in views:
        view.close()


class Clock:
    """A hand-wound monotonic clock."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Events:
    """Builds AgentEvents with increasing seq numbers."""

    def __init__(self) -> None:
        self.seq = 0

    def __call__(self, type: EventType, agent_id: str | None = None, **data: Any) -> AgentEvent:
        return self.make(type, agent_id, data)

    def make(self, type: EventType, agent_id: str | None, data: dict[str, Any]) -> AgentEvent:
        """An event whose ``data`` may hold any key (``agent_id`` too, as sub-agent events do)."""
        self.seq += 1
        return AgentEvent(self.seq, 1_700_000_000.0 + self.seq, "s1", "r1", "t1", None, 0, type, data,
                          agent_id)


def start(view: AgentView, ev: Events) -> None:
    view.handle(ev(T.RUN_START, prompt="Summarise notes.md", model="scripted", max_iterations=5))
    view.handle(ev(T.ITERATION_START, turn_state={"turn_counter": 0, "max_iterations": 5}))


def front_end(view: AgentView, content: dict[str, Any]) -> None:
    """Delivers a custom message from the front-end, as the comm would."""
    view._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def utf16_slice(text: str, start: int, end: int | None) -> str:
    """``text.slice(start, end)`` as JavaScript counts (UTF-16 units)."""
    units = text.encode("utf-16-le")
    return units[2 * start: None if end is None else 2 * end].decode("utf-16-le")


def replay(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """What the front-end ends up with after applying the batches in order (mirrors the JS): a
    ``draw`` op's piece goes at the end of its block's body, just before the block's frame ends."""
    from agent_kernel.jupyter._item_html import block_frame

    items: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    status: dict[str, Any] = {}
    for batch in messages:
        for op in batch["ops"]:
            if op["op"] == "add":
                items[op["item"]["id"]] = dict(op["item"])
                order.append(op["item"]["id"])
            elif op["op"] == "append":
                for item_id, text in op["texts"].items():
                    items[item_id]["text"] += text
            elif op["op"] == "draw":
                item = items[op["id"]]
                end = block_frame(item)[1]
                assert item["html"].endswith(end)
                item["html"] = item["html"][:-len(end)] + op["html"] + end
                item["drawn"] = op["drawn"]
            elif op["op"] == "set":
                item = items[op["id"]]
                item.update(op["patch"])
                html, at = "", 0
                for start, end, text in op.get("edits", ()):  # offsets in UTF-16 units, as JS slices
                    html += utf16_slice(item["html"], at, start) + text
                    at = end
                if "edits" in op:
                    item["html"] = html + utf16_slice(item["html"], at, None)
            elif op["op"] == "status":
                status.update(op["patch"])
    return {"items": [items[i] for i in order], "status": status}


# -- coalescing ----------------------------------------------------------------------------------


def test_a_thousand_deltas_within_one_interval_arrive_as_one_batch_with_the_exact_text(make_view):
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    start(view, ev)
    sent_before = len(view.comm.batches())
    tokens = [f"word{i} " for i in range(1000)]
    for token in tokens:
        view.handle(ev(T.TEXT_DELTA, text=token))
    assert len(view.comm.batches()) == sent_before  # nothing yet: still inside the interval

    clock.now += 0.05
    view.handle(ev(T.TEXT_DELTA, text="end."))
    batches = view.comm.batches()[sent_before:]
    assert len(batches) == 1
    (block,) = replay(view.comm.batches())["items"]
    assert block["text"] == "".join(tokens) + "end."


async def test_on_a_running_loop_the_timer_sends_each_burst_as_one_batch(make_view):
    ev = Events()
    view = make_view(flush_interval=0.01)
    start(view, ev)
    sent = asyncio.Event()
    view.comm.on_send = sent.set
    expected = ""
    for burst in range(3):
        sent.clear()
        before = len(view.comm.batches())
        for i in range(300):
            token = f"b{burst}t{i} "
            expected += token
            view.handle(ev(T.TEXT_DELTA, text=token))
        assert len(view.comm.batches()) == before  # handle() only schedules
        await asyncio.wait_for(sent.wait(), timeout=5)
        assert len(view.comm.batches()) == before + 1
    assert replay(view.comm.batches())["items"][0]["text"] == expected


def test_bytes_sent_grow_linearly_with_the_text(make_view):
    def traffic(n_tokens: int) -> tuple[int, int]:
        clock, ev = Clock(), Events()
        view = make_view(clock=clock)
        start(view, ev)
        opened = view.comm.bytes_sent()
        text = ""
        for i in range(n_tokens):
            token = f"tok{i % 97:02d} "
            text += token
            clock.now += 0.001  # 1,000 tokens a second
            view.handle(ev(T.TEXT_DELTA, text=token))
        view.handle(ev(T.RUN_FINISH, reason="end_turn", text=text,
                       stats={"turns": 1, "input_tokens": 10, "output_tokens": n_tokens}))
        return view.comm.bytes_sent() - opened, len(text.encode())

    bytes_1, text_1 = traffic(2_000)
    bytes_2, text_2 = traffic(4_000)
    assert 1.8 < bytes_2 / bytes_1 < 2.2
    # The text travels a few times, never per token: streamed, in the finished run's snapshot
    # (its Markdown, and the HTML the page shows), and in the transcript the page saves in the
    # view's place (HTML and plain text).
    assert bytes_2 <= 6 * text_2


# -- the card lifecycle --------------------------------------------------------------------------


def test_a_tool_card_goes_from_queued_through_approval_and_running_to_done(make_view):
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    start(view, ev)
    card = lambda: view.transcript.card("c1")  # noqa: E731

    view.handle(ev(T.TOOL_CALL_START, call_id="c1", name="write_file", index=0))
    assert card().status == "queued"
    view.handle(ev(T.TOOL_CALL_READY, call_id="c1", name="write_file",
                   arguments={"path": "out.md", "content": "hi"}, index=0))
    assert json.loads(card().arguments) == {"path": "out.md", "content": "hi"}

    sent = len(view.comm.batches())
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c1", tool="write_file",
                   arguments={"path": "out.md"}, key="write_file(out.md)", reason="asks"))
    assert card().status == "awaiting_approval"
    assert len(view.comm.batches()) == sent + 1  # sent at once: a person is waited on
    assert replay(view.comm.batches())["items"][0]["status"] == "awaiting_approval"

    view.handle(ev(T.APPROVAL_DECISION, call_id="c1", decision="approve", decided_by="person",
                   reason=None))
    assert card().status == "queued"
    view.handle(ev(T.TOOL_START, call_id="c1", name="write_file"))
    view.handle(ev(T.TOOL_PROGRESS, call_id="c1", message="writing", fraction=0.5))
    assert (card().status, card().progress, card().fraction) == ("running", "writing", 0.5)
    view.handle(ev(T.TOOL_RESULT, call_id="c1", name="write_file", content="wrote 2 bytes",
                   is_error=False, duration_s=0.25))
    view.flush()

    final = replay(view.comm.batches())["items"][0]
    assert final["status"] == "done"
    assert final["duration_s"] == 0.25
    assert final["decided_by"] == "person"
    assert "wrote 2 bytes" in final["html"] and "Approved by person" in final["html"]
    assert "result" not in final  # drawn into its html, not sent a second time


def test_a_writes_diff_shows_while_its_card_waits_and_goes_once_it_is_decided(make_view):
    # The diff is read from disk when the approval is asked for: what the person decides on, not
    # a record of what was written (a write approved by a rule may land before it is read).
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    view.handle(ev(T.TOOL_CALL_READY, call_id="w", name="write_file", arguments={"path": "a.md"}, index=0))
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="w", tool="write_file", arguments={"path": "a.md"},
                   key="write_file(a.md)", reason="asks"))
    view.show_diff("w", None, "--- a/a.md\n+++ b/a.md\n-old\n+new")
    waiting = replay(view.comm.batches())["items"][0]["html"]
    assert '<span class="ak-diff-add"' in waiting and "Arguments (JSON)" in waiting
    view.handle(ev(T.APPROVAL_DECISION, call_id="w", decision="approve", decided_by="person"))
    decided = replay(view.comm.batches())["items"][0]["html"]
    assert "ak-diff-view" not in decided and ">Arguments</summary>" in decided
    assert "ak-diff-view" not in view.static().html


def test_a_rejected_call_keeps_its_status_and_reason_after_its_error_result(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    view.handle(ev(T.TOOL_CALL_READY, call_id="c9", name="bash", arguments={"command": "rm -rf /"},
                   index=0))
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c9", tool="bash", arguments={}, key="bash", reason=""))
    view.handle(ev(T.APPROVAL_DECISION, call_id="c9", decision="reject", decided_by="person",
                   reason="never delete everything"))
    view.handle(ev(T.TOOL_RESULT, call_id="c9", name="bash", is_error=True, duration_s=None,
                   content="The user rejected this call: never delete everything"))
    card = view.transcript.card("c9")
    assert (card.status, card.reason) == ("rejected", "never delete everything")


def test_a_long_result_is_capped_but_its_full_length_is_kept(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    view.handle(ev(T.TOOL_RESULT, call_id="c1", name="read_file", content="x" * 50_000,
                   is_error=False, duration_s=0.1))
    card = view.transcript.card("c1")
    assert len(card.result) == 20_000
    assert card.result_chars == 50_000


def test_cards_left_open_when_the_run_ends_are_marked_cancelled(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    view.handle(ev(T.TOOL_CALL_READY, call_id="c1", name="slow", arguments={}, index=0))
    view.handle(ev(T.TOOL_START, call_id="c1", name="slow"))
    view.handle(ev(T.CANCELLED, reason="kernel interrupt"))
    view.handle(ev(T.RUN_FINISH, reason="user_interrupt", text="", stats={"turns": 1}))
    assert view.transcript.card("c1").status == "cancelled"
    assert view.transcript.status.phase == "cancelled"
    assert repr(view) == "AgentView(run cancelled: user_interrupt)"


def test_retry_after_partial_output_strikes_the_partial_text_and_says_so(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    view.handle(ev(T.TEXT_DELTA, text="The answer is"))
    view.handle(ev(T.RETRY, attempt=1, delay_s=0.5, error="overloaded (529)", partial=True))
    view.handle(ev(T.TEXT_DELTA, text="The answer is 42."))
    texts = [i for i in view.transcript.items if i.kind == "text"]
    assert [(t.text, t.discarded) for t in texts] == [("The answer is", True), ("The answer is 42.", False)]
    notice = next(i for i in view.transcript.items if i.kind == "notice")
    assert "partial output above was discarded" in notice.message
    assert view.transcript.final_text == "The answer is 42."


def test_compaction_fallback_and_stall_show_as_cards_and_notices(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    view.handle(ev(T.COMPACTION_START, tokens_before=150_000))
    view.handle(ev(T.COMPACTION_COMPLETE, tokens_before=150_000, tokens_after=9_000,
                   messages_removed=40, summary="Earlier: read three files."))
    view.handle(ev(T.MODEL_FALLBACK, from_model="big", to_model="small", reason="overloaded"))
    view.handle(ev(T.STALL_DETECTED, seconds=30.0, action="retry"))
    kinds = [(i.kind, getattr(i, "topic", None)) for i in view.transcript.items]
    assert kinds == [("compaction", None), ("notice", "model_fallback"), ("notice", "stall_detected")]
    compaction = view.transcript.items[0]
    assert (compaction.status, compaction.tokens_after, compaction.summary) == (
        "done", 9_000, "Earlier: read three files.")
    assert view.transcript.status.model == "small"


def test_a_compaction_summarys_usage_counts_in_the_status(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    view.handle(ev(T.LLM_COMPLETE, usage={"input_tokens": 100, "output_tokens": 20}, cost_usd=0.01, model="big"))
    view.handle(ev(T.COMPACTION_START, tokens_before=150_000))
    view.handle(ev(T.COMPACTION_COMPLETE, tokens_before=150_000, tokens_after=9_000, messages_removed=40,
                   summary="Earlier: read three files.", usage={"input_tokens": 900, "output_tokens": 80},
                   cost_usd=0.002, model="small"))
    status = view.transcript.status
    assert (status.input_tokens, status.output_tokens, status.model) == (1_000, 100, "big")
    assert status.cost_usd == pytest.approx(0.012)


def test_status_follows_turns_usage_and_the_final_stats(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    view.handle(ev(T.LLM_COMPLETE, usage={"input_tokens": 100, "output_tokens": 20}, cost_usd=0.01,
                   model="scripted-2"))
    view.handle(ev(T.ITERATION_START, turn_state={"turn_counter": 1, "max_iterations": 5}))
    view.handle(ev(T.LLM_COMPLETE, usage={"input_tokens": 150, "output_tokens": 30}, cost_usd=None,
                   model="scripted-2"))
    status = view.transcript.status
    assert (status.turn, status.max_turns, status.input_tokens, status.output_tokens) == (2, 5, 250, 50)
    assert status.cost_usd is None  # one unknown price makes the total unknown
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text="Done.",
                   stats={"turns": 2, "input_tokens": 250, "output_tokens": 50, "cost_usd": None,
                          "duration": 3.5}))
    assert view.snapshot["status"]["phase"] == "finished"
    assert view.snapshot["status"]["elapsed_s"] == 3.5


# -- sub-agents ----------------------------------------------------------------------------------


def call_tool(view: AgentView, ev: Events, call_id: str, name: str, arguments: dict[str, Any],
              agent: str | None = None) -> None:
    """Agent ``agent`` calls ``name`` and the call starts running."""
    view.handle(ev(T.TOOL_CALL_READY, agent, call_id=call_id, name=name, arguments=arguments,
                   index=0))
    view.handle(ev(T.TOOL_START, agent, call_id=call_id, name=name))


def start_subagent(view: AgentView, ev: Events, agent_id: str, name: str, prompt: str, *,
                   call_id: str | None, parent: str | None = None) -> None:
    """The events that open a sub-agent's run, as subagents.run_subagent emits them."""
    view.handle(ev.make(T.SUBAGENT_START, agent_id, {
        "agent_id": agent_id, "name": name, "parent_agent_id": parent, "parent_call_id": call_id,
        "parent_turn_id": "t1", "prompt": prompt, "model": "scripted"}))
    view.handle(ev(T.RUN_START, agent_id, prompt=prompt, model="scripted", max_iterations=3,
                   agent_name=name))
    view.handle(ev(T.ITERATION_START, agent_id, turn_state={"turn_counter": 0, "max_iterations": 3}))


def finish_subagent(view: AgentView, ev: Events, agent_id: str, name: str, text: str, *,
                    call_id: str | None, parent: str | None = None, reason: str = "end_turn",
                    error: str | None = None) -> None:
    """The events that close a sub-agent's run."""
    view.handle(ev(T.RUN_FINISH, agent_id, reason=reason, text=text, stats={"turns": 2}))
    view.handle(ev.make(T.SUBAGENT_FINISH, agent_id, {
        "agent_id": agent_id, "name": name, "parent_agent_id": parent, "parent_call_id": call_id,
        "text": text, "reason": reason, "usage": {"input_tokens": 300, "output_tokens": 40},
        "cost_usd": 0.0021, "turns": 2, "tool_calls": 1, "duration_s": 1.5, "error": error}))


def test_a_sub_agent_card_sits_under_the_call_that_started_it_and_shows_its_outcome_at_the_end(
        make_view):
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    start(view, ev)
    view.handle(ev(T.TEXT_DELTA, text="Delegating."))
    call_tool(view, ev, "p1", "task", {"agent": "researcher", "instructions": "Find the notes."})
    start_subagent(view, ev, "a1", "researcher", "Find the notes.", call_id="p1")
    view.handle(ev(T.TEXT_DELTA, "a1", text="Looking"))
    view.handle(ev(T.TEXT_DELTA, "a1", text=" around."))
    call_tool(view, ev, "c1", "read_file", {"path": "notes.md"}, agent="a1")
    view.handle(ev(T.TOOL_RESULT, "a1", call_id="c1", name="read_file", content="# Notes",
                   is_error=False, duration_s=0.1))
    clock.now += 1
    view.flush()

    shown = replay(view.comm.batches())["items"]
    assert [(i["kind"], i["agent"]) for i in shown] == [
        ("text", None), ("tool", None), ("subagent", None), ("text", "a1"), ("tool", "a1")]
    card = shown[2]
    assert {k: card[k] for k in ("agent_id", "name", "parent_call_id", "status")} == {
        "agent_id": "a1", "name": "researcher", "parent_call_id": "p1", "status": "running"}
    assert "Task: Find the notes." in card["html"]
    assert card["input_tokens"] is None and " in · " not in card["html"]  # not known while it runs
    assert (shown[3]["text"], shown[4]["call_id"], shown[4]["status"]) == ("Looking around.", "c1",
                                                                           "done")

    finish_subagent(view, ev, "a1", "researcher", "The notes are in notes.md.", call_id="p1")
    assert view.transcript.status.phase == "running"  # its run_finish is not the run's
    view.handle(ev(T.TOOL_RESULT, call_id="p1", name="task", content="The notes are in notes.md.",
                   is_error=False, duration_s=1.6))
    view.handle(ev(T.ITERATION_START, turn_state={"turn_counter": 1, "max_iterations": 5}))
    view.handle(ev(T.TEXT_DELTA, text="Found them."))
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text="Found them.", stats={"turns": 2}))

    final = {i["id"]: i for i in view.snapshot["items"]}[card["id"]]
    assert {k: final[k] for k in ("status", "reason", "input_tokens", "output_tokens",
                                   "cost_usd", "turns", "tool_calls", "duration_s")} == {
        "status": "done", "reason": "end_turn",
        "input_tokens": 300, "output_tokens": 40, "cost_usd": 0.0021, "turns": 2, "tool_calls": 1,
        "duration_s": 1.5}
    assert "The notes are in notes.md." in final["html"]
    assert "300 in · 40 out · $0.0021 · 1 tool call · 1.5 s" in final["html"]
    assert replay(view.comm.batches())["items"] == view.snapshot["items"]  # reload shows the same
    assert view.transcript.final_text == "Found them."


def test_concurrent_sub_agents_keep_their_text_and_cards_apart_even_with_equal_call_ids(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    call_tool(view, ev, "p1", "task", {"agent": "worker", "instructions": "A"})
    call_tool(view, ev, "p2", "task", {"agent": "worker", "instructions": "B"})
    start_subagent(view, ev, "w1", "worker", "A", call_id="p1")
    start_subagent(view, ev, "w2", "worker", "B", call_id="p2")
    for agent, chunk in [("w1", "A says "), ("w2", "B says "), ("w1", "one."), ("w2", "two.")]:
        view.handle(ev(T.TEXT_DELTA, agent, text=chunk))
    # Each worker's model numbers its calls from the start: the ids are equal.
    call_tool(view, ev, "call_1_0", "add", {"a": 1, "b": 1}, agent="w1")
    call_tool(view, ev, "call_1_0", "add", {"a": 2, "b": 2}, agent="w2")
    view.handle(ev(T.TOOL_RESULT, "w2", call_id="call_1_0", name="add", content="4", is_error=False,
                   duration_s=0.0))
    finish_subagent(view, ev, "w2", "worker", "", call_id="p2", reason="error",
                    error="ModelError: overloaded")
    view.handle(ev(T.TOOL_RESULT, "w1", call_id="call_1_0", name="add", content="2", is_error=False,
                   duration_s=0.0))
    finish_subagent(view, ev, "w1", "worker", "2", call_id="p1")

    texts = {i.agent: i.text for i in view.transcript.items if i.kind == "text"}
    assert texts == {"w1": "A says one.", "w2": "B says two."}
    one, two = view.transcript.card("call_1_0", "w1"), view.transcript.card("call_1_0", "w2")
    assert (one.arguments, one.result) == (json.dumps({"a": 1, "b": 1}, indent=2), "2")
    assert (two.arguments, two.result) == (json.dumps({"a": 2, "b": 2}, indent=2), "4")
    cards = {c.agent_id: c for c in view.transcript.subagents}
    assert (cards["w1"].parent_call_id, cards["w1"].status, cards["w1"].result) == ("p1", "done", "2")
    assert (cards["w2"].parent_call_id, cards["w2"].status, cards["w2"].error) == (
        "p2", "error", "ModelError: overloaded")


def test_a_sub_agent_of_a_sub_agent_hangs_under_its_parents_call_and_ends_with_the_run(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    call_tool(view, ev, "p1", "task", {"agent": "lead", "instructions": "Plan."})
    start_subagent(view, ev, "a1", "lead", "Plan.", call_id="p1")
    call_tool(view, ev, "m1", "task", {"agent": "math", "instructions": "1+1"}, agent="a1")
    start_subagent(view, ev, "g1", "math", "1+1", call_id="m1", parent="a1")
    call_tool(view, ev, "g-c1", "slow_add", {"a": 1, "b": 1}, agent="g1")
    view.handle(ev(T.CANCELLED, reason="kernel interrupt"))
    view.handle(ev(T.RUN_FINISH, reason="user_interrupt", text="", stats={"turns": 1}))

    inner = view.transcript.subagent("g1")
    assert (inner.agent, inner.parent_call_id) == ("a1", "m1")
    assert view.transcript.card("m1", "a1") is not None
    assert [c.status for c in view.transcript.subagents] == ["cancelled", "cancelled"]
    assert view.transcript.card("g-c1", "g1").status == "cancelled"


def test_an_approval_click_on_a_sub_agents_card_resolves_that_call_through_on_decision(make_view):
    decisions: list[tuple[str, str, str | None, str | None]] = []
    ev = Events()
    view = make_view(clock=Clock(), on_decision=lambda *args: decisions.append(args))
    start(view, ev)
    call_tool(view, ev, "p1", "task", {"agent": "scribe", "instructions": "Note x."})
    start_subagent(view, ev, "s1", "scribe", "Note x.", call_id="p1")
    view.handle(ev(T.TOOL_CALL_READY, "s1", call_id="c1", name="record", arguments={"note": "x"},
                   index=0))
    sent = len(view.comm.batches())
    view.handle(ev(T.APPROVAL_REQUIRED, "s1", call_id="c1", tool="record", arguments={"note": "x"},
                   key="record", reason="record asks"))
    assert len(view.comm.batches()) == sent + 1  # a person is waited on: sent at once
    waiting = replay(view.comm.batches())["items"][-1]
    assert (waiting["agent"], waiting["call_id"], waiting["status"]) == (
        "s1", "c1", "awaiting_approval")

    front_end(view, {"type": "approval", "call_id": "c1", "agent": "s1", "decision": "approve",
                     "reason": None})
    front_end(view, {"type": "approval", "call_id": "c1", "agent": "s1", "decision": "reject",
                     "reason": "changed my mind"})
    assert decisions == [("c1", "approve", None, "s1")]  # the broker's callback, once, naming the agent
    view.handle(ev(T.APPROVAL_DECISION, "s1", call_id="c1", decision="approve",
                   decided_by="person", reason=None))
    assert view.transcript.card("c1", "s1").status == "queued"

    # A later sub-agent whose call has the same id is answered on its own card; a front-end that
    # does not say whose card it is still reaches the one waiting.
    start_subagent(view, ev, "s2", "scribe", "Note y.", call_id="p1")
    view.handle(ev(T.APPROVAL_REQUIRED, "s2", call_id="c1", tool="record", arguments={"note": "y"},
                   key="record", reason="record asks"))
    front_end(view, {"type": "approval", "call_id": "c1", "decision": "reject", "reason": "no"})
    assert decisions[1:] == [("c1", "reject", "no", "s2")]


async def test_a_scripted_delegation_through_the_view_nests_the_child_and_lists_it(make_view):
    from agent_kernel import Agent, tool
    from agent_kernel.models.scripted import ScriptedModel, text, tool_call

    @tool(read_only=True)
    def add(a: int, b: int) -> int:
        """Adds two numbers."""
        return a + b

    child = Agent(ScriptedModel([tool_call("add", {"a": 2, "b": 3}, id="c1"), "2 + 3 = 5"]),
                  tools=[add], name="math", journal=None, context=None, permissions="bypass")
    parent = Agent(ScriptedModel([[text("Asking math."), tool_call(
        "task", {"agent": "math", "instructions": "Add 2 and 3."}, id="p1")], "It is 5."]),
        subagents={"math": child}, journal=None, context=None, permissions="bypass")
    view = make_view()
    async for event in parent.stream("What is 2 + 3?"):
        view.handle(event)

    (card,) = view.transcript.subagents
    assert (card.name, card.agent, card.parent_call_id, card.status, card.result) == (
        "math", None, "p1", "done", "2 + 3 = 5")
    assert view.transcript.card("c1", card.agent_id).status == "done"
    assert view.transcript.card("c1") is None  # the child's call is not the parent's
    assert view.transcript.status.phase == "finished"
    assert "Sub-agents (1):\n  1. math - done: 2 + 3 = 5\n     - add(a=2, b=3) - done" in \
        view.summary().text


# -- messages from the front-end -----------------------------------------------------------------


def awaiting_two_calls(view: AgentView, ev: Events) -> None:
    start(view, ev)
    for call_id in ("c1", "c2"):
        view.handle(ev(T.TOOL_CALL_READY, call_id=call_id, name="bash", arguments={"n": call_id},
                       index=0))
        view.handle(ev(T.APPROVAL_REQUIRED, call_id=call_id, tool="bash", arguments={},
                       key=f"bash {call_id}", reason="ask"))

async def test_the_context_meter_and_its_warning_show_in_the_live_view_and_the_static_transcript(make_view):
    from agent_kernel import Agent
    from agent_kernel.context import ContextManager
    from agent_kernel.jupyter._static_view import StaticTranscript
    from agent_kernel.models.scripted import ScriptedModel

    model = ScriptedModel(["Noted."], context_window=1_000)
    agent = Agent(model, system="Be exact. " * 300, journal=None, context=ContextManager(calibrate=False, warn_threshold=0.5, threshold=0.95))
    result = await agent.run("go")
    view = make_view(clock=Clock())
    for event in result.events:
        view.handle(event)
    status = view.transcript.status.to_json()
    used = \
        [e for e in result.events if e.type is EventType.LLM_COMPLETE][0].data["context_usage"]["used_tokens"]
    assert (status["context_used"], status["context_window"], status["context_warned"]) == (used, 1_000, True)
    html = StaticTranscript.from_events(result.events).html
    share = f"{used / 1_000:.0%}"
    assert f"context {share} of 1k" in html and "ak-context" in html
    assert "The context window is" in html  # the warning, as a notice


def test_an_approval_click_resolves_only_the_named_call_and_only_once(make_view):
    decisions: list[tuple[str, str, str | None, str | None]] = []
    view = make_view(clock=Clock(), on_decision=lambda *args: decisions.append(args))
    awaiting_two_calls(view, Events())

    front_end(view, {"type": "approval", "call_id": "c2", "decision": "approve", "reason": None})
    front_end(view, {"type": "approval", "call_id": "c2", "decision": "reject", "reason": "no"})
    front_end(view, {"type": "approval", "call_id": "c1", "decision": "explode"})
    assert decisions == [("c2", "approve", None, None)]

    front_end(view, {"type": "approval", "call_id": "c1", "decision": "reject",
                     "reason": "use git rm instead"})
    assert decisions[1] == ("c1", "reject", "use git rm instead", None)


def test_a_click_on_a_call_already_decided_elsewhere_is_not_passed_on(make_view):
    decisions: list[tuple[str, str, str | None, str | None]] = []
    ev = Events()
    view = make_view(clock=Clock(), on_decision=lambda *args: decisions.append(args))
    awaiting_two_calls(view, ev)
    view.handle(ev(T.APPROVAL_DECISION, call_id="c1", decision="reject", decided_by="policy",
                   reason="auto_deny"))
    view.handle(ev(T.TOOL_RESULT, call_id="c2", name="bash", content="", is_error=False,
                   duration_s=0.0))
    front_end(view, {"type": "approval", "call_id": "c1", "decision": "approve"})
    front_end(view, {"type": "approval", "call_id": "c2", "decision": "approve"})
    assert decisions == []


def test_always_allow_is_passed_on_as_its_own_decision(make_view):
    decisions: list[tuple[str, str, str | None, str | None]] = []
    view = make_view(clock=Clock(), on_decision=lambda *args: decisions.append(args))
    awaiting_two_calls(view, Events())
    front_end(view, {"type": "approval", "call_id": "c1", "decision": "always_allow"})
    assert decisions == [("c1", "always_allow", None, None)]


def test_a_failing_decision_callback_becomes_an_error_notice_and_can_be_retried(make_view):
    calls: list[str] = []

    def broken(call_id: str, decision: str, reason: str | None, agent: str | None) -> None:
        calls.append(call_id)
        raise RuntimeError("the loop has closed")

    view = make_view(clock=Clock(), on_decision=broken)
    awaiting_two_calls(view, Events())
    front_end(view, {"type": "approval", "call_id": "c1", "decision": "approve"})
    front_end(view, {"type": "approval", "call_id": "c1", "decision": "approve"})
    assert calls == ["c1", "c1"]
    notices = [i.message for i in view.transcript.items if i.kind == "notice"]
    assert notices[0] == "Could not deliver the decision on bash: the loop has closed"


def test_stop_calls_on_stop_once_and_shows_stopping(make_view):
    stops: list[bool] = []
    view = make_view(clock=Clock(), on_stop=lambda: stops.append(True))
    start(view, Events())
    front_end(view, {"type": "stop"})
    front_end(view, {"type": "stop"})
    assert stops == [True]
    assert replay(view.comm.batches())["status"]["stopping"] is True


def test_stop_after_the_run_has_ended_does_nothing(make_view):
    stops: list[bool] = []
    ev = Events()
    view = make_view(clock=Clock(), on_stop=lambda: stops.append(True))
    start(view, ev)
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text="", stats={}))
    front_end(view, {"type": "stop"})
    assert stops == []


def test_a_sync_request_is_answered_with_a_snapshot_equal_to_the_replayed_batches(make_view):
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    start(view, ev)
    view.handle(ev(T.THINKING_DELTA, text="Hmm."))
    view.handle(ev(T.TEXT_DELTA, text="Reading"))
    view.handle(ev(T.TOOL_CALL_READY, call_id="c1", name="read_file", arguments={"path": "a"}, index=0))
    clock.now += 1
    view.handle(ev(T.TOOL_RESULT, call_id="c1", name="read_file", content="abc", is_error=False,
                   duration_s=0.01))
    view.handle(ev(T.TEXT_DELTA, text=" done"))  # pending when the front-end asks

    front_end(view, {"type": "sync"})
    snapshot = view.comm.custom()[-1]
    assert snapshot["type"] == "snapshot"
    assert snapshot["v"] == view.comm.batches()[-1]["v"]  # covers every batch sent before it
    replayed = replay(view.comm.batches())
    assert snapshot["state"]["items"] == replayed["items"]
    assert {k: v for k, v in snapshot["state"]["status"].items() if k != "elapsed_s"} == \
        {k: v for k, v in replayed["status"].items() if k != "elapsed_s"}


def test_batches_are_numbered_without_gaps(make_view):
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    start(view, ev)
    for i in range(50):
        clock.now += 0.02
        view.handle(ev(T.TEXT_DELTA, text=f"{i} "))
    assert [b["v"] for b in view.comm.batches()] == list(range(1, len(view.comm.batches()) + 1))


# -- repr, static files, imports -----------------------------------------------------------------


def test_repr_is_deterministic_and_names_the_outcome(make_view):
    ev = Events()
    view = make_view(clock=Clock())
    assert repr(view) == "AgentView(waiting for a run)"
    start(view, ev)
    assert repr(view) == "AgentView(running)"
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text="Hi", stats={}))
    assert repr(view) == "AgentView(run finished: end_turn)"
    assert view._repr_mimebundle_()[0]["text/plain"] == "AgentView(run finished: end_turn)"


def test_the_front_end_ships_with_the_package_and_fetches_nothing(make_view):
    state = make_view().comm.opened_with["data"]["state"]
    assert state["_esm"] == (REPO / "widgets" / "agent_view.js").read_text()
    assert state["_css"] == (REPO / "widgets" / "agent_view.css").read_text()
    assert not re.search(r"^\s*import\b|\bimport\s*\(", state["_esm"], re.MULTILINE)
    # HTML is parsed in one place only, the kernel's drawings, into an inert template that is
    # checked before anything of it reaches the page; model output is otherwise text. No eval.
    assert re.findall(r"\w+\.(?:inner|outer)HTML\s*=", state["_esm"]) == ["template.innerHTML ="]
    assert not re.search(r"insertAdjacentHTML|document\.write|\beval\(|new Function|DOMParser",
                         state["_esm"])
    assert "http://" not in state["_css"] and "https://" not in state["_css"]


def test_importing_agent_kernel_and_its_jupyter_package_loads_no_widgets():
    code = ("import sys, agent_kernel, agent_kernel.jupyter; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('anywidget', 'ipywidgets', 'IPython', 'ipykernel')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_a_scripted_run_fed_through_the_view_ends_with_its_answer(make_view):
    from agent_kernel import Agent, tool
    from agent_kernel.models.scripted import ScriptedModel, text, tool_call

    @tool
    def add(a: int, b: int) -> int:
        """Adds two numbers."""
        return a + b

    model = ScriptedModel([[text("Adding."), tool_call("add", {"a": 2, "b": 3}, id="call_1")],
                           "The sum is **5**."])
    agent = Agent(model, tools=[add], journal=None, context=None, permissions="bypass")
    view = make_view()
    async for event in agent.stream("What is 2 + 3?"):
        view.handle(event)
    assert repr(view) == "AgentView(run finished: end_turn)"
    assert view.transcript.card("call_1").status == "done"
    assert view.snapshot["items"][-1]["text"] == "The sum is **5**."
    assert view.summary().answer == "The sum is **5**."


# -- the widget protocol ----------------------------------------------------------------------------


def test_the_es_module_handles_and_sends_exactly_the_message_types_of_the_protocol() -> None:
    source = (REPO / "widgets" / "agent_view.js").read_text(encoding="utf-8")
    handled = set(re.findall(r'msg\.type === "(\w+)"', source))
    sent = set(re.findall(r'(?:model|store|storeFor\(model\))\.send\(\{\s*type: "(\w+)"', source))
    assert handled == set(TO_FRONT_END), "agent_view.js and jupyter.protocol disagree on kernel messages"
    assert sent == set(TO_KERNEL), "agent_view.js and jupyter.protocol disagree on front-end messages"


def test_the_view_ignores_a_front_end_message_outside_the_protocol(make_view) -> None:
    decisions: list[Any] = []
    clock, ev = Clock(), Events()
    view = make_view(clock=clock, on_decision=lambda *args: decisions.append(args))
    start(view, ev)
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c1", tool="bash", arguments={"command": "ls"},
                   key="bash(ls)", reason="asks"))
    front_end(view, {"type": "approval", "call_id": "c1", "decision": "yes please"})  # not a decision
    front_end(view, {"type": "approval", "call_id": 7, "decision": "approve"})  # not a call id
    assert decisions == []
    front_end(view, {"type": "approval", "call_id": "c1", "decision": "approve", "agent": None, "reason": None})
    assert [d[:2] for d in decisions] == [("c1", "approve")]


# -- the lasting transcript, in Python -----------------------------------------------------------


def test_the_transcript_is_static_html_with_the_summary_as_deterministic_plain_text(make_view):
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    every_kind_of_item(view, ev, clock)
    transcript = view.static()
    bundle = transcript._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"] == view.summary().text
    assert "<script" not in bundle["text/html"].lower()
    assert "<style" not in bundle["text/html"].lower()  # styles inline, for renderers that drop them
    assert bundle["text/html"].count("Three files matched") == 1  # the answer, once

    again, ev2 = make_view(clock=Clock()), Events()
    ev2.seq = 10_000  # other ids and timestamps, same run
    every_kind_of_item(again, ev2, Clock())
    assert again.static().text == transcript.text


def test_an_unknown_cost_reads_as_a_dash_never_as_zero(make_view):
    ev = Events()
    view = make_view()
    start(view, ev)
    assert view.transcript.status.cost_usd is None
    assert "$0.0000" not in view.static().html and "—" in view.static().html
    view.handle(ev(T.LLM_COMPLETE, usage={"input_tokens": 10, "output_tokens": 2}, cost_usd=0.5))
    assert view.transcript.status.cost_usd == 0.5
    view.handle(ev(T.LLM_COMPLETE, usage={"input_tokens": 10, "output_tokens": 2}, cost_usd=None))
    assert view.transcript.status.cost_usd is None  # one unpriced call: the total is unknown
    view.handle(ev(T.CANCELLED, reason="stopped"))
    view.handle(ev(T.RUN_FINISH, reason="user_interrupt", text="", stats={"turns": 1,
                                                                          "cost_usd": None}))
    assert "Usage: 20 tokens in · 4 out · — · 1 turn" in view.static().text


def test_events_that_stop_before_the_runs_end_show_as_an_interrupted_transcript():
    from agent_kernel.jupyter._static_view import StaticTranscript

    ev = Events()
    events = [ev(T.RUN_START, prompt="Go", model="scripted", max_iterations=5),
              ev(T.ITERATION_START, turn_state={"turn_counter": 0, "max_iterations": 5}),
              ev(T.TEXT_DELTA, text="Starting the long job."),
              ev(T.TOOL_CALL_READY, call_id="c1", name="bash", arguments={"command": "make"},
                 index=0),
              ev(T.TOOL_START, call_id="c1", name="bash")]
    transcript = StaticTranscript.from_events(events)
    assert "interrupted (the journal ends here)" in transcript.html
    assert "Starting the long job." in transcript.html and "cancelled" in transcript.html
    assert "ended: interrupted" in transcript.text


async def test_a_run_cancelled_mid_turn_counts_that_turn_in_the_view_and_in_the_sessions_usage(
        make_view):
    from agent_kernel import Agent, tool
    from agent_kernel.models.scripted import ScriptedModel, text, tool_call

    @tool
    async def add(a: int, b: int) -> int:
        """Adds two numbers."""
        return a + b

    model = ScriptedModel([[text("Adding."), tool_call("add", {"a": 2, "b": 3}, id="call_1")],
                           [text("Still going. " * 50, chunk=5)]])
    agent = Agent(model, tools=[add], journal=None, context=None, permissions="bypass")
    view = make_view()
    async for event in agent.stream("Add them"):
        view.handle(event)
        if event.type is T.TEXT_DELTA and "Still" in event.data["text"]:
            agent.cancel("enough")
    assert view.transcript.status.phase == "cancelled"
    assert view.summary().turns == agent.stats.turns == 2
    assert "2 turns" in view.static().text


# (Kept above the browser tests: their module-scoped Playwright keeps an event loop running in
# this thread, so an async test placed after them could not run its own.)

# -- the front-end in a real browser -------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PAGE = """<!doctype html><html><head><meta charset="utf-8"><link rel="stylesheet" href="/agent_view.css">
</head><body><div id="out"></div><script type="module">
import widget from "/agent_view.js";
class Model {
  constructor() { this.state = { snapshot: {} }; this.handlers = {}; window.sent = []; }
  get(key) { return this.state[key]; }
  on(name, cb) { (this.handlers[name] ||= []).push(cb); }
  off() {}
  send(msg) { window.sent.push(msg); }
  set(key, value) { this.state[key] = value; (this.handlers["change:" + key] || []).forEach((cb) => cb()); }
  emit(msg) { (this.handlers["msg:custom"] || []).forEach((cb) => cb(msg, [])); }
}
window.Model = Model;
window.widget = widget;
window.model = new Model();
window.alerts = 0;
window.alert = () => { window.alerts++; };
widget.initialize({ model: window.model });
widget.render({ model: window.model, el: document.getElementById("out") });
window.ready = true;
</script></body></html>"""

HOSTILE = """# Report

Plain **bold**, *em*, `code` and snake_case_names.

- [docs](https://example.com/docs)
- [bad](javascript:alert(1)) <script>alert(2)</script> <img src=x onerror="alert(3)">

```html
<script>alert(4)</script>
```
"""


class BrowserPage:
    """agent_view.js on a page of headless Chromium, wired to ``view`` through a fake model."""

    def __init__(self, browser: Any, view: AgentView) -> None:
        self.view = view
        self.page = page = browser.new_page()
        self.requests: list[str] = []
        self.errors: list[str] = []
        self._forwarded = 0
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        page.route("**/*", self._serve)
        page.goto("http://view.test/")
        page.wait_for_function("window.ready === true")

    @staticmethod
    def _serve(route: Any) -> None:
        files = {"agent_view.js": "text/javascript", "agent_view.css": "text/css"}
        name = route.request.url.rsplit("/", 1)[-1]
        if name in files:
            route.fulfill(body=(REPO / "widgets" / name).read_text(), content_type=files[name])
        elif route.request.url == "http://view.test/":
            route.fulfill(body=PAGE, content_type="text/html")
        else:
            route.abort()  # nothing else may be fetched (an <img> from model output, say)

    def pump(self, click: str | None = None) -> None:
        """Carries messages both ways until both sides are quiet.

        Each round's messages reach the page in one task. With ``click``, the element it selects
        is clicked at the start of that same task, so whatever the click queues (a ``toggle``
        event, say) runs only after the messages: the order a person's click and a message
        arriving together can take in a browser.
        """
        view, page = self.view, self.page
        while True:
            pending = view.comm.messages[self._forwarded:]
            self._forwarded += len(pending)
            replies = page.evaluate("""([click, messages]) => {
                if (click) document.querySelector(click).click();
                for (const m of messages) {
                    if (m.method === "custom") window.model.emit(m.content);
                    else if (m.method === "update") {
                        for (const [k, v] of Object.entries(m.state)) window.model.set(k, v);
                    }
                }
                return window.sent.splice(0);
            }""", [click, [{"method": m["method"], "content": m.get("content"),
                            "state": m.get("state")} for m in pending]])
            click = None
            for reply in replies:
                why = problem(reply, TO_KERNEL)
                assert why is None, f"agent_view.js sent a message outside jupyter.protocol: {why}"
                front_end(view, reply)
            if not replies and self._forwarded == len(view.comm.messages):
                return

    def render_saved(self, element_id: str) -> None:
        """Renders the view again from its saved snapshot trait alone, as a page with no kernel."""
        self.page.evaluate("""(id) => {
            const saved = new window.Model();
            saved.state.snapshot = window.model.get("snapshot");
            const el = document.createElement("div");
            el.id = id;
            document.body.appendChild(el);
            window.widget.render({ model: saved, el });
        }""", element_id)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium for the browser tests of this module (each gets its own page)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make chromium` (make test installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        yield browser
        browser.close()


@pytest.mark.browser
def test_the_front_end_renders_streamed_markdown_safely_and_sends_clicks_back(make_view, tmp_path,
                                                                              chromium):
    decisions: list[tuple[str, str, str | None, str | None]] = []
    clock, ev = Clock(), Events()
    view = make_view(clock=clock, on_decision=lambda *args: decisions.append(args))
    browser = BrowserPage(chromium, view)
    page, pump = browser.page, browser.pump
    start(view, ev)
    pump()
    for i in range(0, len(HOSTILE), 5):
        clock.now += 0.05
        view.handle(ev(T.TEXT_DELTA, text=HOSTILE[i:i + 5]))
        pump()
    assert page.inner_text(".ak-text h1") == "Report"
    assert page.locator(".ak-text a").evaluate_all("links => links.map(a => a.href)") == [
        "https://example.com/docs"]
    assert page.locator(".ak-text script, .ak-text img").count() == 0
    assert "<script>alert(2)</script>" in page.inner_text(".ak-text")
    assert page.inner_text(".ak-text pre code").rstrip("\n") == "<script>alert(4)</script>"
    assert page.inner_text(".ak-text em") == "em"  # not the underscores of snake_case_names

    view.handle(ev(T.TOOL_CALL_READY, call_id="c1", name="bash", arguments={"command": "ls"},
                   index=0))
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c1", tool="bash", arguments={"command": "ls"},
                   key="bash(ls)", reason="bash asks for approval"))
    pump()
    card = page.locator(".ak-tool")
    assert card.locator(".ak-badge").inner_text() == "awaiting approval"
    assert "waiting for your approval" in page.inner_text(".ak-phase")
    page.screenshot(path=str(tmp_path / "agent_view_awaiting_approval.png"), full_page=True)
    card.locator(".ak-reason").fill("list only the notes folder")
    card.locator(".ak-reject").click()
    pump()
    assert decisions == [("c1", "reject", "list only the notes folder", None)]

    view.handle(ev(T.APPROVAL_DECISION, call_id="c1", decision="reject", decided_by="person",
                   reason="list only the notes folder"))
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text=HOSTILE, stats={"turns": 1}))
    pump()
    assert card.locator(".ak-badge").inner_text() == "rejected"
    assert page.locator(".ak-approval").is_hidden()
    assert page.inner_text(".ak-phase") == "finished"

    # A page opened later, with no kernel, rebuilds the run from the saved snapshot trait.
    browser.render_saved("saved")
    assert page.inner_text("#saved .ak-text h1") == "Report"
    assert page.inner_text("#saved .ak-tool .ak-badge") == "rejected"
    assert page.evaluate("window.alerts") == 0
    assert browser.errors == []
    assert all(url.startswith("http://view.test/") for url in browser.requests)
    page.close()


@pytest.mark.browser
def test_the_front_end_nests_sub_agent_cards_that_fold_when_done_and_take_approvals(make_view,
                                                                                  tmp_path,
                                                                                  chromium):
    decisions: list[tuple[str, str, str | None, str | None]] = []
    clock, ev = Clock(), Events()
    view = make_view(clock=clock, on_decision=lambda *args: decisions.append(args))
    browser = BrowserPage(chromium, view)
    page, pump = browser.page, browser.pump
    cards = """() => [...document.querySelectorAll("#out .ak-agent-card")].map((card) => ({
        agent: card.dataset.agentId,
        open: card.open,
        under: card.parentElement.closest(".ak-tool")?.dataset.callId ?? null,
        badge: card.querySelector(".ak-badge").textContent,
        text: [...card.querySelectorAll(":scope > .ak-agent-items > .ak-text")]
            .map((t) => t.querySelector(".ak-md").innerText).join("|"),
        calls: [...card.querySelectorAll(":scope > .ak-agent-items > .ak-tool")]
            .map((t) => t.dataset.callId),
    }))"""
    card = lambda agent: page.locator(f'#out .ak-agent-card[data-agent-id="{agent}"]')  # noqa: E731

    start(view, ev)
    call_tool(view, ev, "p1", "task", {"agent": "researcher", "instructions": "Find the notes."})
    call_tool(view, ev, "p2", "task", {"agent": "writer", "instructions": "Draft it."})
    start_subagent(view, ev, "a1", "researcher", "Find the notes.", call_id="p1")
    start_subagent(view, ev, "a2", "writer", "Draft it.", call_id="p2")
    view.handle(ev(T.TEXT_DELTA, "a1", text="Looking **around**."))
    view.handle(ev(T.TEXT_DELTA, "a2", text="Drafting."))
    view.handle(ev(T.TOOL_CALL_READY, "a2", call_id="c1", name="write_file",
                   arguments={"path": "draft.md"}, index=0))
    clock.now += 1
    view.flush()
    pump()
    # The researcher's paragraph is still being written: shown as it comes, drawn once it ends.
    assert page.evaluate(cards) == [
        {"agent": "a1", "open": True, "under": "p1", "badge": "running", "text": "Looking **around**.",
         "calls": []},
        {"agent": "a2", "open": True, "under": "p2", "badge": "running", "text": "Drafting.",
         "calls": ["c1"]}]
    assert "Task: Find the notes." in card("a1").inner_text()

    # Folded by the person while it runs, the writer's card opens again to ask for approval.
    card("a2").locator(".ak-agent-summary").click()
    assert page.evaluate(cards)[1]["open"] is False
    view.handle(ev(T.APPROVAL_REQUIRED, "a2", call_id="c1", tool="write_file",
                   arguments={"path": "draft.md"}, key="write_file(draft.md)", reason="asks"))
    pump()
    assert page.evaluate(cards)[1]["open"] is True
    assert "waiting for your approval" in page.inner_text(".ak-phase")
    page.screenshot(path=str(tmp_path / "agent_view_sub_agents.png"), full_page=True)
    card("a2").locator(".ak-approve").click()
    pump()
    assert decisions == [("c1", "approve", None, "a2")]
    assert view._decided == {("a2", "c1")}  # the click named the writer's card

    view.handle(ev(T.APPROVAL_DECISION, "a2", call_id="c1", decision="approve",
                   decided_by="person", reason=None))
    view.handle(ev(T.TOOL_RESULT, "a2", call_id="c1", name="write_file", content="wrote",
                   is_error=False, duration_s=0.1))
    finish_subagent(view, ev, "a2", "writer", "Draft written to draft.md.\nIt has two parts.",
                    call_id="p2")
    clock.now += 1
    view.flush()
    pump()
    writer = page.evaluate(cards)[1]
    assert (writer["open"], writer["badge"]) == (False, "done")  # folded once it is done
    head = card("a2").locator(".ak-agent-summary").inner_text()
    assert "300 in · 40 out · $0.0021 · 1 tool call · 1.5 s" in head
    assert "Draft written to draft.md. …" in head  # its answer, one line, seen while folded

    finish_subagent(view, ev, "a1", "researcher", "In notes.md.", call_id="p1")
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text="Done.", stats={"turns": 2}))
    # The person opens it again as the final snapshot arrives, in the same task: the view, rebuilt
    # from that snapshot before the click's `toggle` event runs, keeps it open all the same.
    pump(click='#out .ak-agent-card[data-agent-id="a2"] > .ak-agent-summary')
    assert [(c["agent"], c["open"], c["badge"], c["under"]) for c in page.evaluate(cards)] == [
        ("a1", False, "done", "p1"), ("a2", True, "done", "p2")]
    assert card("a1").locator(".ak-text strong").text_content() == "around"
    page.screenshot(path=str(tmp_path / "agent_view_sub_agents_done.png"), full_page=True)

    browser.render_saved("saved")  # no kernel: the snapshot alone rebuilds the nesting
    saved = page.locator('#saved .ak-tool[data-call-id="p1"] .ak-agent-card[data-agent-id="a1"]')
    assert saved.locator(".ak-badge").inner_text() == "done"
    assert saved.locator(".ak-agent-items .ak-text .ak-md").text_content().strip() == "Looking around."  # folded
    assert browser.errors == []
    page.close()


# -- one view model, two renderings: the live view and the lasting transcript ------------------

#: Leaf text of a rendering as a person reads it: hidden parts, buttons and inputs, and marks
#: meant for the eye only (``aria-hidden``) left out; whitespace collapsed.
LEAF_TEXT = """(root) => {
    root.normalize(); // adjacent text nodes (an escaped character, say) read as one
    const out = [];
    const walk = (node) => {
        if (node.nodeType === Node.TEXT_NODE) {
            const text = node.nodeValue.replace(/\\s+/g, " ").trim();
            if (text) out.push(text);
            return;
        }
        if (node.nodeType !== Node.ELEMENT_NODE || node.hidden) return;
        if (node.getAttribute("aria-hidden") === "true") return;
        if (["BUTTON", "INPUT", "STYLE", "SCRIPT"].includes(node.tagName)) return;
        for (const child of node.childNodes) walk(child);
    };
    walk(root);
    return out.join(" ");
}"""

REPORT = """## Findings

Three files matched, see [the docs](https://example.com/docs) and `notes.md`:

1. **alpha** — first
2. *beta* — second

| file | lines |
|---|---|
| a.md | 10 |

```python
print("done")
```
"""


def every_kind_of_item(view: AgentView, ev: Events, clock: Clock) -> None:
    """A finished run with text, thinking, approvals (one timed out), results short and long, a
    retry, a fallback, a pause, a steered message, a compaction and a sub-agent under the call
    that started it."""
    start(view, ev)
    view.handle(ev(T.CONTEXT_ASSEMBLED, total_tokens=900))
    view.handle(ev(T.LLM_START, model="scripted"))
    view.handle(ev(T.THINKING_DELTA, text="Which files? Start with notes."))
    view.handle(ev(T.TEXT_DELTA, text="A first try that fails."))
    view.handle(ev(T.RETRY, attempt=2, delay_s=1.5, error="overloaded", partial=True))
    view.handle(ev(T.MODEL_FALLBACK, from_model="scripted", to_model="backup", reason="overloaded"))
    view.handle(ev(T.TEXT_DELTA, text="Reading **notes** first."))
    call_tool(view, ev, "c1", "read_file", {"path": "notes.md"})
    view.handle(ev(T.TOOL_RESULT, call_id="c1", name="read_file", content="line\n" * 30,
                   is_error=False, duration_s=0.2))
    view.handle(ev(T.TOOL_CALL_READY, call_id="c2", name="bash", arguments={"command": "rm x"},
                   index=1))
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c2", tool="bash", arguments={"command": "rm x"},
                   key="bash(rm x)", reason="bash asks"))
    view.handle(ev(T.APPROVAL_DECISION, call_id="c2", decision="reject", decided_by="person",
                   reason="keep x"))
    view.handle(ev(T.TOOL_RESULT, call_id="c2", name="bash", content="The user rejected this call",
                   is_error=True, duration_s=None))
    view.handle(ev(T.TOOL_CALL_READY, call_id="c3", name="bash", arguments={"command": "rm y"},
                   index=2))
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c3", tool="bash", arguments={"command": "rm y"},
                   key="bash(rm y)", reason="bash asks", expires_at=1_700_000_030.0))
    view.handle(ev(T.APPROVAL_DECISION, call_id="c3", decision="reject", decided_by="timeout",
                   reason="no decision within 30 s", wait_s=30.0))
    view.handle(ev(T.TOOL_RESULT, call_id="c3", name="bash", content="No decision within 30 s",
                   is_error=True, duration_s=None))
    view.handle(ev(T.PAUSED, steers=1))
    view.handle(ev(T.RESUMED, paused_s=4.0))
    view.handle(ev(T.STEER, text="Also look in *archive/*, please."))
    call_tool(view, ev, "p1", "task", {"agent": "researcher", "instructions": "Find the notes."})
    start_subagent(view, ev, "a1", "researcher", "Find the notes.", call_id="p1")
    view.handle(ev(T.TEXT_DELTA, "a1", text="Looking *around*."))
    call_tool(view, ev, "s1", "list_files", {"path": "."}, agent="a1")
    view.handle(ev(T.TOOL_RESULT, "a1", call_id="s1", name="list_files", content="notes.md",
                   is_error=False, duration_s=0.1))
    finish_subagent(view, ev, "a1", "researcher", "In notes.md.", call_id="p1")
    view.handle(ev(T.TOOL_RESULT, call_id="p1", name="task", content="In notes.md.",
                   is_error=False, duration_s=1.6))
    view.handle(ev(T.LLM_COMPLETE, usage={"input_tokens": 1200, "output_tokens": 80},
                   cost_usd=0.0123, model="backup"))
    view.handle(ev(T.COMPACTION_START, tokens_before=5000))
    view.handle(ev(T.COMPACTION_COMPLETE, tokens_before=5000, tokens_after=800,
                   messages_removed=6, summary="Read **notes.md**; kept x."))
    view.handle(ev(T.ITERATION_START, turn_state={"turn_counter": 1, "max_iterations": 5}))
    view.handle(ev(T.TEXT_DELTA, text=REPORT))
    view.handle(ev(T.LLM_COMPLETE, usage={"input_tokens": 1500, "output_tokens": 120},
                   cost_usd=0.0101, model="backup"))
    clock.now += 3.25
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text=REPORT,
                   stats={"turns": 2, "input_tokens": 2700, "output_tokens": 200,
                          "cost_usd": 0.0224, "duration": 3.25}))


@pytest.mark.browser
def test_the_lasting_transcript_reads_exactly_as_the_live_view_of_the_same_run(make_view,
                                                                               chromium):
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    browser = BrowserPage(chromium, view)
    every_kind_of_item(view, ev, clock)
    browser.pump()
    page = browser.page
    page.evaluate("""(html) => {
        const el = document.createElement("div");
        el.id = "static";
        el.innerHTML = html;
        document.body.appendChild(el);
    }""", view.static().html)

    live = page.locator("#out .ak-view").evaluate(LEAF_TEXT)
    static = page.locator("#static .ak-static").evaluate(LEAF_TEXT)
    assert static == live
    for expected in ("Findings", "alpha", "Thinking (30 characters)", "Rejected by person: keep x",
                     "Full result (150 characters)", "Context compacted", "researcher",
                     "Retrying (attempt 2)", "Switched model from scripted to backup",
                     "2,700 in · 200 out", "$0.0224", "3.3 s", "backup",
                     "Rejected: timed out after 30 s", "You (steered in)",
                     "Also look in *archive/*, please.",
                     "Paused for 4.0 s at the turn boundary, then resumed"):
        assert expected in static
    # Nested as the live view nests: the sub-agent's card inside the call that started it.
    assert page.locator("#static .ak-tool .ak-agent-card .ak-tool").count() == 1
    assert browser.errors == []
    page.close()


MARKDOWN_CORPUS = [
    REPORT,
    HOSTILE,
    "Plain text with a URL https://example.com/a and an email-ish <mailto:x@example.com>.",
    "# Title\n\nA paragraph\nwrapped over lines.\n\n> quoted *text*\n\n---\n\nafter the rule",
    "- one\n- two\n  continued\n- three\n\n1. first\n2. second",
    "- loose\n\n- list, one list once the blank line is past",
    "Some `inline code` and a fenced block:\n\n~~~\nraw <b>html</b> stays text\n~~~\nright after it",
    "**bold** and __also bold__, *em* and _em_, ~~struck~~ and snake_case_words.",
    "| a | b |\n|:--|--:|\n| 1 | 2 |\n| 3 | 4 |",
    "![an image](https://example.com/x.png) is shown as a link; [bad](javascript:x) is text.",
    "### Heading three\n\nEscaped \\*stars\\* and a line  \nbreak.",
    "<div onclick=alert(1)>raw</div>\n\n<script>alert(5)</script>\n\n[x](  javascript:alert(6))",
]


def stream_corpus(view: AgentView, ev: Events, clock: Clock, on_flush: Callable[[], None] = lambda: None) -> None:
    """Each sample of ``MARKDOWN_CORPUS`` streamed a few characters at a time (a batch each), as a
    block a tool call then ends; thinking, a notice and a steered message between them."""
    start(view, ev)
    view.handle(ev(T.THINKING_DELTA, text="Which files?\n\nStart with <notes>."))
    for n, sample in enumerate(MARKDOWN_CORPUS):
        for i in range(0, len(sample), 7):
            clock.now += 0.05
            view.handle(ev(T.TEXT_DELTA, text=sample[i:i + 7]))
            view.flush()  # a batch each, whatever loop the test runs on
            on_flush()
        call_tool(view, ev, f"c{n}", "read_file", {"path": f"<{n}>.md"})
        view.handle(ev(T.TOOL_RESULT, call_id=f"c{n}", name="read_file", content=f"<b>{n}</b>\n" * 9,
                       is_error=n % 2 == 1, duration_s=0.1))
    view.handle(ev(T.STALL_DETECTED, seconds=30, action="waiting <on>"))
    view.handle(ev(T.STEER, text="Use <b>March</b>."))
    view.handle(ev(T.TOOL_CALL_READY, call_id="w", name="bash", arguments={"command": "rm <x>"}, index=0))
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="w", tool="bash", arguments={"command": "rm <x>"},
                   key="bash", reason="asks <why>"))
    view.handle(ev(T.APPROVAL_DECISION, call_id="w", decision="reject", decided_by="person", reason="no <x>"))
    call_tool(view, ev, "p", "plot", {"title": "📈 growth <b>", "data": list(range(50))})
    for step in range(3):  # each a small edit of the card's drawing, offsets counted as in JavaScript
        view.handle(ev(T.TOOL_PROGRESS, call_id="p", message=f"🎨 step {step} <of> 3", fraction=step / 3))
        view.flush()
        on_flush()
    view.handle(ev(T.TOOL_RESULT, call_id="p", name="plot", content="drawn 📈", is_error=False, duration_s=2.0))
    view.handle(ev(T.COMPACTION_COMPLETE, tokens_before=500, tokens_after=50, messages_removed=4,
                   summary="Kept **this** <b>and</b> that."))
    clock.now += 1
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text="", stats={"turns": 1}))
    on_flush()


def test_the_live_view_is_sent_each_item_as_the_saved_transcript_draws_it(make_view):
    from agent_kernel.jupyter._item_html import item_html

    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    stream_corpus(view, ev, clock)
    batches = view.comm.batches()
    received = {item["id"]: item for item in replay(batches)["items"]}
    saved = view.static().html
    kinds = set()
    for item in view.transcript.to_json()["items"]:
        kinds.add(item["kind"])
        drawn = item_html(item)
        assert received[item["id"]]["html"] == drawn, item  # the bytes the page got...
        assert drawn in saved  # ...are the bytes the notebook keeps
    assert kinds == {"text", "thinking", "tool", "notice", "user", "compaction"}
    assert view.snapshot["items"] == list(received.values())  # a page opened later: the same
    texts = [item for item in received.values() if item["kind"] == "text"]
    assert [item["text"] for item in texts] == MARKDOWN_CORPUS
    # Streamed a finished piece at a time, the drawing of a block whole only where the pieces
    # would not make it (the loose list); never a piece twice, nor the whole block per change.
    ops = [op for batch in batches for op in batch["ops"]]
    drawn_again = [op["id"] for op in ops if op["op"] == "set" and "html" in op["patch"]
                   and received[op["id"]]["kind"] == "text"]
    assert drawn_again == [texts[5]["id"]]
    assert sum(op["op"] == "draw" for op in ops) > len(MARKDOWN_CORPUS)
    # A card's update is an edit of what the page has: its arguments are not sent again.
    progress = [op for op in ops if op["op"] == "set" and op["id"] == view.transcript.card("p").id]
    assert all("edits" in op and "html" not in op["patch"] for op in progress[1:4])
    assert all("growth" not in json.dumps(op) for op in progress[1:4])
    for html in [op["html"] for op in ops if op["op"] == "draw"] + [i["html"] for i in received.values()]:
        assert "<script" not in html and "<div onclick" not in html and "javascript:" not in html


@pytest.mark.browser
def test_streamed_markdown_ends_as_the_transcripts_markdown_on_the_page(make_view, chromium):
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    browser = BrowserPage(chromium, view)
    page = browser.page
    stream_corpus(view, ev, clock, on_flush=browser.pump)
    page.evaluate("""(html) => {
        const el = document.createElement("div");
        el.id = "static";
        el.innerHTML = html;
        document.body.appendChild(el);
    }""", view.static().html)
    structure = """([root, leafText]) => [...document.querySelectorAll(root + " .ak-text .ak-md")].map((md) => [
        eval(leafText)(md), [...md.querySelectorAll("*")].map((n) => n.tagName).filter((t) => !["DIV", "SPAN", "BUTTON"].includes(t))])"""
    live = page.evaluate(structure, ["#out", LEAF_TEXT])
    static = page.evaluate(structure, ["#static", LEAF_TEXT])
    assert len(live) == len(MARKDOWN_CORPUS) and live == static
    assert page.locator("#out .ak-text script, #out .ak-text img, #out [onclick]").count() == 0
    assert page.evaluate("window.alerts") == 0 and browser.errors == []
    page.close()


@pytest.mark.browser
def test_a_click_the_kernel_never_answers_is_offered_again_with_what_to_do(make_view, chromium):
    # A page left open across a kernel restart can send clicks where nobody receives them: after
    # four seconds without an answer the card says so, names the way out, and takes a click again.
    decisions: list[tuple[str, str, str | None, str | None]] = []
    clock, ev = Clock(), Events()
    view = make_view(clock=clock, on_decision=lambda *args: decisions.append(args))
    browser = BrowserPage(chromium, view)
    page, pump = browser.page, browser.pump
    page.clock.install()
    start(view, ev)
    view.handle(ev(T.TOOL_CALL_READY, call_id="c1", name="bash", arguments={"command": "ls"}, index=0))
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c1", tool="bash", arguments={"command": "ls"},
                   key="bash(ls)", reason="bash asks for approval"))
    pump()
    card = page.locator(".ak-tool")
    page.evaluate("() => { window.model.send = () => {}; }")  # whatever the card sends now is lost
    card.locator(".ak-approve").click()
    assert "Sending your decision" in card.inner_text() and card.locator(".ak-approve").is_disabled()

    page.clock.run_for(3_900)
    assert "No answer from the kernel" not in card.inner_text()
    page.clock.run_for(200)
    text = card.inner_text()
    assert "No answer from the kernel yet. If it was restarted, reload this page" in text
    assert "%agent approve c1" in text and card.locator(".ak-approve").is_enabled()
    assert decisions == [] and browser.errors == []
    page.close()


@pytest.mark.browser
def test_a_pending_approval_scrolls_into_view_once_and_marks_the_tab_title_until_answered(
        make_view, chromium):
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    browser = BrowserPage(chromium, view)
    page, pump = browser.page, browser.pump
    page.set_viewport_size({"width": 900, "height": 500})
    page.evaluate("""() => {
        document.title = "notes.ipynb";
        const spacer = document.createElement("div");
        spacer.style.height = "3000px";  // the view starts far below the fold
        document.body.prepend(spacer);
        window.notified = [];
        window.jupyterapp = { commands: {  // what JupyterLab 4 offers when it exposes the app
            hasCommand: (id) => id === "apputils:notify" || id === "apputils:dismiss-notification",
            execute: (id, args) => { window.notified.push([id, args]); return Promise.resolve("n1"); },
        } };
    }""")
    in_view = """() => { const r = document.querySelector("#out .ak-tool").getBoundingClientRect();
        return r.top >= -1 && r.bottom <= window.innerHeight + 1; }"""
    start(view, ev)
    view.handle(ev(T.TOOL_CALL_READY, call_id="c1", name="bash", arguments={"command": "ls"},
                   index=0))
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c1", tool="bash", arguments={"command": "ls"},
                   key="bash(ls)", reason="bash asks for approval"))
    pump()

    page.wait_for_function(in_view, timeout=5_000)
    assert page.title() == "⏸ approval needed · notes.ipynb"
    page.wait_for_function("window.notified.length === 1")
    assert page.evaluate("window.notified[0][0]") == "apputils:notify"
    # The person scrolls away: later updates do not pull the card back.
    page.evaluate("window.scrollTo(0, 0)")
    clock.now += 1
    view.handle(ev(T.TEXT_DELTA, text="Still waiting."))
    view.flush()
    pump()
    page.evaluate("document.title = 'renamed.ipynb'")  # the page sets its own title meanwhile
    assert page.evaluate(in_view) is False
    assert page.title() == "⏸ approval needed · renamed.ipynb"

    view.handle(ev(T.APPROVAL_DECISION, call_id="c1", decision="approve", decided_by="person"))
    pump()
    assert page.title() == "renamed.ipynb"
    page.wait_for_function("window.notified.length === 2")
    assert page.evaluate("window.notified[1]") == ["apputils:dismiss-notification", {"id": "n1"}]
    assert browser.errors == []
    page.close()


@pytest.mark.browser
def test_without_jupyterlabs_notifications_an_approval_still_marks_the_title(make_view, chromium):
    ev = Events()
    view = make_view()
    browser = BrowserPage(chromium, view)
    browser.page.evaluate("document.title = 'nb'")
    start(view, ev)
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c1", tool="bash", arguments={}, key="bash",
                   reason="asks"))
    browser.pump()
    assert browser.page.title() == "⏸ approval needed · nb"
    view.handle(ev(T.RUN_FINISH, reason="user_interrupt", text="", stats={"turns": 1}))
    browser.pump()
    assert browser.page.title() == "nb"
    assert browser.errors == []
    browser.page.close()


@pytest.mark.browser
def test_the_status_line_estimates_tokens_while_streaming_and_says_what_the_run_does(
        make_view, chromium):
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    browser = BrowserPage(chromium, view)
    page, pump = browser.page, browser.pump
    start(view, ev)
    view.handle(ev(T.CONTEXT_ASSEMBLED, total_tokens=812))
    view.handle(ev(T.LLM_START, model="scripted"))
    clock.now += 1
    view.flush()
    pump()
    bar = lambda: page.inner_text("#out .ak-statusbar")  # noqa: E731
    assert "waiting for the model" in bar()
    assert "~812 in · 0 out" in bar() and "—" in bar()  # cost unknown, not $0.0000
    view.handle(ev(T.TEXT_DELTA, text="x" * 41))
    clock.now += 1
    view.flush()
    pump()
    assert "writing" in bar() and "~812 in · ~11 out" in bar()
    view.handle(ev(T.LLM_COMPLETE, usage={"input_tokens": 800, "output_tokens": 9},
                   cost_usd=0.0004, model="scripted"))
    call_tool(view, ev, "c1", "read_file", {"path": "a"})
    clock.now += 1
    view.flush()
    pump()
    assert "800 in · 9 out" in bar() and "~" not in bar() and "$0.0004" in bar()
    assert "running read_file" in bar()
    assert browser.errors == []
    page.close()


def test_a_results_images_show_on_its_card_and_in_the_saved_transcript(make_view):
    from agent_kernel.jupyter._static_view import render_html

    ev = Events()
    view = make_view(clock=Clock())
    start(view, ev)
    image = {"media_type": "image/png", "data": "iVBORw0KGgo=", "width": 2, "height": 2, "alt": "figure 'Growth'"}
    junk = {"media_type": "text/html", "data": "PHNjcmlwdD4=", "width": None, "height": None, "alt": ""}
    view.handle(ev(T.TOOL_RESULT, call_id="c1", name="python", content="plotted", is_error=False, duration_s=0.1,
                   images=[image, junk]))
    card = view.transcript.card("c1")
    assert card.images == [{"src": "data:image/png;base64,iVBORw0KGgo=", "alt": "figure 'Growth'"}]
    assert card.to_json()["images"] == card.images
    html = render_html(view.transcript.to_json())
    assert '<img class="ak-picture" src="data:image/png;base64,iVBORw0KGgo=" alt="figure &#x27;Growth&#x27;"' in html
    assert "text/html" not in html


@pytest.mark.browser
def test_the_front_end_shows_a_results_images_on_its_card_without_fetching(make_view, chromium):
    import base64
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (40, 20), "red").save(buffer, format="PNG")
    png = base64.b64encode(buffer.getvalue()).decode()
    ev = Events()
    view = make_view(clock=Clock())
    browser = BrowserPage(chromium, view)
    page = browser.page
    start(view, ev)
    view.handle(ev(T.TOOL_CALL_READY, call_id="c1", name="python", arguments={"code": "plot()"}, index=0))
    view.handle(ev(T.TOOL_RESULT, call_id="c1", name="python", content="plotted", is_error=False, duration_s=0.1,
                   images=[{"media_type": "image/png", "data": png, "width": 40, "height": 20, "alt": "figure 'Red'"}]))
    browser.pump()
    picture = page.locator(".ak-tool .ak-picture")
    assert picture.count() == 1 and picture.get_attribute("alt") == "figure 'Red'"
    page.wait_for_function("document.querySelector('.ak-picture').complete")
    assert page.evaluate("document.querySelector('.ak-picture').naturalWidth") == 40  # decoded, from the data URL
    assert browser.errors == [] and all(url.startswith("http://view.test/") for url in browser.requests)


@pytest.mark.browser
def test_the_front_end_draws_the_context_meter_and_turns_it_amber_after_a_warning(make_view, chromium):
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    browser = BrowserPage(chromium, view)
    page, pump = browser.page, browser.pump
    start(view, ev)
    pump()
    assert page.locator(".ak-context").is_hidden()  # nothing to show before a call reports
    usage = {"input_tokens": 90_000, "output_tokens": 10}
    view.handle(ev(T.LLM_COMPLETE, usage=usage, cost_usd=0.0, model="big",
                   context_usage={"used_tokens": 90_000, "window": 200_000, "share": 0.45, "estimated": False}))
    clock.now += 1
    view.flush()
    pump()
    meter = page.locator(".ak-context")
    assert meter.inner_text().strip() == "context 45% of 200k"
    assert page.locator(".ak-meter-fill").evaluate("e => e.style.width") == "45%"
    assert meter.get_attribute("data-warn") == "false"
    view.handle(ev(T.CONTEXT_WARNING, used_tokens=150_000, window=200_000, share=0.75, warn_at=0.7, compact_at=0.8,
                   message="The context window is 75% full (150,000 of 200,000 tokens)."))
    view.handle(ev(T.LLM_COMPLETE, usage=usage, cost_usd=0.0, model="big",
                   context_usage={"used_tokens": 150_000, "window": 200_000, "share": 0.75, "estimated": False}))
    clock.now += 1
    view.flush()
    pump()
    assert meter.inner_text().strip() == "context 75% of 200k" and meter.get_attribute("data-warn") == "true"
    assert "The context window is 75% full" in page.inner_text("#out")
    assert browser.errors == []
    page.close()


def test_the_saved_transcript_shows_a_pending_card_as_cut_off_and_then_the_finished_run(make_view) -> None:
    clock, ev = Clock(), Events()
    view = make_view(clock=clock)
    start(view, ev)
    assert view.saved["model_id"] == view.model_id and view.saved["final"] is False
    view.handle(ev(T.TOOL_CALL_READY, call_id="c1", name="write_file",
                   arguments={"path": "out.md", "content": "hi"}, index=0))
    view.handle(ev(T.APPROVAL_REQUIRED, call_id="c1", tool="write_file",
                   arguments={"path": "out.md"}, key="write_file(out.md)", reason="asks"))
    # What the page keeps if the kernel goes now: the card as it stands, the run cut off there.
    pending = view.saved
    assert pending["final"] is False
    assert 'data-phase="interrupted"' in pending["html"] and "write_file" in pending["html"]
    assert view.transcript.status.phase == "running"  # the live view is not changed by it
    for n in range(50):  # a stream of text draws nothing new
        view.handle(ev(T.TEXT_DELTA, text=f"t{n} "))
    assert view.saved is pending
    view.handle(ev(T.RUN_FINISH, reason="end_turn", text="Done.", stats={"turns": 1}))
    assert view.saved["final"] is True
    assert view.saved["html"] == view.static().html and view.saved["text"] == view.static().text
