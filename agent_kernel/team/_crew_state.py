"""crew_state — a crew's shared state, and what a conditional task reads.

``Crew(..., state={...})`` gives the crew one dict its agents share: each agent gets two tools,
``read_state`` and ``write_state``, and every write is journaled as ``crew_state`` (tagged with
the writing agent's id and task), so the journal says who decided what. Values are JSON.

A task with ``when=`` runs only if its condition, called with an ``Outcomes`` (the outputs of
the tasks finished so far, by name, and the shared state), returns True.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from agent_kernel.errors import ToolError
from agent_kernel.events import payloads as p
from agent_kernel.events._event import EventType
from agent_kernel.tools._tool import Tool, ToolContext

if TYPE_CHECKING:
    from agent_kernel.team._crew import TaskOutput

_MAX_VALUE_CHARS = 20_000  # one value, as JSON: the state goes into prompts when read


class Outcomes(Mapping[str, "TaskOutput"]):
    """What a task's ``when`` condition reads: ``outcomes["review"]`` is the ``TaskOutput`` of
    task ``review`` once it has finished (absent before), ``outcomes.state`` the crew's shared
    state (read-only).

    Example:
        >>> Task("Ship it.", shipper, depends_on=["review"],  # doctest: +SKIP
        ...      when=lambda outcomes: outcomes.state.get("verdict") == "approve")
    """

    def __init__(self, outputs: Mapping[str, TaskOutput], state: Mapping[str, Any]) -> None:
        self._outputs = dict(outputs)
        self.state: Mapping[str, Any] = MappingProxyType(state)

    def __getitem__(self, task: str) -> TaskOutput:
        return self._outputs[task]

    def __iter__(self) -> Iterator[str]:
        return iter(self._outputs)

    def __len__(self) -> int:
        return len(self._outputs)

    def __repr__(self) -> str:
        return f"Outcomes({list(self._outputs)}, state={dict(self.state)!r})"


def state_tools(state: dict[str, Any], task: str | None) -> list[Tool]:
    """``read_state`` and ``write_state`` over ``state`` for the agent doing ``task``."""

    def read_state(key: str | None = None) -> str:
        """Reads the crew's shared state, which every agent of the crew can read and write.

        Args:
            key: the key to read; leave it out to read the whole state.
        """
        if key is None:
            return json.dumps(state, ensure_ascii=False, default=str)
        if key not in state:
            known = ", ".join(sorted(state)) or "none yet"
            raise ToolError(f"The shared state has no key {key!r}. Keys: {known}.")
        return json.dumps(state[key], ensure_ascii=False, default=str)

    def write_state(key: str, value: str, ctx: ToolContext) -> str:
        """Writes one value into the crew's shared state, for the other agents and the crew's conditions to read.

        Args:
            key: the key to set.
            value: the value as JSON (a string in quotes, a number, true/false, a list or an object); text that is not JSON is stored as a string.
        """
        if len(value) > _MAX_VALUE_CHARS:
            raise ToolError(f"The value is {len(value):,} characters; the shared state takes at most {_MAX_VALUE_CHARS:,} per key. Store a summary.")
        try:
            parsed: Any = json.loads(value)
        except ValueError:
            parsed = value
        state[key] = parsed
        run = ctx.run
        emitter = getattr(run, "emitter", None)
        if emitter is not None:
            emitter.later(EventType.CREW_STATE, p.CrewState(key=key, value=parsed, task=task, agent_id=getattr(run, "agent_id", None)))
        return f"Set {key!r}."

    # Both change nothing outside the crew's run, so no permission mode asks for them; writes
    # run one at a time, in the model's order.
    return [
        Tool(read_state, name="read_state", read_only=True, category="crew"),
        Tool(write_state, name="write_state", read_only=True, concurrency_safe=False, category="crew"),
    ]
