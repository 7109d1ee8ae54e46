"""errors — the exceptions agent_kernel raises, grouped by intent.

``UserError`` and its subclasses are mistakes a user can fix (the message says how);
``ModelError`` and ``ToolError`` are failures of a run; ``RunCancelled`` marks a cancelled run.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

__all__ = [
    "AgentKernelError",
    "ApprovalPending",
    "ContextOverflow",
    "JournalError",
    "JournalWriteError",
    "MissingAPIKey",
    "ModelError",
    "RunCancelled",
    "StopRun",
    "ToolError",
    "UnknownModel",
    "UnknownTool",
    "UserError",
    "did_you_mean",
]


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """Returns `` Did you mean 'x'?`` for the closest known name, or an empty string."""
    match = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" Did you mean {match[0]!r}?" if match else ""


class AgentKernelError(Exception):
    """Base class of every agent_kernel exception."""


class UserError(AgentKernelError):
    """A usage mistake; the message says what went wrong and how to fix it."""


class UnknownModel(UserError):
    """A model string names a provider or model that is not known."""


class UnknownTool(UserError):
    """A tool named by string is neither built in nor defined."""


class MissingAPIKey(UserError):
    """A provider was chosen explicitly but its API key is not set."""


class JournalError(UserError):
    """A journal cannot be opened or written (for example, a second writer)."""


class JournalWriteError(JournalError):
    """The journal's file cannot take the events written to it (disk full, read-only, deleted).

    The events stay queued in memory, in order, and nothing already in the file is damaged: a
    failed write is cut back to the last whole line. The message names the file, the cause and
    what to do.

    Attributes:
        path: the journal file.
        cause: the ``OSError`` behind it, or None when the file was deleted or replaced.
        event: the event whose write found the failure (it is queued), or None.
    """

    def __init__(self, message: str, *, path: object = None, cause: OSError | None = None, event: Any = None) -> None:
        super().__init__(message)
        self.path = path
        self.cause = cause
        self.event = event


class ApprovalPending(UserError):
    """An approval is needed but nobody can answer it (headless, no policy)."""


class ModelError(AgentKernelError):
    """A model request failed.

    Args:
        message: what happened.
        retryable: whether the same request may succeed if sent again.
        status_code: the HTTP status, when there was one.
        retry_after: seconds the server asked us to wait, when it said.
        overloaded: the provider is overloaded (a fallback model may take over).
        kind: a short machine-readable label (``rate_limit``, ``server``, ``connection``,
            ``stream_cut``, ``stall``, ``auth``, ``bad_request``, ``not_found``,
            ``context_length``, ``scripted``, ...).
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status_code: int | None = None,
        retry_after: float | None = None,
        overloaded: bool = False,
        kind: str = "error",
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status_code = status_code
        self.retry_after = retry_after
        self.overloaded = overloaded
        self.kind = kind


class ContextOverflow(ModelError):
    """A request does not fit the model's context window even after compaction; it was not sent.

    Attributes:
        tokens: the request's estimated input tokens.
        window: the model's context window.
        parts: the largest parts of the request, ``(description, tokens)``, largest first.
    """

    def __init__(self, message: str, *, tokens: int, window: int, parts: list[tuple[str, int]]) -> None:
        super().__init__(message, kind="context_overflow")
        self.tokens = tokens
        self.window = window
        self.parts = parts


class ToolError(AgentKernelError):
    """Raised by a tool to return an error result the model can read."""


class StopRun(AgentKernelError):
    """Raised by a hook (or a tool, via ``ToolContext.stop``) to end the run cleanly."""

    def __init__(self, reason: str = "stopped by a hook", final_message: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.final_message = final_message


class RunCancelled(AgentKernelError):
    """The run was cancelled (``agent.cancel()``, the Stop button, a kernel interrupt)."""
