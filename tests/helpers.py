"""Small helpers shared by the tests (not fixtures: plain functions)."""

from __future__ import annotations

from typing import Any

from agent_kernel import Agent, AgentEvent, EventType


def make_agent(model: Any, tools: Any = (), **kwargs: Any) -> Agent:
    """An agent with no journal, no context management and fast retries unless overridden."""
    kwargs.setdefault("journal", None)
    kwargs.setdefault("context", None)
    kwargs.setdefault("permissions", "bypass")
    kwargs.setdefault("retry_base_delay", 0.001)
    return Agent(model, tools=tools, **kwargs)


def types(events: list[AgentEvent]) -> list[str]:
    """The event types, as strings, in order."""
    return [e.type.value for e in events]


def of_type(events: list[AgentEvent], t: EventType) -> list[AgentEvent]:
    """The events of one type."""
    return [e for e in events if e.type is t]
