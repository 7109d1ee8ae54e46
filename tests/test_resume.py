"""Rebuilding a conversation from its journal: what a resumed agent holds equals what the loop had."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_kernel import Agent, ToolContext, tool
from agent_kernel.context import ContextManager
from agent_kernel.errors import JournalError, UserError
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.events._turn import TurnState
from agent_kernel.journal import INTERRUPTED_RESULT, SkippedLinesWarning, read_events, rebuild, turn_history
from agent_kernel.messages import Message, TextBlock, ToolResultBlock
from agent_kernel.models.scripted import FunctionModel, ScriptedModel, fail, text, thinking, tool_call

from .journal_events import recorded_run, until


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def agent_for(model: Any, tools: Any, tmp_path: Path, **kwargs: Any) -> Agent:
    kwargs.setdefault("context", None)
    kwargs.setdefault("permissions", "bypass")
    return Agent(model, tools=tools, journal=tmp_path / "run.jsonl", **kwargs)


def assert_rebuilds(agent: Agent, tmp_path: Path) -> None:
    """The journal alone gives back the agent's conversation, last TurnState and last seq."""
    agent.close()
    events = read_events(tmp_path / "run.jsonl")
    messages, turn_state, seq = rebuild(events)
    assert messages == agent.messages
    assert turn_state == (agent.history[-1] if agent.history else None)
    assert turn_history(events) == agent.history
    assert seq == agent.events[-1].seq


async def test_a_run_with_tools_and_thinking_rebuilds_exactly(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [thinking("Add them."), text("Adding."), tool_call("add", {"a": 2, "b": 3}), tool_call("add", {"a": 1, "b": 1})],
            "5 and 2.",
            "Still 5.",
        ]
    )
    agent = agent_for(model, [add], tmp_path)
    await agent.run("what are 2+3 and 1+1?")
    await agent.run("and 2+3 again?")
    assert_rebuilds(agent, tmp_path)


async def test_a_compacted_conversation_rebuilds_exactly(tmp_path: Path) -> None:
    @tool(read_only=True)
    def read_chunk(n: int) -> str:
        """Returns chunk n."""
        return f"chunk {n}: " + "r" * 1_500

    reads = [[text(f"Chunk {n}."), tool_call("read_chunk", {"n": n})] for n in range(5)]

    def script(messages: list[Message], tools: Any) -> Any:
        if not tools and "<conversation>" in messages[0].text:
            return "## Summary\nChunks 0 to 3 were read."
        script.calls += 1  # type: ignore[attr-defined]
        return reads[script.calls - 1] if script.calls <= len(reads) else "Done."  # type: ignore[attr-defined]

    script.calls = 0  # type: ignore[attr-defined]
    context = ContextManager(micro_compact=False, keep_messages=4, retry_delays=(), calibrate=False)
    agent = agent_for(FunctionModel(script, context_window=2_000), [read_chunk], tmp_path, context=context)
    result = await agent.run("Read every chunk.")
    assert any(e.type is EventType.COMPACTION_COMPLETE for e in result.events)
    assert any(t.compacted for t in agent.history)
    assert_rebuilds(agent, tmp_path)


async def test_a_run_cancelled_mid_tool_rebuilds_with_its_closing_results(tmp_path: Path) -> None:
    started = asyncio.Event()

    @tool(read_only=True)
    async def forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.sleep(60)
        return "never"

    model = ScriptedModel([[text("Trying."), tool_call("forever"), tool_call("add", {"a": 1, "b": 2})], "Resumed."])
    agent = agent_for(model, [forever, add], tmp_path)

    async def cancel() -> None:
        await started.wait()
        agent.cancel("stop")

    canceller = asyncio.create_task(cancel())
    await asyncio.wait_for(agent.run("go"), 10)
    await canceller
    assert agent.messages[-1].tool_results
    await agent.run("continue")  # the prompt joins the closing results' message
    assert_rebuilds(agent, tmp_path)


async def test_a_run_cancelled_mid_stream_keeps_the_partial_answer(tmp_path: Path) -> None:
    model = ScriptedModel([[text("partial "), text("never arrives", delay=30)]])
    agent = agent_for(model, [], tmp_path)
    async for event in agent.stream("go"):
        if event.type is EventType.TEXT_DELTA:
            asyncio.get_running_loop().call_soon(agent.cancel)
    assert agent.messages[-1].text == "partial "
    assert_rebuilds(agent, tmp_path)


async def test_a_run_that_failed_mid_stream_rebuilds(tmp_path: Path) -> None:
    model = ScriptedModel([[text("Half an answer"), fail("bad_request")]])
    agent = agent_for(model, [], tmp_path)
    result = await agent.run("go")
    assert result.termination_reason.value == "error"
    assert_rebuilds(agent, tmp_path)


async def test_a_tool_that_stops_the_run_rebuilds(tmp_path: Path) -> None:
    @tool
    def finish(ctx: ToolContext) -> str:
        """Ends the run."""
        ctx.stop("Stopped by the tool.")

    model = ScriptedModel([[tool_call("finish"), tool_call("add", {"a": 1, "b": 1})], "After the stop."])
    agent = agent_for(model, [finish, add], tmp_path)
    first = await agent.run("go")
    assert first.termination_reason.value == "tool_stop"
    await agent.run("go on")
    assert_rebuilds(agent, tmp_path)


def test_a_run_killed_mid_tool_closes_the_calls_that_never_finished() -> None:
    events = until(recorded_run(), EventType.TOOL_RESULT)  # c1 finished; c2 ran, c3 waited for approval
    messages, turn_state, seq = rebuild(events)
    assert [m.role for m in messages] == ["user", "assistant", "user"]
    assert messages[-1].tool_results == [
        ToolResultBlock("c1", "alpha", False),
        ToolResultBlock("c2", INTERRUPTED_RESULT, True),
        ToolResultBlock("c3", INTERRUPTED_RESULT, True),
    ]
    assert turn_state == TurnState.from_dict(events[1].data["turn_state"])
    assert seq == events[-1].seq


def test_a_response_cut_off_by_a_crash_is_not_part_of_the_conversation() -> None:
    events = until(recorded_run(), EventType.TEXT_DELTA, 2)
    messages, _, seq = rebuild(events)
    assert messages == [Message.user("Copy a.txt and c.txt into b.txt.")]
    assert seq == 6


def test_the_recorded_run_rebuilds_through_its_compaction() -> None:
    messages, turn_state, seq = rebuild(recorded_run())
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert "b.txt was written" in messages[0].text and messages[-1].text == "All done."
    assert turn_state is not None and turn_state.turn_id == "t_second" and turn_state.compacted
    assert seq == 31


def test_a_sub_agents_events_stay_out_of_the_conversation() -> None:
    events = recorded_run()
    child = AgentEvent(32, events[-1].ts, "s_frames", "r_child", "t_child", "t_first", 0, EventType.RUN_START,
                       {"prompt": "a sub-task", "turn_state": TurnState.initial().to_dict()}, agent_id="a_child")
    assert rebuild([*events, child]).messages == rebuild(events).messages
    assert rebuild([*events, child]).seq == 32


def test_nothing_recorded_rebuilds_to_nothing() -> None:
    assert rebuild([]) == ([], None, 0)


def test_rebuilt_text_blocks_are_the_recorded_ones() -> None:
    messages, _, _ = rebuild(recorded_run())
    assert messages[-1].content == (TextBlock("All done."),)


@pytest.mark.parametrize("prompt", ["plain text", {"role": "user", "content": [{"type": "text", "text": "as a dict"}]}])
def test_a_prompt_may_be_text_or_a_message_dict(prompt: Any) -> None:
    [start] = recorded_run()[:1]
    event = AgentEvent(1, start.ts, "s", "r", "t", None, 0, EventType.RUN_START, {"prompt": prompt})
    [message] = rebuild([event]).messages
    assert message.role == "user" and message.text in ("plain text", "as a dict")


# -- a process killed mid-tool, then resumed ---------------------------------------------------

CHILD = '''
import asyncio, sys
from agent_kernel import Agent, tool
from agent_kernel.models.scripted import ScriptedModel, text, tool_call

seen_start, seen_complete = asyncio.Event(), asyncio.Event()

@tool(read_only=True)
def quick(n: int) -> str:
    """Returns at once."""
    return f"quick {n}"

@tool(read_only=True)
async def slow_count(n: int) -> str:
    """Counts, very slowly."""
    # Once the consumer has seen this call start and the response complete, the loop has
    # nothing left to emit until this returns: the parent may kill the process.
    await seen_start.wait()
    await seen_complete.wait()
    print("TOOL_RUNNING", flush=True)
    await asyncio.sleep(600)
    return "never"

async def main() -> None:
    model = ScriptedModel([
        [text("First a quick look."), tool_call("quick", {"n": 1})],
        [text("Now the slow count, " * 8), tool_call("slow_count", {"n": 3})],
    ])
    agent = Agent(model, tools=[quick, slow_count], session_id=sys.argv[2], working_dir=sys.argv[1],
                  context=None, permissions="bypass")
    async for event in agent.stream("Count to three."):
        print("EVENT", event.seq, event.type.value, flush=True)
        if event.type.value == "tool_start" and event.data["name"] == "slow_count":
            seen_start.set()
        if event.type.value == "llm_complete" and "slow_count" in str(event.data["message"]):
            seen_complete.set()

asyncio.run(main())
'''


async def test_a_process_killed_mid_tool_resumes_to_completion_losing_nothing(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(tmp_path), "s_killed", stdout=asyncio.subprocess.PIPE
    )
    emitted: list[tuple[int, str]] = []
    assert child.stdout is not None
    try:
        while True:
            line = (await asyncio.wait_for(child.stdout.readline(), 60)).decode()
            assert line, "the child exited before its tool ran"
            if line.startswith("TOOL_RUNNING"):
                break
            _, seq, kind = line.split()
            emitted.append((int(seq), kind))
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have exited on its own
            child.send_signal(signal.SIGKILL)
        status = await child.wait()
    assert status == -signal.SIGKILL

    path = tmp_path / ".agent_kernel" / "sessions" / "s_killed.jsonl"
    before = path.read_bytes()
    recorded = read_events(path)
    # Nothing the child emitted before the kill is missing from its journal.
    assert [(e.seq, e.type.value) for e in recorded] == emitted
    assert emitted[-1][1] in ("tool_start", "llm_complete") and "run_finish" not in dict(emitted).values()

    model = ScriptedModel(["The count is three."])
    agent = Agent.resume("s_killed", working_dir=tmp_path, model=model, context=None, permissions="bypass")
    result = await agent.run("Carry on.")
    agent.close()

    assert result.text == "The count is three."
    sent = model.requests[0].messages
    assert [m.role for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    closing = sent[-1]
    assert [(b.tool_use_id, b.content, b.is_error) for b in closing.tool_results] == [
        (sent[-2].tool_uses[0].id, INTERRUPTED_RESULT, True)
    ]
    assert closing.content[-1] == TextBlock("Carry on.")
    # The journal only grew: the old records are intact and seq carries on from the last one.
    after = path.read_bytes()
    assert after.startswith(before)
    seqs = [e.seq for e in read_events(path)]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) > len(emitted)


def test_a_resume_that_fails_on_a_setting_can_be_tried_again_at_once(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    agent = Agent(ScriptedModel(["Hi."]), journal=path)
    agent.run_sync("hello")
    agent.close()
    with pytest.raises(UserError):
        Agent.resume(path, model="no-such-model")
    with pytest.raises(UserError, match="Agent.resume\\(\\) got 'max_iteration', which Agent does not take"):
        Agent.resume(path, model=ScriptedModel(["Again."]), max_iteration=3)
    with pytest.raises(UserError, match="names no journal"):
        Agent.resume(42)
    resumed = Agent.resume(path, model=ScriptedModel(["Again."]))  # the failed tries left the journal unlocked
    assert resumed.run_sync("once more").text == "Again." and len(resumed.messages) == 4


# -- one reader policy: damaged lines, unknown types, a newer schema ----------------------------


def _two_runs(tmp_path: Path) -> tuple[Path, list[Message]]:
    path = tmp_path / "s.jsonl"
    agent = Agent(ScriptedModel(["First.", "Second."]), journal=path)
    agent.run_sync("one")
    agent.run_sync("two")
    agent.close()
    return path, list(agent.messages)


def test_a_resumed_journal_with_a_damaged_middle_line_skips_it_with_a_count_and_goes_on(tmp_path: Path) -> None:
    path, messages = _two_runs(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    # A fragment an older version left after a disk-full write, then the next record appended to it.
    at = next(i for i, line in enumerate(lines) if b'"type":"text_delta"' in line)
    lines[at] = lines[at][: len(lines[at]) // 2] + b"\n"
    path.write_bytes(b"".join(lines))
    with pytest.warns(SkippedLinesWarning, match=rf"skipped 1 damaged line \(line {at + 1}\)"):
        resumed = Agent.resume(path, model=ScriptedModel(["Third."]))
    assert [m.to_dict() for m in resumed.messages] == [m.to_dict() for m in messages]
    assert resumed.run_sync("three").text == "Third."
    resumed.close()
    with pytest.warns(SkippedLinesWarning, match="skipped 1 damaged line"):
        assert [e.type for e in read_events(path)][-1] is EventType.RUN_FINISH


def test_a_journal_of_a_newer_schema_is_refused_by_every_reader_with_both_versions_and_the_upgrade(tmp_path: Path) -> None:
    from agent_kernel.journal import Journal, diff_runs, events_df, export_parquet, sql

    path, _ = _two_runs(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[0] = lines[0].replace(b'"schema":1', b'"schema":2')
    path.write_bytes(b"".join(lines))
    refusal = r"schema 2, written by a newer agent_kernel; this version reads schema 1\. Upgrade to read it: pip install -U agent_kernel"
    for read in (lambda: Agent.resume(path, model=ScriptedModel([])), lambda: read_events(path), lambda: events_df(path),
                 lambda: sql("SELECT count(*) FROM events", path), lambda: export_parquet(path, tmp_path / "out"),
                 lambda: diff_runs(path, path), lambda: Journal(path)):
        with pytest.raises(JournalError, match=refusal):
            read()


def test_events_of_an_unknown_type_are_counted_not_called_corruption(tmp_path: Path) -> None:
    from agent_kernel.journal import events_df

    path, messages = _two_runs(tmp_path)
    with open(path, "ab") as f:  # what a newer version might write between two runs
        f.write(b'{"seq":99,"ts":1.0,"session_id":"s","run_id":"r_new","turn_id":null,"parent_turn_id":null,'
                b'"iteration":0,"agent_id":null,"type":"plan_revised","data":{"plan":"x"}}\n')
    counted = r"left out 1 event of types this version does not know \('plan_revised' \(1\)\)"
    with pytest.warns(SkippedLinesWarning, match=counted):
        resumed = Agent.resume(path, model=ScriptedModel(["Third."]))
    assert [m.to_dict() for m in resumed.messages] == [m.to_dict() for m in messages]
    resumed.close()
    with pytest.warns(SkippedLinesWarning, match=counted):
        assert "plan_revised" not in set(events_df(path)["type"].astype(str))
