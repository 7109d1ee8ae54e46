"""context_policy — the seam between the loop and whatever keeps a conversation in its window.

The loop asks a ``ContextPolicy`` four things each turn: is preparing this request going to call
a model (``due``), prepare it (``prepare``), shrink a conversation the provider refused as too
long (``shrink``), and learn the tokens a call really used (``record_usage``).
``context.ContextManager`` is the implementation the ``Agent`` uses; a custom policy implements
the same four methods. The protocol lives at the loop's layer so the loop depends on it, not on
the context package above it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from agent_kernel.messages import Message
from agent_kernel.models._base import Model, ModelRequest, Usage

if TYPE_CHECKING:
    from agent_kernel.events._event import Emit
    from agent_kernel.events._turn import TurnState



class SummaryCall(Protocol):
    """A compaction's summary call, which counts in the run's usage and cost."""

    @property
    def usage(self) -> Usage | None:
        """The summary call's tokens."""
        ...

    @property
    def cost_usd(self) -> float | None:
        """Its cost (None: the price is unknown)."""
        ...


@dataclass(frozen=True, slots=True)
class PreparedContext:
    """What the loop sends, and whether the stored conversation changed.

    Attributes:
        request: the request to send (old tool results may be cleared in it).
        history: the new stored conversation when auto-compaction rewrote it, else None.
        compacted: True when auto-compaction happened (the turn is marked compacted).
        compaction: that compaction's summary call, when one was made.
    """

    request: ModelRequest
    history: list[Message] | None = None
    compacted: bool = False
    compaction: SummaryCall | None = None


@runtime_checkable
class ContextPolicy(Protocol):
    """Keeps each request of a run inside the model's context window."""

    def due(self, request: ModelRequest, model: Model) -> bool:
        """Whether preparing ``request`` will call a model (the loop then streams its events live)."""
        ...

    async def prepare(self, history: list[Message], turn: TurnState, request: ModelRequest, model: Model, emit: Emit) -> PreparedContext:
        """The request to send for this turn (and the history, if it was compacted)."""
        ...

    async def shrink(self, history: list[Message], model: Model, emit: Emit, *, reason: str) -> list[Message] | None:
        """A smaller history after the provider refused one as too long, or None if none can be made."""
        ...

    def record_usage(self, request: ModelRequest, usage: Usage) -> None:
        """The tokens ``request`` really took, so later estimates are corrected."""
        ...
