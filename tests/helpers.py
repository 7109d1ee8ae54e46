"""Small helpers shared by the tests (not fixtures: plain functions)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Collection
from types import ModuleType
from typing import Any

from agent_kernel import Agent, AgentEvent, EventType
from agent_kernel.messages import Message
from agent_kernel.models._base import ModelRequest, ToolSpec

#: The smallest request an adapter sends, and a tool for requests that offer one.
HELLO = ModelRequest((Message.user("hello"),))
ADD = ToolSpec("add", "Adds two numbers.", {"type": "object", "properties": {"a": {"type": "integer"}}})


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


def unmapped_exceptions(sdk: ModuleType, fixed: Collection[str], by_status: Collection[str]) -> list[str]:
    """The exception classes ``sdk`` exports that ``models/sdk_errors.py`` does not map."""
    # dir() rather than vars(): an SDK loads some attributes lazily, on first access.
    public = [getattr(sdk, name) for name in dir(sdk) if not name.startswith("_")]
    exported = {obj.__name__ for obj in public if inspect.isclass(obj) and issubclass(obj, BaseException)}
    assert {"APIStatusError", "APIConnectionError"} <= exported, "the SDK no longer exports its base errors"
    return sorted(exported - set(fixed) - set(by_status))


class Overlap:
    """Counts how many callers are inside ``visit`` at once; ``most`` is the highest count seen."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0

    async def visit(self) -> None:
        """Enters, lets every other ready task run, and leaves."""
        self.running += 1
        self.most = max(self.most, self.running)
        await asyncio.sleep(0)
        self.running -= 1
