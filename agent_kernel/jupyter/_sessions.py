"""jupyter.sessions — the named conversations of one notebook, and which one is current.

A ``Session`` is a name, the ``Agent`` holding its conversation, and the runs started in it.
``%%agent`` cells continue the current session; ``--session NAME`` switches to (or creates)
another; ``--new`` replaces a session's agent with a fresh conversation with the same settings.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agent_kernel.agent._agent import Agent
from agent_kernel.errors import UserError, did_you_mean
from agent_kernel.jupyter._runner import RunHandle

DEFAULT_SESSION = "default"


@dataclass
class Session:
    """One named conversation.

    Attributes:
        name: what ``--session`` calls it.
        agent: the agent holding the conversation.
        runs: the runs started in it, oldest first.
    """

    name: str
    agent: Agent
    runs: list[RunHandle] = field(default_factory=list)

    @property
    def running(self) -> list[RunHandle]:
        """Runs still in progress."""
        return [run for run in self.runs if not run.done()]

    def row(self, current: bool) -> dict[str, Any]:
        """A row for ``%agent sessions``."""
        agent = self.agent
        return {
            "name": self.name,
            "current": current,
            "session_id": agent.session_id,
            "model": agent.model.name,
            "runs": len(self.runs),
            "running": bool(self.running),
            "messages": len(agent.messages),
            "input_tokens": agent.stats.input_tokens,
            "output_tokens": agent.stats.output_tokens,
            "cost_usd": agent.stats.cost_usd,
            "journal": str(agent.journal.path) if getattr(agent.journal, "path", None) else None,
        }


class Sessions:
    """The sessions of one shell by name, with one current (``default`` at first)."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self.current = DEFAULT_SESSION

    def __contains__(self, name: object) -> bool:
        return name in self._sessions

    def __iter__(self) -> Iterator[Session]:
        return iter(self._sessions.values())

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def names(self) -> list[str]:
        """Session names in creation order."""
        return list(self._sessions)

    def find(self, name: str | None = None) -> Session | None:
        """The session called ``name`` (default: the current one), or None."""
        return self._sessions.get(self.current if name is None else name)

    def get(self, name: str | None = None) -> Session:
        """The session called ``name`` (default: the current one).

        Raises:
            UserError: there is no such session; the message lists the ones there are.
        """
        session = self.find(name)
        if session is None:
            wanted = self.current if name is None else name
            if not self._sessions:
                raise UserError(f"No agent session yet: run an %%agent cell first (it starts {wanted!r}).")
            raise UserError(f"No agent session {wanted!r}.{did_you_mean(wanted, self._sessions)} "
                            f"Sessions: {', '.join(self._sessions)}.")
        return session

    def put(self, name: str, agent: Agent) -> Session:
        """Makes ``agent`` the conversation of session ``name`` (replacing any) and makes it current.

        The replaced agent's journal is closed; its file is kept.
        """
        old = self._sessions.get(name)
        if old is not None and old.agent is not agent:
            if old.running:
                raise UserError(f"Session {name!r} has a run in progress; wait for it (%agent wait) "
                                "or cancel it (%agent cancel) before starting a new conversation.")
            old.agent.close()
        session = Session(name, agent, old.runs if old is not None and old.agent is agent else [])
        self._sessions[name] = session
        self.current = name
        return session

    def running(self) -> list[RunHandle]:
        """Every run in progress, in any session."""
        return [run for session in self for run in session.running]

    def close(self) -> None:
        """Cancels runs in progress and closes every journal (the extension is unloading)."""
        for session in self:
            running = session.running
            for run in running:
                run.cancel("the agent_kernel extension was unloaded")
            if running:  # the journal stays open until the run has recorded how it ended
                running[-1].task.add_done_callback(functools.partial(_close_agent, session.agent))
            else:
                session.agent.close()
        self._sessions.clear()
        self.current = DEFAULT_SESSION


def _close_agent(agent: Agent, _task: object) -> None:
    """Closes ``agent`` once its last run has ended (a task's done callback)."""
    agent.close()
