"""jupyter.protocol — the messages between ``AgentView`` and its ES module, declared once.

The live view talks to ``widgets/agent_view.js`` in anywidget custom messages, each a dict with
a ``type``. This module is the one list of them: what the front end sends the kernel
(``TO_KERNEL``) and what the kernel sends the front end (``TO_FRONT_END``), as ``TypedDict``s.
The view dispatches incoming messages by this list and checks them against it; the tests check
every message either side sends against it, and that the ES module handles and sends exactly
these types.

Everything else the front end needs travels in the ``snapshot`` state and the ``batch`` ops,
which ``transcript.Transcript.to_json`` and ``view.AgentView`` define.
"""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict


class Sync(TypedDict):
    """Front end → kernel: the view has rendered; send the whole state (a ``snapshot``)."""

    type: Literal["sync"]


class Approval(TypedDict):
    """Front end → kernel: a person decided a pending tool call."""

    type: Literal["approval"]
    call_id: str
    decision: Literal["approve", "reject", "always_allow"]
    agent: NotRequired[str | None]  # the card's agent (sub-agents may number their calls alike)
    reason: NotRequired[str | None]  # a rejection's reason, which the model reads


class Stop(TypedDict):
    """Front end → kernel: the Stop button."""

    type: Literal["stop"]


class Steer(TypedDict):
    """Front end → kernel: a person sent a message to the running agent (``agent.steer``).

    Untrusted like any input from a page: the view ignores blank text, refuses text longer than
    ``view.STEER_CAP`` characters and messages for a run that has ended, saying so in the view."""

    type: Literal["steer"]
    text: str


class Pause(TypedDict):
    """Front end → kernel: the Pause button (``agent.pause()``: hold at the next turn boundary)."""

    type: Literal["pause"]


class ResumeRun(TypedDict):
    """Front end → kernel: the Resume button (``agent.resume_run()``)."""

    type: Literal["resume_run"]


class Elicitation(TypedDict):
    """Front end → kernel: a person answered an MCP server's question (the view's ``elicitation`` form)."""

    type: Literal["elicitation"]
    id: str  # the question's id, as the ``elicitation`` trait gave it
    action: Literal["accept", "decline", "cancel"]
    content: NotRequired[dict[str, Any] | None]  # the form's values (accept only)


class Snapshot(TypedDict):
    """Kernel → front end: the whole view state, replacing what the front end has."""

    type: Literal["snapshot"]
    v: int  # the state's version; later batches build on it
    state: dict[str, Any]  # the items as the view sends them (with their ``html``) and the status


class Batch(TypedDict):
    """Kernel → front end: the changes since the last message (coalesced on a timer)."""

    type: Literal["batch"]
    v: int
    ops: list[dict[str, Any]]  # add / append / draw / set / status operations (see view.py)


#: What the front end may send, by ``type``.
TO_KERNEL: dict[str, type] = {"sync": Sync, "approval": Approval, "stop": Stop, "elicitation": Elicitation,
                              "steer": Steer, "pause": Pause, "resume_run": ResumeRun}
#: What the kernel may send, by ``type``.
TO_FRONT_END: dict[str, type] = {"snapshot": Snapshot, "batch": Batch}


def problem(message: Any, direction: dict[str, type]) -> str | None:
    """Why ``message`` is not a message of ``direction`` (``TO_KERNEL`` or ``TO_FRONT_END``), or None."""
    if not isinstance(message, dict):
        return f"a message must be a dict, got {type(message).__name__}"
    kind = message.get("type")
    shape = direction.get(kind) if isinstance(kind, str) else None
    if shape is None:
        return f"unknown message type {kind!r}; known: {', '.join(direction)}"
    import pydantic  # only when a message is checked (clicks, tests): not on import

    unknown = sorted(set(message) - set(shape.__annotations__))
    if unknown:
        return f"{kind}: unknown keys {unknown}"
    try:
        pydantic.TypeAdapter(shape).validate_python(message, strict=True)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        return f"{kind}: {'.'.join(map(str, first['loc']))}: {first['msg']}"
    return None
