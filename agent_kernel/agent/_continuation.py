"""continuation — how a conversation goes on elsewhere: resumed from its journal, or forked at a turn.

``Agent.resume`` and ``Agent.fork`` are thin wrappers over ``restore`` and ``fork_of``. A resumed
journal that ends inside a turn (a process died between the model's tool calls and their results)
keeps that turn open for ``Agent.continue_run`` (``Interrupted.unfinished_results`` answers the
calls that had started as interrupted), and ``request_of`` turns each pending ``approval_required`` back
into the question it asked.

A journal's header records the session's sandbox and permission settings (``recorded_settings``)
and is signed by the writer with this user's key (``guard._signing``): ``restore`` resumes only a
journal this install wrote, unless the person trusts it (``trust=True``), and gives the resumed
agent the recorded settings unless others are passed.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel.agent._parts import DEFAULT, journal_path
from agent_kernel.agent._settings import AgentSettings, check_known_settings
from agent_kernel.errors import UserError
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.events._turn import TurnState, new_id
from agent_kernel.guard._approvals import ApprovalRequest
from agent_kernel.guard._permissions import Permissions
from agent_kernel.guard._sandbox import Sandbox
from agent_kernel.guard._signing import header_problem
from agent_kernel.journal import Journal, read_header, resolve_journal_path
from agent_kernel.journal._event_log import DEFAULT_KEEP_EVENTS
from agent_kernel.journal._reader import check_schema
from agent_kernel.journal._resume import fork_point, rebuild, replace_tool_results, scan, turn_history
from agent_kernel.memory._trail import SessionTrail

if TYPE_CHECKING:
    from agent_kernel.agent._agent import Agent
    from agent_kernel.models._base import Model


def recorded_settings(agent: Agent) -> dict[str, Any]:
    """What a new journal's header records of ``agent``: its sandbox and permission settings."""
    settings: dict[str, Any] = {}
    sandbox = agent.tool_extras.get("sandbox")
    if isinstance(sandbox, Sandbox):
        settings["sandbox"] = sandbox.settings()
    permissions = getattr(agent.permissions, "permissions", None)
    if isinstance(permissions, Permissions):
        settings["permissions"] = {"mode": permissions.mode, "allow": list(permissions.allow), "ask": list(permissions.ask),
                                   "deny": list(permissions.deny)}
    return {"settings": settings} if settings else {}


def _trusted_header(path: Path, trust: bool) -> dict[str, Any] | None:
    """The journal's header, once it is known to be this install's (or ``trust`` says so)."""
    header = read_header(path)
    check_schema(header, path)  # a newer version's journal: say which upgrade reads it, before trust
    problem = None if trust else header_problem(header)
    if problem is not None:
        raise UserError(
            f"{path} is not resumed: {problem}. A journal decides the tools, system prompt and settings of the "
            f"agent resumed from it, so only one this install wrote is resumed without asking. If you trust this "
            f"one, resume it with Agent.resume({str(path)!r}, trust=True) (in a notebook: %agent resume --trust {path.stem})."
        )
    return header


def _recorded(header: dict[str, Any] | None, agent_kwargs: dict[str, Any]) -> None:
    """Puts the header's recorded sandbox and permissions into ``agent_kwargs`` where none are given."""
    settings = header.get("settings") if header is not None else None
    if not isinstance(settings, dict):
        return
    if "sandbox" in settings and "sandbox" not in agent_kwargs:
        agent_kwargs["sandbox"] = settings["sandbox"]
    recorded = settings.get("permissions")
    if isinstance(recorded, dict) and "permissions" not in agent_kwargs and "approver" not in agent_kwargs:
        agent_kwargs["permissions"] = Permissions(**recorded)


def restore(cls: type[Agent], session_id_or_path: str | os.PathLike[str], agent_kwargs: dict[str, Any], *, trust: bool = False) -> Agent:
    """``Agent.resume``: an agent of class ``cls`` rebuilt from its journal (see there).

    Raises:
        UserError: the journal's header is not signed by this install and ``trust`` is not set.
    """
    from agent_kernel.journal import Journal

    path = resolve_journal_path(session_id_or_path, agent_kwargs.get("working_dir"))
    header = _trusted_header(path, trust)
    _recorded(header, agent_kwargs)
    # One pass, line by line: a long session's journal never has to fit in memory.
    # Session memory's trail (todo list, running summary, files read) is filled in the same pass.
    trail = SessionTrail()
    found = scan(path, agent_kwargs.get("keep_events", DEFAULT_KEEP_EVENTS), trail.add)
    messages, _, last_seq = found.resumed
    session_id = found.session_id or path.stem
    if "model" not in agent_kwargs:
        agent_kwargs["model"] = _recorded_model([found.last_run_start] if found.last_run_start is not None else [])
    opened = None
    if agent_kwargs.get("journal", DEFAULT) is DEFAULT:
        opened = agent_kwargs["journal"] = Journal(path, session_id=session_id)
    try:
        agent = cls(session_id=session_id, **_known(cls, agent_kwargs, "Agent.resume"))
    except BaseException:
        if opened is not None:
            opened.close()  # its lock would refuse the next try
        raise
    if found.interrupted is not None:
        # The process died inside a turn: its tool calls stay open for continue_run, which
        # asks again where an approval was pending; a new prompt closes them instead.
        messages = messages[:-1]
        # Upward, lazily: only a resumed delegation needs the team part above this one.
        from agent_kernel.team._subagents import resumable_delegation

        agent._interrupted = found.interrupted.keeping_subagents(lambda tool: resumable_delegation(agent.tools.get(tool)))
    agent.messages[:] = messages
    agent.history[:] = found.turn_states
    agent.events.load(found.tail, found.total)  # the tail in memory; the rest is read back from the journal
    agent.memory.session.adopt(trail, found.total)
    agent._seq = itertools.count(last_seq + 1)
    if header is not None and isinstance(header.get("forked_from"), dict):
        agent.forked_from = header["forked_from"]  # a fork stays one when resumed
    return agent


def fork_of(
    self: Agent,
    at: int | str,
    model: str | Model | None,
    journal: Any,
    replace_result: Mapping[str, str] | None,
    overrides: dict[str, Any],
) -> Agent:
    """``Agent.fork``: a new agent whose history is ``self``'s up to the start of turn ``at``."""
    if self._context is not None:
        raise UserError("Cannot fork while a run is in progress; wait for it or call agent.cancel() first.")
    overrides = _known(type(self), overrides, "fork")
    point = fork_point(list(self.events), at)
    session_id = new_id("s_")
    forked_from = {"session_id": self.session_id, "run_id": point.run_id, "turn_id": point.turn_state.turn_id, "iteration": point.turn_state.turn_counter}
    made = None
    if journal is DEFAULT or isinstance(journal, (str, os.PathLike)):
        path = journal_path(journal, session_id, Path(overrides.get("working_dir", self.working_dir)))
        journal = made = Journal(path, session_id=session_id, metadata={"forked_from": forked_from, **recorded_settings(self)})
    settings = AgentSettings.carried(self)  # every setting the fork does not override is this agent's
    if model is not None:
        settings["model"] = model
    try:
        fork = type(self)(session_id=session_id, journal=journal, **{**settings, **overrides})
    except BaseException:
        if made is not None:  # the journal made for this fork holds its header alone: no fork, no file
            made.close()
            made.path.unlink(missing_ok=True)
        raise
    if "permissions" not in overrides and "approver" not in overrides:
        fork.permissions = self.permissions  # the same gate: the same rules and the same person asked
    for pinned in getattr(self.context_manager, "components", ()):  # agent.context.add: the fork sees the same texts
        if hasattr(fork.context_manager, "add"):
            fork.context_manager.add(pinned.name, pinned.content, priority=pinned.priority, truncatable=pinned.truncatable, keep=pinned.keep)
    fork.tool_extras.update(self.tool_extras)
    fork.tool_extras["memory"] = fork.memory  # the fork keeps its own todo list and reminders
    # The history before the turn, as this session recorded it, under the fork's session id.
    events = [dataclasses.replace(e, session_id=session_id) for e in replace_tool_results(point.events, replace_result or {})]
    if fork.journal is not None:
        for event in events:
            fork.journal.write(event)
        fork.journal.flush()
    fork.events.load(events)
    trail = SessionTrail()
    for event in events:
        trail.add(event)
    fork.memory.session.adopt(trail, len(events))
    fork.messages[:] = rebuild(events).messages
    fork.history[:] = turn_history(events)
    fork._seq = itertools.count((events[-1].seq if events else 0) + 1)
    turn = point.turn_state
    fork._start_turn = TurnState(turn.turn_counter, new_id("t_"), fork.max_iterations, False, turn.parent_turn_id, turn.metadata)
    fork.forked_from = forked_from
    return fork


def _known(cls: type[Agent], settings: dict[str, Any], caller: str) -> dict[str, Any]:
    """``settings``, once each is known to be an argument of ``cls`` (else a UserError naming it)."""
    check_known_settings(cls, settings, caller)
    return settings


def request_of(data: Mapping[str, Any]) -> ApprovalRequest:
    """The ``ApprovalRequest`` an ``approval_required`` event recorded."""
    key = str(data.get("key") or data.get("tool"))
    return ApprovalRequest(
        str(data.get("call_id")), str(data.get("tool")), dict(data.get("arguments") or {}), key,
        data.get("rule"), str(data.get("reason", "")), None, full_key=key,
    )


def _recorded_model(events: Sequence[AgentEvent]) -> str | None:
    """The model string of the last recorded run, when one can rebuild it (not scripted ones)."""
    for event in reversed(events):
        if event.type is EventType.RUN_START:
            provider, name = event.data.get("provider"), event.data.get("model")
            if provider == "offline":
                return "offline"
            if provider in ("anthropic", "openai") and name:
                return f"{provider}:{name}"
            return None
    return None


