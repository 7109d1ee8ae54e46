"""memory.summaries — the mid-term memory: a session's compaction summaries, oldest first.

Each compaction leaves its summary in a ``compaction_complete`` event. They are read from the
session's events (``agent.events``, which reads older ones back from the journal), so they are
there after ``Agent.resume`` and in a fork, whose journal starts with the events before its turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agent_kernel.events._event import AgentEvent, EventType


@dataclass(frozen=True, slots=True)
class Summary:
    """One compaction summary.

    Attributes:
        text: the summary (a notice, for a sliding-window fallback).
        source: ``model`` (a summary call), ``session_memory`` (the running summary) or
            ``fallback`` (every summary call failed).
        trigger: ``auto``, ``manual`` or ``overflow``.
        messages_removed: messages it stands for.
        seq: the ``compaction_complete`` event's seq.
        ts: when (epoch seconds).
        run_id: the run it happened in.
    """

    text: str
    source: str
    trigger: str
    messages_removed: int
    seq: int
    ts: float
    run_id: str


def summaries_of(events: Iterable[AgentEvent]) -> list[Summary]:
    """The top-level agent's compaction summaries among ``events``, oldest first."""
    out = []
    for event in events:
        if event.type is EventType.COMPACTION_COMPLETE and event.agent_id is None:
            data = event.data
            source = data.get("source") or ("fallback" if data.get("fallback") else "model")
            out.append(Summary(str(data.get("summary", "")), source, str(data.get("trigger", "")), int(data.get("messages_removed", 0)), event.seq, event.ts, event.run_id))
    return out
