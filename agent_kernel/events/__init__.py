"""events — the vocabulary of what happens in a run.

``AgentEvent`` and ``EventType`` (every step of a run is one event), the payload types of each
event's ``data`` (``agent_kernel.events.payloads``), ``TurnState`` (where in a run an event
happened) and ``EventSink`` (what receives them: the journal, a recorder, an exporter).
Every other part may import this one; it imports none of them.
"""

from __future__ import annotations

from agent_kernel.events._event import PAYLOADS, AgentEvent, Emit, EventType, Payload
from agent_kernel.events._sink import EventRecorder, EventSink
from agent_kernel.events._turn import TurnState

__all__ = ["PAYLOADS", "AgentEvent", "Emit", "EventRecorder", "EventSink", "EventType", "Payload", "TurnState"]
