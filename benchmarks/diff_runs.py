"""``journal.diff_runs`` on two sessions of about 10,000 events each: an original and its fork.

Run:  .venv/bin/python benchmarks/diff_runs.py
      .venv/bin/python benchmarks/diff_runs.py --events 50000

An agent on a scripted model runs turns of streamed text (about 40 deltas) and one tool call each
until its journal holds the asked number of events; it is then forked at its middle turn and the
fork runs the rest with other arguments and other text, so both journals are the same length and
part halfway. Timed: ``diff_runs(original_path, fork_path)`` from the files, which reads both
journals, sums every turn and builds the DataFrame (best of five).

Goal: under 1 s for two 10,000-event journals (a cell a person runs while looking at a run).
The figure prints with its ratio to the goal; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_kernel import Agent, tool  # noqa: E402
from agent_kernel.journal import diff_runs, read_events  # noqa: E402
from agent_kernel.models.scripted import ScriptedModel, text, tool_call  # noqa: E402

GOAL = 1.0  # seconds for two 10,000-event journals
WORDS = "the a of to read file line value test error fix function returns because when which this that".split()
EVENTS_PER_TURN = 48  # about: the text deltas, the tool call's events, the turn's own events


@tool(read_only=True)
def lookup(key: str) -> str:
    """Looks a key up."""
    return f"value of {key} " * 4


def script(turns: int, salt: str) -> list[Any]:
    sentence = " ".join(WORDS[i % len(WORDS)] for i in range(60))
    responses: list[Any] = [[text(f"{salt} {i}: {sentence}", chunk=8), tool_call("lookup", {"key": f"{salt}{i}"})] for i in range(turns)]
    return [*responses, "Done."]


async def build(folder: Path, events: int) -> tuple[Path, Path]:
    turns = max(2, events // EVENTS_PER_TURN)
    original = folder / "original.jsonl"
    agent = Agent(ScriptedModel(script(turns, "a")), [lookup], journal=original, context=None, permissions="bypass", max_iterations=turns + 2)
    await agent.run("look everything up")
    fork_path = folder / "fork.jsonl"
    fork = agent.fork(at=turns // 2, model=ScriptedModel(script(turns - turns // 2, "b")), journal=fork_path)
    await fork.continue_run()
    agent.close()
    fork.close()
    return original, fork_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=10_000, help="events per journal (about)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = asyncio.run(build(Path(tmp), args.events))
        sizes = (len(read_events(a)), len(read_events(b)))
        diff_runs(a, b)  # warm: imports pandas
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            df = diff_runs(a, b)
            best = min(best, time.perf_counter() - started)
    goal = GOAL * max(sizes) / 10_000
    print(f"journals: {sizes[0]:,} and {sizes[1]:,} events; {len(df)} turns differ from turn {df.attrs['first_divergence']}")
    print(f"diff_runs: {best * 1000:.1f} ms (goal < {goal:.2f} s: {best / goal:.2f}x of the limit)")


if __name__ == "__main__":
    main()
