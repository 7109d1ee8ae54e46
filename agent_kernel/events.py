"""events — the event vocabulary (``EventType``) and the frozen ``AgentEvent`` record.

Everything that happens in a run is an ``AgentEvent``; every surface (journal, live view,
DataFrames, your own ``async for``) consumes the same stream. ``to_dict`` / ``from_dict`` are the
one conversion each way, so adding an event type touches only ``EventType``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["AgentEvent", "EventType"]


class EventType(str, Enum):
    """What an event records. Values are snake_case strings, stable in journals."""

    RUN_START = "run_start"
    ITERATION_START = "iteration_start"
    CONTEXT_ASSEMBLED = "context_assembled"
    MICRO_COMPACTION = "micro_compaction"
    COMPACTION_START = "compaction_start"
    COMPACTION_RETRY = "compaction_retry"
    COMPACTION_FALLBACK = "compaction_fallback"
    COMPACTION_COMPLETE = "compaction_complete"
    LLM_START = "llm_start"
    TEXT_DELTA = "text_delta"
    THINKING_DELTA = "thinking_delta"
    TOOL_CALL_START = "tool_call_start"
    TOOL_CALL_DELTA = "tool_call_delta"
    TOOL_CALL_READY = "tool_call_ready"
    LLM_COMPLETE = "llm_complete"
    CONTINUATION = "continuation"
    RETRY = "retry"
    MODEL_FALLBACK = "model_fallback"
    STALL_DETECTED = "stall_detected"
    APPROVAL_REQUIRED = "approval_required"
    APPROVAL_DECISION = "approval_decision"
    TOOL_START = "tool_start"
    TOOL_PROGRESS = "tool_progress"
    TOOL_RESULT = "tool_result"
    RECURSION = "recursion"
    MAX_ITERATIONS_REACHED = "max_iterations_reached"
    SUBAGENT_START = "subagent_start"
    SUBAGENT_FINISH = "subagent_finish"
    CANCELLED = "cancelled"
    ERROR = "error"
    RUN_FINISH = "run_finish"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """One recorded fact of a run.

    Attributes:
        seq: monotonic per session, starting at 1.
        ts: wall-clock time, seconds since the epoch (UTC).
        session_id: the conversation this belongs to.
        run_id: correlation id of one ``run``/``stream`` call.
        turn_id: the ``TurnState.turn_id`` of the recursion that emitted it.
        parent_turn_id: that turn's parent (the previous turn, or the spawning turn of a sub-agent).
        iteration: the ``TurnState.turn_counter``.
        type: what happened.
        data: the facts, JSON-serialisable; keys are documented per type in the docs.
        agent_id: which agent emitted it (``None`` for the top-level agent).
    """

    seq: int
    ts: float
    session_id: str
    run_id: str
    turn_id: str | None
    parent_turn_id: str | None
    iteration: int
    type: EventType
    data: dict[str, Any]
    agent_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``type`` as its string value)."""
        return {
            "seq": self.seq,
            "ts": self.ts,
            "session_id": self.session_id,
            "run_id": self.run_id,
            "turn_id": self.turn_id,
            "parent_turn_id": self.parent_turn_id,
            "iteration": self.iteration,
            "type": self.type.value,
            "data": self.data,
            "agent_id": self.agent_id,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AgentEvent:
        """Rebuilds an event from ``to_dict`` output."""
        return cls(
            seq=d["seq"],
            ts=d["ts"],
            session_id=d["session_id"],
            run_id=d["run_id"],
            turn_id=d.get("turn_id"),
            parent_turn_id=d.get("parent_turn_id"),
            iteration=d.get("iteration", 0),
            type=EventType(d["type"]),
            data=d.get("data") or {},
            agent_id=d.get("agent_id"),
        )
