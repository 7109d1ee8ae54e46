"""events — the event vocabulary (``EventType``) and the frozen ``AgentEvent`` record.

Everything that happens in a run is an ``AgentEvent``; every surface (journal, live view,
DataFrames, your own ``async for``) consumes the same stream. ``to_dict`` / ``from_dict`` are the
one conversion each way, so adding an event type touches only ``EventType``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any

#: An event's ``data`` as emitters pass it: one of the ``TypedDict`` types of
#: ``agent_kernel.events.payloads`` (``PAYLOADS[type]``), a plain dict at run time.
Payload = Mapping[str, Any]

#: Records an event from a part of a run that holds no emitter itself (approvals, compaction, MCP
#: servers, memory): ``emit(EventType.X, payloads.X(...))``.
Emit = Callable[["EventType", Payload], object]


class EventType(str, Enum):
    """What an event records. Values are snake_case strings, stable in journals."""

    RUN_START = "run_start"
    ITERATION_START = "iteration_start"
    CONTEXT_ASSEMBLED = "context_assembled"
    CONTEXT_ADDED = "context_added"
    CONTEXT_WARNING = "context_warning"
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
    STEER = "steer"
    PAUSED = "paused"
    RESUMED = "resumed"
    SUBAGENT_START = "subagent_start"
    SUBAGENT_FINISH = "subagent_finish"
    CANCELLED = "cancelled"
    ERROR = "error"
    RUN_FINISH = "run_finish"
    # MCP servers (agent_kernel.mcp). Data keys: mcp_connect {server, transport, target,
    # server_name, server_version, protocol_version, duration_s, reconnect}; mcp_tools_listed
    # {server, tools, resources, prompts}; mcp_warning {server, tool, message} (a tool skipped);
    # mcp_error {server, phase (connect|call), message, stderr_tail}, followed by an ``error``
    # event of kind "mcp"; mcp_elicitation {server, message, schema, action, content, reason};
    # mcp_resource {server, uri, mime_type, chars, capped} (a resource attached to a prompt);
    # mcp_sampling {server, messages, system_prompt, max_tokens, action, model, text, usage, cost_usd,
    # stop_reason, duration_s, reason}.
    MCP_CONNECT = "mcp_connect"
    MCP_TOOLS_LISTED = "mcp_tools_listed"
    MCP_WARNING = "mcp_warning"
    MCP_ERROR = "mcp_error"
    MCP_ELICITATION = "mcp_elicitation"
    MCP_RESOURCE = "mcp_resource"
    MCP_SAMPLING = "mcp_sampling"
    # Memory (agent_kernel.memory): the long-term store's steps, the todo list, session-memory
    # summaries and system reminders; docs/events.md lists their keys.
    MEMORY_LOADED = "memory_loaded"
    MEMORY_RECALL = "memory_recall"
    MEMORY_WRITE_START = "memory_write_start"
    MEMORY_SAVED = "memory_saved"
    MEMORY_WRITE_COMPLETE = "memory_write_complete"
    MEMORY_WARNING = "memory_warning"
    TODO_UPDATE = "todo_update"
    SESSION_MEMORY_UPDATE = "session_memory_update"
    SYSTEM_REMINDER = "system_reminder"
    # The loop's phases (LoopState), plan mode, background sub-agents' reports, crews' shared
    # state and conditional tasks.
    STATE_CHANGE = "state_change"
    PLAN_MODE = "plan_mode"
    SUBAGENT_REPORT = "subagent_report"
    CREW_STATE = "crew_state"
    TASK_CONDITION = "task_condition"
    # Notebook tools (read_notebook, edit_notebook, run_cell): every change to a notebook and every
    # cell run; docs/events.md lists their keys.
    NOTEBOOK_EDIT = "notebook_edit"
    NOTEBOOK_RUN = "notebook_run"

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
        data: the facts, JSON-serialisable; ``PAYLOADS[type]`` types its keys (docs/events.md).
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


def _payloads() -> dict[EventType, type]:
    from agent_kernel.events import payloads as p

    T = EventType
    return {
        T.RUN_START: p.RunStart, T.ITERATION_START: p.IterationStart, T.CONTEXT_ASSEMBLED: p.ContextAssembled,
        T.CONTEXT_ADDED: p.ContextAdded, T.CONTEXT_WARNING: p.ContextWarning,
        T.MICRO_COMPACTION: p.MicroCompaction, T.COMPACTION_START: p.CompactionStart,
        T.COMPACTION_RETRY: p.CompactionRetry, T.COMPACTION_FALLBACK: p.CompactionFallback,
        T.COMPACTION_COMPLETE: p.CompactionComplete, T.LLM_START: p.LlmStart, T.TEXT_DELTA: p.TextDelta,
        T.THINKING_DELTA: p.ThinkingDelta, T.TOOL_CALL_START: p.ToolCallStart, T.TOOL_CALL_DELTA: p.ToolCallDelta,
        T.TOOL_CALL_READY: p.ToolCallReady, T.LLM_COMPLETE: p.LlmComplete, T.CONTINUATION: p.Continuation,
        T.RETRY: p.Retry, T.MODEL_FALLBACK: p.ModelFallback, T.STALL_DETECTED: p.StallDetected,
        T.APPROVAL_REQUIRED: p.ApprovalRequired, T.APPROVAL_DECISION: p.ApprovalDecision, T.TOOL_START: p.ToolStart,
        T.TOOL_PROGRESS: p.ToolProgress, T.TOOL_RESULT: p.ToolResult, T.RECURSION: p.Recursion,
        T.MAX_ITERATIONS_REACHED: p.MaxIterationsReached, T.STEER: p.Steer, T.PAUSED: p.Paused, T.RESUMED: p.Resumed,
        T.SUBAGENT_START: p.SubagentStart,
        T.SUBAGENT_FINISH: p.SubagentFinish, T.CANCELLED: p.Cancelled, T.ERROR: p.Error, T.RUN_FINISH: p.RunFinish,
        T.MCP_CONNECT: p.McpConnect, T.MCP_TOOLS_LISTED: p.McpToolsListed, T.MCP_WARNING: p.McpWarning,
        T.MCP_ERROR: p.McpError, T.MCP_ELICITATION: p.McpElicitation, T.MCP_RESOURCE: p.McpResource,
        T.MCP_SAMPLING: p.McpSampling,
        T.MEMORY_LOADED: p.MemoryLoaded, T.MEMORY_RECALL: p.MemoryRecall, T.MEMORY_WRITE_START: p.MemoryWriteStart,
        T.MEMORY_SAVED: p.MemorySaved, T.MEMORY_WRITE_COMPLETE: p.MemoryWriteComplete, T.MEMORY_WARNING: p.MemoryWarning,
        T.TODO_UPDATE: p.TodoUpdate, T.SESSION_MEMORY_UPDATE: p.SessionMemoryUpdate, T.SYSTEM_REMINDER: p.SystemReminder,
        T.STATE_CHANGE: p.StateChange, T.PLAN_MODE: p.PlanMode, T.SUBAGENT_REPORT: p.SubagentReport,
        T.CREW_STATE: p.CrewState, T.TASK_CONDITION: p.TaskCondition,
        T.NOTEBOOK_EDIT: p.NotebookEdit, T.NOTEBOOK_RUN: p.NotebookRun,
    }


#: Each event type's ``data``, as a ``TypedDict`` (see ``agent_kernel.events.payloads`` and docs/events.md).
PAYLOADS: Mapping[EventType, type] = MappingProxyType(_payloads())
