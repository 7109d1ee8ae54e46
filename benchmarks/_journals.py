"""The sessions the journal benchmarks write: seeded, plausible streams of ``AgentEvent``.

``benchmarks/journal.py`` reads four kinds of 1,000,000-event journal (``text_session`` with
``TEXT_HEAVY``, ``tool_session``, ``crew_session``); ``benchmarks/journal_sql.py`` writes a fleet
of 10,000-event sessions (``text_session`` with ``fleet_member(n)``). Each generator is seeded, so
a cached journal is the file a rerun would write.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass

from agent_kernel.events._event import AgentEvent, EventType

WORDS = "the a of to read file line value test error fix function returns because when which this that".split()
MODELS = [("anthropic", "claude-sonnet-4-5"), ("anthropic", "claude-haiku-4-5"), ("openai", "gpt-4.1"), ("openai", "gpt-4.1-mini")]
FLEET_TOOLS = ["read_file", "grep", "bash", "write_file", "list_dir", "python"]


@dataclass(frozen=True)
class TextShape:
    """What varies between the text-heavy sessions of the two benchmarks.

    Attributes:
        seed: the random generator's seed.
        session_id, run_id: the ids of every event.
        start: the first event's time (epoch seconds).
        turn_prefix: turn ids are this then the turn number (``turn_digits`` wide).
        provider, model: the model every call goes to.
        tools: the tools the model picks from.
        compact_every: turns between compactions.
        summary_usage: a model wrote the compaction summary (usage and cost are recorded).
        first_index: the index of a response's first tool call.
        tool_time: tools take time (seconds drawn per call) and about 3% fail.
        llm_measured: ``duration_s`` of a model call is its measured time, not a fixed 3.2 s.
    """

    seed: int
    session_id: str
    run_id: str
    start: float
    turn_prefix: str
    turn_digits: int
    provider: str
    model: str
    tools: tuple[str, ...]
    compact_every: int
    summary_usage: bool
    first_index: int
    tool_time: bool
    llm_measured: bool


TEXT_HEAVY = TextShape(
    seed=7, session_id="s_bench0000001", run_id="r_bench0000001", start=1_700_000_000.0, turn_prefix="t_", turn_digits=12,
    provider="anthropic", model="claude-sonnet-4-5", tools=("read_file", "grep", "bash"), compact_every=200,
    summary_usage=False, first_index=1, tool_time=False, llm_measured=False,
)


def fleet_member(number: int) -> TextShape:
    """The shape of session ``number`` of the SQL benchmark's fleet: its own ids, hour and model."""
    provider, model = MODELS[number % len(MODELS)]
    return TextShape(
        seed=number, session_id=f"s_bench{number:06d}", run_id=f"r_bench{number:06d}", start=1_760_000_000.0 + number * 3_600.0,
        turn_prefix=f"t_{number:06d}_", turn_digits=4, provider=provider, model=model, tools=tuple(FLEET_TOOLS), compact_every=20,
        summary_usage=True, first_index=0, tool_time=True, llm_measured=True,
    )


def text_session(count: int, shape: TextShape) -> Iterator[AgentEvent]:
    """About ``count`` events of a long session: turns of 100 to 400 streamed text deltas, one to
    three tool calls, an approval now and then, a compaction every ``shape.compact_every`` turns,
    each turn's full assistant message and usage in ``llm_complete``."""
    rnd = random.Random(shape.seed)
    seq, ts = 0, shape.start
    it = 0
    turn, parent = f"{shape.turn_prefix}{it:0{shape.turn_digits}d}", None

    def event(kind: EventType, data: dict) -> AgentEvent:
        nonlocal seq, ts
        seq += 1
        ts += rnd.random() * 0.02
        return AgentEvent(seq, ts, shape.session_id, shape.run_id, turn, parent, it, kind, data)

    def state() -> dict:
        return {"turn_counter": it, "turn_id": turn, "max_iterations": 10_000, "compacted": False, "parent_turn_id": parent, "metadata": {}}

    yield event(EventType.RUN_START, {
        "prompt": "Find and fix the failing test.", "model": shape.model, "provider": shape.provider, "system": "You are careful.",
        "tools": list(shape.tools), "max_iterations": 10_000, "turn_state": state(), "agent_name": None
    })
    while seq < count - 1:
        yield event(EventType.ITERATION_START, {"turn_state": state()})
        if it and it % shape.compact_every == 0:
            yield event(EventType.COMPACTION_START, {"tokens_before": 150_000, "messages": 2 * it, "threshold": 140_000, "trigger": "auto", "focus": None})
            summary = {
                "tokens_before": 150_000, "tokens_after": 20_000, "messages_removed": 2 * it - 4, "kept_messages": 4,
                "summary": "## Progress\nTests read.", "fallback": False, "usage": None
            }
            if shape.summary_usage:
                summary["usage"] = {"input_tokens": 150_000, "output_tokens": 800, "cache_read_tokens": 0, "cache_write_tokens": 0}
                summary["cost_usd"] = 0.02
            yield event(EventType.COMPACTION_COMPLETE, summary)
        yield event(EventType.CONTEXT_ASSEMBLED, {"window": 200_000, "threshold": 160_000, "messages": 2 * it + 1, "messages_hidden": 0})
        started_llm = ts
        yield event(EventType.LLM_START, {"model": shape.model, "provider": shape.provider, "attempt": 0, "messages": 2 * it + 1, "tools_enabled": True})
        words = []
        for _ in range(rnd.randint(100, 400)):
            piece = rnd.choice(WORDS) + (" " if rnd.random() < 0.9 else ".\n")
            words.append(piece)
            yield event(EventType.TEXT_DELTA, {"text": piece})
        uses = []
        for index in range(shape.first_index, shape.first_index + rnd.randint(1, 3)):
            call_id = f"toolu_{it:06d}_{index}"
            name = rnd.choice(shape.tools)
            arguments = {"path": f"src/{rnd.choice(WORDS)}.py", "limit": rnd.randint(10, 400)}
            yield event(EventType.TOOL_CALL_START, {"call_id": call_id, "name": name, "index": index})
            yield event(EventType.TOOL_CALL_DELTA, {"call_id": call_id, "index": index, "delta": json.dumps(arguments)})
            yield event(EventType.TOOL_CALL_READY, {"call_id": call_id, "name": name, "arguments": arguments, "index": index})
            uses.append((call_id, name, arguments))
        message = {"role": "assistant", "content": [{"type": "text", "text": "".join(words)}] + [{"type": "tool_use", "id": c, "name": n, "input": a} for c, n, a in uses]}
        usage = {"input_tokens": 2_000 + 50 * it, "output_tokens": len(words), "cache_read_tokens": 1_500, "cache_write_tokens": 0}
        yield event(EventType.LLM_COMPLETE, {
            "message": message, "usage": usage, "cost_usd": 0.004, "model": shape.model, "stop_reason": "tool_use",
            "duration_s": ts - started_llm if shape.llm_measured else 3.2, "attempts": 1
        })
        results = []
        for call_id, name, arguments in uses:
            if name == "bash" and rnd.random() < 0.3:
                yield event(EventType.APPROVAL_REQUIRED, {"call_id": call_id, "tool": name, "arguments": arguments, "reason": "bash asks before it runs"})
                yield event(EventType.APPROVAL_DECISION, {"call_id": call_id, "tool": name, "decision": "approve", "decided_by": "person", "wait_s": 2.5})
            started = ts
            yield event(EventType.TOOL_START, {"call_id": call_id, "name": name, "arguments": arguments, "started_at": started})
            failed = False
            if shape.tool_time:
                failed = rnd.random() < 0.03
                ts += rnd.expovariate(1 / (0.05 if name != "bash" else 1.5))  # the tool's own run time
            content = f"Error: {name} failed" if failed else "\n".join(f"{i}: {rnd.choice(WORDS)} = {rnd.randint(0, 999)}" for i in range(rnd.randint(1, 30)))
            yield event(EventType.TOOL_RESULT, {"call_id": call_id, "name": name, "content": content, "is_error": failed, "duration_s": ts - started, "started_at": started, "ended_at": ts})
            results.append({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": failed})
        following = f"{shape.turn_prefix}{it + 1:0{shape.turn_digits}d}"
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
