"""Storage faults: a full disk, a deleted folder, a read-only journal. The journal keeps every event
before the fault, never holds a fragment, and the run ends with an ``error`` of kind ``journal``
instead of an exception; once the disk takes writes again the same agent goes on.

The faults are real: a 4 MB tmpfs filled up (ENOSPC), a read-only bind mount (EROFS; chmod
would not stop root), the journal's folder removed. Mounting needs root (or CAP_SYS_ADMIN).
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_kernel import Agent, tool
from agent_kernel.errors import JournalWriteError
from agent_kernel.events import AgentEvent, EventType
from agent_kernel.journal import Journal, JournalLostWarning, read_events
from tests.fakes.turns import turn


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mounting needs root or CAP_SYS_ADMIN here: {done.stderr.strip()}")


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs: a real file system that runs out of space."""
    disk = tmp_path / "disk"
    disk.mkdir()
    _mount("-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(disk))
    try:
        yield disk
    finally:
        _umount(disk)


def _fill(disk: Path) -> Path:
    """Fills ``disk`` to the last byte with one file; deleting it gives the space back."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        chunk = b"x" * 4096
        while True:
            try:
                f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        for size in (512, 64, 1):  # the last partial page too
            while True:
                try:
                    f.write(b"x" * size)
                except OSError:
                    break
    return filler


def _seqs(events: list[AgentEvent]) -> list[int]:
    return [e.seq for e in events]


def test_a_full_disk_ends_the_run_with_a_journal_error_and_the_same_agent_goes_on_once_space_returns(small_disk: Path, fake_provider) -> None:
    filled: list[Path] = []

    @tool(read_only=True)  # runs without asking: the test is about the disk
    def archive(name: str) -> str:
        """Archives the named report."""
        filled.append(_fill(small_disk))  # the disk fills up while the run is under way
        return f"archived {name}: " + "ok " * 4000  # 12 KB: more than the slack of the journal's last page

    fake_provider.script(
        turn("First answer."),
        turn(calls=[("toolu_1", "archive", {"name": "q3"})]),
        turn("Third answer."),
    )
    agent = Agent(fake_provider.claude(), tools=[archive], working_dir=small_disk)
    path = agent.journal.path
    first = agent.run_sync("one")
    assert first.termination_reason == "end_turn"

    second = agent.run_sync("archive q3")  # no exception: the run reports the fault and ends
    errors = [e for e in second.events if e.type is EventType.ERROR]
    assert len(errors) == 1, [(e.type.value, e.data) for e in second.events if e.type is not EventType.TEXT_DELTA]
    message = errors[0].data["message"]
    assert errors[0].data["kind"] == "journal"
    assert str(path) in message and "ENOSPC" in message and "free space" in message
    assert second.events[-1].type is EventType.RUN_FINISH and second.events[-1].data["reason"] == "error"
    assert [e.type for e in second.events].count(EventType.TOOL_RESULT) == 1  # shown, though not yet on disk
    assert len(fake_provider.requests) == 2  # the model is not asked again while nothing can be kept
    # The file holds whole lines only: everything before the fault, nothing torn.
    on_disk = read_events(path)
    assert _seqs(on_disk) == list(range(1, len(on_disk) + 1))
    assert len(first.events) < len(on_disk) < len(first.events) + len(second.events)

    filled[0].unlink()  # space returns
    third = agent.run_sync("three")
    assert third.termination_reason == "end_turn", third.error
    assert third.text == "Third answer."
    agent.close()

    recorded = read_events(path)
    assert _seqs(recorded) == list(range(1, len(recorded) + 1))  # nothing lost, nothing twice
    assert _seqs(recorded) == _seqs([*first.events, *second.events, *third.events])
    resumed = Agent.resume(path, model=fake_provider.claude(), tools=[archive])
    try:
        assert [m.to_dict() for m in resumed.messages] == [m.to_dict() for m in agent.messages]
        assert "archived q3" in str(resumed.messages[4].to_dict())  # the tool's result, written once space returned
    finally:
        resumed.close()


def test_a_run_that_starts_on_a_full_disk_ends_at_once_and_its_prompt_is_answered_once_space_returns(small_disk: Path, fake_provider) -> None:
    fake_provider.script(turn("First."), turn("Answered."))
    agent = Agent(fake_provider.claude(), working_dir=small_disk)
    agent.run_sync("one")
    filler = _fill(small_disk)
    prompt = "Summarise this. " + "words " * 3000  # 18 KB: run_start cannot fit in the last page's slack
    failed = agent.run_sync(prompt)
    assert [e.type for e in failed.events] == [EventType.RUN_START, EventType.ERROR, EventType.RUN_FINISH]
    assert failed.events[1].data["kind"] == "journal" and "ENOSPC" in failed.events[1].data["message"]
    assert len(fake_provider.requests) == 1  # the model was not asked
    filler.unlink()
    assert agent.run_sync("again").text == "Answered."
    agent.close()
    recorded = read_events(agent.journal.path)
    assert _seqs(recorded) == list(range(1, len(recorded) + 1))
    assert prompt in str(fake_provider.bodies[-1]["messages"])  # the prompt stayed in the conversation, as the journal keeps it
    resumed = Agent.resume(agent.journal.path, model=fake_provider.claude())
    assert [m.to_dict() for m in resumed.messages] == [m.to_dict() for m in agent.messages]
    resumed.close()


async def test_the_flush_timer_keeps_deltas_queued_on_a_full_disk_and_never_calls_the_loop_handler(small_disk: Path) -> None:
    handled: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: handled.append(context))
    journal = Journal(small_disk / "s.jsonl", session_id="s", flush_interval=0.0)
    journal.write(AgentEvent(1, 1.0, "s", "r", None, None, 0, EventType.RUN_START, {"prompt": "hi"}))
    filler = _fill(small_disk)
    deltas = [AgentEvent(seq, 1.0, "s", "r", None, None, 0, EventType.TEXT_DELTA, {"text": "y" * 8000}) for seq in range(2, 6)]
    for delta in deltas:
        journal._flushed_at = float("inf")  # keep them for the timer (the clock only decides when)
        journal.write(delta)
    while journal.fault is None:  # the timer fires on the next pass of the loop
        await asyncio.sleep(0)
    assert handled == []
    with pytest.raises(JournalWriteError, match="ENOSPC"):
        journal.flush()
    filler.unlink()
    journal.flush()
    journal.close()
    assert _seqs(read_events(small_disk / "s.jsonl")) == [1, 2, 3, 4, 5]


def test_a_journal_whose_folder_is_deleted_mid_session_ends_the_run_with_an_error_and_a_second_writer_cannot_interleave(tmp_path: Path, fake_provider) -> None:
    fake_provider.script(turn("First."), turn("Second."), turn("Other agent."), turn("Third."))
    agent = Agent(fake_provider.claude(), working_dir=tmp_path)
    path = agent.journal.path
    agent.run_sync("one")
    shutil.rmtree(path.parent)

    second = agent.run_sync("two")
    errors = [e for e in second.events if e.type is EventType.ERROR]
    assert [e.data["kind"] for e in errors] == ["journal"]
    assert "deleted or replaced" in errors[0].data["message"] and str(path) in errors[0].data["message"]
    assert second.events[-1].data["reason"] == "error"

    # Another agent of the same session now owns the path; the first one never writes into it.
    other = Agent(fake_provider.claude(), working_dir=tmp_path, session_id=agent.session_id)
    other.run_sync("hello")
    third = agent.run_sync("three")
    assert third.events[-1].data["reason"] == "error"
    other.close()
    recorded = read_events(path)
    assert {e.run_id for e in recorded} == {e.run_id for e in other.events}
    with pytest.warns(JournalLostWarning, match="could not write"):
        agent.close()


def test_a_journal_on_read_only_storage_ends_the_run_with_an_error_naming_the_file(tmp_path: Path, fake_provider) -> None:
    fake_provider.script(turn("Written."))
    writable, read_only = tmp_path / "rw", tmp_path / "ro"
    writable.mkdir()
    read_only.mkdir()
    first = Agent(fake_provider.claude(), working_dir=writable)
    first.run_sync("one")
    first.close()
    _mount("--bind", str(writable), str(read_only))
    try:
        _mount("-o", "remount,bind,ro", str(read_only))  # chmod would not stop root; a read-only mount does
        # A new session there: the run starts, says why nothing can be kept, and ends.
        agent = Agent(fake_provider.claude(), working_dir=read_only)
        result = agent.run_sync("two")
        errors = [e for e in result.events if e.type is EventType.ERROR]
        assert [e.data["kind"] for e in errors] == ["journal"]
        message = errors[0].data["message"]
        assert str(read_only / ".agent_kernel" / "sessions") in message and "EROFS" in message and "writable" in message
        assert result.events[-1].type is EventType.RUN_FINISH and result.events[-1].data["reason"] == "error"
        assert len(fake_provider.requests) == 1  # the model was not asked: nothing of the run could be kept
        agent.close()
        # Resuming a session kept there is refused up front, saying why and what to do.
        path = read_only / first.journal.path.relative_to(writable)
        with pytest.raises(JournalWriteError, match="EROFS.*writable"):
            Agent.resume(path, model=fake_provider.claude())
    finally:
        _umount(read_only)
    assert _seqs(read_events(first.journal.path)) == _seqs(list(first.events))


def test_a_journal_write_cut_short_leaves_no_fragment(small_disk: Path) -> None:
    journal = Journal(small_disk / "s.jsonl", session_id="s")
    journal.write(AgentEvent(1, 1.0, "s", "r", None, None, 0, EventType.RUN_START, {"prompt": "hi"}))
    size = os.path.getsize(journal.path)
    filler = _fill(small_disk)
    big = AgentEvent(2, 1.0, "s", "r", None, None, 0, EventType.TOOL_RESULT, {"content": "z" * 20000})
    with pytest.raises(JournalWriteError) as raised:
        journal.write(big)
    assert raised.value.event is big and raised.value.cause is not None and raised.value.cause.errno == errno.ENOSPC
    assert os.path.getsize(journal.path) == size  # cut back to the last whole line
    journal.write(AgentEvent(3, 1.0, "s", "r", None, None, 0, EventType.TOOL_RESULT, {"content": "w" * 20000}))  # queued quietly
    filler.unlink()
    journal.close()
    assert _seqs(read_events(journal.path)) == [1, 2, 3]


# -- what an agent holds is released: dropped without close(), or closed -----------------------

_DROPPED_AGENTS = r"""
import gc, json, resource, sys, warnings
from pathlib import Path

resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
from agent_kernel import Agent
from agent_kernel.models.anthropic import AnthropicModel

url, folder = sys.argv[1], Path(sys.argv[2])
model = lambda: AnthropicModel("claude-sonnet-4-6", base_url=url, api_key="sk-ant-test")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for i in range(300):
        agent = Agent(model(), working_dir=folder, session_id=f"s_{i}")
        agent.cycle = agent  # freed only by the cycle collector, as a notebook's agents are
        assert agent.run_sync("hi").text == "Hello.", i
        del agent
    # The last session again, at once, in the same process: its writer was dropped, not closed.
    again = Agent.resume(folder / ".agent_kernel" / "sessions" / "s_299.jsonl", model=model())
    assert again.run_sync("again").text == "Hello."
    again.close()
    gc.collect()
unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
print(json.dumps({"journals": sum(m.startswith("unclosed journal") for m in unclosed), "other": [m for m in unclosed if not m.startswith("unclosed journal")]}))
"""


def test_300_agents_dropped_without_close_release_their_journals_under_a_low_descriptor_limit(tmp_path: Path, fake_provider) -> None:
    import json
    import sys

    fake_provider.script(*[turn("Hello.")] * 301)
    done = subprocess.run(
        [sys.executable, "-c", _DROPPED_AGENTS, fake_provider.url, str(tmp_path)],
        capture_output=True, text=True, timeout=240, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["journals"] == 300  # each dropped journal said so, as an unclosed file does
    assert report["other"] == []  # no socket or file of the model left unclosed
    sessions = tmp_path / ".agent_kernel" / "sessions"
    assert len(read_events(sessions / "s_299.jsonl")) > len(read_events(sessions / "s_1.jsonl"))  # reopened and continued


async def test_close_closes_the_models_pooled_connections(fake_provider) -> None:
    import weakref

    fake_provider.script(turn("Hello."), turn("Again."))
    agent = Agent(fake_provider.claude(), journal=None)
    assert (await agent.run("hi")).text == "Hello."
    client = weakref.ref(agent.model.client)  # the running loop's SDK client, its connection pooled
    await agent.aclose()
    assert client() is None or client().is_closed()  # type: ignore[union-attr]
    assert (await agent.run("again")).text == "Again."  # a new client opens new connections
    client = weakref.ref(agent.model.client)
    agent.close()  # from a running loop: the close is scheduled on it
    while (c := client()) is not None and not c.is_closed():
        await asyncio.sleep(0)
