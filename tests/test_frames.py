"""DataFrames from a journal: columns, dtypes and rows of every frame, fast and plain readers agree."""

from __future__ import annotations

import asyncio
import json
import math
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agent_kernel import Agent, tool
from agent_kernel.context import SECTIONS, ContextManager
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.guard._approvals import Approval
from agent_kernel.journal import Journal, SkippedLinesWarning, TornLineWarning, read_events
from agent_kernel.journal import _frames as frames
from agent_kernel.journal._event_frame import EVENT_COLUMNS
from agent_kernel.journal._fast import any_layout, chunk_columns
from agent_kernel.journal._frames import (
    MESSAGE_COLUMNS,
    STRING,
    TOOL_CALL_COLUMNS,
    TURN_COLUMNS,
    USAGE_COLUMNS,
    events_df,
    load_journals,
    messages_df,
    tool_calls_df,
    turns_df,
    usage_df,
)
from agent_kernel.messages import Message
from agent_kernel.models._base import ModelRequest
from agent_kernel.models.scripted import FunctionModel, text, tool_call

from .journal_events import ANSWER, PROMPT, SUMMARY, T0, recorded_run, until


def write(path: Path, events: list[AgentEvent]) -> Path:
    with Journal(path) as journal:
        for e in events:
            journal.write(e)
    return path


def assert_columns(frame: pd.DataFrame, expected: dict[str, Any]) -> None:
    assert list(frame.columns) == list(expected)
    for name, dtype in expected.items():
        assert frame[name].dtype == (pd.api.types.pandas_dtype(dtype) if isinstance(dtype, str) else dtype), name


def utc(seconds: float) -> pd.Timestamp:
    return pd.Timestamp(round((T0 + seconds) * 1e9), unit="ns", tz="UTC")


# -- every frame on the recorded run ----------------------------------------------------------


def test_events_df_has_the_envelope_then_the_data_keys() -> None:
    events = recorded_run()
    df = events_df(events)
    assert len(df) == len(events) == 31
    assert list(df.columns[: len(EVENT_COLUMNS)]) == list(EVENT_COLUMNS)
    assert_columns(df[list(EVENT_COLUMNS)], EVENT_COLUMNS)
    data_columns = list(df.columns[len(EVENT_COLUMNS) :])
    assert data_columns == sorted({key for e in events for key in e.data})
    assert df["seq"].tolist() == list(range(1, 32))
    assert df["ts"].iloc[0] == utc(0.0)
    assert df["type"].iloc[0] == "run_start" and df["type"].iloc[-1] == "run_finish"
    assert df["agent_id"].isna().all() and df["parent_agent_id"].isna().all()
    # Data columns are typed by their values.
    assert df["text"].dtype == STRING and df["is_error"].dtype == "boolean"
    assert df["index"].dtype == "Int64" and df["duration_s"].dtype == "float64"
    assert df["arguments"].dtype == object and df.loc[8, "arguments"] == {"path": "a.txt"}
    assert "".join(df.loc[df["type"] == "text_delta", "text"]) == "Let me look." + ANSWER


def test_turns_df_has_one_row_per_turn_with_its_timings_and_tokens() -> None:
    df = turns_df(recorded_run())
    assert_columns(df, TURN_COLUMNS)
    assert df["turn_id"].tolist() == ["t_first", "t_second"]
    first, second = df.iloc[0], df.iloc[1]
    assert first["turn_counter"] == 0 and second["parent_turn_id"] == "t_first"
    assert first["ended_by"] == "recursion" and second["ended_by"] == "end_turn"
    assert not first["compacted"] and second["compacted"]
    assert first["start"] == utc(0.0) and first["end"] == utc(1.31)
    assert first["model_s"] == pytest.approx(0.57)
    # c1 and c2 overlap (0.33-0.90 together), c3 runs alone (1.11-1.30): parallel time counts once.
    assert first["tool_s"] == pytest.approx(0.57 + 0.19)
    assert first["approval_wait_s"] == pytest.approx(0.49)
    assert (first["input_tokens"], first["output_tokens"], first["cache_read_tokens"]) == (100, 20, 5)
    assert first["cost_usd"] == pytest.approx(0.001) and second["cost_usd"] == pytest.approx(0.002)
    assert first["tool_calls"] == 3 and second["tool_calls"] == 0
    assert first["llm_calls"] == 1 and second["llm_calls"] == 1


def test_tool_calls_df_has_one_row_per_call_with_overlaps_and_approvals() -> None:
    df = tool_calls_df(recorded_run())
    assert_columns(df, TOOL_CALL_COLUMNS)
    assert df["call_id"].tolist() == ["c1", "c2", "c3"]
    assert df["name"].tolist() == ["read", "read", "write"]
    assert df["index"].tolist() == [0, 1, 2]
    assert json.loads(df.loc[2, "arguments"]) == {"path": "b.txt", "text": "hi"}
    assert df["overlaps"].tolist() == [["c2"], ["c1"], []]
    assert df.loc[0, "queued"] == utc(0.32) and df.loc[0, "start"] == utc(0.33) and df.loc[0, "end"] == utc(0.80)
    assert df["duration_s"].tolist() == pytest.approx([0.47, 0.47, 0.19])
    assert df["is_error"].tolist() == [False, False, False]
    assert df["approval"].isna().tolist() == [True, True, False]
    assert (df.loc[2, "approval"], df.loc[2, "decided_by"], df.loc[2, "approval_wait_s"]) == ("approve", "callback", 0.49)
    assert df["result_preview"].tolist() == ["alpha", "gamma", "wrote 2 bytes"]


def parallel_calls(count: int, seed: int) -> tuple[list[AgentEvent], list[tuple[float, float]]]:
    """One turn of ``count`` tool calls with random, overlapping run times; and those times."""
    rnd = random.Random(seed)
    spans = [(start, start + rnd.uniform(0.01, 5.0)) for start in (rnd.uniform(0, 60) for _ in range(count))]
    events = []
    for n, (start, end) in enumerate(spans):
        events.append((EventType.TOOL_CALL_START, {"call_id": f"c{n}", "name": "read", "index": n}))
        events.append((EventType.TOOL_RESULT, {"call_id": f"c{n}", "name": "read", "content": "ok", "started_at": T0 + start, "ended_at": T0 + end}))
    return [AgentEvent(seq, T0 + seq / 1000, "s", "r", "t", None, 0, kind, data) for seq, (kind, data) in enumerate(events, 1)], spans


def test_overlaps_and_tool_time_of_many_parallel_calls() -> None:
    events, spans = parallel_calls(300, seed=3)
    calls = tool_calls_df(events)
    by_start = sorted(range(len(spans)), key=lambda n: spans[n])
    for n, (start, end) in enumerate(spans):
        expected = [f"c{m}" for m in by_start if m != n and spans[m][0] < end and start < spans[m][1]]
        assert calls.loc[n, "overlaps"] == expected, n
    covered, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        covered += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    assert turns_df(events).loc[0, "tool_s"] == pytest.approx(covered)


def test_a_result_with_text_utf8_cannot_hold_keeps_its_row() -> None:
    events = [AgentEvent(1, T0, "s", "r", "t", None, 0, EventType.TOOL_RESULT, {"call_id": "c1", "name": "read", "content": "half \ud800 a pair"})]
    assert tool_calls_df(events)["result_preview"].tolist() == ["half \ufffd a pair"]


def test_usage_df_has_one_row_per_model_call() -> None:
    df = usage_df(recorded_run())
    assert_columns(df, USAGE_COLUMNS)
    assert df["input_tokens"].tolist() == [100, 200] and df["output_tokens"].tolist() == [20, 10]
    assert df["stop_reason"].tolist() == ["tool_use", "end_turn"]
    assert df["cost_usd"].sum() == pytest.approx(0.003)
    assert df["iteration"].tolist() == [0, 1]


def test_messages_df_follows_the_conversation_through_a_compaction() -> None:
    df = messages_df(recorded_run())
    assert_columns(df, MESSAGE_COLUMNS)
    assert df["kind"].tolist() == ["prompt", "response", "tool_results", "summary", "response"]
    assert df["role"].tolist() == ["user", "assistant", "user", "user", "assistant"]
    # Compaction replaced the prompt (kept_messages=2 keeps the response and its results).
    assert df["in_context"].tolist() == [False, True, True, True, True]
    assert df["context_index"].tolist() == [pd.NA, 1, 2, 0, 3]
    assert df.loc[0, "text"] == PROMPT and df.loc[4, "text"] == ANSWER
    assert SUMMARY in df.loc[3, "text"]
    assert df["tool_uses"].tolist() == [0, 3, 0, 0, 0] and df["tool_results"].tolist() == [0, 0, 3, 0, 0]
    assert isinstance(df.loc[1, "message"], Message)


@pytest.mark.parametrize("frame", [events_df, turns_df, tool_calls_df, messages_df, usage_df])
def test_every_frame_of_no_events_is_empty_with_its_columns(frame: Any) -> None:
    df = frame([])
    assert len(df) == 0
    if frame is not events_df:
        assert len(df.columns) > 5


# -- sources ----------------------------------------------------------------------------------


@pytest.mark.parametrize("frame", [events_df, turns_df, tool_calls_df, messages_df, usage_df])
def test_a_path_a_journal_and_an_events_holder_give_the_same_frame(tmp_path: Path, frame: Any) -> None:
    events = recorded_run()
    path = write(tmp_path / "j.jsonl", events)

    class Holder:
        def __init__(self) -> None:
            self.events = events

    expected = frame(events)
    pd.testing.assert_frame_equal(frame(path), expected)
    pd.testing.assert_frame_equal(frame(str(path)), expected)
    pd.testing.assert_frame_equal(frame(Holder()), expected)
    with Journal(path) as journal:
        pd.testing.assert_frame_equal(frame(journal), expected)


def test_frames_of_a_run_in_progress_show_what_has_happened_so_far() -> None:
    events = until(recorded_run(), EventType.TOOL_RESULT)  # c1 done, c2 running, c3 awaiting approval
    calls = tool_calls_df(events)
    assert calls["call_id"].tolist() == ["c1", "c2", "c3"]
    assert calls["is_error"].isna().tolist() == [False, True, True]
    assert pd.isna(calls.loc[1, "end"]) and pd.isna(calls.loc[2, "start"])
    assert calls.loc[0, "overlaps"] == ["c2"]
    turns = turns_df(events)
    assert len(turns) == 1 and pd.isna(turns.loc[0, "end"]) and pd.isna(turns.loc[0, "ended_by"])
    assert len(events_df(events)) == len(events)
    assert messages_df(events)["kind"].tolist() == ["prompt", "response", "interrupted"]


def test_a_journal_growing_while_it_is_read_gives_growing_frames(tmp_path: Path) -> None:
    events = recorded_run()
    journal = Journal(tmp_path / "j.jsonl")
    sizes = []
    for e in events:
        journal.write(e)
        if e.type is EventType.TOOL_RESULT:
            sizes.append(len(events_df(journal)))
    journal.close()
    assert sizes == [18, 19, 22]


async def test_frames_of_a_live_agent_while_a_tool_runs(tmp_path: Path) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @tool(read_only=True)
    async def wait() -> str:
        """Waits for the test."""
        started.set()
        await release.wait()
        return "released"

    def script(messages: list[Message], tools: Any) -> Any:
        return [tool_call("wait", {})] if len(messages) == 1 else "Finished."

    agent = Agent(FunctionModel(script), tools=[wait], journal=None, context=None)
    seen: dict[str, pd.DataFrame] = {}
    async for ev in agent.stream("go"):
        if ev.type is EventType.TOOL_START:
            await started.wait()
            seen = {"events": events_df(agent), "calls": tool_calls_df(agent), "turns": turns_df(agent)}
            release.set()
    assert len(seen["events"]) < len(agent.events)
    assert seen["calls"]["name"].tolist() == ["wait"] and pd.isna(seen["calls"].loc[0, "end"])
    assert pd.isna(seen["turns"].loc[0, "ended_by"])
    assert tool_calls_df(agent).loc[0, "result_preview"] == "released"


# -- the fast file reader ---------------------------------------------------------------------


def delta(i: int) -> AgentEvent:
    """Text deltas (half plain text, half with escapes) alternating with argument deltas."""
    if i % 2:
        return AgentEvent(0, T0 + 0.1 + i * 1e-5, "s_frames", "r_frames", "t_first", None, 0, EventType.TEXT_DELTA,
                          {"text": f"tok {i}" if i % 4 == 1 else f"t\u00e9\"{i}\\n"})
    return AgentEvent(0, T0 + 0.1 + i * 1e-5, "s_frames", "r_frames", "t_first", None, 0, EventType.TOOL_CALL_DELTA,
                      {"call_id": "c1", "delta": f'{{"n": {i}', "signature": None, **({"n": i} if i % 3 == 0 else {})})


def many_deltas(count: int) -> list[AgentEvent]:
    events = recorded_run()
    head, tail = events[:5], events[5:]
    deltas = [delta(i) for i in range(count)]
    return [AgentEvent(seq, e.ts, e.session_id, e.run_id, e.turn_id, e.parent_turn_id, e.iteration, e.type, e.data, e.agent_id)
            for seq, e in enumerate(head + deltas + tail, 1)]


def test_the_fast_reader_gives_the_frame_the_event_list_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = many_deltas(3000)  # enough per type for the fast payload paths
    path = write(tmp_path / "j.jsonl", events)
    used: dict[str, int] = {"arrow": 0, "in place": 0}
    read_json, plain_strings = chunk_columns.pa_json.read_json, chunk_columns.plain_strings

    def counted_read_json(*args: Any, **kwargs: Any) -> Any:
        used["arrow"] += 1
        return read_json(*args, **kwargs)

    def counted_plain_strings(*args: Any) -> Any:
        found = plain_strings(*args)
        used["in place"] += found is not None
        return found

    def no_duckdb_reading(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a canonical journal must not need DuckDB's reader")

    monkeypatch.setattr(chunk_columns.pa_json, "read_json", counted_read_json)
    monkeypatch.setattr(chunk_columns, "plain_strings", counted_plain_strings)
    monkeypatch.setattr(any_layout, "read_columns", no_duckdb_reading)
    fast = events_df(path)
    monkeypatch.undo()
    assert used["arrow"] and used["in place"]
    pd.testing.assert_frame_equal(fast, events_df(events))
    assert fast["n"].dtype == "Int64" and fast["n"].notna().sum() == 500
    assert fast["signature"].dtype == object and fast["signature"].isna().all()
    assert fast["text"].str.startswith("tok ").sum() == 750


# Payloads that look like one plain string to a byte scanner but are not, or not only.
LOOKALIKES: list[dict[str, Any]] = [
    {"text": "plain"},
    {"text": ""},
    {"text": 'say "hi"'},
    {"text": "back\\slash"},
    {"text": "caf\u00e9 \U0001f600"},
    {"text": "tab\tand\x7f"},
    {"text": "a", "extra": "b"},
    {"text": "a", "n": 1},
    {"text": 7},
    {"other": "key"},
]


def test_the_fast_reader_keeps_payloads_that_only_look_like_one_string(tmp_path: Path) -> None:
    # 700 of each so every type passes the fast reader's threshold; seq runs past eight digits.
    events = [
        AgentEvent(123_456_789_000 + i, T0 + i / 1000, "s_look", "r_look", "t_look", None, 0, EventType.TEXT_DELTA,
                   dict(LOOKALIKES[i % len(LOOKALIKES)]))
        for i in range(700 * len(LOOKALIKES))
    ]
    fast = events_df(write(tmp_path / "j.jsonl", events))
    pd.testing.assert_frame_equal(fast, events_df(events))
    assert fast["seq"].iloc[-1] == 123_456_789_000 + len(events) - 1
    assert fast["text"].tolist()[: len(LOOKALIKES)] == [d.get("text") for d in LOOKALIKES]
    assert fast["extra"].notna().sum() == 700 and fast["other"].notna().sum() == 700


@pytest.mark.parametrize(("real", "unknown"), [("text_delta", "text_deltas"), ("compaction_complete", "compactioX_complete")])
def test_an_unknown_event_type_is_left_out_counted_and_named_when_reading(tmp_path: Path, real: str, unknown: str) -> None:
    events = many_deltas(600)
    path = write(tmp_path / "j.jsonl", events)
    rows = path.read_text().splitlines()
    at = max(i for i, row in enumerate(rows) if f'"type":"{real}"' in row)
    rows[at] = rows[at].replace(f'"type":"{real}"', f'"type":"{unknown}"')
    path.write_text("\n".join(rows) + "\n")
    with pytest.warns(SkippedLinesWarning, match=rf"left out 1 event of types this version does not know \('{unknown}' \(1\)\); pip install -U agent_kernel"):
        frame = events_df(path)
    assert len(frame) == len(events) - 1  # every other event is read


@pytest.mark.parametrize("frame", [events_df, turns_df, tool_calls_df, messages_df, usage_df])
def test_a_journal_in_another_json_layout_reads_the_same(tmp_path: Path, frame: Any) -> None:
    events = many_deltas(1200)
    path = tmp_path / "other.jsonl"
    with open(path, "w") as f:  # spaces after separators and to_dict's own key order
        f.write(json.dumps({"schema": 1, "session_id": "s_frames", "created": T0}) + "\n")
        for e in events:
            f.write(json.dumps(e.to_dict(), ensure_ascii=False) + "\n")
    pd.testing.assert_frame_equal(frame(path), frame(events))  # and no warning: they are errors here
    pd.testing.assert_frame_equal(frame(write(tmp_path / "canonical.jsonl", events)), frame(events))


def test_data_values_choose_their_column_dtype(tmp_path: Path) -> None:
    values = [
        {"flag": True, "count": 1, "mixed_number": 1, "name": "a", "mixed": 1, "nested": {"a": 1}, "none": None},
        {"flag": False, "count": 2**40, "mixed_number": 2.5, "name": "b", "mixed": "x", "nested": [1, 2], "label": None},
        {"label": "last"},
    ]
    events = [AgentEvent(i, T0 + i, "s", "r", "t", None, 0, EventType.TOOL_PROGRESS, v) for i, v in enumerate(values, 1)]
    df = events_df(write(tmp_path / "j.jsonl", events))
    pd.testing.assert_frame_equal(df, events_df(events))
    assert df["flag"].dtype == "boolean" and df["count"].dtype == "Int64" and df["mixed_number"].dtype == "float64"
    assert df["name"].dtype == STRING and df["mixed"].dtype == object and df["nested"].dtype == object
    assert df["count"].tolist() == [1, 2**40, pd.NA]
    assert df["nested"].tolist() == [{"a": 1}, [1, 2], None]
    assert df["mixed"].tolist() == [1, "x", None] and df["none"].tolist() == [None, None, None]
    assert df["label"].dtype == STRING and df["label"].tolist() == [pd.NA, pd.NA, "last"]
    assert df["label"].str.len().tolist() == [pd.NA, pd.NA, 4] and df["name"].str.upper().tolist() == ["A", "B", pd.NA]


def test_a_data_key_named_like_a_column_is_prefixed(tmp_path: Path) -> None:
    events = [AgentEvent(1, T0, "s", "r", "t", None, 0, EventType.SUBAGENT_START, {"agent_id": "a_child", "type": "task"})]
    df = events_df(write(tmp_path / "j.jsonl", events))
    assert df.loc[0, "data_agent_id"] == "a_child" and df.loc[0, "data_type"] == "task"
    assert pd.isna(df.loc[0, "agent_id"]) and df.loc[0, "type"] == "subagent_start"


def test_a_torn_last_line_is_skipped_by_the_frames_with_one_warning(tmp_path: Path) -> None:
    path = write(tmp_path / "j.jsonl", many_deltas(700))
    with open(path, "a") as f:
        f.write('{"seq":900,"ts":17')
    with pytest.warns(TornLineWarning) as caught:
        df = events_df(path)
    assert len(caught) == 1 and len(df) == 700 + 31


# -- many journals ----------------------------------------------------------------------------


def test_load_journals_concatenates_sessions_and_keeps_dtypes(tmp_path: Path) -> None:
    first = recorded_run()
    other = [AgentEvent(e.seq, e.ts + 60, "s_other", e.run_id, e.turn_id, e.parent_turn_id, e.iteration, e.type,
                        {k: v for k, v in e.data.items() if k != "is_error"}) for e in first]
    write(tmp_path / "runs" / "a.jsonl", first)
    write(tmp_path / "runs" / "b.jsonl", other)
    df = load_journals(str(tmp_path / "runs" / "*.jsonl"))
    assert len(df) == 62 and df["session_id"].unique().tolist() == ["s_frames", "s_other"]
    assert df.dtypes.to_dict() == events_df(first).dtypes.to_dict()
    assert df["is_error"].isna().sum() == 62 - 3
    usage = load_journals([tmp_path / "runs" / "a.jsonl", tmp_path / "runs" / "b.jsonl"], kind="usage")
    assert_columns(usage, USAGE_COLUMNS)
    assert len(usage) == 4


@pytest.mark.parametrize("kind", ["turns", "tool_calls", "usage"])
def test_load_journals_derives_each_journal_apart_however_it_batches_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    # Both journals have the same turn and call ids: load_journals derives them together.
    first = recorded_run()
    other = [AgentEvent(e.seq, e.ts + 60, "s_other", e.run_id, e.turn_id, e.parent_turn_id, e.iteration, e.type, e.data) for e in first]
    paths = [write(tmp_path / "a.jsonl", first), write(tmp_path / "b.jsonl", other)]
    frame = {"turns": turns_df, "tool_calls": tool_calls_df, "usage": usage_df}[kind]
    expected = pd.concat([frame(first), frame(other)], ignore_index=True)
    pd.testing.assert_frame_equal(load_journals(paths, kind), expected)
    monkeypatch.setattr(frames, "_BATCH_EVENTS", 1)  # one journal a batch
    pd.testing.assert_frame_equal(load_journals(paths, kind), expected)


def test_load_journals_says_when_nothing_matches(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="no journal matches"):
        load_journals(str(tmp_path / "*.jsonl"))
    with pytest.raises(Exception, match="unknown frame kind 'turn'"):
        load_journals(str(tmp_path / "*.jsonl"), kind="turn")


# -- a real agent: parallel tools, an approval and a compaction -------------------------------


SUMMARY_TEXT = "\n".join(f"## {s}\n{s} notes." for s in SECTIONS)


def is_summary_request(messages: list[Message], tools: Any) -> bool:
    return not tools and "<conversation>" in messages[0].text


async def test_frames_of_a_real_run_with_parallel_tools_an_approval_and_a_compaction(tmp_path: Path) -> None:
    both_started = asyncio.Barrier(2)

    @tool(read_only=True)
    async def read_chunk(n: int) -> str:
        """Returns chunk n of the input."""
        if n < 2:  # the first two calls run side by side: each waits until both have started
            await both_started.wait()
        return f"chunk {n}: " + "r" * 1_500

    @tool
    def write_note(note: str) -> str:
        """Writes a note."""
        return f"noted {len(note)} characters"

    turns = [
        [text("Reading two chunks."), tool_call("read_chunk", {"n": 0}), tool_call("read_chunk", {"n": 1})],
        [text("Noting."), tool_call("write_note", {"note": "half way"})],
        *[[text(f"Chunk {n}."), tool_call("read_chunk", {"n": n})] for n in range(2, 5)],
        "All chunks read.",
    ]
    answered: list[int] = []

    def script(messages: list[Message], tools: Any) -> Any:
        if is_summary_request(messages, tools):
            return SUMMARY_TEXT
        answered.append(1)
        return turns[len(answered) - 1]

    model = FunctionModel(script, context_window=2_000)
    context = ContextManager(micro_compact=False, keep_messages=4, retry_delays=(), calibrate=False)
    agent = Agent(
        model,
        tools=[read_chunk, write_note],
        journal=tmp_path / "run.jsonl",
        context=context,
        approver=lambda request: Approval.approve(),
    )
    result = await agent.run("Read every chunk.")
    agent.close()
    assert result.text == "All chunks read."
    types = [e.type for e in result.events]
    assert EventType.COMPACTION_COMPLETE in types and EventType.APPROVAL_DECISION in types

    path = tmp_path / "run.jsonl"
    events = events_df(path)
    pd.testing.assert_frame_equal(events, events_df(agent))
    assert len(events) == len(read_events(path)) == len(agent.events)
    assert_columns(events[list(EVENT_COLUMNS)], EVENT_COLUMNS)

    turns_frame = turns_df(path)
    assert_columns(turns_frame, TURN_COLUMNS)
    assert len(turns_frame) == len(agent.history)
    assert turns_frame["compacted"].tolist() == [t.compacted for t in agent.history]
    assert turns_frame["ended_by"].iloc[-1] == "end_turn" and (turns_frame["ended_by"].iloc[:-1] == "recursion").all()

    calls = tool_calls_df(path)
    assert_columns(calls, TOOL_CALL_COLUMNS)
    assert calls["name"].tolist() == ["read_chunk", "read_chunk", "write_note", "read_chunk", "read_chunk", "read_chunk"]
    assert calls.loc[0, "overlaps"] == [calls.loc[1, "call_id"]]
    assert calls["approval"].tolist()[2] == "approve" and calls["decided_by"].tolist()[2] == "callback"
    assert not calls["is_error"].any()

    usage = usage_df(path)
    assert_columns(usage, USAGE_COLUMNS)
    # One row per model call: each turn's response, and the summary the compaction asked for.
    assert usage["purpose"].tolist().count("turn") == len(turns) and usage["purpose"].tolist().count("compaction") == 1
    summary_row = usage[usage["purpose"] == "compaction"].iloc[0]
    assert pd.isna(summary_row["stop_reason"]) and summary_row["output_tokens"] > 0 and summary_row["duration_s"] >= 0
    assert usage["output_tokens"].sum() == result.usage.output_tokens and usage["input_tokens"].sum() == result.usage.input_tokens
    assert turns_frame["llm_calls"].sum() == len(usage) and turns_frame["output_tokens"].sum() == result.usage.output_tokens

    messages = messages_df(path)
    assert_columns(messages, MESSAGE_COLUMNS)
    assert messages.sort_values("context_index").loc[messages["in_context"], "message"].tolist() == agent.messages
    assert "summary" in messages["kind"].tolist()
    assert math.isclose(turns_frame["input_tokens"].sum(), usage["input_tokens"].sum())


def test_the_request_shape_used_above_is_what_compaction_sends() -> None:
    # Guards is_summary_request: a summary request has no tools and wraps the history.
    request = ModelRequest((Message.user("<conversation>\n...\n</conversation>"),))
    assert is_summary_request(list(request.messages), list(request.tools))
