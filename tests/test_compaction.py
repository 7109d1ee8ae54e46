"""Auto- and manual compaction: summaries, kept tool pairs, retries, fallback, and event figures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_kernel.agent._agent import Agent
from agent_kernel.context import SECTIONS, Compactor, ContextManager, TokenCounter, compacted_history
from agent_kernel.context._compaction import is_valid_cut, render_transcript, summary_block
from agent_kernel.errors import ContextOverflow
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.events._turn import TurnState
from agent_kernel.messages import Message, SummaryBlock, TextBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models import _pricing as pricing
from agent_kernel.models._base import ModelRequest, Usage
from agent_kernel.models.scripted import ScriptedModel, fail, text, tool_call
from agent_kernel.tools._tool import tool

from .payload_check import EmitRecorder

SUMMARY_CALL = 4
SUMMARY = "\n".join(f"## {s}\n{s} notes." for s in SECTIONS)


def assert_valid_for_providers(messages: Sequence[Message]) -> None:
    """Starts with a user message, alternates roles, and every tool_result answers a tool_use
    in the message just before it (and every tool_use but the last is answered just after)."""
    assert messages and messages[0].role == "user"
    for before, after in zip(messages, messages[1:]):
        assert before.role != after.role, [m.role for m in messages]
    for i, m in enumerate(messages):
        if m.tool_results:
            assert i > 0
            asked = {u.id for u in messages[i - 1].tool_uses}
            assert {r.tool_use_id for r in m.tool_results} <= asked
        if m.tool_uses and i + 1 < len(messages):
            assert {u.id for u in m.tool_uses} == {r.tool_use_id for r in messages[i + 1].tool_results}


def is_summary_request(request: ModelRequest) -> bool:
    return not request.tools and "<conversation>" in request.messages[0].text


Recorder = EmitRecorder


def of(events: Sequence[AgentEvent], kind: EventType) -> list[dict[str, Any]]:
    return [e.data for e in events if e.type is kind]


@tool(read_only=True)
def read_chunk(n: int) -> str:
    """Returns chunk n of the input file."""
    return f"chunk {n} of data.csv: " + "r" * 1_500


def tool_history(turns: int, size: int = 800) -> list[Message]:
    history = [Message.user("Process every chunk of data.csv.")]
    for i in range(turns):
        history.append(Message("assistant", (TextBlock(f"Reading chunk {i}."), ToolUseBlock(f"c{i}", "read_chunk", {"n": i}))))
        history.append(Message("user", (ToolResultBlock(f"c{i}", f"chunk {i}: " + "r" * size),)))
    return history


# -- through the Agent ----------------------------------------------------------------------------


def chunk_session() -> list[Any]:
    """Five chunk reads, with the summary answer where compaction will ask for it.

    Each turn adds ~400 tokens, so the 2,000-token window's threshold (1,600) is crossed before
    the fifth model call (SUMMARY_CALL); after it the conversation stays under the threshold.
    """
    script: list[Any] = [[text(f"Reading chunk {i}."), tool_call("read_chunk", {"n": i})] for i in range(5)]
    script.insert(SUMMARY_CALL, SUMMARY)
    script.append("Every chunk is processed.")
    return script


def chunk_agent(model: ScriptedModel | None = None, **settings: Any) -> tuple[Agent, ScriptedModel, ContextManager]:
    model = model or ScriptedModel(chunk_session(), context_window=2_000)
    options: dict[str, Any] = {"micro_compact": False, "keep_messages": 4, "retry_delays": (), "calibrate": False}
    manager = ContextManager(**{**options, **settings})
    return Agent(model, tools=[read_chunk], journal=None, context=manager), model, manager


def history_before_compaction(events: Sequence[AgentEvent], prompt: str) -> list[Message]:
    """The conversation as it stood at ``compaction_start``, rebuilt from the events alone."""
    history: list[Message] = [Message.user(prompt)]
    for e in events:
        if e.type is EventType.COMPACTION_START:
            break
        if e.type is EventType.LLM_COMPLETE:
            blocks = e.data["message"]["content"]
            history.append(Message("assistant", tuple(TextBlock(b["text"]) if b["type"] == "text" else ToolUseBlock(b["id"], b["name"], b["input"]) for b in blocks)))
        if e.type is EventType.RECURSION:
            history.append(Message("user", tuple(ToolResultBlock(r["tool_use_id"], r["content"], r["is_error"]) for r in e.data["tool_results"])))
    return history


async def test_a_session_that_crosses_the_threshold_compacts_and_carries_on() -> None:
    agent, model, manager = chunk_agent()
    result = await agent.run("Process every chunk of data.csv.")

    assert result.text == "Every chunk is processed."
    assert result.termination_reason.value == "end_turn"
    [complete] = of(result.events, EventType.COMPACTION_COMPLETE)
    assert complete["summary"] == SUMMARY and not complete["fallback"]
    # One summary request; every main request is valid and under the window.
    assert [is_summary_request(r) for r in model.requests] == [False] * 4 + [True] + [False] * 2
    for request in model.requests:
        if not is_summary_request(request):
            assert_valid_for_providers(request.messages)
            assert manager.estimate(request, model) <= 2_000
    # The call after compaction starts from the summary and the kept messages.
    after = model.requests[SUMMARY_CALL + 1].messages
    assert after[0].content == (summary_block(SUMMARY, complete["messages_removed"]),)
    # The stored conversation is the compacted one, and it grew again after compaction.
    assert agent.messages[: len(after)] == list(after)
    assert agent.messages[-1].text == "Every chunk is processed."
    # The turn that compacted is marked, the others are not.
    assert [t.compacted for t in agent.history] == [False] * 4 + [True] + [False]


async def test_the_summary_prompt_holds_the_history_and_the_eight_sections() -> None:
    agent, model, _ = chunk_agent()
    await agent.run("Process every chunk of data.csv.")
    request = model.requests[SUMMARY_CALL]
    assert request.tools == () and len(request.messages) == 1
    prompt = request.messages[0].text
    for section in SECTIONS:
        assert f"## {section}" in prompt
    assert "Process every chunk of data.csv." in prompt
    assert "[tool call read_chunk id=call_0_1]" in prompt
    assert "chunk 0 of data.csv: rrr" in prompt
    assert "Reading chunk 1." in prompt


async def test_the_event_figures_add_up() -> None:
    agent, model, manager = chunk_agent()
    result = await agent.run("Process every chunk of data.csv.")

    [start] = of(result.events, EventType.COMPACTION_START)
    [complete] = of(result.events, EventType.COMPACTION_COMPLETE)
    before = history_before_compaction(result.events, "Process every chunk of data.csv.")
    assert start["messages"] == len(before)
    # tokens_before is the estimate of the request that crossed the threshold ...
    crossing = ModelRequest(tuple(before), model.requests[SUMMARY_CALL - 1].system, model.requests[SUMMARY_CALL - 1].tools)
    assert complete["tokens_before"] == start["tokens_before"] == manager.estimate(crossing, model) > start["threshold"] == 1_600
    # ... tokens_after that of exactly what the next call sent, which the assembly reports too.
    assert complete["tokens_after"] == manager.estimate(model.requests[SUMMARY_CALL + 1], model) < complete["tokens_before"]
    assert of(result.events, EventType.CONTEXT_ASSEMBLED)[SUMMARY_CALL]["total_tokens"] == complete["tokens_after"]
    # Every message is either removed or kept.
    assert complete["messages_removed"] + complete["kept_messages"] == start["messages"]
    removed = before[: complete["messages_removed"]]
    kept = before[complete["messages_removed"] :]
    counter = manager.counter(model)
    summary_message = model.requests[SUMMARY_CALL + 1].messages[0]
    saved = counter.messages(removed) - counter.message(summary_message)
    assert abs((complete["tokens_before"] - complete["tokens_after"]) - saved) <= 2  # each estimate rounds up once
    assert list(model.requests[SUMMARY_CALL + 1].messages[1:]) == kept


async def test_the_journal_rebuild_matches_what_the_loop_used() -> None:
    agent, model, _ = chunk_agent()
    result = await agent.run("Process every chunk of data.csv.")
    [complete] = of(result.events, EventType.COMPACTION_COMPLETE)
    before = history_before_compaction(result.events, "Process every chunk of data.csv.")
    kept = before[len(before) - complete["kept_messages"] :]
    assert compacted_history(complete["summary"], complete["messages_removed"], kept) == list(model.requests[SUMMARY_CALL + 1].messages)


async def test_a_cheaper_compaction_model_writes_the_summary() -> None:
    summariser = ScriptedModel([SUMMARY], name="cheap", context_window=50_000)
    script = [[text(f"Reading chunk {i}."), tool_call("read_chunk", {"n": i})] for i in range(5)] + ["Done."]
    model = ScriptedModel(script, context_window=2_000)
    manager = ContextManager(micro_compact=False, keep_messages=4, retry_delays=(), compaction_model=summariser)
    result = await Agent(model, tools=[read_chunk], journal=None, context=manager).run("Process every chunk.")
    assert result.text == "Done."
    assert not any(is_summary_request(r) for r in model.requests)
    assert len(summariser.requests) == 1 and is_summary_request(summariser.requests[0])
    [complete] = of(result.events, EventType.COMPACTION_COMPLETE)
    assert complete["model"] == "cheap"


async def test_the_summary_call_counts_in_the_runs_usage_and_cost() -> None:
    summariser = ScriptedModel([SUMMARY], name="claude-haiku-4-5", context_window=50_000)
    script = [[text(f"Reading chunk {i}."), tool_call("read_chunk", {"n": i})] for i in range(5)] + ["Done."]
    model = ScriptedModel(script, name="claude-sonnet-4-5", context_window=2_000)
    manager = ContextManager(micro_compact=False, keep_messages=4, retry_delays=(), compaction_model=summariser)
    result = await Agent(model, tools=[read_chunk], journal=None, context=manager).run("Process every chunk.")
    [complete] = of(result.events, EventType.COMPACTION_COMPLETE)
    summary = Usage(**complete["usage"])
    assert summary.output_tokens > 0 and complete["cost_usd"] == pricing.cost("claude-haiku-4-5", summary) > 0
    turns = of(result.events, EventType.LLM_COMPLETE)
    assert result.usage == sum((Usage(**t["usage"]) for t in turns), summary)
    assert result.cost_usd == pytest.approx(sum(t["cost_usd"] for t in turns) + complete["cost_usd"])


async def test_failed_summaries_are_retried_with_backoff_then_a_sliding_window_takes_over() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    summariser = ScriptedModel([fail("server"), fail("overloaded"), fail("connection"), fail("server", "still down")], name="cheap")
    script = [[text(f"Reading chunk {i}."), tool_call("read_chunk", {"n": i})] for i in range(5)] + ["Done."]
    model = ScriptedModel(script, context_window=2_000)
    manager = ContextManager(
        micro_compact=False, keep_messages=4, compaction_model=summariser, retry_delays=(0.01, 0.02, 0.04), sleep=sleep
    )
    agent = Agent(model, tools=[read_chunk], journal=None, context=manager)
    result = await agent.run("Process every chunk.")

    assert result.text == "Done."
    assert slept == [0.01, 0.02, 0.04]
    retries = of(result.events, EventType.COMPACTION_RETRY)
    assert [(r["attempt"], r["delay_s"]) for r in retries] == [(1, 0.01), (2, 0.02), (3, 0.04)]
    assert "overloaded" in retries[1]["error"]
    [fallback] = of(result.events, EventType.COMPACTION_FALLBACK)
    assert "still down" in fallback["error"]
    [complete] = of(result.events, EventType.COMPACTION_COMPLETE)
    assert complete["fallback"] is True
    assert complete["messages_removed"] == fallback["messages_removed"]
    assert complete["tokens_after"] == fallback["tokens_after"] < 1_600 // 2 + 100
    kinds = [e.type for e in result.events if e.type.value.startswith("compaction")]
    assert kinds == [EventType.COMPACTION_START] + [EventType.COMPACTION_RETRY] * 3 + [EventType.COMPACTION_FALLBACK, EventType.COMPACTION_COMPLETE]
    [after] = [r.messages for r in model.requests if isinstance(r.messages[0].content[0], SummaryBlock)][:1]
    assert_valid_for_providers(after)
    assert "summarising failed" in after[0].content[0].text


async def test_one_failure_then_a_summary_needs_a_single_retry() -> None:
    summariser = ScriptedModel([fail("rate_limit"), SUMMARY])
    manager = ContextManager(micro_compact=False, keep_messages=2, compaction_model=summariser, retry_delays=(0, 0, 0))
    history = tool_history(6, size=1_200)
    record = Recorder()
    prepared = await manager.prepare(history, TurnState.initial(), ModelRequest(tuple(history)), ScriptedModel([], context_window=2_000), record)
    assert prepared.compacted
    assert len(record.of(EventType.COMPACTION_RETRY)) == 1
    assert record.of(EventType.COMPACTION_FALLBACK) == []
    assert record.of(EventType.COMPACTION_COMPLETE)[0]["summary"] == SUMMARY


async def test_manual_compaction_uses_the_focus_and_marks_the_turn() -> None:
    model = ScriptedModel(
        [[text("Reading."), tool_call("read_chunk", {"n": i})] for i in range(3)] + ["Read three chunks.", SUMMARY]
    )
    agent = Agent(model, tools=[read_chunk], journal=None, context=ContextManager(keep_messages=2, retry_delays=()))
    await agent.run("Read three chunks.")
    events = await agent.compact(focus="the column names")
    prompt = model.requests[-1].messages[0].text
    assert "Pay particular attention to: the column names" in prompt
    [start] = of(events, EventType.COMPACTION_START)
    assert (start["trigger"], start["focus"]) == ("manual", "the column names")
    [complete] = of(events, EventType.COMPACTION_COMPLETE)
    assert complete["messages_removed"] + complete["kept_messages"] == start["messages"] == 8
    assert agent.messages[0].content[0] == summary_block(SUMMARY, complete["messages_removed"])
    assert_valid_for_providers(agent.messages)
    assert agent.history[-1].compacted


# -- prepare() and the Compactor directly ---------------------------------------------------------


async def test_a_kept_part_starting_with_a_user_message_absorbs_the_summary() -> None:
    history = [
        Message.user("first " * 300),
        Message("assistant", (TextBlock("one " * 300),)),
        Message.user("second question"),
        Message("assistant", (TextBlock("two"),)),
    ]
    manager = ContextManager(micro_compact=False, keep_messages=2, retry_delays=())
    new = await manager.compact(history, ScriptedModel([SUMMARY]), Recorder())
    assert [m.role for m in new] == ["user", "assistant"]
    assert new[0].content == (summary_block(SUMMARY, 2), TextBlock("second question"))
    assert new[1] is history[3]


def test_the_cut_moves_back_rather_than_orphan_a_tool_result() -> None:
    history = tool_history(5)  # user, (assistant tool_use, user tool_result) x 5
    compactor = Compactor(keep_messages=3)
    cut = compactor.choose_cut(history, TokenCounter(), budget=10**6)
    # Three from the end would start at a tool_result; the cut keeps its tool_use too.
    assert cut == len(history) - 4
    assert history[cut].tool_uses


def test_kept_messages_shrink_when_they_alone_would_fill_the_budget() -> None:
    history = tool_history(6, size=4_000)
    counter = TokenCounter()
    compactor = Compactor(keep_messages=8, target_ratio=0.5)
    cut = compactor.choose_cut(history, counter, budget=3_000)
    assert counter.messages(history[cut:]) <= 1_500
    assert cut > len(history) - 8 and is_valid_cut(history, cut)


async def test_nothing_is_compacted_when_only_the_kept_messages_exist() -> None:
    history = [Message.user("x" * 10_000)]
    manager = ContextManager(micro_compact=False, retry_delays=())
    record = Recorder()
    model = ScriptedModel([], context_window=1_000)
    # Nothing can be compacted, and the one message is larger than the window: refused, not sent.
    with pytest.raises(ContextOverflow, match=r"needs about 2,504 tokens .* holds 1,000\. Largest parts: message 1 \(user\)"):
        await manager.prepare(history, TurnState.initial(), ModelRequest(tuple(history)), model, record)
    assert record.of(EventType.COMPACTION_START) == [] and model.requests == []
    [assembled] = record.of(EventType.CONTEXT_ASSEMBLED)
    assert not assembled["fits"] and assembled["total_tokens"] > assembled["window"]


async def test_a_huge_system_prompt_does_not_get_the_summary_summarised_again() -> None:
    history = compacted_history(SUMMARY, 40, [Message("assistant", (TextBlock("a" * 100),)), Message.user("b" * 100)])
    manager = ContextManager(micro_compact=False, keep_messages=2, retry_delays=())
    model = ScriptedModel([], context_window=2_000)
    request = ModelRequest(tuple(history), system="s" * 8_000)
    with pytest.raises(ContextOverflow, match="Largest parts: the system prompt"):
        await manager.prepare(history, TurnState.initial(), request, model, Recorder())
    assert model.requests == []  # no summary call either


async def test_an_instruction_added_to_the_request_survives_compaction() -> None:
    history = tool_history(6, size=1_200)
    last = history[-1]
    # The loop's final turn appends an instruction to the last user message, in the request only.
    sent = tuple(history[:-1]) + (Message("user", last.content + (TextBlock("Answer now, without tools."),)),)
    manager = ContextManager(micro_compact=False, keep_messages=2, retry_delays=())
    model = ScriptedModel([SUMMARY], context_window=2_000)
    prepared = await manager.prepare(history, TurnState.initial(), ModelRequest(sent), model, Recorder())
    assert prepared.compacted and prepared.history is not None
    assert prepared.request.messages[-1].content[-1] == TextBlock("Answer now, without tools.")
    assert prepared.history[-1] is last
    assert len(prepared.request.messages) == len(prepared.history)


def test_the_transcript_clips_long_blocks_in_the_middle() -> None:
    rendered = render_transcript([Message.user("start " + "m" * 10_000 + " end")], max_block_chars=200)
    assert rendered.startswith("[user]\nstart ")
    assert rendered.endswith(" end")
    assert "chars omitted" in rendered and len(rendered) < 400


def test_compacted_history_always_starts_with_a_user_message() -> None:
    kept = [Message("assistant", (TextBlock("a"),)), Message.user("b")]
    block = summary_block("s", 3)
    assert block.messages_replaced == 3 and block.text.endswith("\n\ns") and "compacted" in block.text
    assert compacted_history("s", 3, kept) == [Message("user", (block,)), *kept]
    assert compacted_history("s", 3, []) == [Message("user", (block,))]


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Valid conversations: a prompt, then assistant turns that may call tools (answered next)."""
    history = [Message.user("start")]
    for t in range(draw(st.integers(1, 12))):
        calls = draw(st.integers(0, 3))
        size = draw(st.integers(1, 3_000))
        uses = tuple(ToolUseBlock(f"c{t}_{k}", "t", {}) for k in range(calls))
        history.append(Message("assistant", (TextBlock("x" * size), *uses)))
        if calls:
            history.append(Message("user", tuple(ToolResultBlock(u.id, "y" * size) for u in uses)))
        elif draw(st.booleans()):
            history.append(Message.user("more " * draw(st.integers(1, 500))))
        else:
            break
    return history


@settings(max_examples=150, deadline=None)
@given(history=conversations(), keep=st.integers(1, 8), budget=st.integers(0, 4_000))
def test_any_cut_leaves_a_history_providers_accept(history: list[Message], keep: int, budget: int) -> None:
    counter = TokenCounter()
    cut = Compactor(keep_messages=keep).choose_cut(history, counter, budget)
    assert is_valid_cut(history, cut)
    if cut > 0:
        new = compacted_history("summary", cut, history[cut:])
        assert_valid_for_providers(new)
        assert sum(1 for m in new for b in m.content if isinstance(b, SummaryBlock)) == 1


@pytest.mark.parametrize("bad", [{"target_ratio": 0}, {"retry_delays": (-1,)}, {"micro_keep": -1}])
def test_invalid_compaction_settings_are_refused(bad: dict[str, Any]) -> None:
    from agent_kernel.errors import UserError

    with pytest.raises(UserError):
        ContextManager(**bad)


async def test_prepare_only_suspends_when_compaction_is_due() -> None:
    manager = ContextManager(micro_compact=False, keep_messages=2, retry_delays=())
    model = ScriptedModel([SUMMARY], context_window=2_000)
    short = tool_history(1)
    request = ModelRequest(tuple(short))
    assert not manager.due(request, model)
    # Not due: the coroutine finishes on its first step, so the loop can await it inline.
    step = manager.prepare(short, TurnState.initial(), request, model, Recorder())
    with pytest.raises(StopIteration) as done:
        step.send(None)
    assert done.value.value.request is request

    long = tool_history(6, size=1_200)
    request = ModelRequest(tuple(long))
    assert manager.due(request, model)
    prepared = await manager.prepare(long, TurnState.initial(), request, model, Recorder())
    assert prepared.compacted
    assert not manager.due(prepared.request, model)


async def test_compact_shrinks_a_huge_tool_result_even_when_the_conversation_is_too_short_to_summarise(tmp_path: Any) -> None:
    @tool(read_only=True)
    def dump() -> str:
        """Returns a huge log."""
        return "x" * 100_000

    model = ScriptedModel([[tool_call("dump", {})], "Read it."])
    agent = Agent(model, tools=[dump], working_dir=tmp_path, tool_result_limit=None)  # nothing capped it
    await agent.run("dump it")
    before = sum(m.char_count() for m in agent.messages)
    events = await agent.compact()
    assert [e.data["trigger"] for e in events if e.type is EventType.MICRO_COMPACTION] == ["manual"]
    assert sum(m.char_count() for m in agent.messages) < before - 90_000
    assert agent.messages[-2].tool_results[0].content.startswith("x" * 500)  # a preview stays
