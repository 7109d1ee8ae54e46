"""Cost of reminders and memory injection per loop turn, on vs off, with an instant scripted model.

Goal: with reminders (namespace, files, todo list) and the long-term memory block on, a turn of
the loop costs at most 1.2x what it costs with them off.

Workloads, each a session of prompts whose runs make a few tool turns, with variables changing
between prompts as a notebook's do:

* small namespace: 10 variables (a DataFrame, an array, lists, scalars), 2 change per prompt;
* medium namespace: 100 variables (5 DataFrames, 5 arrays, lists, scalars), 5 change per prompt;
* large namespace: 1,000 variables (50 DataFrames, 50 arrays, the rest lists and scalars),
  20 change per prompt;
* large namespace, one tool turn per prompt: the least work to spread the reminder's cost over;
* the same with the journal and the context manager on, as an agent runs by default (the other
  workloads turn both off in both arms, the strictest comparison).

The memory store holds 20 entries and the working directory an AGENTS.md, so session start reads
and injects both. Both agents offer the same tools (``memory`` and ``todo_write`` included), so
the difference is the reminders and the memory block alone. Each figure is the fastest of
several rounds; a session's start (reading memory, the first full listing of the namespace) is
part of it.

Run: python benchmarks/reminders.py
"""

from __future__ import annotations

import asyncio
import gc
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agent_kernel import Agent, tool
from agent_kernel.memory import MemoryStore
from agent_kernel.models.scripted import ScriptedModel, tool_call
from agent_kernel.tools.builtin._memory import memory
from agent_kernel.tools.builtin._todo import todo_write

GOAL = 1.2
ROUNDS = 7
PROMPTS = 20


async def _ping(x: int) -> int:
    return x


ping = tool(read_only=True)(_ping)
ping.name = "ping"


def namespace(size: int) -> dict[str, Any]:
    ns: dict[str, Any] = {}
    frames = arrays = max(1, size // 20)
    for i in range(frames):
        ns[f"df{i}"] = pd.DataFrame({"a": range(10), "b": [0.5] * 10, "c": ["x"] * 10})
    for i in range(arrays):
        ns[f"arr{i}"] = np.zeros((10, 3))
    i = 0
    while len(ns) < size:
        ns[f"v{i}"] = [i, i + 1] if i % 2 else i
        i += 1
    return ns


def mutate(ns: dict[str, Any], prompt: int, changes: int) -> None:
    """Changes ``changes`` variables, as cells between two prompts would."""
    names = list(ns)
    for k in range(changes):
        name = names[(prompt * changes + k) % len(names)]
        value = ns[name]
        ns[name] = value.assign(d=1) if isinstance(value, pd.DataFrame) else np.ones(4) if isinstance(value, np.ndarray) else [prompt, k]


def workdir() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="reminders-bench-"))
    (folder / "AGENTS.md").write_text("Use pandas. Keep answers short.\n" * 20)
    store = MemoryStore.in_dir(folder)
    for i in range(20):
        store.remember(f"fact-{i}", f"Remembered fact number {i} about the project.")
    return folder


async def session(size: int, changes: int, turns: int, on: bool, folder: Path, defaults: bool = False) -> float:
    """Seconds per loop turn over ``PROMPTS`` prompts of ``turns`` tool turns and a final answer."""
    ns = namespace(size)
    script: list[Any] = []
    for _ in range(PROMPTS):
        script += [[tool_call("ping", {"x": t})] for t in range(turns)] + ["done"]
    bare: dict[str, Any] = {} if defaults else {"journal": None, "context": None}
    agent = Agent(
        ScriptedModel(script), tools=[ping, "read_file", memory, todo_write], stall_timeout=None,
        max_iterations=10_000, working_dir=folder,
        memory=on, reminders=on, namespace=ns if on else None, **bare,
    )
    gc.collect()
    elapsed = 0.0
    for prompt in range(PROMPTS):
        mutate(ns, prompt, changes)  # outside the timing: the notebook's own work
        t0 = time.perf_counter()
        await agent.run("go")
        elapsed += time.perf_counter() - t0
    return elapsed / (PROMPTS * (turns + 1))


def best(size: int, changes: int, turns: int, on: bool, folder: Path, defaults: bool) -> float:
    return min(asyncio.run(session(size, changes, turns, on, folder, defaults)) for _ in range(ROUNDS))


def main() -> None:
    folder = workdir()
    workloads = [  # label, variables, changed per prompt, tool turns per prompt, journal and context on
        ("small namespace (10 variables), 3 tool turns per prompt", 10, 2, 3, False),
        ("medium namespace (100 variables), 3 tool turns per prompt", 100, 5, 3, False),
        ("large namespace (1,000 variables), 3 tool turns per prompt", 1_000, 20, 3, False),
        ("large namespace (1,000 variables), 1 tool turn per prompt", 1_000, 20, 1, False),
        ("large namespace (1,000 variables), 1 tool turn per prompt, journal and context on", 1_000, 20, 1, True),
    ]
    worst = 0.0
    for label, size, changes, turns, defaults in workloads:
        off = best(size, changes, turns, False, folder, defaults)
        on = best(size, changes, turns, True, folder, defaults)
        ratio = on / off
        worst = max(worst, ratio)
        per_prompt = (on - off) * (turns + 1) * 1e6
        print(f"{label}: {off * 1e3:.3f} ms per turn off, {on * 1e3:.3f} ms on "
              f"(+{per_prompt:.0f} µs per prompt): {ratio:.2f}x (goal ≤ {GOAL}x)")
    print(f"worst ratio: {worst:.2f}x of the turn cost without reminders and memory (goal ≤ {GOAL}x)")


if __name__ == "__main__":
    main()
