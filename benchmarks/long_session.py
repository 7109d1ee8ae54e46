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

Per-turn cost over a long session (issue: sessions that stay lean): the loop's overhead per turn
(CPU time less the model's, garbage collector paused) averaged over the first and the last 5% of
the turns, of one 5,000-turn run and of 50 runs of 100 turns. The
model reuses one tool-call id (``call_0``, as the OpenAI adapter's fallback does), the journal is
on, and the conversation is kept within a 20,000-token window by compaction, so what could grow is
what the session has accumulated, not the request. Goal: end / start at most 1.3. The same
5,000-turn run with a 200,000-token window is shown beside it: there the request itself grows
(more messages in the window at the end than at the start), which is the model's input, not the
session's history.

Compaction after resuming a long journal: journals of 10, 100 and 200 MB (500 MB with ``--full``)
are made (``tests/journal_builder.py``: a todo list and two file reads at the start, then large
answers with compactions), resumed with the default ``keep_events`` (and again with 1,000, so
every size holds as many events in memory), and then given a run and a
compaction twenty times, garbage collector paused: ten compactions timed (the fastest counts) and
ten traced (tracemalloc slows what it watches). Each size runs in a fresh interpreter. Printed:
the compaction's time, its peak traced memory and the bytes it read. Goal: flat within 20%
across sizes.

Notebook: 300 ``%%agent`` cells (2,000 deltas each) in one kernel, executed by nbclient, with the
kernel's resident memory after every 100 cells and the executed notebook's size beyond the runs'
transcripts. Goals: at most 5 KB per finished run beyond its transcript; kernel memory from 100
to 300 cells flat within 10%.

Run: python benchmarks/long_session.py                  (everything)
     python benchmarks/long_session.py memory           (the memory figures only)
     python benchmarks/long_session.py turns            (per-turn cost, start and end)
     python benchmarks/long_session.py compaction [--full]  (compaction after resume; --full adds 500 MB)
     python benchmarks/long_session.py notebook         (kernel memory and notebook size)
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


# -- per-turn cost at the start and the end of a long session -------------------------------

TURN_GOAL = 1.3
LONG_RUN = 5_000
RUNS, RUN_TURNS = 50, 100


@tool(read_only=True)
async def _small_read(n: int) -> str:
    """Reads file n."""
    return f"file {n}: " + "x" * 200


_small_read.name = "read_file"


def _reused_id_model(turns_per_run: int, window: int) -> FunctionModel:
    """Runs of ``turns_per_run`` reads, every call with the id ``call_0``; summaries on request."""
    state = {"turn": 0, "in_run": 0}

    def respond(messages: list[Message], tools: list[ToolSpec]) -> Any:
        if not tools and "<conversation>" in messages[0].text:
            return SUMMARY
        if state["in_run"] == turns_per_run:
            state["in_run"] = 0
            return "Read this batch."
        state["turn"] += 1
        state["in_run"] += 1
        return [text(f"Reading file {state['turn']}."), tool_call("read_file", {"n": state["turn"]}, id="call_0")]

    return FunctionModel(respond, name="reused-ids", context_window=window)


async def _per_turn(turns_per_run: int, runs: int, window: int) -> list[float]:
    """The loop's overhead of every turn, in order (seconds)."""
    model = _Timed(_reused_id_model(turns_per_run, window))
    inner = model.inner
    assert isinstance(inner, FunctionModel)
    marks: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        agent = Agent(model, tools=[_small_read], journal=os.path.join(folder, "session.jsonl"), working_dir=folder,
                      max_iterations=turns_per_run + 5, stall_timeout=None)
        gc.collect()
        gc.disable()
        try:
            for r in range(runs):
                async for event in agent.stream(f"Read the next {turns_per_run} files."):
                    if event.type is EventType.ITERATION_START and event.agent_id is None:
                        marks.append(time.thread_time() - model.seconds)
                    if len(inner.requests) > 50:
                        inner.requests.clear()  # the scripted model records every request; a real one keeps none
                inner.requests.clear()
                if r % 10 == 9:
                    gc.enable()
                    gc.collect()  # between runs, as a notebook's idle time would; not timed
                    gc.disable()
                    marks.append(float("nan"))  # the next gap spans the collection: not counted
        finally:
            gc.enable()
        agent.close()
    gaps = [b - a for a, b in zip(marks, marks[1:])]
    return [g for g in gaps if g == g]  # drop the gaps that span a collection


def _ends(gaps: list[float], share: float = 0.05) -> tuple[float, float]:
    n = max(1, int(len(gaps) * share))
    return sum(gaps[:n]) / n, sum(gaps[-n:]) / n


def turns() -> None:
    """Prints the per-turn overhead at the start and the end of a long run and of many runs."""
    print("per-turn loop overhead (CPU less the model's; call ids all 'call_0'; journal on), mean of the first and last 5% of turns:")
    cases = [
        (f"one run of {LONG_RUN:,} turns, 20,000-token window", LONG_RUN, 1, 20_000, True),
        (f"{RUNS} runs of {RUN_TURNS} turns, 20,000-token window", RUN_TURNS, RUNS, 20_000, True),
        (f"one run of {LONG_RUN:,} turns, 200,000-token window (the request grows within the window; no goal)", LONG_RUN, 1, 200_000, False),
    ]
    for label, per_run, runs, window, judged in cases:
        start, end = _ends(asyncio.run(_per_turn(per_run, runs, window)))
        ratio = end / start
        verdict = f"goal ≤ {TURN_GOAL}: {ratio / TURN_GOAL:.2f} of the limit, {'met' if ratio <= TURN_GOAL else 'not met'}" if judged else "for comparison"
        print(f"  {label}: start {start * 1e3:.3f} ms, end {end * 1e3:.3f} ms per turn; end / start = {ratio:.2f} ({verdict})")


# -- one compaction after resuming a long journal ------------------------------------------

COMPACTION_SIZES_MB = (10, 100, 200)
FULL_SIZES_MB = (10, 100, 200, 500)
COMPACTION_GOAL = 1.20
#: Compactions per size: a single one is at the mercy of another thread holding the GIL for a
#: switch interval (5 ms), several times what the compaction itself takes.
COMPACTION_ROUNDS = 20


def _bytes_read() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def _compaction_after_resume(megabytes: int, keep_events: int | None = DEFAULT_KEEP_EVENTS) -> dict[str, float]:
    """Resumes a journal of ``megabytes`` MB and times one compaction (run in its own interpreter)."""
    import tracemalloc
    from pathlib import Path

    from agent_kernel.tools.builtin._todo import todo_write

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout, for tests.journal_builder
    from tests.journal_builder import long_journal, summarising_model

    with tempfile.TemporaryDirectory() as folder:
        path = long_journal(Path(folder), megabytes * 1_000_000)
        t0 = time.perf_counter()
        agent = Agent.resume(path, model=summarising_model(), tools=["read_file", todo_write], working_dir=folder,
                             context=ContextManager(keep_messages=2, retry_delays=(), calibrate=False), keep_events=keep_events)
        resumed_s = time.perf_counter() - t0
        rounds = []
        for _ in range(COMPACTION_ROUNDS):  # the fastest compaction counts, garbage collector paused
            agent.run_sync("Write a long answer.")  # something to compact: the journal ends compacted
            gc.collect()
            gc.disable()
            traced = len(rounds) % 2 == 1  # tracemalloc slows what it watches: odd rounds measure memory, even ones time
            read0 = _bytes_read()
            if traced:
                tracemalloc.start()
            t0 = time.perf_counter()
            events = asyncio.run(agent.compact())
            seconds = time.perf_counter() - t0 if not traced else float("inf")
            peak = tracemalloc.get_traced_memory()[1] if traced else float("inf")
            tracemalloc.stop()
            read = _bytes_read() - read0
            gc.enable()
            [complete] = [e.data for e in events if e.type is EventType.COMPACTION_COMPLETE]
            # A result, not a time: what lies at the journal's start is restored.
            assert [f["path"] for f in complete["restored_files"]] == ["b.txt", "a.txt"] and complete["restored_todos"] == 2
            rounds.append((seconds, peak, read))
        seconds, peak, read = (min(r[i] for r in rounds) for i in range(3))
        size = path.stat().st_size
        agent.close()
    return {"size": size, "seconds": seconds, "peak": peak, "read": read, "resume_s": resumed_s}


def compaction(full: bool = False) -> None:
    """Prints the time and peak memory of one compaction after resuming journals of growing size."""
    sizes = FULL_SIZES_MB if full else COMPACTION_SIZES_MB
    # With the default window the larger journals also leave more events in memory (10,000 of
    # them here, about 1,400 for 10 MB), so the process is larger; keep_events=1,000 holds the
    # same number whatever the size, which isolates the journal's own size.
    for keep, label in ((DEFAULT_KEEP_EVENTS, "default keep_events"), (1_000, "keep_events=1,000")):
        print(f"one compaction after resuming a journal ({label}), sizes {', '.join(f'{s} MB' for s in sizes)}:")
        figures = [_child("compaction-child", [megabytes, keep]) for megabytes in sizes]
        for megabytes, f in zip(sizes, figures):
            print(f"  {megabytes:>4} MB journal ({f['size'] / 1e6:.0f} MB): compaction {f['seconds'] * 1e3:.2f} ms, peak traced memory "
                  f"{f['peak'] / 2**20:.3f} MB, read {f['read']:,} bytes (resume itself {f['resume_s']:.1f} s)")
        for key, what in (("seconds", "time"), ("peak", "peak memory")):
            ratio = max(f[key] for f in figures) / min(f[key] for f in figures)
            print(f"  {what}: largest / smallest = {ratio:.2f} (goal ≤ {COMPACTION_GOAL:.2f}: "
                  f"{(ratio - 1) / (COMPACTION_GOAL - 1):.2f} of the allowed spread, {'met' if ratio <= COMPACTION_GOAL else 'not met'})")


def _child(command: str, argument: Any) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, command, json.dumps(argument)], check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# -- a notebook of many %%agent cells -------------------------------------------------------

NOTEBOOK_CELLS = 300
NOTEBOOK_STEP = 100
DELTAS = 2_000
NOTEBOOK_GOAL_BYTES = 5_000
KERNEL_GOAL = 1.10


def notebook() -> None:
    """Executes 300 ``%%agent`` cells with nbclient; prints kernel memory per 100 cells and the notebook's size."""
    import nbformat
    from nbclient import NotebookClient

    probe = ("import gc, os, json; gc.collect(); model.requests.clear()\n"
             "print(json.dumps({'rss': int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')}))")
    answer = "word " * (DELTAS // 5)  # DELTAS characters, one delta each
    cells = ["%load_ext agent_kernel\nfrom agent_kernel.models.scripted import ScriptedModel, text\n"
             f"model = ScriptedModel([text(f'Answer {{i}}: ' + {answer!r}, chunk=1) for i in range({NOTEBOOK_CELLS})])"]
    for i in range(NOTEBOOK_CELLS):
        cells.append(f"%%agent -m model\nQuestion {i}")
        if (i + 1) % NOTEBOOK_STEP == 0:
            cells.append(probe)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": folder}}).execute()
        elapsed = time.perf_counter() - t0
    rss = [json.loads(o["text"])["rss"] for cell in nb.cells if cell.source.startswith("import gc") for o in cell.outputs if o.get("name") == "stdout"]
    size = len(nbformat.writes(nb).encode())
    transcripts = [o for cell in nb.cells if cell.source.startswith("%%agent") for o in cell.outputs if "text/html" in o.get("data", {})]
    assert len(transcripts) == NOTEBOOK_CELLS, len(transcripts)  # a result, not a time: one transcript per run
    transcript_bytes = sum(len(json.dumps(o, indent=1).encode()) for o in transcripts)
    beyond = (size - transcript_bytes) / NOTEBOOK_CELLS
    print(f"notebook: {NOTEBOOK_CELLS} %%agent cells of {DELTAS:,} deltas, executed by nbclient in {elapsed:.0f} s")
    print(f"  kernel RSS after every {NOTEBOOK_STEP} cells: {', '.join(f'{r / 2**20:.1f} MB' for r in rss)}; "
          f"largest / after {NOTEBOOK_STEP} = {max(rss) / rss[0]:.3f} (goal ≤ {KERNEL_GOAL:.2f}: "
          f"{(max(rss) / rss[0] - 1) / (KERNEL_GOAL - 1):.2f} of the allowed growth, {'met' if max(rss) / rss[0] <= KERNEL_GOAL else 'not met'})")
    print(f"  notebook {size / 1e6:.2f} MB, of which transcripts {transcript_bytes / 1e6:.2f} MB: {beyond:,.0f} bytes per run beyond "
          f"its transcript (goal ≤ {NOTEBOOK_GOAL_BYTES:,}: {beyond / NOTEBOOK_GOAL_BYTES:.2f} of the limit, "
          f"{'met' if beyond <= NOTEBOOK_GOAL_BYTES else 'not met'}); {size / NOTEBOOK_CELLS / 1e3:.1f} KB per run in all")


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
    command = sys.argv[1:2]
    if command == ["memory-child"]:
        print(json.dumps(_memory_session(json.loads(sys.argv[2]))))
    elif command == ["compaction-child"]:
        print(json.dumps(_compaction_after_resume(*json.loads(sys.argv[2]))))
    elif command == ["memory"]:
        memory()
    elif command == ["turns"]:
        turns()
    elif command == ["compaction"]:
        compaction(full="--full" in sys.argv)
    elif command == ["notebook"]:
        notebook()
    else:
        main()
        memory()
        turns()
        compaction(full="--full" in sys.argv)
        notebook()
