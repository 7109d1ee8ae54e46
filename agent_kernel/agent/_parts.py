"""agent_parts — how ``Agent``'s arguments become its parts: model, gate, context, journal.

Kept apart from ``agent`` so the class reads as what an agent does; ``crew`` and ``continuation``
build agents' parts the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

from agent_kernel.agent._settings import DEFAULT, AgentSettings
from agent_kernel.errors import UserError

if TYPE_CHECKING:
    from agent_kernel.agent._agent import Agent
    from agent_kernel.events._sink import EventSink
    from agent_kernel.models._base import Model


T = TypeVar("T")


class LoopSetting(Generic[T]):
    """An ``Agent`` attribute kept in its ``LoopConfig`` (``agent.stall_timeout`` is ``agent.config.stall_timeout``),
    checked on assignment by its ``AgentSettings`` field."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, agent: None, owner: type) -> LoopSetting[T]: ...
    @overload
    def __get__(self, agent: Agent, owner: type | None = None) -> T: ...
    def __get__(self, agent: Agent | None, owner: type | None = None) -> T | LoopSetting[T]:
        return self if agent is None else cast(T, getattr(agent.config, self.name))

    def __set__(self, agent: Agent, value: T) -> None:
        setattr(agent.config, self.name, AgentSettings.checked(self.name, value))


def resolve_model_arg(model: str | Model | None) -> Model:
    if model is not None and not isinstance(model, str):
        if not hasattr(model, "stream"):
            raise UserError(f"{model!r} is not a model: pass a model string such as 'anthropic:claude-sonnet-4-6', 'offline', or an object with a stream() method.")
        return model
    from agent_kernel.models._registry import resolve_model

    return resolve_model(model)


def build_permissions(permissions: Any, approver: Callable[..., Any] | None) -> Any:
    from agent_kernel.guard._permissions import build_gate

    return build_gate(permissions, approver)


def build_context_manager(context: Any, model: Model) -> Any:
    if context is None:
        return None
    if context is DEFAULT:
        from agent_kernel.context import ContextManager

        return ContextManager()
    return context


class ContextOff:
    """``agent.context`` when the agent has no context manager that takes pinned text: every
    use says why and what to do instead of failing on a missing attribute."""

    def __init__(self, policy: Any) -> None:
        self._why = (
            "Context management is off for this agent (context=None)" if policy is None
            else f"This agent's context policy ({type(policy).__name__}) takes no pinned context"
        )

    def __getattr__(self, name: str) -> Any:
        raise UserError(f"{self._why}, so agent.context.{name} cannot work; create the agent with the default "
                        "context (or context=ContextManager(...)) to add pinned or retrieved text.")


def otel_sink() -> EventSink:
    from agent_kernel.journal._otel import OtelSink  # imports OpenTelemetry: only when asked for

    return OtelSink()


def journal_path(journal: Any, session_id: str, working_dir: Path) -> Path:
    """Where ``Agent(journal=...)`` records session ``session_id``: the default file under
    ``working_dir``, a file path as given, or ``<session_id>.jsonl`` in a folder (one that exists,
    or a str ending in a slash: a ``Path`` drops its trailing slash, so a new folder is told apart
    only in a str).

    Raises:
        UserError: ``journal`` is an empty path.
    """
    from agent_kernel.journal import session_path

    if journal is DEFAULT:
        return session_path(session_id, working_dir)
    text = os.fspath(journal)
    if not text:
        raise UserError("journal='' names no file. Pass a file (journal='runs/a.jsonl'), a folder "
                        "(journal='runs/'), or journal=None to keep no journal.")
    path = Path(text)
    # A folder keeps one journal per session in it, as the default folder does: many runs, one
    # glob for sql().
    path = path / f"{session_id}.jsonl" if is_journal_folder(journal) else path
    _check_can_hold(path, journal)
    return path


def _check_can_hold(path: Path, journal: Any) -> None:
    """Refuses a journal path no file can be made at: a folder on the way is a file."""
    blocking = file_in_the_way(path.parent)
    if blocking is not None:
        raise UserError(f"journal={os.fspath(journal)!r} cannot be written: {blocking} is a file, not a folder. "
                        "Pass a path under a folder, or journal=None to keep no journal.")


def file_in_the_way(folder: Path) -> Path | None:
    """The file that stops ``folder`` from being made (it, or the nearest of its parents that
    exists, is not a folder), or None when it is a folder or can be made."""
    for path in (folder, *folder.parents):
        if path.exists():
            return None if path.is_dir() else path
    return None


def is_journal_folder(journal: Any) -> bool:
    """True when the ``journal`` setting names a folder of per-session journals (see ``journal_path``)."""
    if journal is DEFAULT or not isinstance(journal, (str, os.PathLike)):
        return False
    text = os.fspath(journal)
    return bool(text) and (text.endswith(("/", os.sep)) or Path(text).is_dir())


def open_journal(journal: Any, session_id: str, working_dir: Path, metadata: dict[str, Any] | None = None) -> Any:
    """The journal an agent records in, opened, for its ``journal`` setting (None: no journal);
    ``metadata`` goes into the header of a new file."""
    if journal is None:
        return None
    if journal is DEFAULT or isinstance(journal, (str, os.PathLike)):
        from agent_kernel.journal import Journal

        path = journal_path(journal, session_id, working_dir)
        try:
            return Journal(path, session_id=session_id, metadata=metadata)
        except OSError as error:  # a folder that cannot be made, a disk full, no permission
            where = "the default journal" if journal is DEFAULT else f"journal={os.fspath(journal)!r}"
            raise UserError(f"{where} cannot be opened at {path}: {error.strerror or error}. "
                            "Pass a journal path that can be written, or journal=None to keep no journal.") from error
    return journal
