"""Benchmark: a parallel crew of three independent 1-second tasks against the 1 s limit.

Each task's agent has a scripted model that answers after exactly one second (a text part with
``delay=1.0``), so a crew that really runs independent tasks side by side takes about 1 s and a
sequential one about 3 s. The goal (issue 9) is the parallel crew within 10% of the 1 s limit;
what is left above 1 s is the crew's own overhead: scheduling, events, stats.

Run: ``.venv/bin/python benchmarks/crew_parallel.py``
"""

from __future__ import annotations

import asyncio
import statistics
import time

from agent_kernel import Agent
from agent_kernel.models.scripted import ScriptedModel, text
from agent_kernel.team._crew import Crew, CrewResult, Task

TASK_SECONDS = 1.0
LIMIT_S = 1.0
GOAL_RATIO = 1.10
REPEATS = 3


def build(mode: str) -> Crew:
    """Three agents, each with one independent task whose model takes ``TASK_SECONDS``."""
    agents = [
        Agent(
            ScriptedModel([text(f"answer {i}", chunk=1000, delay=TASK_SECONDS)]),
            name=f"agent_{i}",
            journal=None,
            context=None,
            permissions="bypass",
        )
        for i in range(3)
    ]
    tasks = [Task(f"Task {i}: answer.", agent, name=f"task_{i}") for i, agent in enumerate(agents)]
    return Crew(agents, tasks, mode, journal=None, permissions="bypass")  # type: ignore[arg-type]


async def timed(mode: str) -> tuple[float, CrewResult]:
    crew = build(mode)
    start = time.perf_counter()
    result = await crew.run()
    return time.perf_counter() - start, result


def check(result: CrewResult) -> None:
    """The figure only counts if every task ran and answered."""
    assert [o.status for o in result.outputs.values()] == ["done"] * 3, result.outputs
    assert [o.text for o in result.outputs.values()] == [f"answer {i}" for i in range(3)]


async def main() -> None:
    runs: dict[str, list[float]] = {"parallel": [], "sequential": []}
    for _ in range(REPEATS):
        for mode in runs:
            seconds, result = await timed(mode)
            check(result)
            runs[mode].append(seconds)
    parallel = statistics.median(runs["parallel"])
    sequential = statistics.median(runs["sequential"])
    print(f"three independent tasks, each {TASK_SECONDS:g} s of scripted model time; median of {REPEATS} runs")
    print(f"  parallel crew:    {parallel:.3f} s  (runs: {', '.join(f'{s:.3f}' for s in runs['parallel'])})")
    print(f"  sequential crew:  {sequential:.3f} s  (runs: {', '.join(f'{s:.3f}' for s in runs['sequential'])})")
    print(f"  speed-up parallel vs sequential: {sequential / parallel:.2f}x (ideal 3.00x)")
    ratio = parallel / LIMIT_S
    verdict = "within" if ratio <= GOAL_RATIO else "OUTSIDE"
    print(f"  parallel / {LIMIT_S:g} s limit: {ratio:.3f}  (goal <= {GOAL_RATIO:.2f}: {verdict} the goal; overhead {1000 * (parallel - LIMIT_S):.1f} ms)")


if __name__ == "__main__":
    asyncio.run(main())
