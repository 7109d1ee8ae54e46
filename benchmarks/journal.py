"""Journal benchmark: append throughput, and events_df on four kinds of 1,000,000-event journal.

Run:  .venv/bin/python benchmarks/journal.py            (1,000,000 events each; the first run
                                                          writes the journals, later runs reuse them)
      .venv/bin/python benchmarks/journal.py --events 200000 --runs 1 --skip-baseline
      .venv/bin/python benchmarks/journal.py --journals tool-heavy,crew

Goals: appending with buffering at least 200,000 events/s; building ``events_df`` from a
1,000,000-event journal in at most 3 s and at most 3x the file size in peak memory, on every kind
of journal the project writes; and a journal another tool re-serialised (read by DuckDB's JSON
reader, the fast reader cannot take it) in at most 2x the time of the same journal as the writer
wrote it. Two baselines run on the same file in the same run: ``json.loads``
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
  defaults: spaces after separators; ``data`` and ``type`` first). The fast reader cannot apply,
  so events_df reads it with DuckDB; its time is printed as a ratio to reading the fresh
  tool-heavy file (measured too when only the re-serialised one is asked for).

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
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _journals import TEXT_HEAVY, crew_session, text_session, tool_session  # noqa: E402

from agent_kernel.events._event import AgentEvent  # noqa: E402
from agent_kernel.journal import Journal  # noqa: E402

APPEND_GOAL = 200_000  # events per second
TIME_GOAL = 3.0  # seconds for events_df on 1,000,000 events
MEMORY_GOAL = 3.0  # peak memory as a multiple of the file size
REWRITTEN_GOAL = 2.0  # a re-serialised journal's time as a multiple of the fresh one's

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
    "text-heavy": lambda count: text_session(count, TEXT_HEAVY),
    "tool-heavy": tool_session,
    "crew": crew_session,
    "tool-heavy re-serialised": None,  # made from tool-heavy
}
# Each re-serialised journal and the fresh one it is judged against.
FRESH_OF = {"tool-heavy re-serialised": "tool-heavy"}


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
from agent_kernel.journal._frames import events_df

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
        written, spent, cpu = write_journal(Path(folder) / "append.jsonl", text_session(count, TEXT_HEAVY), count)
    rate = written / spent
    print(
        f"append: {rate:,.0f} events/s ({written:,} text-heavy events in {spent:.2f} s; {written / cpu:,.0f} events per CPU second)"
        f"    goal >= {APPEND_GOAL:,}: {rate / APPEND_GOAL:.2f}x the goal\n"
    )

    header = f"{'journal':<26}{'MB':>6}  {'reader':<16}{'wall s':>8}{'cpu s':>8}{'peak/file':>10}  {'time/goal':>9}{'mem/goal':>9}"
    print(header)
    print("-" * len(header))
    notes = []
    medians: dict[str, dict[str, float]] = {}
    for name in names + [FRESH_OF[n] for n in names if n in FRESH_OF and FRESH_OF[n] not in names]:
        path = journal_file(name, args.events)
        size = path.stat().st_size
        runs = [measure(path, "events_df") for _ in range(args.runs)]
        for run in runs:
            assert run["rows"] == args.events, f"events_df read {run['rows']} rows of {name}, expected {args.events}"
        medians[name] = {k: statistics.median(r[k] for r in runs) for k in ("seconds", "cpu", "peak")}
        readers = [("events_df", medians[name]), ("json.loads", measure(path, "json.loads"))]
        if not args.skip_baseline:
            readers.append(("naive pandas", measure(path, "naive")))
        for reader, m in readers:
            goals = f"{m['seconds'] / (TIME_GOAL * scale):>9.2f}{m['peak'] / size / MEMORY_GOAL:>9.2f}" if reader == "events_df" else ""
            label = name if reader == "events_df" else ""
            mb = f"{size / 1e6:>6.0f}" if reader == "events_df" else " " * 6
            print(f"{label:<26}{mb}  {reader:<16}{m['seconds']:>8.2f}{m['cpu']:>8.2f}{m['peak'] / size:>10.2f}  {goals}")
        each = ", ".join(f"{r['seconds']:.2f}" for r in runs)
        peaks = ", ".join(f"{r['peak'] / size:.2f}" for r in runs)
        print(f"{'':<34}(events_df of {len(runs)} runs: wall {each} s; peak/file {peaks}; {runs[0]['columns']} columns)")
        for message in runs[0]["warnings"]:
            notes.append(f"{name}: events_df warned: {message}")
    print(f"\ngoals: events_df <= {TIME_GOAL * scale:.2f} s and <= {MEMORY_GOAL:.0f}x the file in peak memory; time/goal and mem/goal <= 1.00 meet them")
    for rewritten, fresh in FRESH_OF.items():
        if rewritten in medians:
            was, now = medians[fresh], medians[rewritten]
            print(
                f"{rewritten} / {fresh}: wall {now['seconds']:.2f} / {was['seconds']:.2f} s = {now['seconds'] / was['seconds']:.2f}x, "
                f"cpu {now['cpu']:.2f} / {was['cpu']:.2f} s = {now['cpu'] / was['cpu']:.2f}x; goal <= {REWRITTEN_GOAL:.0f}x: "
                f"{now['seconds'] / was['seconds'] / REWRITTEN_GOAL:.2f} of it by wall time"
            )
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
