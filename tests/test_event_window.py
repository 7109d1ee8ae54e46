"""A session's events in memory are bounded: the current run plus ``keep_events`` earlier ones,
while the journal, the frames, replay, resume and run results still see every event."""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path
from typing import Any

import pytest

from agent_kernel import Agent, RunResult, tool
from agent_kernel.errors import UserError
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.journal import Journal, read_events, rebuild, replay, turn_history
from agent_kernel.journal._event_log import EventLog, EventsForgottenWarning, EventSlice
from agent_kernel.journal._resume import scan
from agent_kernel.messages import Message
from agent_kernel.models.scripted import FunctionModel, text, tool_call

KEEP = 150
RUNS = 30
TURNS = 5  # tool turns per run: about 63 events a run, so a session of about 1,900 events


@tool(read_only=True)
def lookup(n: int) -> str:
    """Returns the entry for n."""
    return f"entry {n}"


def tool_model() -> FunctionModel:
    """Each run: TURNS lookups, then an answer naming how many lookups it made."""
    state = {"turn": 0}

    def respond(messages: list[Message], tools: Any) -> Any:
        state["turn"] += 1
        if state["turn"] % (TURNS + 1) == 0:
            return f"Looked up {TURNS} entries."
        return [text(f"Looking up {state['turn']}."), tool_call("lookup", {"n": state["turn"]})]

    return FunctionModel(respond, name="lookups")


def session(tmp_path: Path, *, journal: bool = True, keep: int | None = KEEP, runs: int = RUNS) -> tuple[Agent, list[RunResult]]:
    agent = Agent(
        tool_model(),
        tools=[lookup],
        journal=tmp_path / "session.jsonl" if journal else None,
        context=None,
        permissions="bypass",
        keep_events=keep,
    )
    results = [agent.run_sync(f"Run {i}.") for i in range(runs)]
    return agent, results


def test_a_long_session_holds_only_the_last_run_and_the_window_before_it(tmp_path: Path) -> None:
    agent, results = session(tmp_path)
    recorded = read_events(tmp_path / "session.jsonl")
    last_run = len(results[-1].events)
    assert len(recorded) > 5 * (KEEP + last_run)
    assert len(agent.events.held) <= KEEP + last_run
    assert agent.events.held == recorded[-len(agent.events.held) :]


def test_agent_events_still_reads_every_event_in_order_from_the_journal(tmp_path: Path) -> None:
    agent, _ = session(tmp_path)
    recorded = read_events(tmp_path / "session.jsonl")
    assert len(agent.events) == len(recorded)
    assert list(agent.events) == recorded
    assert agent.events[0] == recorded[0] and agent.events[-1] == recorded[-1]
    assert agent.events[10:20] == recorded[10:20]
    assert agent.events[::97] == recorded[::97]


def test_frames_see_every_tool_call_and_event_of_the_session(tmp_path: Path) -> None:
    agent, _ = session(tmp_path)
    recorded = read_events(tmp_path / "session.jsonl")
    calls = agent.tool_calls_df()
    assert len(calls) == RUNS * TURNS
    assert agent.events_df()["seq"].tolist() == [e.seq for e in recorded]
    assert len(agent.turns_df()) == RUNS * (TURNS + 1)


def test_frames_of_a_run_in_progress_include_the_events_not_yet_flushed(tmp_path: Path) -> None:
    agent, _ = session(tmp_path, runs=RUNS - 1)
    seen: dict[str, int] = {}

    @tool(read_only=True)
    def count_tool_calls() -> str:
        """Counts the session's tool calls so far."""
        seen["calls"] = len(agent.tool_calls_df())
        seen["events"] = len(agent.events_df())
        return "counted"

    def count_then_answer(messages: list[Message], tools: Any) -> Any:
        counted = "calls" in seen
        return "Counted." if counted else tool_call("count_tool_calls", {})

    agent.tools.add(count_tool_calls)
    agent.model = FunctionModel(count_then_answer, name="counter")
    before = len(agent.events)
    agent.run_sync("Count.")
    # The frame taken mid-run saw every earlier call, the running one, and this run's events so far.
    assert seen["calls"] == (RUNS - 1) * TURNS + 1
    assert before < seen["events"] < len(agent.events)


async def test_replay_of_a_long_session_yields_every_event(tmp_path: Path) -> None:
    agent, _ = session(tmp_path)
    replayed = [event async for event in replay(agent, speed=None)]
    assert replayed == read_events(tmp_path / "session.jsonl")


def test_an_old_run_result_reads_its_events_back_from_the_journal(tmp_path: Path) -> None:
    agent, results = session(tmp_path)
    first = results[0]
    assert isinstance(first.events, EventSlice)
    assert first.events[0].type is EventType.RUN_START and first.events[-1].type is EventType.RUN_FINISH
    assert {e.run_id for e in first.events} == {first.run_id}
    assert [c["content"] for c in first.tool_calls] == [f"entry {n}" for n in range(1, TURNS + 1)]
    assert pickle.loads(pickle.dumps(first)).events == list(first.events)  # a copy carries the events


def test_a_run_result_holds_the_same_events_the_stream_yielded(tmp_path: Path) -> None:
    agent = Agent(tool_model(), tools=[lookup], journal=tmp_path / "j.jsonl", context=None, permissions="bypass")
    streamed: list[AgentEvent] = []

    async def both() -> Any:
        streamed.extend([e async for e in agent.stream("Streamed.")])
        return await agent.run("Run.")

    result = asyncio.run(both())
    assert result.events == agent.events[len(streamed) :]
    assert result.events[0].type is EventType.RUN_START and len(result.events) == len(agent.events) - len(streamed)


def test_a_resumed_long_session_holds_the_window_and_continues_the_conversation(tmp_path: Path) -> None:
    agent, _ = session(tmp_path)
    messages = list(agent.messages)
    agent.close()
    recorded = read_events(tmp_path / "session.jsonl")
    resumed = Agent.resume(tmp_path / "session.jsonl", model=tool_model(), tools=[lookup], context=None, keep_events=KEEP)
    assert resumed.messages == messages
    assert len(resumed.events.held) == KEEP
    assert len(resumed.events) == len(recorded) and resumed.events[0] == recorded[0]
    resumed.run_sync("One more.")
    assert len(resumed.tool_calls_df()) == (RUNS + 1) * TURNS
    resumed.close()


def test_a_one_pass_scan_rebuilds_what_reading_the_whole_journal_does(tmp_path: Path) -> None:
    agent, _ = session(tmp_path, runs=6)
    agent.close()
    events = read_events(tmp_path / "session.jsonl")
    found = scan(tmp_path / "session.jsonl", keep=KEEP)
    assert found.resumed == rebuild(events) and found.turn_states == turn_history(events)
    assert found.tail == events[-KEEP:] and found.total == len(events)


def test_without_a_journal_older_events_are_gone_and_frames_say_how_to_keep_them(tmp_path: Path) -> None:
    agent, results = session(tmp_path, journal=False)
    held = agent.events.held
    assert len(held) <= KEEP + len(results[-1].events) < len(agent.events)
    assert list(agent.events) == held
    with pytest.raises(IndexError, match="keep_events"):
        agent.events[0]
    with pytest.warns(EventsForgottenWarning, match=r"keep_events=N.*journal"):
        frame = agent.events_df()
    assert len(frame) == len(held)
    # What a result holds stays with it: without a journal it could not be read back.
    assert [c["content"] for c in results[0].tool_calls] == [f"entry {n}" for n in range(1, TURNS + 1)]


def test_journal_false_means_no_journal_as_none_does() -> None:
    agent = Agent(tool_model(), tools=[lookup], journal=False, context=None, permissions="bypass")
    assert agent.run_sync("Run.").text == f"Looked up {TURNS} entries." and agent.journal is None


def test_keep_events_none_holds_every_event_and_never_warns(tmp_path: Path) -> None:
    agent, _ = session(tmp_path, journal=False, keep=None, runs=3)
    assert agent.events.complete and len(agent.events.held) == len(agent.events)
    assert len(agent.tool_calls_df()) == 3 * TURNS


def test_positions_stay_put_when_a_run_lets_older_events_go(tmp_path: Path) -> None:
    agent, _ = session(tmp_path, runs=4)
    mark = len(agent.events)
    agent.run_sync("Again.")
    since = agent.events[mark:]
    assert since[0].type is EventType.RUN_START and since[-1].type is EventType.RUN_FINISH
    assert agent.events.held_from > 0


def test_a_negative_window_is_refused_with_the_fix() -> None:
    with pytest.raises(UserError, match="keep_events must be 0 or more"):
        EventLog(keep=-1)


def test_reading_older_events_back_flushes_what_the_journal_still_buffers(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl", clock=lambda: 0.0)  # a frozen clock: deltas stay buffered
    log = EventLog(keep=1, journal=journal)
    deltas = [AgentEvent(n, float(n), "s_1", "r_1", "t_1", None, 1, EventType.TEXT_DELTA, {"text": f"{n} "}) for n in range(1, 6)]
    for event in deltas:
        journal.write(event)
        log.append(event)
    log.begin_run()
    assert log.held == deltas[-1:]
    assert list(log) == deltas and log[0] == deltas[0]
    journal.close()


def test_a_walk_back_that_stops_among_the_held_events_never_reads_the_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent, _ = session(tmp_path, runs=5)
    everything = list(agent.events)
    assert not agent.events.complete
    assert list(reversed(agent.events)) == everything[::-1]  # a whole walk reads the rest back
    import agent_kernel.journal._event_log as event_log

    def refuse(path: Any) -> Any:
        raise AssertionError(f"{path} was read from its start")

    monkeypatch.setattr(event_log, "read_events", refuse)
    last_start = next(e for e in reversed(agent.events) if e.type is EventType.RUN_START)
    assert last_start == [e for e in everything if e.type is EventType.RUN_START][-1]
    agent.close()
