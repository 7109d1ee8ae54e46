"""jupyter.controls — the ``%agent`` subcommands: status, models, tools, sessions, frames, replay.

Each ``cmd_NAME(magics, rest)`` implements ``%agent NAME rest``. Listings return DataFrames (so
a notebook can filter them); actions print one line saying what they did. ``wait`` and
``compact`` await, so they live with the magics' async entry point.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..errors import UserError
from ..events import AgentEvent
from ..tools.registry import BUILTIN_TOOLS, as_tool
from ..tools.tool import Tool

if TYPE_CHECKING:
    from .magics import AgentMagics

__all__ = [
    "cmd_cancel",
    "cmd_events",
    "cmd_history",
    "cmd_model",
    "cmd_models",
    "cmd_replay",
    "cmd_reset",
    "cmd_sessions",
    "cmd_tools",
    "cmd_usage",
    "status",
]


def _usage_line(stats: Any) -> str:
    cost = "cost unknown" if stats.cost_usd is None else f"${stats.cost_usd:.4f}"
    return (f"{stats.input_tokens:,} tokens in · {stats.output_tokens:,} out · {cost} · "
            f"{stats.turns} turn{'s' if stats.turns != 1 else ''}")


def status(magics: AgentMagics) -> None:
    """``%agent``: the current session's model, mode, tools, usage, and how cells run."""
    from .magics import _mode_of

    mode = magics.execution_mode()
    session = magics.sessions.find()
    if session is None:
        model = magics.model or "the default model (AGENT_KERNEL_MODEL, a provider with a key, or offline)"
        print(f"No conversation yet: the next %%agent cell starts session {magics.sessions.current!r} "
              f"with {model}, mode {magics.mode}, at most {magics.max_turns} turns.")
    else:
        agent = session.agent
        state = "running" if session.running else "idle"
        print(f"Session {session.name!r} ({agent.session_id}), {state}: model {agent.model.name} "
              f"({agent.model.provider}), mode {_mode_of(agent)}, at most {agent.max_iterations} turns.")
        print(f"Tools: {', '.join(agent.tools.names) or 'none'}.")
        print(f"Usage: {_usage_line(agent.stats)}.")
        others = [name for name in magics.sessions.names if name != session.name]
        if others:
            print(f"Other sessions: {', '.join(others)}.")
    print(f"Cells run {mode.name}: {mode.reason}.")


def cmd_model(magics: AgentMagics, rest: str) -> None:
    """``%agent model NAME``: the model of the current session and of sessions started later."""
    session = magics.sessions.find()
    if not rest:
        current = session.agent.model.name if session else (magics.model or "the default model")
        print(f"Model: {current}. Change it with %agent model NAME (%agent models lists them).")
        return
    model = magics.resolve_model(rest)
    magics.model = rest
    if session is not None:
        if session.running:
            raise UserError("The session is running a prompt; change the model once it ends (%agent wait).")
        session.agent.model = model
        print(f"Session {session.name!r} now uses {model.name}; so will new sessions.")
    else:
        print(f"New sessions will use {model.name}.")


def cmd_models(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent models``: the Model objects in the notebook, then the models the catalog knows."""
    from ..models.registry import list_models

    rows: list[dict[str, Any]] = []
    for name in magics._model_names():
        model = magics.shell.user_ns[name]
        rows.append({"spec": name, "provider": model.provider, "name": model.name,
                     "context_window": getattr(model, "context_window", None),
                     "input_price": None, "output_price": None, "key_env": None, "ready": True})
    rows += [info.to_dict() for info in list_models()]
    return pd.DataFrame(rows)


def _tool_row(tool: Tool, source: str, in_session: bool) -> dict[str, Any]:
    return {"name": tool.name, "source": source, "in_session": in_session,
            "read_only": tool.read_only, "category": tool.category, "description": tool.description}


def cmd_tools(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent tools``: the session's tools, then @tool objects in the notebook, then built-ins."""
    session = magics.sessions.find()
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    if session is not None:
        for tool in session.agent.tools:
            source = "built-in" if tool.name in BUILTIN_TOOLS and as_tool(tool.name) is tool else "notebook"
            rows.append(_tool_row(tool, source, True))
            seen.add(tool.name)
    for name in magics._tool_names():
        tool = magics.shell.user_ns[name]
        if tool.name not in seen:
            rows.append(_tool_row(tool, "notebook", False))
            seen.add(tool.name)
    for name in BUILTIN_TOOLS:
        if name not in seen:
            rows.append(_tool_row(as_tool(name), "built-in", False))
    return pd.DataFrame(rows, columns=["name", "source", "in_session", "read_only", "category", "description"])


def cmd_sessions(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent sessions``: one row per session."""
    rows = [session.row(session.name == magics.sessions.current) for session in magics.sessions]
    columns = ["name", "current", "session_id", "model", "runs", "running", "messages",
               "input_tokens", "output_tokens", "cost_usd", "journal"]
    return pd.DataFrame(rows, columns=columns)


def cmd_history(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent history``: the current session's turns (``journal.frames.turns_df``)."""
    from ..journal.frames import turns_df

    return turns_df(magics.sessions.get(rest or None).agent)


def cmd_events(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent events``: the current session's events (``journal.frames.events_df``)."""
    from ..journal.frames import events_df

    return events_df(magics.sessions.get(rest or None).agent)


def cmd_usage(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent usage``: tokens, cost and counts per session."""
    rows = []
    for session in magics.sessions:
        s = session.agent.stats
        rows.append({"session": session.name, "turns": s.turns, "llm_calls": s.llm_calls,
                     "tool_calls": s.tool_calls, "input_tokens": s.input_tokens,
                     "output_tokens": s.output_tokens, "cache_read_tokens": s.cache_read_tokens,
                     "cache_write_tokens": s.cache_write_tokens, "cost_usd": s.cost_usd})
    columns = ["session", "turns", "llm_calls", "tool_calls", "input_tokens", "output_tokens",
               "cache_read_tokens", "cache_write_tokens", "cost_usd"]
    return pd.DataFrame(rows, columns=columns)


def cmd_cancel(magics: AgentMagics, rest: str) -> None:
    """``%agent cancel``: cancels every run in progress."""
    running = [(session, run) for session in magics.sessions for run in session.running]
    if not running:
        print("Nothing is running.")
        return
    for session, run in running:
        run.cancel(rest or "cancelled with %agent cancel")
        print(f"Cancelling the run in session {session.name!r}; it records how it ended in its journal.")


def cmd_reset(magics: AgentMagics, rest: str) -> None:
    """``%agent reset``: a new conversation in the current session, with the same settings."""
    session = magics.sessions.get()
    old = session.agent.journal
    magics.sessions.put(session.name, magics._new_agent(session, {}))
    kept = f"; the old journal is kept at {old.path}" if getattr(old, "path", None) else ""
    print(f"Session {session.name!r} starts a new conversation "
          f"({magics.sessions.get().agent.session_id}){kept}.")


def _journal_of(magics: AgentMagics, name: str) -> Any:
    from ..journal.resume import resolve_journal_path

    session = magics.sessions.find(name or None)
    if session is not None:
        journal = session.agent.journal
        if journal is None:
            return list(session.agent.events)  # journal=None: the events kept in memory
        journal.flush()
        return journal.path
    if not name:
        raise UserError("No agent session yet: %agent replay SESSION_ID (or a journal path) replays an earlier one.")
    if magics.journal_dir is not None:
        configured = Path(magics.journal_dir).expanduser() / f"{name}.jsonl"
        if configured.is_file():
            return configured
    return resolve_journal_path(name)


def cmd_replay(magics: AgentMagics, rest: str) -> None:
    """``%agent replay [SESSION]``: shows each recorded run of a session again (view and summary).

    ``SESSION`` is a session name, a session id with a journal under ``.agent_kernel/sessions``,
    or a journal path; default: the current session.
    """
    from IPython.display import display

    from ..journal.reader import read_events
    from .view import AgentView

    source = _journal_of(magics, rest)
    events: list[AgentEvent] = source if isinstance(source, list) else read_events(source)
    runs: dict[str, list[AgentEvent]] = {}
    for event in events:
        runs.setdefault(event.run_id, []).append(event)
    if not runs:
        print("That session has no recorded runs yet.")
        return
    for run_events in runs.values():
        view = AgentView()
        for event in run_events:
            view.handle(event)
        view.close_run()  # a view shown afterwards renders the whole run from its snapshot
        display(view)
        display(view.summary())
