"""Journal benchmark: append throughput, and events_df on a 1,000,000-event journal vs the naive way.

Run:  .venv/bin/python benchmarks/journal.py            (1,000,000 events; about two minutes,
                                                          most of it the naive baseline)
      .venv/bin/python benchmarks/journal.py --events 200000 --runs 1

Goals (issue 6): appending with buffering at least 200,000 events/s; building ``events_df`` from a
1,000,000-event journal in at most 3 s and at most 3x the file size in peak memory. The baseline,
measured in the same run, is ``pandas.read_json(path, lines=True)`` then ``json_normalize`` of the
``data`` column.

The journal is a realistic session: turns of 100 to 400 streamed text deltas, one to three tool
calls (start, argument delta, ready, tool start, result), an approval now and then, a compaction
every 200 turns, each turn's full assistant message in ``llm_complete``. Appending is timed over
``Journal.write`` and ``flush`` only (the events are built beforehand). Each reader runs in a fresh
interpreter; its peak memory is the rise of the process's peak resident set size over what it held
after its imports. Figures print with their ratio to the goal; nothing here asserts a time.
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

    yield event(EventType.RUN_START, {"prompt": "Find and fix the failing test.", "model": "claude-sonnet-4-5", "provider": "anthropic", "system": "You are careful.", "tools": ["read_file", "grep", "bash"], "max_iterations": 10_000, "turn_state": state(), "agent_name": None})
    while seq < count - 1:
        yield event(EventType.ITERATION_START, {"turn_state": state()})
        if it and it % 200 == 0:
            yield event(EventType.COMPACTION_START, {"tokens_before": 150_000, "messages": 2 * it, "threshold": 140_000, "trigger": "auto", "focus": None})
            yield event(EventType.COMPACTION_COMPLETE, {"tokens_before": 150_000, "tokens_after": 20_000, "messages_removed": 2 * it - 4, "kept_messages": 4, "summary": "## Progress\nTests read.", "fallback": False, "usage": None})
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


def write_journal(path: Path, count: int) -> tuple[int, float, float]:
    """Writes the session; returns the events written and the wall and CPU seconds spent in
    ``write`` and ``flush``."""
    spent, cpu, written = 0.0, 0.0, 0
    events = session(count)
    with Journal(path, session_id="s_bench0000001") as journal:
        while True:
            batch = [e for _, e in zip(range(50_000), events)]
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


READER = r"""
import json, resource, sys, time
import pandas as pd
from agent_kernel.journal.frames import events_df

def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))

def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))

path, which = sys.argv[1], sys.argv[2]
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets the peak to the current size: imports do not count
base = rss()
started, cpu = time.perf_counter(), time.process_time()
if which == "events_df":
    df = events_df(path)
    rows = len(df)
else:  # the naive baseline
    raw = pd.read_json(path, lines=True)
    data = pd.json_normalize(raw["data"].tolist())
    df = pd.concat([raw.drop(columns=["data"]), data], axis=1)
    rows = int(raw["seq"].notna().sum())  # the header line is a row of NaN here
wall, cpu = time.perf_counter() - started, time.process_time() - cpu
print(json.dumps({"seconds": wall, "cpu": cpu, "peak": peak() - base, "rows": rows, "columns": len(df.columns)}))
"""


def measure(path: Path, which: str) -> dict:
    """Runs one reader in a fresh interpreter; returns its seconds, cpu, peak bytes, rows, columns."""
    done = subprocess.run(
        [sys.executable, "-c", READER, str(path), which], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3, help="events_df runs (the median is reported)")
    parser.add_argument("--skip-baseline", action="store_true", help="skip the slow naive baseline")
    args = parser.parse_args()
    if not Path("/proc/self/clear_refs").exists():
        sys.exit("this benchmark reads peak memory from /proc (Linux only)")

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "session.jsonl"
        load = os.getloadavg()[0]
        written, spent, cpu = write_journal(path, args.events)
        size = path.stat().st_size
        rate = written / spent
        print(
            f"journal: {written:,} events, {size / 1e6:.0f} MB ({size / written:.0f} bytes an event); "
            f"{os.cpu_count()} cpus, load average {load:.1f} at the start (wall times need a quiet machine)"
        )
        print(
            f"append:    {rate:,.0f} events/s ({spent:.2f} s; {written / cpu:,.0f} events per CPU second)"
            f"    goal >= {APPEND_GOAL:,}: {rate / APPEND_GOAL:.2f}x the goal"
        )

        runs = [measure(path, "events_df") for _ in range(args.runs)]
        for run in runs:
            assert run["rows"] == written, f"events_df has {run['rows']} rows, expected {written}"
        seconds = statistics.median(r["seconds"] for r in runs)
        memory = statistics.median(r["peak"] for r in runs)
        scale = written / 1_000_000  # the goal is for 1,000,000 events
        each = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        print(
            f"events_df: {seconds:.2f} s (median of {len(runs)}: {each}; "
            f"cpu {statistics.median(r['cpu'] for r in runs):.2f} s), {runs[0]['columns']} columns"
            f"    goal <= {TIME_GOAL * scale:.2f} s: {seconds / (TIME_GOAL * scale):.2f} of the limit"
        )
        print(
            f"           peak memory +{memory / 1e6:.0f} MB = {memory / size:.2f}x the file"
            f"    goal <= {MEMORY_GOAL:.0f}x: {memory / size / MEMORY_GOAL:.2f} of the limit"
        )
        if args.skip_baseline:
            return
        naive = measure(path, "naive")
        assert naive["rows"] == written, f"the baseline read {naive['rows']} rows, expected {written}"
        print(
            f"naive read_json + json_normalize: {naive['seconds']:.2f} s, peak memory +{naive['peak'] / 1e6:.0f} MB "
            f"= {naive['peak'] / size:.2f}x the file, {naive['columns']} columns"
        )
        print(
            f"events_df vs naive: {naive['seconds'] / seconds:.1f}x faster, "
            f"{naive['peak'] / memory:.1f}x less peak memory"
        )


if __name__ == "__main__":
    main()
