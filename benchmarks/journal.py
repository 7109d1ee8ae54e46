"""Journal benchmark: append throughput, and events_df on four kinds of 1,000,000-event journal.

Run:  .venv/bin/python benchmarks/journal.py            (1,000,000 events each; the first run
                                                          writes the journals, later runs reuse them)
      .venv/bin/python benchmarks/journal.py --events 200000 --runs 1 --skip-baseline
      .venv/bin/python benchmarks/journal.py --journals tool-heavy,crew

Goals (issue 6): appending with buffering at least 200,000 events/s; building ``events_df`` from a
1,000,000-event journal in at most 3 s and at most 3x the file size in peak memory, on every kind
of journal the project writes. Two baselines run on the same file in the same run: ``json.loads``
over every line (the floor of any reader that parses each record, with the garbage collector
paused as events_df pauses it) and the naive pandas way, ``pandas.read_json(path, lines=True)``
then ``json_normalize`` of the ``data`` column.

The journals, written with the project's own ``Journal`` and ``AgentEvent`` (seeded, and cached
under ``~/.cache/agent_kernel/bench``, so reruns are fast and read the same bytes):

* text-heavy: turns of 100 to 400 streamed text deltas, one to three tool calls, an approval now
  and then, a compaction every 200 turns, each turn's full assistant message in ``llm_complete``;
* tool-heavy: a few text deltas a turn, two to four tool calls with ~1 KB results,
  ``context_assembled`` with its components, the message in ``llm_complete``, the results again in
  ``recursion``;
* crew: the tool-heavy turns of sub-agents (``agent_id`` set, ``subagent_start`` /
  ``subagent_finish``) interleaved as parallel members' events are, under a lead agent;
* tool-heavy re-serialised: the tool-heavy file as another tool writes it back (``json.dumps``
  defaults: spaces after separators; ``data`` and ``type`` first). The fast reader cannot apply;
  events_df warns why, and the table's notes print that warning.

Appending is timed over ``Journal.write`` and ``flush`` only (the events are built beforehand).
Each reader runs in a fresh interpreter; wall and CPU seconds are printed (CPU time counts every
thread, so it is the steadier figure on a busy machine); peak memory is the rise of the process's
peak resident set size over what it held after its imports. Figures print with their ratio to the
goal; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_kernel.events import AgentEvent, EventType  # noqa: E402
from agent_kernel.journal import Journal  # noqa: E402

APPEND_GOAL = 200_000  # events per second
TIME_GOAL = 3.0  # seconds for events_df on 1,000,000 events
MEMORY_GOAL = 3.0  # peak memory as a multiple of the file size

WORDS = "the a of to read file line value test error fix function returns because when which this that".split()


def session(count: int, seed: int = 7) -> Iterator[AgentEvent]:
    """``count`` events of a plausible long session (see the module docstring)."""
    rnd = random.Random(seed)
    sid, run = "s_bench0000001", "r_bench0000001"
    seq, ts = 0, 1_700_000_000.0
    turn, parent, it = "t_000000000000", None, 0

    def event(kind: EventType, data: dict) -> AgentEvent:
        nonlocal seq, ts
        seq += 1
        ts += rnd.random() * 0.02
        return AgentEvent(seq, ts, sid, run, turn, parent, it, kind, data)

    def state() -> dict:
        return {"turn_counter": it, "turn_id": turn, "max_iterations": 10_000, "compacted": False, "parent_turn_id": parent, "metadata": {}}

    yield event(EventType.RUN_START, {
        "prompt": "Find and fix the failing test.", "model": "claude-sonnet-4-5", "provider": "anthropic", "system": "You are careful.",
        "tools": ["read_file", "grep", "bash"], "max_iterations": 10_000, "turn_state": state(), "agent_name": None
    })
    while seq < count - 1:
        yield event(EventType.ITERATION_START, {"turn_state": state()})
        if it and it % 200 == 0:
            yield event(EventType.COMPACTION_START, {"tokens_before": 150_000, "messages": 2 * it, "threshold": 140_000, "trigger": "auto", "focus": None})
            yield event(EventType.COMPACTION_COMPLETE, {
                "tokens_before": 150_000, "tokens_after": 20_000, "messages_removed": 2 * it - 4, "kept_messages": 4,
                "summary": "## Progress\nTests read.", "fallback": False, "usage": None
            })
        yield event(EventType.CONTEXT_ASSEMBLED, {"window": 200_000, "threshold": 160_000, "messages": 2 * it + 1, "messages_hidden": 0})
        yield event(EventType.LLM_START, {"model": "claude-sonnet-4-5", "provider": "anthropic", "attempt": 0, "messages": 2 * it + 1, "tools_enabled": True})
        words = []
        for _ in range(rnd.randint(100, 400)):
            piece = rnd.choice(WORDS) + (" " if rnd.random() < 0.9 else ".\n")
            words.append(piece)
            yield event(EventType.TEXT_DELTA, {"text": piece})
        uses = []
        for index in range(1, rnd.randint(2, 4)):
            call_id = f"toolu_{it:06d}_{index}"
            name = rnd.choice(["read_file", "grep", "bash"])
            arguments = {"path": f"src/{rnd.choice(WORDS)}.py", "limit": rnd.randint(10, 400)}
            yield event(EventType.TOOL_CALL_START, {"call_id": call_id, "name": name, "index": index})
            yield event(EventType.TOOL_CALL_DELTA, {"call_id": call_id, "index": index, "delta": json.dumps(arguments)})
            yield event(EventType.TOOL_CALL_READY, {"call_id": call_id, "name": name, "arguments": arguments, "index": index})
            uses.append((call_id, name, arguments))
        message = {"role": "assistant", "content": [{"type": "text", "text": "".join(words)}] + [{"type": "tool_use", "id": c, "name": n, "input": a} for c, n, a in uses]}
        usage = {"input_tokens": 2_000 + 50 * it, "output_tokens": len(words), "cache_read_tokens": 1_500, "cache_write_tokens": 0}
        yield event(EventType.LLM_COMPLETE, {"message": message, "usage": usage, "cost_usd": 0.004, "model": "claude-sonnet-4-5", "stop_reason": "tool_use", "duration_s": 3.2, "attempts": 1})
        results = []
        for call_id, name, arguments in uses:
            if name == "bash" and rnd.random() < 0.3:
                yield event(EventType.APPROVAL_REQUIRED, {"call_id": call_id, "tool": name, "arguments": arguments, "reason": "bash asks before it runs"})
                yield event(EventType.APPROVAL_DECISION, {"call_id": call_id, "tool": name, "decision": "approve", "decided_by": "person", "wait_s": 2.5})
            started = ts
            yield event(EventType.TOOL_START, {"call_id": call_id, "name": name, "arguments": arguments, "started_at": started})
            content = "\n".join(f"{i}: {rnd.choice(WORDS)} = {rnd.randint(0, 999)}" for i in range(rnd.randint(1, 30)))
            yield event(EventType.TOOL_RESULT, {"call_id": call_id, "name": name, "content": content, "is_error": False, "duration_s": ts - started, "started_at": started, "ended_at": ts})
            results.append({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": False})
        following = f"t_{it + 1:012d}"
        yield event(EventType.RECURSION, {"tool_results": results, "next_turn_id": following})
        parent, turn, it = turn, following, it + 1
    yield event(EventType.RUN_FINISH, {"reason": "end_turn", "text": "Fixed.", "stats": {"turns": it}})


def tool_session(count: int, seed: int = 11) -> Iterator[AgentEvent]:
    """``count`` events of a tool-heavy session: few text deltas, two to four tool calls a turn with
    ~1 KB results, ``context_assembled`` with its components, each turn's message in ``llm_complete``."""
    return _agent_session(count, seed, crew=False)


def crew_session(count: int, seed: int = 13) -> Iterator[AgentEvent]:
    """``count`` events of a crew: each top-level turn hands two or three tasks to sub-agents
    (``subagent_start`` / ``subagent_finish``, ``agent_id`` set on their events), whose short
    tool-using runs interleave as parallel agents' events do."""
    return _agent_session(count, seed, crew=True)


def _agent_session(count: int, seed: int, *, crew: bool) -> Iterator[AgentEvent]:
    rnd = random.Random(seed)
    sid = "s_bench0000002"
    clock = {"seq": 0, "ts": 1_700_000_000.0}

    def event(ids: tuple, kind: EventType, data: dict) -> AgentEvent:
        clock["seq"] += 1
        clock["ts"] += rnd.random() * 0.02
        run, turn, parent, it, agent = ids
        return AgentEvent(clock["seq"], clock["ts"], sid, run, turn, parent, it, kind, data, agent)

    def result_text() -> str:
        lines = [f"{i:4d}  {' '.join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 12)))}" for i in range(rnd.randint(14, 26))]
        return "\n".join(lines)  # about 1 KB, with the newlines a file listing has

    def turn(ids: tuple, deltas: int) -> Iterator[AgentEvent]:
        """One turn of an agent: context, a short streamed answer, tool calls and their results."""
        run, turn_id, parent, it, agent = ids
        yield event(ids, EventType.ITERATION_START, {"turn_state": {"turn_counter": it, "turn_id": turn_id, "max_iterations": 50, "compacted": False, "parent_turn_id": parent, "metadata": {}}})
        components = [{"name": name, "tokens": rnd.randint(100, 9_000), "priority": p, "truncated": False} for p, name in enumerate(("system", "tools", "memory", "history"))]
        yield event(ids, EventType.CONTEXT_ASSEMBLED, {
            "total_tokens": 12_000 + 900 * it, "budget": 180_000, "threshold": 160_000, "window": 200_000, "messages": 2 * it + 1,
            "messages_hidden": 0, "components": components
        })
        yield event(ids, EventType.LLM_START, {"model": "claude-sonnet-4-5", "provider": "anthropic", "attempt": 0, "messages": 2 * it + 1, "tools_enabled": True})
        words = []
        for _ in range(deltas):
            piece = rnd.choice(WORDS) + " "
            words.append(piece)
            yield event(ids, EventType.TEXT_DELTA, {"text": piece})
        uses = []
        for index in range(rnd.randint(2, 4)):
            call_id = f"toolu_{clock['seq']:08d}_{index}"
            name = rnd.choice(["read_file", "grep", "bash", "list_dir"])
            arguments = {"path": f"src/{rnd.choice(WORDS)}/{rnd.choice(WORDS)}.py", "pattern": rnd.choice(WORDS), "limit": rnd.randint(10, 400)}
            text = json.dumps(arguments)
            yield event(ids, EventType.TOOL_CALL_START, {"call_id": call_id, "name": name, "index": index})
            for part in (text[: len(text) // 2], text[len(text) // 2 :]):
                yield event(ids, EventType.TOOL_CALL_DELTA, {"call_id": call_id, "index": index, "delta": part})
            yield event(ids, EventType.TOOL_CALL_READY, {"call_id": call_id, "name": name, "arguments": arguments, "index": index})
            uses.append((call_id, name, arguments))
        message = {"role": "assistant", "content": [{"type": "text", "text": "".join(words)}] + [{"type": "tool_use", "id": c, "name": n, "input": a} for c, n, a in uses]}
        usage = {"input_tokens": 12_000 + 900 * it, "output_tokens": 40 + deltas, "cache_read_tokens": 10_000, "cache_write_tokens": 900}
        yield event(ids, EventType.LLM_COMPLETE, {"model": "claude-sonnet-4-5", "message": message, "stop_reason": "tool_use", "usage": usage, "cost_usd": 0.011, "duration_s": 2.7, "attempts": 1})
        results = []
        for call_id, name, arguments in uses:
            started = clock["ts"]
            yield event(ids, EventType.TOOL_START, {"call_id": call_id, "name": name, "arguments": arguments, "started_at": started})
            content = result_text()
            yield event(ids, EventType.TOOL_RESULT, {
                "call_id": call_id, "name": name, "content": content, "is_error": False, "started_at": started, "ended_at": clock["ts"],
                "duration_s": clock["ts"] - started
            })
            results.append({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": False})
        yield event(ids, EventType.RECURSION, {"tool_results": results, "next_turn_id": f"{turn_id}n"})

    top = ("r_bench0000002", "t_000000000000", None, 0, None)
    yield event(top, EventType.RUN_START, {
        "prompt": "Review the repository.", "model": "claude-sonnet-4-5", "provider": "anthropic", "system": "You are careful.",
        "tools": ["read_file", "grep", "bash", "list_dir", "task"], "max_iterations": 10_000, "agent_name": None
    })
    it, members = 0, 0
    while clock["seq"] < count - 1:
        ids = ("r_bench0000002", f"t_{it:012d}", f"t_{it - 1:012d}" if it else None, it, None)
        if not crew:
            yield from turn(ids, rnd.randint(5, 20))
        else:
            # The lead plans, then hands tasks to two or three members whose turns interleave.
            runs = []
            for _ in range(rnd.randint(2, 3)):
                members += 1
                agent = f"a_member{members:06d}"
                runs.append((agent, [turn((f"r_{agent}", f"t_{agent}_{k}", ids[1] if k == 0 else f"t_{agent}_{k - 1}", k, agent), rnd.randint(3, 10)) for k in range(rnd.randint(1, 3))]))
                yield event(ids, EventType.SUBAGENT_START, {
                    "agent_id": agent, "name": f"member {members % 5}", "model": "claude-haiku-4-5", "prompt": "Check one module.",
                    "parent_agent_id": None, "parent_call_id": f"toolu_task_{members}", "parent_turn_id": ids[1], "task": rnd.choice(WORDS)
                })
            streams = [(agent, iter([e for t in turns for e in t])) for agent, turns in runs]
            while streams:
                agent, stream = streams[rnd.randrange(len(streams))]
                batch = [e for _, e in zip(range(rnd.randint(1, 8)), stream)]
                yield from batch
                if not batch:
                    streams = [s for s in streams if s[0] != agent]
                    usage = {"input_tokens": 30_000, "output_tokens": 800, "cache_read_tokens": 20_000, "cache_write_tokens": 0}
                    yield event(ids, EventType.SUBAGENT_FINISH, {
                        "agent_id": agent, "name": "member", "reason": "end_turn", "text": "Done: " + " ".join(rnd.choice(WORDS) for _ in range(30)),
                        "error": None, "turns": 2, "tool_calls": 5, "usage": usage, "cost_usd": 0.02, "duration_s": 9.5, "parent_agent_id": None,
                        "parent_call_id": "toolu_task", "parent_turn_id": ids[1]
                    })
            yield from turn(ids, rnd.randint(5, 20))
        it += 1
    yield event(top, EventType.RUN_FINISH, {"reason": "end_turn", "text": "Reviewed.", "stats": {"turns": it}})


def write_journal(path: Path, events: Iterator[AgentEvent], count: int) -> tuple[int, float, float]:
    """Writes the first ``count`` of ``events``; returns the events written and the wall and CPU
    seconds spent in ``write`` and ``flush``."""
    spent, cpu, written = 0.0, 0.0, 0
    with Journal(path, session_id=path.stem) as journal:
        while written < count:
            batch = [e for _, e in zip(range(min(50_000, count - written)), events)]
            if not batch:
                break
            started, cpu_started = time.perf_counter(), time.process_time()
            for e in batch:
                journal.write(e)
            journal.flush()
            spent += time.perf_counter() - started
            cpu += time.process_time() - cpu_started
            written += len(batch)
    return written, spent, cpu


def reserialise(source: Path, target: Path) -> None:
    """``source`` as another tool writes it back: ``json.dumps`` defaults (spaces after separators,
    non-ASCII kept as \\u escapes) and the keys of each event in another order (``data`` first)."""
    with open(source, "rb") as f, open(target, "w") as out:
        for line in f:
            record = json.loads(line)
            if "seq" in record:
                record = {"data": record.pop("data"), "type": record.pop("type"), **record}
            out.write(json.dumps(record) + "\n")


CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "agent_kernel" / "bench"
JOURNALS = {
    "text-heavy": session,
    "tool-heavy": tool_session,
    "crew": crew_session,
    "tool-heavy re-serialised": None,  # made from tool-heavy
}


def journal_file(name: str, count: int) -> Path:
    """The benchmark journal ``name`` of ``count`` events, written once and cached (the generator
    is seeded, so a cached file is the file a rerun would write)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{name.replace(' ', '-')}-{count}-v1.jsonl"
    if path.exists():
        return path
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    make = JOURNALS[name]
    if make is None:
        reserialise(journal_file("tool-heavy", count), partial)
    else:
        write_journal(partial, make(count), count)
    partial.rename(path)
    return path


READER = r"""
import json, sys, time, warnings
import pandas as pd
from agent_kernel.journal.frames import events_df

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

path, which = sys.argv[1], sys.argv[2]
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets the peak to the current size: imports do not count
base = status("VmRSS")
started, cpu = time.perf_counter(), time.process_time()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    if which == "events_df":
        df = events_df(path)
        rows, columns = len(df), len(df.columns)
    elif which == "json.loads":  # the floor of any reader that parses every line
        import gc
        gc.disable()  # as events_df does while it reads: collections would only slow the floor down
        with open(path, "rb") as f:
            records = [json.loads(line) for line in f]
        rows, columns = len(records) - 1, 0
    else:  # the naive pandas way
        raw = pd.read_json(path, lines=True)
        data = pd.json_normalize(raw["data"].tolist())
        df = pd.concat([raw.drop(columns=["data"]), data], axis=1)
        rows, columns = int(raw["seq"].notna().sum()), len(df.columns)  # the header line is a row of NaN here
wall, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"seconds": wall, "cpu": cpu, "peak": status("VmHWM") - base, "rows": rows, "columns": columns,
                  "warnings": [str(w.message) for w in caught]}))
"""


def measure(path: Path, which: str) -> dict:
    """Runs one reader in a fresh interpreter; returns its seconds, cpu, peak bytes, rows, columns, warnings."""
    done = subprocess.run([sys.executable, "-c", READER, str(path), which], capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        sys.exit(f"{which} on {path} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3, help="events_df runs per journal (the median is reported)")
    parser.add_argument("--journals", default=",".join(JOURNALS), help=f"comma-separated, of: {', '.join(JOURNALS)}")
    parser.add_argument("--skip-baseline", action="store_true", help="skip the slow naive pandas baseline")
    args = parser.parse_args()
    if not Path("/proc/self/clear_refs").exists():
        sys.exit("this benchmark reads peak memory from /proc (Linux only)")
    names = [name.strip() for name in args.journals.split(",")]
    scale = args.events / 1_000_000  # the time goal is for 1,000,000 events
    print(f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f} at the start (wall times need a quiet machine); journals cached in {CACHE}")

    with tempfile.TemporaryDirectory() as folder:
        count = min(args.events, 300_000)
        written, spent, cpu = write_journal(Path(folder) / "append.jsonl", session(count), count)
    rate = written / spent
    print(
        f"append: {rate:,.0f} events/s ({written:,} text-heavy events in {spent:.2f} s; {written / cpu:,.0f} events per CPU second)"
        f"    goal >= {APPEND_GOAL:,}: {rate / APPEND_GOAL:.2f}x the goal\n"
    )

    header = f"{'journal':<26}{'MB':>6}  {'reader':<16}{'wall s':>8}{'cpu s':>8}{'peak/file':>10}  {'time/goal':>9}{'mem/goal':>9}"
    print(header)
    print("-" * len(header))
    notes = []
    for name in names:
        path = journal_file(name, args.events)
        size = path.stat().st_size
        runs = [measure(path, "events_df") for _ in range(args.runs)]
        for run in runs:
            assert run["rows"] == args.events, f"events_df read {run['rows']} rows of {name}, expected {args.events}"
        readers = [("events_df", {k: statistics.median(r[k] for r in runs) for k in ("seconds", "cpu", "peak")}), ("json.loads", measure(path, "json.loads"))]
        if not args.skip_baseline:
            readers.append(("naive pandas", measure(path, "naive")))
        for reader, m in readers:
            goals = f"{m['seconds'] / (TIME_GOAL * scale):>9.2f}{m['peak'] / size / MEMORY_GOAL:>9.2f}" if reader == "events_df" else ""
            label = name if reader == "events_df" else ""
            mb = f"{size / 1e6:>6.0f}" if reader == "events_df" else " " * 6
            print(f"{label:<26}{mb}  {reader:<16}{m['seconds']:>8.2f}{m['cpu']:>8.2f}{m['peak'] / size:>10.2f}  {goals}")
        each = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        print(f"{'':<34}(events_df wall of {len(runs)} runs: {each}; {runs[0]['columns']} columns)")
        for message in runs[0]["warnings"]:
            notes.append(f"{name}: events_df warned: {message}")
    print(f"\ngoals: events_df <= {TIME_GOAL * scale:.2f} s and <= {MEMORY_GOAL:.0f}x the file in peak memory; time/goal and mem/goal <= 1.00 meet them")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
