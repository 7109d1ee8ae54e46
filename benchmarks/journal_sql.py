"""SQL over many journals: ``journal.sql`` on 1,000 journals of about 10,000 events each (10M events).

Run:  .venv/bin/python benchmarks/journal_sql.py                       (1,000 journals, 10M events)
      .venv/bin/python benchmarks/journal_sql.py --journals 100 --events 2000

The journals are written once by the project's own ``Journal`` writer (two processes) into a cache
folder (``$AGENT_KERNEL_CACHE`` or ``~/.cache/agent_kernel``, then ``bench-journals-<n>x<m>``), so
reruns skip straight to the queries. Each journal is a plausible session: turns of 100 to 400
streamed text deltas, one to three tool calls (start, argument delta, ready, tool start, result;
about 3% fail), an approval now and then, a compaction every 20 turns, each turn's full assistant
message and usage in ``llm_complete``; sessions use one of four models and six tools.

Timed, each in a fresh ``sql`` call (read the files, build the views, run the query):

* tool calls by tool (``tool_calls``),
* model calls and tokens by model (``usage``),
* the p95 tool duration by tool (``tool_calls``),
* events by type (``events``: every per-token delta is read and kept).

Goal: each query over the 10M events in at most 30 s on two cores (the time a person waits for a
cell before they go and do something else). Figures print with their ratio to the goal; nothing
here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_kernel.events import AgentEvent, EventType  # noqa: E402
from agent_kernel.journal import Journal, sql  # noqa: E402

GOAL = 30.0  # seconds per query over 10M events
WORDS = "the a of to read file line value test error fix function returns because when which this that".split()
MODELS = [("anthropic", "claude-sonnet-4-5"), ("anthropic", "claude-haiku-4-5"), ("openai", "gpt-4.1"), ("openai", "gpt-4.1-mini")]
TOOLS = ["read_file", "grep", "bash", "write_file", "list_dir", "python"]


def session(number: int, count: int) -> Iterator[AgentEvent]:
    """About ``count`` events of session ``number`` (see the module docstring)."""
    rnd = random.Random(number)
    provider, model = MODELS[number % len(MODELS)]
    sid, run = f"s_bench{number:06d}", f"r_bench{number:06d}"
    seq, ts = 0, 1_760_000_000.0 + number * 3_600.0
    turn, parent, it = f"t_{number:06d}_0000", None, 0

    def event(kind: EventType, data: dict) -> AgentEvent:
        nonlocal seq, ts
        seq += 1
        ts += rnd.random() * 0.02
        return AgentEvent(seq, ts, sid, run, turn, parent, it, kind, data)

    def state() -> dict:
        return {"turn_counter": it, "turn_id": turn, "max_iterations": 10_000, "compacted": False, "parent_turn_id": parent, "metadata": {}}

    yield event(EventType.RUN_START, {"prompt": "Find and fix the failing test.", "model": model, "provider": provider,
                                      "system": "You are careful.", "tools": TOOLS, "max_iterations": 10_000,
                                      "turn_state": state(), "agent_name": None})
    while seq < count - 1:
        yield event(EventType.ITERATION_START, {"turn_state": state()})
        if it and it % 20 == 0:
            yield event(EventType.COMPACTION_START, {"tokens_before": 150_000, "messages": 2 * it, "threshold": 140_000, "trigger": "auto", "focus": None})
            summary_usage = {"input_tokens": 150_000, "output_tokens": 800, "cache_read_tokens": 0, "cache_write_tokens": 0}
            yield event(EventType.COMPACTION_COMPLETE, {"tokens_before": 150_000, "tokens_after": 20_000, "messages_removed": 2 * it - 4,
                                                        "kept_messages": 4, "summary": "## Progress\nTests read.", "fallback": False,
                                                        "usage": summary_usage, "cost_usd": 0.02})
        yield event(EventType.CONTEXT_ASSEMBLED, {"window": 200_000, "threshold": 160_000, "messages": 2 * it + 1, "messages_hidden": 0})
        started_llm = ts
        yield event(EventType.LLM_START, {"model": model, "provider": provider, "attempt": 0, "messages": 2 * it + 1, "tools_enabled": True})
        words = []
        for _ in range(rnd.randint(100, 400)):
            piece = rnd.choice(WORDS) + (" " if rnd.random() < 0.9 else ".\n")
            words.append(piece)
            yield event(EventType.TEXT_DELTA, {"text": piece})
        uses = []
        for index in range(rnd.randint(1, 3)):
            call_id = f"toolu_{it:06d}_{index}"
            name = rnd.choice(TOOLS)
            arguments = {"path": f"src/{rnd.choice(WORDS)}.py", "limit": rnd.randint(10, 400)}
            yield event(EventType.TOOL_CALL_START, {"call_id": call_id, "name": name, "index": index})
            yield event(EventType.TOOL_CALL_DELTA, {"call_id": call_id, "index": index, "delta": json.dumps(arguments)})
            yield event(EventType.TOOL_CALL_READY, {"call_id": call_id, "name": name, "arguments": arguments, "index": index})
            uses.append((call_id, name, arguments))
        message = {"role": "assistant", "content": [{"type": "text", "text": "".join(words)}] + [{"type": "tool_use", "id": c, "name": n, "input": a} for c, n, a in uses]}
        usage = {"input_tokens": 2_000 + 50 * it, "output_tokens": len(words), "cache_read_tokens": 1_500, "cache_write_tokens": 0}
        yield event(EventType.LLM_COMPLETE, {"message": message, "usage": usage, "cost_usd": 0.004, "model": model, "stop_reason": "tool_use", "duration_s": ts - started_llm, "attempts": 1})
        results = []
        for call_id, name, arguments in uses:
            if name == "bash" and rnd.random() < 0.3:
                yield event(EventType.APPROVAL_REQUIRED, {"call_id": call_id, "tool": name, "arguments": arguments, "reason": "bash asks before it runs"})
                yield event(EventType.APPROVAL_DECISION, {"call_id": call_id, "tool": name, "decision": "approve", "decided_by": "person", "wait_s": 2.5})
            started = ts
            yield event(EventType.TOOL_START, {"call_id": call_id, "name": name, "arguments": arguments, "started_at": started})
            failed = rnd.random() < 0.03
            ts += rnd.expovariate(1 / (0.05 if name != "bash" else 1.5))  # the tool's own run time
            content = f"Error: {name} failed" if failed else "\n".join(f"{i}: {rnd.choice(WORDS)} = {rnd.randint(0, 999)}" for i in range(rnd.randint(1, 30)))
            yield event(EventType.TOOL_RESULT, {"call_id": call_id, "name": name, "content": content, "is_error": failed, "duration_s": ts - started, "started_at": started, "ended_at": ts})
            results.append({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": failed})
        following = f"t_{number:06d}_{it + 1:04d}"
        yield event(EventType.RECURSION, {"tool_results": results, "next_turn_id": following})
        parent, turn, it = turn, following, it + 1
    yield event(EventType.RUN_FINISH, {"reason": "end_turn", "text": "Fixed.", "stats": {"turns": it}})


def write_one(args: tuple[str, int, int]) -> int:
    """Writes journal ``number`` (to a temporary name, renamed when whole); returns its events."""
    folder, number, count = args
    path = Path(folder) / f"s_bench{number:06d}.jsonl"
    if path.exists():
        return 0
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    written = 0
    with Journal(partial, session_id=f"s_bench{number:06d}", metadata={"model": MODELS[number % len(MODELS)][1]}) as journal:
        for event in session(number, count):
            journal.write(event)
            written += 1
    partial.rename(path)
    return written


def ensure_journals(journals: int, events: int) -> Path:
    """The cached folder of journals, written now if missing."""
    cache = Path(os.environ.get("AGENT_KERNEL_CACHE", Path.home() / ".cache" / "agent_kernel"))
    folder = cache / f"bench-journals-{journals}x{events}"
    folder.mkdir(parents=True, exist_ok=True)
    missing = [n for n in range(journals) if not (folder / f"s_bench{n:06d}.jsonl").exists()]
    if missing:
        print(f"writing {len(missing)} journals of about {events:,} events into {folder} (cached for reruns)")
        started = time.perf_counter()
        with ProcessPoolExecutor(2) as pool:
            written = sum(pool.map(write_one, [(str(folder), n, events) for n in missing], chunksize=8))
        print(f"  {written:,} events in {time.perf_counter() - started:.1f} s")
    return folder


QUERIES = {
    "tool calls by tool": "SELECT name, count(*) AS calls, count(*) FILTER (WHERE is_error) AS errors FROM tool_calls GROUP BY name ORDER BY calls DESC",
    "model calls by model": "SELECT model, count(*) AS calls, sum(input_tokens)::BIGINT AS input_tokens, sum(output_tokens)::BIGINT AS output_tokens,"
                            " sum(cost_usd) AS cost_usd FROM usage GROUP BY model ORDER BY calls DESC",
    "p95 tool duration": "SELECT name, quantile_cont(duration_s, 0.95) AS p95_s, count(*) AS calls FROM tool_calls GROUP BY name ORDER BY p95_s DESC",
    "events by type": "SELECT type, count(*) AS events FROM events GROUP BY type ORDER BY events DESC",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journals", type=int, default=1_000)
    parser.add_argument("--events", type=int, default=10_000, help="events per journal (about)")
    args = parser.parse_args()
    folder = ensure_journals(args.journals, args.events)
    pattern = str(folder / "*.jsonl")
    size = sum(p.stat().st_size for p in folder.glob("*.jsonl"))
    total = int(sql("SELECT count(*) AS n FROM events", pattern)["n"][0])
    print(f"{args.journals:,} journals, {total:,} events, {size / 1e9:.2f} GB")
    scale = total / 10_000_000
    for label, query in QUERIES.items():
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a clean fleet: any skipped line is a bug here
            result = sql(query, pattern)
        seconds = time.perf_counter() - started
        print(f"\n{label}: {seconds:.2f} s  ({seconds / (GOAL * scale):.2f}x the goal of {GOAL * scale:.1f} s for this size)")
        print(result.to_string(index=False))


if __name__ == "__main__":
    main()
