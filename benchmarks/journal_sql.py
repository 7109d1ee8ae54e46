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
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _journals import MODELS, fleet_member, text_session  # noqa: E402

from agent_kernel.journal import Journal, sql  # noqa: E402

GOAL = 30.0  # seconds per query over 10M events


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
        for event in text_session(count, fleet_member(number)):
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
