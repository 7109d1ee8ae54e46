"""The journal writer and reader: round trip, header, buffering, torn lines, locking, locations."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from agent_kernel import Agent, tool
from agent_kernel.errors import JournalError, UserError
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.journal import Journal, SkippedLinesWarning, TornLineWarning, list_sessions, read_events, read_header, resolve_journal_path, session_path
from agent_kernel.journal._writer import CANONICAL_FIELDS
from agent_kernel.models.scripted import ScriptedModel, text, thinking, tool_call

from .journal_events import recorded_run


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def event(seq: int, kind: EventType = EventType.TEXT_DELTA, **data: object) -> AgentEvent:
    return AgentEvent(seq, 1_700_000_000.0 + seq / 10, "s_test", "r_test", "t_test", None, 0, kind, dict(data))


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


async def test_every_event_of_a_scripted_run_reads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    model = ScriptedModel(
        [
            [thinking("Two numbers, so add them."), text("Adding ünïcode ✓. "), tool_call("add", {"a": 2, "b": 3})],
            "The sum is 5.",
        ]
    )
    agent = Agent(model, tools=[add], journal=path, context=None, permissions="bypass")
    first = await agent.run("what is 2+3?")
    agent.close()

    recorded = read_events(path)
    assert recorded == agent.events
    assert [e.seq for e in recorded] == list(range(1, len(recorded) + 1))
    assert {e.type for e in first.events} >= {EventType.THINKING_DELTA, EventType.TOOL_RESULT, EventType.RECURSION}
    # The file is plain JSON Lines: one header, then one AgentEvent.to_dict() per line.
    records = [json.loads(line) for line in lines(path)]
    assert [AgentEvent.from_dict(r) for r in records[1:]] == recorded
    assert records[1] == recorded[0].to_dict()


def test_the_header_names_the_schema_session_and_metadata(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.jsonl", session_id="s_head", metadata={"model": "scripted", "system": "Be brief."}) as journal:
        journal.write(event(1))
    header = read_header(tmp_path / "j.jsonl")
    assert header is not None
    assert header["schema"] == 1 and header["session_id"] == "s_head"
    assert header["model"] == "scripted" and header["system"] == "Be brief."
    assert isinstance(header["created"], float)


def test_reserved_header_fields_cannot_be_set_through_metadata(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="schema"):
        Journal(tmp_path / "j.jsonl", metadata={"schema": 2})


def test_writes_wait_in_memory_until_a_flush(tmp_path: Path) -> None:
    clock = Clock()
    journal = Journal(tmp_path / "j.jsonl", clock=clock)
    for seq in range(1, 4):
        journal.write(event(seq, text="tok"))
    assert len(lines(journal.path)) == 1  # the header only
    journal.flush()
    assert len(lines(journal.path)) == 4
    journal.close()


def test_a_write_after_the_flush_interval_flushes_everything_buffered(tmp_path: Path) -> None:
    clock = Clock()
    journal = Journal(tmp_path / "j.jsonl", clock=clock)
    journal.write(event(1))
    clock.now = 0.05
    journal.write(event(2))
    assert len(lines(journal.path)) == 1
    clock.now = 0.1
    journal.write(event(3))
    assert len(lines(journal.path)) == 4
    journal.close()


@pytest.mark.parametrize("kind", [EventType.TOOL_START, EventType.APPROVAL_REQUIRED, EventType.LLM_COMPLETE, EventType.RUN_FINISH])
def test_an_event_other_than_a_delta_reaches_the_file_at_once_with_the_deltas_before_it(tmp_path: Path, kind: EventType) -> None:
    journal = Journal(tmp_path / "j.jsonl", clock=Clock())
    journal.write(event(1))
    journal.write(event(2, kind))
    assert [json.loads(line)["seq"] for line in lines(journal.path)[1:]] == [1, 2]
    journal.close()


async def test_inside_an_event_loop_a_timer_flushes_a_quiet_buffer(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    journal.write(event(1))
    assert len(lines(journal.path)) == 1
    # The journal's call_later(0.1) is due before this sleep's, so it has run by the time we wake.
    await asyncio.sleep(journal.flush_interval * 1.5)
    assert len(lines(journal.path)) == 2
    journal.close()


def test_a_timer_left_in_a_finished_event_loop_does_not_stop_the_next_one(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")

    async def write_then_leave(seq: int) -> None:
        journal.write(event(seq))  # arms a timer in this loop, which ends before it fires

    async def write_then_wait(seq: int) -> None:
        journal.write(event(seq))
        await asyncio.sleep(journal.flush_interval * 1.5)

    asyncio.run(write_then_leave(1))
    journal.flush()
    asyncio.run(write_then_wait(2))
    assert [json.loads(line)["seq"] for line in lines(journal.path)[1:]] == [1, 2]
    journal.close()


def test_close_flushes_and_a_closed_journal_refuses_writes(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl", clock=Clock())
    journal.write(event(1))
    journal.sync()
    journal.write(event(2))
    journal.close()
    journal.close()  # twice is fine
    assert [e.seq for e in read_events(journal.path)] == [1, 2]
    with pytest.raises(JournalError, match="closed"):
        journal.write(event(3))


def test_a_second_writer_on_the_same_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    first = Journal(path, session_id="s_one")
    with pytest.raises(JournalError) as refused:
        Journal(path)
    message = str(refused.value)
    assert "another agent or kernel" in message and "another session id" in message and "close" in message
    first.close()
    Journal(path).close()  # once released, the file opens again


def test_reopening_a_journal_continues_its_seq(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path, session_id="s_more") as journal:
        for seq in range(1, 6):
            journal.write(event(seq))
    with Journal(path) as journal:
        assert journal.last_seq == 5 and journal.session_id == "s_more"
        journal.write(event(6))
    assert [e.seq for e in read_events(path)] == [1, 2, 3, 4, 5, 6]
    assert sum(1 for line in lines(path) if '"schema"' in line) == 1


def test_reopening_with_another_session_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    Journal(path, session_id="s_one").close()
    with pytest.raises(JournalError, match="holds session 's_one'"):
        Journal(path, session_id="s_two")


def test_a_file_that_is_not_a_journal_is_not_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"hello": "world"}\n')
    with pytest.raises(JournalError, match="not an agent_kernel journal"):
        Journal(path)
    assert path.read_text() == '{"hello": "world"}\n'


def _torn(path: Path, count: int) -> str:
    with Journal(path, session_id="s_torn") as journal:
        for seq in range(1, count + 1):
            journal.write(event(seq, text=f"token {seq}"))
    whole = path.read_text()
    with open(path, "a") as f:  # a crash in the middle of writing the next record
        f.write('{"seq":99,"ts":1700000000.5,"session_id":"s_to')
    return whole


def test_a_torn_last_line_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    _torn(path, 3)
    with pytest.warns(TornLineWarning, match="torn last line"):
        events = read_events(path)
    assert [e.seq for e in events] == [1, 2, 3]
    assert events[-1].data == {"text": "token 3"}


def test_continuing_a_journal_cuts_off_its_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    whole = _torn(path, 2)
    with pytest.warns(TornLineWarning, match="dropped a torn last line"):
        journal = Journal(path)
    assert journal.last_seq == 2 and path.read_text() == whole
    journal.write(event(3))
    journal.close()
    assert [e.seq for e in read_events(path)] == [1, 2, 3]


def test_a_last_line_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path, session_id="s_nl") as journal:
        journal.write(event(1))
        journal.write(event(2))
    path.write_text(path.read_text().rstrip("\n"))
    assert [e.seq for e in read_events(path)] == [1, 2]
    with Journal(path) as journal:
        assert journal.last_seq == 2
        journal.write(event(3))
    assert [e.seq for e in read_events(path)] == [1, 2, 3]


def test_a_damaged_line_before_the_end_is_skipped_with_a_warning_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path, session_id="s_bad") as journal:
        for seq in range(1, 4):
            journal.write(event(seq))
    rows = lines(path)
    rows[2] = rows[2][:20]
    path.write_text("\n".join(rows) + "\n")
    with pytest.warns(SkippedLinesWarning, match=r"skipped 1 damaged line \(line 3\)"):
        assert [e.seq for e in read_events(path)] == [1, 3]


def test_data_json_cannot_hold_is_written_as_text_not_a_failure(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path) as journal:
        journal.write(event(1, EventType.TOOL_RESULT, content=Path("/tmp/x"), tags={"b"}, pair=(1, 2), codes={1: "one"}))
    [back] = read_events(path)
    assert back.data == {"content": "/tmp/x", "tags": ["b"], "pair": [1, 2], "codes": {"1": "one"}}


@pytest.mark.parametrize(
    "data",
    [{"text": 'q"b\\s\n\t\x7f'}, {"text": "caf\u00e9 \U0001f600 \ud800"}, {"text": ""}, {"": "x"}, {1: "one"}, {"text": None}],
)
def test_a_one_string_payload_is_written_as_json_writes_it(tmp_path: Path, data: dict) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path) as journal:
        journal.write(AgentEvent(1, 1.5, "s", "r", "t", None, 0, EventType.TEXT_DELTA, data))
    line = lines(path)[1]
    assert line.endswith(f',"data":{json.dumps(data, separators=(",", ":"))}}}')
    assert line.isascii()


def test_the_fast_line_format_writes_every_field_of_an_event() -> None:
    # If AgentEvent gains a field, the journal falls back to to_dict() for every line (correct but
    # slower, and the fast reader no longer applies): teach journal.CANONICAL_FIELDS the field.
    assert tuple(f.name for f in dataclasses.fields(AgentEvent)) == CANONICAL_FIELDS


def test_without_the_fast_format_events_still_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_kernel.journal import _writer as journal_module

    monkeypatch.setattr(journal_module, "_FAST", False)
    events = recorded_run()
    with Journal(tmp_path / "j.jsonl") as journal:
        for e in events:
            journal.write(e)
    assert read_events(tmp_path / "j.jsonl") == events


def test_the_synthetic_run_round_trips_through_a_file(tmp_path: Path) -> None:
    events = recorded_run()
    with Journal(tmp_path / "j.jsonl") as journal:
        for e in events:
            journal.write(e)
    assert read_events(tmp_path / "j.jsonl") == events


def test_sessions_live_under_the_working_directory_by_default(tmp_path: Path) -> None:
    with Journal.for_session("s_where", tmp_path) as journal:
        journal.write(event(1))
    assert journal.path == tmp_path / ".agent_kernel" / "sessions" / "s_where.jsonl"
    assert session_path("s_where", tmp_path) == journal.path
    assert list_sessions(tmp_path) == ["s_where"]
    assert resolve_journal_path("s_where", tmp_path) == journal.path
    assert resolve_journal_path(journal.path) == journal.path
    assert resolve_journal_path(str(journal.path)) == journal.path


@pytest.mark.parametrize("make_folder", [True, False], ids=["an existing folder", "a path ending in a slash"])
def test_an_agent_given_a_folder_keeps_one_journal_per_session_in_it(tmp_path: Path, make_folder: bool) -> None:
    folder = tmp_path / "runs"
    if make_folder:
        folder.mkdir()
    where = folder if make_folder else f"{folder}/"
    sessions = []
    for prompt in ("one", "two"):
        agent = Agent(ScriptedModel(["Done."]), journal=where)
        agent.run_sync(prompt)
        agent.close()
        sessions.append(agent.session_id)

    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{s}.jsonl" for s in sessions)
    assert [read_events(folder / f"{s}.jsonl")[0].data["prompt"] for s in sessions] == ["one", "two"]


def test_a_new_session_and_a_fork_of_an_agent_given_a_folder_land_in_that_folder(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(["One.", "Two.", "Forked."]), journal=f"{tmp_path}/runs/")
    agent.run_sync("one")
    first = agent.session_id
    agent.reset()  # a new session: the same folder, not the default one
    agent.run_sync("two")
    fork = agent.fork(at=0, journal=f"{tmp_path}/forks/")
    fork.continue_run_sync()
    agent.close()
    fork.close()

    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == sorted([f"{first}.jsonl", f"{agent.session_id}.jsonl"])
    assert [p.name for p in (tmp_path / "forks").iterdir()] == [f"{fork.session_id}.jsonl"]


def test_an_empty_journal_path_is_refused_with_the_choices(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"journal='' names no file.*journal='runs/'.*journal=None"):
        Agent(ScriptedModel(["Done."]), journal="", working_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing was written in the working folder


def test_an_unknown_session_names_the_ones_that_exist(tmp_path: Path) -> None:
    Journal.for_session("s_alpha", tmp_path).close()
    with pytest.raises(JournalError, match="Did you mean 's_alpha'") as missing:
        resolve_journal_path("s_alph", tmp_path)
    assert "Sessions there: s_alpha" in str(missing.value)
    with pytest.raises(JournalError, match="no journal at"):
        resolve_journal_path(tmp_path / "nowhere.jsonl")


@pytest.mark.parametrize("bad", ["../escape", "a/b", ".hidden", ""])
def test_a_session_id_that_cannot_be_a_file_name_is_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(JournalError, match="cannot name a journal file"):
        session_path(bad, tmp_path)


def test_the_journal_package_exports_what_all_lists_and_loads_pandas_lazily() -> None:
    import subprocess
    import sys

    import agent_kernel.journal as package

    assert package.__all__ == sorted(package.__all__)
    assert all(getattr(package, name) is not None for name in package.__all__)
    assert set(package.__all__) <= set(dir(package))
    code = "import sys, agent_kernel.journal; print('pandas' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
