"""A recorded run built by hand, with known timings, for the journal, frame and timeline tests.

Two turns: the first streams text and three tool calls (two read-only calls that run in
parallel, one write that waits for an approval), the second compacts the history and answers.
Times are seconds after ``T0``.
"""

from __future__ import annotations

from typing import Any

from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.events._turn import TurnState

T0 = 1_700_000_000.0
SESSION = "s_frames"
RUN = "r_frames"
TURN0 = TurnState(0, "t_first", 5)
TURN1 = TurnState(1, "t_second", 5, False, "t_first")
PROMPT = "Copy a.txt and c.txt into b.txt."
ANSWER = "All done."
SUMMARY = "The files were read and b.txt was written."

_USES = [
    {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a.txt"}},
    {"type": "tool_use", "id": "c2", "name": "read", "input": {"path": "c.txt"}},
    {"type": "tool_use", "id": "c3", "name": "write", "input": {"path": "b.txt", "text": "hi"}},
]
RESULTS = [
    {"type": "tool_result", "tool_use_id": "c1", "content": "alpha", "is_error": False},
    {"type": "tool_result", "tool_use_id": "c2", "content": "gamma", "is_error": False},
    {"type": "tool_result", "tool_use_id": "c3", "content": "wrote 2 bytes", "is_error": False},
]


def _result(call_id: str, name: str, content: str, started: float, ended: float) -> dict[str, Any]:
    return {
        "call_id": call_id,
        "name": name,
        "content": content,
        "is_error": False,
        "duration_s": ended - started,
        "started_at": T0 + started,
        "ended_at": T0 + ended,
    }


# (seconds after T0, turn, type, data)
_SCRIPT: list[tuple[float, TurnState, EventType, dict[str, Any]]] = [
    (0.00, TURN0, EventType.RUN_START, {"prompt": PROMPT, "model": "scripted", "system": None, "tools": ["read", "write"], "max_iterations": 5, "turn_state": TURN0.to_dict()}),
    (0.01, TURN0, EventType.ITERATION_START, {"turn_state": TURN0.to_dict()}),
    (0.02, TURN0, EventType.CONTEXT_ASSEMBLED, {"messages": 1, "window": 2000}),
    (0.03, TURN0, EventType.LLM_START, {"model": "scripted", "attempt": 0, "messages": 1}),
    (0.10, TURN0, EventType.TEXT_DELTA, {"text": "Let me "}),
    (0.20, TURN0, EventType.TEXT_DELTA, {"text": "look."}),
    (0.30, TURN0, EventType.TOOL_CALL_START, {"call_id": "c1", "name": "read", "index": 0}),
    (0.31, TURN0, EventType.TOOL_CALL_DELTA, {"call_id": "c1", "index": 0, "delta": '{"path": "a.txt"}'}),
    (0.32, TURN0, EventType.TOOL_CALL_READY, {"call_id": "c1", "name": "read", "arguments": {"path": "a.txt"}, "index": 0}),
    (0.33, TURN0, EventType.TOOL_START, {"call_id": "c1", "name": "read", "arguments": {"path": "a.txt"}, "started_at": T0 + 0.33}),
    (0.40, TURN0, EventType.TOOL_CALL_START, {"call_id": "c2", "name": "read", "index": 1}),
    (0.42, TURN0, EventType.TOOL_CALL_READY, {"call_id": "c2", "name": "read", "arguments": {"path": "c.txt"}, "index": 1}),
    (0.43, TURN0, EventType.TOOL_START, {"call_id": "c2", "name": "read", "arguments": {"path": "c.txt"}, "started_at": T0 + 0.43}),
    (0.50, TURN0, EventType.TOOL_CALL_START, {"call_id": "c3", "name": "write", "index": 2}),
    (0.52, TURN0, EventType.TOOL_CALL_READY, {"call_id": "c3", "name": "write", "arguments": {"path": "b.txt", "text": "hi"}, "index": 2}),
    (0.60, TURN0, EventType.LLM_COMPLETE, {
        "message": {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, *_USES]},
        "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_tokens": 5, "cache_write_tokens": 0},
        "cost_usd": 0.001, "model": "scripted", "stop_reason": "tool_use", "duration_s": 0.57,
    }),
    (0.61, TURN0, EventType.APPROVAL_REQUIRED, {"call_id": "c3", "tool": "write", "reason": "write changes files"}),
    (0.80, TURN0, EventType.TOOL_RESULT, _result("c1", "read", "alpha", 0.33, 0.80)),
    (0.90, TURN0, EventType.TOOL_RESULT, _result("c2", "read", "gamma", 0.43, 0.90)),
    (1.10, TURN0, EventType.APPROVAL_DECISION, {"call_id": "c3", "tool": "write", "decision": "approve", "decided_by": "callback", "wait_s": 0.49}),
    (1.11, TURN0, EventType.TOOL_START, {"call_id": "c3", "name": "write", "arguments": {"path": "b.txt", "text": "hi"}, "started_at": T0 + 1.11}),
    (1.30, TURN0, EventType.TOOL_RESULT, _result("c3", "write", "wrote 2 bytes", 1.11, 1.30)),
    (1.31, TURN0, EventType.RECURSION, {"tool_results": RESULTS, "next_turn_id": TURN1.turn_id}),
    (1.32, TURN1, EventType.ITERATION_START, {"turn_state": TURN1.to_dict()}),
    (1.33, TURN1, EventType.COMPACTION_START, {"tokens_before": 5000, "messages": 3, "trigger": "auto"}),
    (1.80, TURN1, EventType.COMPACTION_COMPLETE, {"summary": SUMMARY, "messages_removed": 1, "kept_messages": 2, "tokens_before": 5000, "tokens_after": 900, "fallback": False}),
    (1.81, TURN1, EventType.CONTEXT_ASSEMBLED, {"messages": 3, "window": 2000}),
    (1.82, TURN1, EventType.LLM_START, {"model": "scripted", "attempt": 0, "messages": 3}),
    (1.90, TURN1, EventType.TEXT_DELTA, {"text": ANSWER}),
    (2.00, TURN1, EventType.LLM_COMPLETE, {
        "message": {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]},
        "usage": {"input_tokens": 200, "output_tokens": 10, "cache_read_tokens": 0, "cache_write_tokens": 0},
        "cost_usd": 0.002, "model": "scripted", "stop_reason": "end_turn", "duration_s": 0.18,
    }),
    (2.01, TURN1, EventType.RUN_FINISH, {"reason": "end_turn", "text": ANSWER, "stats": {"turns": 2}}),
]


def recorded_run() -> list[AgentEvent]:
    """The events of the run described in the module docstring, seq 1 to 31."""
    return [
        AgentEvent(seq, T0 + at, SESSION, RUN, turn.turn_id, turn.parent_turn_id, turn.turn_counter, kind, data)
        for seq, (at, turn, kind, data) in enumerate(_SCRIPT, 1)
    ]


def until(events: list[AgentEvent], kind: EventType, nth: int = 1) -> list[AgentEvent]:
    """The events up to and including the ``nth`` event of ``kind`` (a run still in progress)."""
    seen = 0
    for i, event in enumerate(events):
        if event.type is kind:
            seen += 1
            if seen == nth:
                return events[: i + 1]
    raise ValueError(f"no {kind} number {nth}")
