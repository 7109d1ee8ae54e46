"""Long session: 1,000 tool turns, 5,000-character results, a 200,000-token window.

Goals (issue: context management): the estimated input of every model call stays at or under the
auto-compaction threshold, and the loop's per-turn overhead with context management on is at
most 1.5x the overhead with it off (``context=None``).

The loop's overhead is the run's CPU time (of the thread running the event loop, so a busy
machine does not inflate it) less the CPU time spent inside the model's stream: the offline
model's own bookkeeping, and the summary calls, are the model's cost, not the loop's. Each
configuration runs ROUNDS times, interleaved, with the garbage collector paused as timeit does;
the fastest round counts.

Three runs of the same scripted session through ``Agent``:
  * default context management (micro-compaction and auto-compaction),
  * auto-compaction only (micro-compaction off), which must summarise many times,
  * context management off (the baseline for the overhead ratio).
The model is a ``FunctionModel`` that answers the compaction request (recognised by its prompt)
with an eight-section summary, and otherwise reads the next file until the 1,000th turn.

Memory (issue: memory that does not grow with the session): a notebook-like session of 5,000 tool
turns (runs of 20 turns, journal on, default context management) reports the process's resident
memory after every 1,000 turns. Goal: flat within 10% (the largest figure at most 1.10x the one
after 1,000 turns) with the default ``keep_events``; ``keep_events=None`` (every event held in
memory, as before the window) is measured beside it for comparison. Each configuration runs in a
fresh interpreter, so one does not inherit the other's heap.

Run: python benchmarks/long_session.py            (everything)
     python benchmarks/long_session.py memory     (the memory figures only)
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from agent_kernel import Agent, tool
from agent_kernel.context import SECTIONS, ContextManager
from agent_kernel.events._event import EventType
from agent_kernel.journal._event_log import DEFAULT_KEEP_EVENTS
from agent_kernel.messages import Message
from agent_kernel.models._base import Model, ModelRequest, StreamEvent, ToolSpec
from agent_kernel.models.scripted import FunctionModel, text, tool_call

TURNS = 1_000
ROUNDS = 3
RESULT_CHARS = 5_000
WINDOW = 200_000
SUMMARY = "\n".join(f"## {s}\nReading files in order; nothing blocked." for s in SECTIONS)


async def _read_file(n: int) -> str:
    return f"file {n}: " + "x" * (RESULT_CHARS - len(f"file {n}: "))


# An async tool keeps thread hand-offs out of the measurement.
read_file = tool(read_only=True)(_read_file)
read_file.name = "read_file"


def _session_model() -> FunctionModel:
    state = {"turn": 0}

    def respond(messages: list[Message], tools: list[ToolSpec]) -> Any:
        if not tools and "<conversation>" in messages[0].text:
            return SUMMARY  # the compaction request
        state["turn"] += 1
        if state["turn"] > TURNS:
            return "Read every file."
        return [text(f"Reading file {state['turn']}."), tool_call("read_file", {"n": state["turn"]})]

    return FunctionModel(respond, name="long-session", context_window=WINDOW)


class _Timed:
    """Passes a model through, adding up the time spent inside its stream."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name, self.provider, self.context_window = inner.name, inner.provider, inner.context_window
        self.seconds = 0.0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        clock = time.thread_time
        t0 = clock()
        events = self.inner.stream(request).__aiter__()
        self.seconds += clock() - t0
        while True:
            t0 = clock()
            try:
                event = await events.__anext__()
            except StopAsyncIteration:
                self.seconds += clock() - t0
                return
            self.seconds += clock() - t0
            yield event


@dataclass
class Figures:
    seconds_per_turn: float
    model_seconds_per_turn: float
    peak_estimate: int
    peak_reported: int
    threshold: int | None
    compactions: int
    micro_compactions: int
    turns: int


async def _run(context: ContextManager | None) -> Figures:
    model = _Timed(_session_model())
    agent = Agent(model, tools=[read_file], journal=None, context=context, max_iterations=TURNS + 10, stall_timeout=None)
    gc.collect()
    gc.disable()
    try:
        t0 = time.thread_time()
        result = await agent.run("Read files 1 to 1,000 in order.")
        elapsed = time.thread_time() - t0
    finally:
        gc.enable()
    assert result.text == "Read every file.", result.text
    assert result.turns == TURNS + 1, result.turns
    assembled = [e.data for e in result.events if e.type is EventType.CONTEXT_ASSEMBLED]
    reported = [e.data["usage"]["input_tokens"] for e in result.events if e.type is EventType.LLM_COMPLETE]
    return Figures(
        seconds_per_turn=(elapsed - model.seconds) / result.turns,
        model_seconds_per_turn=model.seconds / result.turns,
        peak_estimate=max((a["total_tokens"] for a in assembled), default=0),
        peak_reported=max(reported),
        threshold=assembled[0]["threshold"] if assembled else None,
        compactions=sum(1 for e in result.events if e.type is EventType.COMPACTION_COMPLETE),
        micro_compactions=sum(1 for e in result.events if e.type is EventType.MICRO_COMPACTION),
        turns=result.turns,
    )


def _report(label: str, f: Figures, off: Figures) -> None:
    assert f.threshold is not None
    ratio = f.seconds_per_turn / off.seconds_per_turn
    print(f"{label}:")
    print(
        f"  peak estimated input {f.peak_estimate:,} tokens vs threshold {f.threshold:,} "
        f"({f.peak_estimate / f.threshold:.2f}x of the threshold; goal ≤ 1.00x)"
    )
    print(f"  peak input reported by the model {f.peak_reported:,} tokens (window {WINDOW:,})")
    print(f"  compactions {f.compactions}, model calls with old tool results cleared {f.micro_compactions}")
    print(
        f"  loop overhead {f.seconds_per_turn * 1e3:.3f} ms per turn: {ratio:.2f}x the run without context "
        f"management (goal ≤ 1.5x); model {f.model_seconds_per_turn * 1e3:.3f} ms per turn"
    )
    assert f.peak_estimate <= f.threshold, "a model call went over the compaction threshold"


def _fastest(runs: list[Figures]) -> Figures:
    return min(runs, key=lambda f: f.seconds_per_turn)


# -- memory over a long session ------------------------------------------------------------

MEMORY_TURNS = 5_000
TURNS_PER_RUN = 20
CHECKPOINT = 1_000
MEMORY_GOAL = 1.10


def _rss_bytes() -> int:
    """The process's resident memory now (Linux ``/proc``), else its peak (``ru_maxrss``)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: the peak is the best figure available
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def _memory_model() -> FunctionModel:
    """Runs of TURNS_PER_RUN file reads, each followed by a one-line answer; summaries on request."""
    state = {"turn": 0, "in_run": 0}

    def respond(messages: list[Message], tools: list[ToolSpec]) -> Any:
        if not tools and "<conversation>" in messages[0].text:
            return SUMMARY
        if state["in_run"] == TURNS_PER_RUN:
            state["in_run"] = 0
            return "Read this batch."
        state["turn"] += 1
        state["in_run"] += 1
        return [text(f"Reading file {state['turn']}."), tool_call("read_file", {"n": state["turn"]})]

    # A small window: compaction keeps the conversation bounded, so what grows is the event record.
    return FunctionModel(respond, name="memory-session", context_window=20_000)


def _memory_session(keep_events: int | None) -> dict[str, Any]:
    """RSS after every CHECKPOINT turns of one session (run in its own interpreter)."""
    figures: list[int] = []
    model = _memory_model()
    with tempfile.TemporaryDirectory() as folder:
        agent = Agent(
            model,
            tools=[read_file],
            journal=os.path.join(folder, "session.jsonl"),
            max_iterations=TURNS_PER_RUN + 5,
            stall_timeout=None,
            keep_events=keep_events,
        )
        turns = 0
        while turns < MEMORY_TURNS:
            result = agent.run_sync(f"Read the next {TURNS_PER_RUN} files.")
            model.requests.clear()  # the scripted model records every request; a real one keeps none
            turns += result.turns - 1  # the last turn of a run answers without reading
            if turns % CHECKPOINT == 0:
                gc.collect()
                figures.append(_rss_bytes())
        events = len(agent.events)
        held = len(agent.events.held)
        calls = len(agent.tool_calls_df())
        agent.close()
    return {"rss": figures, "events": events, "held": held, "tool_calls": calls}


def _in_fresh_interpreter(keep_events: int | None) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "memory-child", json.dumps(keep_events)],
        check=True,
        capture_output=True,
        text=True,
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def memory() -> None:
    """Prints RSS per 1,000 turns with the default window and with every event held."""
    print(f"memory: {MEMORY_TURNS:,} tool turns in runs of {TURNS_PER_RUN}, journal on, RSS after every {CHECKPOINT:,} turns")
    window = _in_fresh_interpreter(DEFAULT_KEEP_EVENTS)
    everything = _in_fresh_interpreter(None)
    for label, figures in ((f"keep_events={DEFAULT_KEEP_EVENTS:,} (default)", window), ("keep_events=None (every event in memory, for comparison)", everything)):
        rss = figures["rss"]
        steps = ", ".join(f"{(i + 1) * CHECKPOINT // 1000}k: {r / 2**20:.1f} MB" for i, r in enumerate(rss))
        print(f"  {label}: {steps}")
        print(
            f"    largest / after {CHECKPOINT:,} turns = {max(rss) / rss[0]:.3f}x; {figures['events']:,} events, "
            f"{figures['held']:,} in memory, {figures['tool_calls']:,} tool calls in tool_calls_df()"
        )
    ratio = max(window["rss"]) / window["rss"][0]
    print(
        f"  default window: RSS {ratio:.3f}x from {CHECKPOINT:,} to {MEMORY_TURNS:,} turns (goal ≤ {MEMORY_GOAL:.2f}x: "
        f"{(ratio - 1) / (MEMORY_GOAL - 1):.2f} of the allowed growth, {'met' if ratio <= MEMORY_GOAL else 'not met'})"
    )
    # A result, not a time: the frames must still see every call the window let go.
    assert window["tool_calls"] == MEMORY_TURNS, "the frames lost tool calls the window let go"


def main() -> None:
    configs: dict[str, Any] = {
        "off": lambda: None,
        "default": ContextManager,
        "auto_only": lambda: ContextManager(micro_compact=False),
    }
    runs: dict[str, list[Figures]] = {name: [] for name in configs}
    for _ in range(ROUNDS):
        for name, make in configs.items():
            runs[name].append(asyncio.run(_run(make())))
    off, default, auto_only = (_fastest(runs[name]) for name in configs)
    print(f"{TURNS:,} tool turns, {RESULT_CHARS:,}-character results, {WINDOW:,}-token window (fastest of {ROUNDS} rounds)")
    print(
        f"context management off: loop overhead {off.seconds_per_turn * 1e3:.3f} ms per turn, model "
        f"{off.model_seconds_per_turn * 1e3:.3f} ms per turn, peak input reported {off.peak_reported:,} tokens"
    )
    _report("default (micro-compaction + auto-compaction)", default, off)
    _report("auto-compaction only (micro-compaction off)", auto_only, off)
    assert auto_only.compactions > 0, "the auto-compaction-only run never compacted"


if __name__ == "__main__":
    if sys.argv[1:2] == ["memory-child"]:
        print(json.dumps(_memory_session(json.loads(sys.argv[2]))))
    elif sys.argv[1:2] == ["memory"]:
        memory()
    else:
        main()
        memory()
