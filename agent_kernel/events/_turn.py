"""TurnState — where in a run something happened: one immutable value per recursion of the loop.

Each recursion of ``tt`` gets a new one from ``next_turn()``; every event carries its ``turn_id``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_kernel.events.payloads import TurnStateDict


def new_id(prefix: str = "") -> str:
    """A short random id (12 hex characters), optionally prefixed."""
    return prefix + uuid.uuid4().hex[:12]


def _frozen(metadata: dict[str, Any] | MappingProxyType | None) -> MappingProxyType:
    return MappingProxyType(dict(metadata or {}))


@dataclass(frozen=True, slots=True)
class TurnState:
    """The state of one recursion of the loop. Frozen: use ``next_turn`` / ``with_metadata``.

    Example:
        >>> t0 = TurnState.initial(max_iterations=3)
        >>> t1 = t0.next_turn()
        >>> (t1.turn_counter, t1.parent_turn_id == t0.turn_id)
        (1, True)
    """

    turn_counter: int
    turn_id: str
    max_iterations: int | None  # None: no limit (the run ends only when the model answers or is stopped)
    compacted: bool = False
    parent_turn_id: str | None = None
    metadata: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def initial(
        cls,
        max_iterations: int | None = 20,
        *,
        parent_turn_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> TurnState:
        """The first turn of a run (counter 0). ``parent_turn_id`` links a sub-agent to its spawner."""
        if max_iterations is not None and max_iterations < 1:
            raise ValueError(f"max_iterations must be at least 1, got {max_iterations}")
        return cls(0, new_id("t_"), max_iterations, False, parent_turn_id, _frozen(metadata))

    def next_turn(self, *, compacted: bool = False) -> TurnState:
        """The following turn: counter + 1, a new id, this turn as parent, metadata copied."""
        return TurnState(
            self.turn_counter + 1,
            new_id("t_"),
            self.max_iterations,
            compacted,
            self.turn_id,
            _frozen(self.metadata),
        )

    def with_metadata(self, **values: Any) -> TurnState:
        """A copy with ``values`` merged into the metadata."""
        return replace(self, metadata=_frozen({**self.metadata, **values}))

    def with_compacted(self) -> TurnState:
        """A copy marked as compacted."""
        return replace(self, compacted=True)

    @property
    def is_initial(self) -> bool:
        """True for the first turn of a run."""
        return self.turn_counter == 0

    @property
    def is_final(self) -> bool:
        """True once the turn counter has reached ``max_iterations`` (never when it is None)."""
        return self.max_iterations is not None and self.turn_counter >= self.max_iterations

    def to_dict(self) -> TurnStateDict:
        """A JSON-serialisable dict; ``from_dict`` rebuilds an equal TurnState."""
        return {
            "turn_counter": self.turn_counter,
            "turn_id": self.turn_id,
            "max_iterations": self.max_iterations,
            "compacted": self.compacted,
            "parent_turn_id": self.parent_turn_id,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TurnState:
        """Rebuilds a TurnState from ``to_dict`` output."""
        return cls(
            d["turn_counter"],
            d["turn_id"],
            d["max_iterations"],
            d.get("compacted", False),
            d.get("parent_turn_id"),
            _frozen(d.get("metadata")),
        )
