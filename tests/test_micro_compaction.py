"""Micro-compaction: old tool results cleared in what the model sees, never in the history."""

from __future__ import annotations

from pathlib import Path

from agent_kernel.agent._agent import Agent
from agent_kernel.context import ContextManager, MicroCompactor, TokenCounter
from agent_kernel.context._micro import placeholder
from agent_kernel.events._event import EventType
from agent_kernel.events._turn import TurnState
from agent_kernel.messages import Message, ToolResultBlock, ToolUseBlock
from agent_kernel.models._base import ModelRequest
from agent_kernel.models.scripted import ScriptedModel, estimate_request_tokens, text, tool_call
from agent_kernel.tools._tool import tool


def conversation(results: list[str]) -> list[Message]:
    history = [Message.user("Read every log file.")]
    for i, content in enumerate(results):
        history.append(Message("assistant", (ToolUseBlock(f"c{i}", "read_log", {"n": i}),)))
        history.append(Message("user", (ToolResultBlock(f"c{i}", content),)))
    return history


def result_contents(messages: tuple[Message, ...] | list[Message]) -> list[str]:
    return [b.content for m in messages for b in m.tool_results]


def test_results_older_than_the_newest_n_become_placeholders() -> None:
    history = conversation([f"log {i}: " + "x" * 4_000 for i in range(6)])
    out = MicroCompactor(keep=3, threshold_tokens=100).apply(history, TokenCounter("openai"))
    contents = result_contents(out.messages)
    assert contents[:3] == [placeholder(len(f"log {i}: ") + 4_000) for i in range(3)]
    assert contents[3:] == result_contents(history)[3:]
    assert out.results_cleared == 3
    assert contents[0] == "[tool result cleared to save context: 4007 chars]"


def test_nothing_changes_when_the_saving_is_below_the_threshold() -> None:
    history = conversation(["y" * 2_000 for _ in range(5)])
    counter = TokenCounter("openai")
    out = MicroCompactor(keep=3, threshold_tokens=20_000).apply(history, counter)
    assert out.messages == tuple(history)
    assert all(a is b for a, b in zip(out.messages, history))
    assert (out.results_cleared, out.tokens_saved, out.tokens) == (0, 0, counter.messages(history))


def test_short_results_are_left_alone_since_a_placeholder_would_not_be_shorter() -> None:
    history = conversation(["ok", "z" * 9_000, "ok", "fine", "done", "last"])
    out = MicroCompactor(keep=3, threshold_tokens=1).apply(history, TokenCounter("openai"))
    assert result_contents(out.messages) == ["ok", placeholder(9_000), "ok", "fine", "done", "last"]
    assert out.results_cleared == 1


def test_tokens_saved_is_the_difference_of_the_estimates() -> None:
    history = conversation(["w" * 5_000 for _ in range(8)])
    counter = TokenCounter("anthropic")
    out = MicroCompactor(keep=2, threshold_tokens=1).apply(history, counter)
    assert out.tokens_saved == counter.messages(history) - counter.messages(out.messages)
    assert out.tokens == counter.messages(out.messages)


def test_clearing_comes_in_batches_so_the_request_otherwise_only_grows_at_its_end() -> None:
    compactor = MicroCompactor(keep=3, threshold_tokens=2_900)
    counter = TokenCounter("openai")
    history = conversation([])
    sent: list[tuple[Message, ...]] = []
    batches = []
    for i in range(30):
        history = history + conversation([f"result {i} " + "k" * 4_000])[1:]
        out = compactor.apply(history, counter)
        sent.append(out.messages)
        if out.results_cleared:
            batches.append((i, out.results_cleared))
    # ~990 tokens saved a result: a batch each time three more results are past the newest three.
    assert batches == [(5, 3), (8, 3), (11, 3), (14, 3), (17, 3), (20, 3), (23, 3), (26, 3), (29, 3)]
    for i, (before, after) in enumerate(zip(sent, sent[1:]), start=1):
        extends = after[: len(before)] == before and all(a is b for a, b in zip(before, after))
        assert extends == (i not in {b for b, _ in batches}), i
    # Between batches up to keep + (batch - 1) results are whole; right after one, exactly keep.
    assert result_contents(sent[29])[-4:] == [placeholder(len("result 26 ") + 4_000)] + result_contents(history)[-3:]


def test_results_in_one_message_are_counted_from_the_newest() -> None:
    parallel = Message("user", tuple(ToolResultBlock(f"p{i}", f"{i}" * 3_000) for i in range(4)))
    history = [Message.user("go"), Message("assistant", tuple(ToolUseBlock(f"p{i}", "t", {}) for i in range(4))), parallel]
    out = MicroCompactor(keep=3, threshold_tokens=1).apply(history, TokenCounter("openai"))
    assert result_contents(out.messages) == [placeholder(3_000), "1" * 3_000, "2" * 3_000, "3" * 3_000]
    assert [b.tool_use_id for b in out.messages[2].tool_results] == ["p0", "p1", "p2", "p3"]


async def test_the_manager_clears_only_the_request_copy_and_reports_it() -> None:
    manager = ContextManager(micro_keep=3, micro_threshold_tokens=2_000)
    model = ScriptedModel([], context_window=200_000)
    history = conversation(["v" * 5_000 for _ in range(6)])
    snapshot = list(history)
    events: list[tuple[EventType, dict]] = []
    request = ModelRequest(tuple(history), system="sys")
    prepared = await manager.prepare(history, TurnState.initial(), request, model, lambda t, d: events.append((t, d)))

    assert history == snapshot and prepared.history is None
    assert result_contents(prepared.request.messages)[:3] == [placeholder(5_000)] * 3
    assert (prepared.request.system, prepared.request.tools) == (request.system, request.tools)
    kinds = [t for t, _ in events]
    assert kinds == [EventType.MICRO_COMPACTION, EventType.CONTEXT_ASSEMBLED]
    data = events[0][1]
    assert data["results_cleared"] == 3
    assert data["tokens_saved"] == manager.estimate(request, model) - manager.estimate(prepared.request, model)


async def test_micro_compaction_can_be_switched_off() -> None:
    manager = ContextManager(micro_compact=False, micro_threshold_tokens=1)
    history = conversation(["v" * 5_000 for _ in range(6)])
    request = ModelRequest(tuple(history))
    prepared = await manager.prepare(history, TurnState.initial(), request, ScriptedModel([]), lambda t, d: None)
    assert prepared.request is request


@tool(read_only=True)
def read_log(n: int) -> str:
    """Returns log file n."""
    return f"log {n}: " + "e" * 3_000


async def test_a_run_shows_the_model_placeholders_while_the_events_and_history_keep_everything(tmp_path: Path) -> None:
    script = [[text(f"Reading log {i}."), tool_call("read_log", {"n": i}, id=f"log{i}")] for i in range(6)] + ["All six logs read."]
    model = ScriptedModel(script)
    agent = Agent(
        model,
        tools=[read_log],
        journal=None,
        working_dir=tmp_path,
        context=ContextManager(micro_keep=2, micro_threshold_tokens=1_000, calibrate=False),
    )
    result = await agent.run("Read the logs.")
    assert result.text == "All six logs read."

    full = [f"log {i}: " + "e" * 3_000 for i in range(6)]
    # The conversation the agent keeps, and every recorded tool result, are complete.
    assert result_contents(agent.messages) == full
    recorded = [r["content"] for e in result.events if e.type is EventType.RECURSION for r in e.data["tool_results"]]
    assert recorded == full
    # The last request cleared all but the newest two results.
    last = model.requests[-1]
    folder = tmp_path / ".agent_kernel" / "sessions" / agent.session_id / "tool-output"
    spilled = [folder / f"log{i}.txt" for i in range(4)]
    assert result_contents(last.messages) == [placeholder(len(full[0]), path) for path in spilled] + full[4:]
    # Each cleared result is kept in the file its placeholder names, for the model to read back.
    assert [path.read_text() for path in spilled] == full[:4]
    # Two batches of two results (each pair saves more than the 1,000-token threshold).
    micro = [e.data for e in result.events if e.type is EventType.MICRO_COMPACTION]
    assert [(m["results_cleared"], m["total_results_cleared"]) for m in micro] == [(2, 2), (2, 4)]
    assert abs(micro[-1]["total_tokens_saved"] - sum(m["tokens_saved"] for m in micro)) <= len(micro)  # rounding
    # The model reports the size of the cleared request it received, not of the full history.
    reported = [e.data["usage"]["input_tokens"] for e in result.events if e.type is EventType.LLM_COMPLETE]
    assert reported == [estimate_request_tokens(r) for r in model.requests]


async def test_asking_whether_compaction_is_due_does_not_swallow_a_batch() -> None:
    manager = ContextManager(micro_keep=1, micro_threshold_tokens=100)
    model = ScriptedModel([], context_window=200_000)
    history = conversation(["q" * 2_000 for _ in range(3)])
    request = ModelRequest(tuple(history))
    assert not manager.due(request, model)
    events: list[tuple[EventType, dict]] = []
    prepared = await manager.prepare(history, TurnState.initial(), request, model, lambda t, d: events.append((t, d)))
    [micro] = [d for t, d in events if t is EventType.MICRO_COMPACTION]
    assert micro["results_cleared"] == 2
    assert result_contents(prepared.request.messages) == [placeholder(2_000)] * 2 + ["q" * 2_000]
