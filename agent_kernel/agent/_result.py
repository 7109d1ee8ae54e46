"""result — what one run produced: ``RunResult``, built from the run's events.

``Agent.run`` returns one; the notebook runner and ``Crew`` build theirs from a run's events the
same way (``RunResult.from_events``), so a result never holds more than the journal says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from typing_extensions import Self

from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.models._base import Usage
from agent_kernel.runtime._state import LoopStats, TerminationReason


def run_finish_of(events: Sequence[AgentEvent]) -> tuple[AgentEvent, LoopStats]:
    """The ``run_finish`` of the run the first event belongs to, and its ``LoopStats``.

    Raises:
        ValueError: the events hold no ``run_finish`` of that run (it has not ended).
    """
    run_id = events[0].run_id if events else None
    finish = next((e for e in reversed(events) if e.type is EventType.RUN_FINISH and e.run_id == run_id), None)
    if finish is None:
        raise ValueError("these events hold no run_finish for their run; the run has not ended yet")
    stats = finish.data.get("stats", {})
    return finish, LoopStats(**{k: v for k, v in stats.items() if k in LoopStats.__dataclass_fields__})


@dataclass
class RunResult:
    """What one run produced.

    Attributes:
        text: the final answer (the last assistant text).
        termination_reason: why the run ended.
        turns: model turns taken.
        usage: tokens summed over the run's model calls.
        cost_usd: cost in USD, or None when a model's price is unknown.
        events: every event of the run, in order. With a journal this reads the run from its
            agent's memory while held there, else back from the journal (``Agent(keep_events=)``).
        stats: the run's ``LoopStats``.
        error: the error message when the run ended with ERROR.
    """

    text: str
    termination_reason: TerminationReason
    turns: int
    usage: Usage
    cost_usd: float | None
    events: Sequence[AgentEvent] = field(repr=False)
    stats: LoopStats = field(repr=False)
    session_id: str = ""
    run_id: str = ""
    error: str | None = None

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        return f"{type(self).__name__}(text={text!r}, termination_reason={self.termination_reason.value!r}, turns={self.turns})"

    @classmethod
    def from_events(cls, events: Sequence[AgentEvent]) -> Self:
        """Builds the result of the run whose events these are (from its ``run_finish``).

        The run is the one the first event belongs to; a sub-agent's events in the list are kept
        in ``events`` but do not decide the result.

        Raises:
            ValueError: the events hold no ``run_finish`` of that run (it has not ended).
        """
        finish, stats = run_finish_of(events)
        data = finish.data
        return cls(
            text=data.get("text", ""),
            termination_reason=TerminationReason(data["reason"]),
            turns=stats.turns,
            usage=Usage(stats.input_tokens, stats.output_tokens, stats.cache_read_tokens, stats.cache_write_tokens),
            cost_usd=stats.cost_usd,
            events=list(events),
            stats=stats,
            session_id=finish.session_id,
            run_id=finish.run_id,
            error=data.get("error"),
            **cls._extra_fields(finish),
        )

    @classmethod
    def _extra_fields(cls, finish: AgentEvent) -> dict[str, Any]:
        """What a subclass reads from ``run_finish`` beyond the common fields."""
        return {}

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The run's tool results as dicts (``call_id``, ``name``, ``content``, ``is_error``, ...)."""
        # A sub-agent's calls are in ``events`` too (tagged with its agent_id); these are the run's own.
        return [e.data for e in self.events if e.type is EventType.TOOL_RESULT and e.run_id == self.run_id]
