"""jupyter.controls — the ``%agent`` subcommands: status, help, settings, frames, sessions, replay.

Each ``cmd_NAME(magics, rest)`` implements ``%agent NAME rest`` (``max-turns`` is
``cmd_max_turns``). Listings and the session's record return DataFrames (so a notebook can
filter them, or keep one: ``calls = %agent calls``); ``%agent session`` returns the session's
``Agent``; actions print one line saying what they did. ``wait`` and ``compact`` await, so they
live with the magics' async entry point.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from agent_kernel.errors import JournalError, UserError, did_you_mean
from agent_kernel.events._event import AgentEvent
from agent_kernel.tools._registry import BUILTIN_TOOLS, as_tool
from agent_kernel.tools._tool import Tool

if TYPE_CHECKING:
    from agent_kernel.jupyter._magics import AgentMagics

#: ``%agent help``: each subcommand and what it does, in the order shown.
HELP = (
    ("%agent", "the session: model, tools, mode, system prompt, usage, and how cells run"),
    ("%agent session [NAME]", "the session's Agent, for Python: agent = %agent session"),
    ("%agent model NAME", "switch the session's model (and new sessions'); %agent models lists them"),
    ("%agent tools [NAMES]", "list the tools; with names (or none), set the session's tools"),
    ("%agent mode MODE", "set the session's permission mode (default, accept_edits, plan, bypass)"),
    ("%agent system TEXT", "set the session's system prompt (none: clear it)"),
    ("%agent max-turns N", "set the session's model turns per prompt"),
    ("%agent budget DOLLARS", "end each run before it would spend more (none: no cap)"),
    ("%agent setup", "choose a provider, model and key in a form, and test the endpoint"),
    ("%agent events", "the session's events as a DataFrame (agent.events_df())"),
    ("%agent turns", "one row per turn (agent.turns_df()); %agent history is the same"),
    ("%agent calls", "one row per tool call (agent.tool_calls_df())"),
    ("%agent usage", "one row per model call: tokens and cost (agent.usage_df())"),
    ("%agent timeline", "the session's runs drawn over time (agent.timeline())"),
    ("%agent sessions", "every session of this notebook"),
    ("%agent compact [FOCUS]", "summarise the conversation so far"),
    ("%agent wait / cancel", "wait for / cancel runs in progress"),
    ("%agent say \"TEXT\"", "send a message to the running agent; it reads it at the next turn (agent.steer)"),
    ("%agent pause / resume-run", "hold the running agent at the next turn boundary / let it go on"),
    ("%agent approvals", "the tool calls waiting for approval: call id, tool, arguments, agent, since"),
    ("%agent approve CALL_ID", "approve a waiting tool call (a unique start of its id is enough)"),
    ("%agent reject CALL_ID \"REASON\"", "reject a waiting tool call; the model reads the reason"),
    ("%agent resume [SESSION]", "after a restart: the newest (or named) session back from its journal; "
                                "a run cut off while an approval waited goes on, its card shown again"),
    ("%agent replay [SESSION]", "show each recorded run of a session again"),
    ("%agent show [RUN]", "the transcript of one run (a run id, or last), rebuilt from its journal"),
    ("%agent reset", "a new conversation in the session, same settings"),
    ("%agent undo [RUN_ID]", "revert one run's notebook edits (edit_notebook) in one step; the latest run's by default"),
    ("%agent fix [REQUEST]", "ask the agent about the last failing cell: its source, traceback and the names it uses"),
    ("%agent on-error [on|off]", "an \"Ask the agent\" button under each traceback, asking as %agent fix does "
                                 "about that cell (off by default); alone: whether it is on"),
    ("%agent panel", "the session's conversation beside the notebook (JupyterLab, Notebook 7): its runs, "
                     "their approvals, and a box whose Send starts the next run"),
    ("%agent mcp", "the session's MCP servers; mcp add NAME [--timeout S] [--trusted] -- COMMAND ... adds one, mcp remove NAME stops one"),
)


def _usage_line(stats: Any) -> str:
    from agent_kernel.jupyter._summary import format_cost

    cost = format_cost(stats.cost_usd)
    return (f"{stats.input_tokens:,} tokens in · {stats.output_tokens:,} out · {cost} · "
            f"{stats.turns} turn{'s' if stats.turns != 1 else ''}")


def cmd_help(magics: AgentMagics, rest: str) -> None:
    """``%agent help``: the subcommands, then the ``%%agent`` options."""
    width = max(len(command) for command, _ in HELP)
    print("Subcommands:")
    for command, what in HELP:
        print(f"  {command.ljust(width)}  {what}")
    print("\n%%agent options (they apply to that cell only; %agent model/tools/mode/... change the session):")
    parser = magics.agent_cell.parser
    for action in parser._actions:
        if not action.option_strings:
            continue
        names = ", ".join(action.option_strings)
        if action.nargs != 0:
            names += f" {action.metavar or action.dest.upper()}"
        print(f"  {names}")
        choices = f" (one of {', '.join(map(str, action.choices))})" if action.choices else ""
        print(f"      {' '.join(str(action.help or '').split())}{choices}")


def status(magics: AgentMagics) -> None:
    """``%agent``: the current session's model, mode, tools, usage, and how cells run."""

    mode = magics.execution_mode()
    session = magics.sessions.find()
    if session is None:
        model = magics.model or "the default model (AGENT_KERNEL_MODEL, a provider with a key, or offline)"
        print(f"No conversation yet: the next %%agent cell starts session {magics.sessions.current!r} "
              f"with {model}, mode {magics.mode}, at most {magics.max_turns} turns.")
    else:
        agent = session.agent
        state = "idle" if not session.running else \
            "running, paused at a turn boundary (%agent resume-run)" if agent.paused else "running"
        print(f"Session {session.name!r} ({agent.session_id}), {state}: model {agent.model.name} "
              f"({agent.model.provider}), mode {agent.mode}, "
              + (f"at most {agent.max_iterations} turns." if agent.max_iterations is not None else "no turn limit."))
        print(f"Tools: {', '.join(agent.tools.names) or 'none'}.")
        if agent.system:
            system = " ".join(agent.system.split())
            print(f"System prompt: {system[:117] + '…' if len(system) > 118 else system}")
        print(f"Usage: {_usage_line(agent.stats)}.")
        others = [name for name in magics.sessions.names if name != session.name]
        if others:
            print(f"Other sessions: {', '.join(others)}.")
    print(f"Cells run {mode.name}: {mode.reason}.")
    if magics.on_error:
        print("Failing cells show an \"Ask the agent\" button (%agent on-error off removes it).")
    print("A cell's -m, --tools, --mode, --max-turns and --system apply to that cell only; "
          "%agent help lists the commands that change the session.")


def _idle_session(magics: AgentMagics, what: str) -> Any:
    """The current session, created with the defaults if need be; refuses while it runs."""
    session = magics.sessions.find()
    if session is None:
        session = magics.sessions.put(magics.sessions.current, magics.new_agent(None, {}))
    if session.running:
        raise UserError(f"The session is running a prompt; change {what} once it ends (%agent wait).")
    return session


def cmd_session(magics: AgentMagics, rest: str) -> Any:
    """``%agent session [NAME]``: the session's ``Agent`` (``agent = %agent session``).

    It is the live object: ``agent.events_df()``, ``agent.tool_calls_df()``, ``agent.timeline()``.
    """
    if rest:
        return magics.sessions.get(rest).agent
    session = magics.sessions.find()
    if session is None:
        session = magics.sessions.put(magics.sessions.current, magics.new_agent(None, {}))
    return session.agent


def cmd_mode(magics: AgentMagics, rest: str) -> None:
    """``%agent mode MODE``: the session's permission mode (and new sessions')."""
    from agent_kernel.guard._permissions import MODES

    if not rest:
        session = magics.sessions.find()
        current = session.agent.mode if session is not None else magics.mode
        print(f"Mode: {current}. Change it with %agent mode MODE ({', '.join(MODES)}).")
        return
    if rest not in MODES:
        raise UserError(f"%agent mode {rest}: not a permission mode.{did_you_mean(rest, MODES)} "
                        f"Modes: {', '.join(MODES)}.")
    session = _idle_session(magics, "the mode")
    session.agent.mode = rest
    magics.mode = rest
    print(f"Session {session.name!r} now runs in {rest} mode; so will new sessions.")


def cmd_system(magics: AgentMagics, rest: str) -> None:
    """``%agent system TEXT``: the session's system prompt (``%agent system none`` clears it)."""
    session = _idle_session(magics, "the system prompt")
    text = rest.strip().strip("\"'") if rest.strip()[:1] in "\"'" else rest.strip()
    session.agent.system = None if text.lower() in ("", "none") else text
    print(f"Session {session.name!r} now has " + ("no system prompt." if session.agent.system is None
                                                  else f"the system prompt {session.agent.system!r}."))


def cmd_max_turns(magics: AgentMagics, rest: str) -> None:
    """``%agent max-turns N``: the session's model turns per prompt (and new sessions')."""
    if not rest.strip().isascii() or not rest.strip().isdigit() or int(rest) < 1:
        raise UserError(f"%agent max-turns {rest}: give a whole number of at least 1, e.g. %agent max-turns 10.")
    session = _idle_session(magics, "max-turns")
    session.agent.max_iterations = magics.max_turns = int(rest)
    print(f"Session {session.name!r} now stops after {int(rest)} model turns per prompt; so will new sessions.")

def cmd_budget(magics: AgentMagics, rest: str) -> None:
    """``%agent budget 0.50``: the most one run of the session may spend, in US dollars
    (``Agent.max_cost``); ``%agent budget none`` lifts the cap, ``%agent budget`` shows it."""
    text = rest.strip().lstrip("$")
    cap: float | None
    if not text:
        session = magics.sessions.find()
        cap = session.agent.max_cost if session is not None else None
        print("No spending cap: set one with %agent budget 0.50 (US dollars per run)." if cap is None
              else f"Each run stops before it would spend more than ${cap:.2f}; %agent budget none lifts the cap.")
        return
    if text.lower() == "none":
        cap = None
    else:
        try:
            cap = float(text)
        except ValueError:
            cap = -1.0
        if not cap >= 0 or cap == float("inf"):  # NaN fails this too
            raise UserError(f"%agent budget {rest.strip()}: give a number of US dollars, e.g. %agent budget 0.50, "
                            "or none to lift the cap.")
    session = _idle_session(magics, "the budget")
    session.agent.max_cost = cap
    print(f"Session {session.name!r} has no spending cap." if cap is None else
          f"Session {session.name!r}: each run ends (reason budget) before a model call that would take it past "
          f"${cap:.2f}.")


def cmd_setup(magics: AgentMagics, rest: str) -> Any:
    """``%agent setup``: a form to choose a provider, model, base URL and key, with a Test button
    that checks the endpoint for real (``jupyter.setup``)."""
    from agent_kernel.jupyter._setup import SetupForm

    return SetupForm(on_use=lambda spec: cmd_model(magics, spec))


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
    from agent_kernel.models._registry import list_models

    rows: list[dict[str, Any]] = []
    for name in magics.model_names():
        model = magics.user_ns[name]
        rows.append({"spec": name, "provider": model.provider, "name": model.name,
                     "context_window": getattr(model, "context_window", None),
                     "input_price": None, "output_price": None, "key_env": None, "ready": True})
    rows += [info.to_dict() for info in list_models()]
    return pd.DataFrame(rows)


def _tool_row(tool: Tool, source: str, in_session: bool) -> dict[str, Any]:
    return {"name": tool.name, "source": source, "in_session": in_session,
            "read_only": tool.read_only, "category": tool.category, "description": tool.description}


def cmd_tools(magics: AgentMagics, rest: str) -> pd.DataFrame | None:
    """``%agent tools``: the session's tools, then @tool objects in the notebook, then built-ins.

    ``%agent tools NAMES`` (spaces or commas; ``none`` for no tools) sets the session's tools.
    """
    if rest:
        tools = magics.resolve_tools(rest.split())
        session = _idle_session(magics, "the tools")
        magics.apply_settings(session.agent, {"tools": tools})
        names = ", ".join(session.agent.tools.names) or "no tools"
        print(f"Session {session.name!r} now has {names}.")
        return None
    session = magics.sessions.find()
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    if session is not None:
        for tool in session.agent.tools:
            source = "built-in" if tool.name in BUILTIN_TOOLS and as_tool(tool.name) is tool else "notebook"
            rows.append(_tool_row(tool, source, True))
            seen.add(tool.name)
    for name in magics.tool_names():
        tool = magics.user_ns[name]
        if tool.name not in seen:
            rows.append(_tool_row(tool, "notebook", False))
            seen.add(tool.name)
    for name in BUILTIN_TOOLS:
        if name not in seen:
            rows.append(_tool_row(as_tool(name), "built-in", False))
    return pd.DataFrame(rows, columns=["name", "source", "in_session", "read_only", "category", "description"])


def cmd_mcp(magics: AgentMagics, rest: str) -> pd.DataFrame | None:
    """``%agent mcp``: the session's MCP servers; ``%agent mcp add NAME -- COMMAND ARGS...`` or
    ``%agent mcp add NAME URL`` adds one (it starts on the next run), ``%agent mcp remove NAME``
    stops one and takes it away. ``--timeout SECONDS`` after the name cancels any of its tool calls
    that takes longer; ``--trusted`` believes its tools' annotations (a ``readOnlyHint`` tool then
    runs unasked)."""
    import shlex

    from agent_kernel.mcp import MCPServer

    try:
        words = shlex.split(rest)
    except ValueError:  # shlex's only complaint: a quote left open
        raise UserError(f"%agent mcp {rest}: a quote is not closed; close it, or quote the argument that holds it.") from None
    columns = ["server", "transport", "target", "status", "tools", "resources", "prompts", "error"]
    if not words:
        session = magics.sessions.find()
        hub = session.agent.mcp if session is not None else None
        return pd.DataFrame(hub.status() if hub is not None else [], columns=columns)
    usage = ("Usage: %agent mcp add NAME [--timeout SECONDS] [--trusted] -- COMMAND ARGS... (a stdio server), "
             "%agent mcp add NAME [--timeout SECONDS] [--trusted] URL (streamable HTTP), or %agent mcp remove NAME. "
             "--trusted believes the server's tool annotations (readOnlyHint).")
    if words[0] == "remove" and len(words) == 2:
        _remove_mcp(magics, words[1])
        return None
    if words[0] != "add" or len(words) < 3:
        raise UserError(f"%agent mcp {rest}: not understood. {usage}")
    name, target = words[1], words[2:]
    call_timeout = None
    trusted = False
    while target and target[0] in ("--timeout", "--trusted"):
        if target[0] == "--trusted":
            trusted, target = True, target[1:]
            continue
        call_timeout = _seconds(f"%agent mcp add {name} --timeout", target[1] if len(target) > 1 else "", usage)
        target = target[2:]
    if target and target[0] == "--":
        if len(target) < 2:
            raise UserError(f"%agent mcp add {name} --: give the command to run after --. {usage}")
        # `python` means the kernel's own Python, as %pip means its pip: the system one may lack
        # the server's package.
        command = sys.executable if target[1] in ("python", "python3") and sys.executable else target[1]
        server = MCPServer.stdio(name, command, *target[2:], call_timeout=call_timeout, trusted=trusted)
    elif len(target) == 1 and target[0].startswith(("http://", "https://")):
        server = MCPServer.http(name, target[0], call_timeout=call_timeout, trusted=trusted)
    else:
        raise UserError(f"%agent mcp add {name}: put -- before a command, or give one http(s):// URL. {usage}")
    session = magics.sessions.find()
    if session is None:
        session = magics.sessions.put(magics.sessions.current, magics.new_agent(None, {}))
    hub = session.agent.mcp
    if hub is not None and name in hub.servers:
        raise UserError(f"%agent mcp add {name}: session {session.name!r} already has a server named {name!r} "
                        f"({hub.servers[name].target}). Remove it first with %agent mcp remove {name}, or pick another name.")
    session.agent.add_mcp(server)
    limit = ("" if call_timeout is None else f", calls cancelled after {call_timeout:g} s") + (", trusted" if trusted else "")
    print(f"Added MCP server {name!r} ({server.transport}{limit}) to session {session.name!r}; it starts on the next run.")
    return None


def _remove_mcp(magics: AgentMagics, name: str) -> None:
    session = _idle_session(magics, "an MCP server")
    hub = session.agent.mcp
    if hub is None or name not in hub.servers:
        known = ", ".join(hub.servers) if hub is not None and hub.servers else "none"
        raise UserError(f"%agent mcp remove {name}: session {session.name!r} has no MCP server named {name!r} "
                        f"(its servers: {known}; %agent mcp lists them).")
    session.agent.remove_mcp(name)
    print(f"Removed MCP server {name!r} from session {session.name!r}; its tools are gone and its process is stopped.")


def _seconds(option: str, text: str, usage: str) -> float:
    """``text`` as a positive number of seconds, or a UserError naming ``option``."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise UserError(f"{option} {text}: give a positive number of seconds, as in --timeout 30. {usage}")
    return seconds


def cmd_sessions(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent sessions``: one row per session."""
    rows = [session.row(session.name == magics.sessions.current) for session in magics.sessions]
    columns = ["name", "current", "session_id", "model", "runs", "running", "messages",
               "input_tokens", "output_tokens", "cost_usd", "journal"]
    return pd.DataFrame(rows, columns=columns)


def cmd_turns(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent turns [SESSION]``: the session's turns (``agent.turns_df()``)."""
    return magics.sessions.get(rest or None).agent.turns_df()


def cmd_history(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent history``: the same as ``%agent turns``."""
    return cmd_turns(magics, rest)


def cmd_calls(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent calls [SESSION]``: the session's tool calls (``agent.tool_calls_df()``)."""
    return magics.sessions.get(rest or None).agent.tool_calls_df()


def cmd_timeline(magics: AgentMagics, rest: str) -> Any:
    """``%agent timeline [SESSION]``: the session's runs drawn over time (``agent.timeline()``)."""
    return magics.sessions.get(rest or None).agent.timeline()


def cmd_events(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent events``: the current session's events (``journal.frames.events_df``)."""
    from agent_kernel.journal._frames import events_df

    return events_df(magics.sessions.get(rest or None).agent)


def cmd_usage(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent usage [SESSION]``: one row per model call, tokens and cost (``agent.usage_df()``).

    ``%agent sessions`` has the totals of every session.
    """
    return magics.sessions.get(rest or None).agent.usage_df()


def cmd_cancel(magics: AgentMagics, rest: str) -> None:
    """``%agent cancel``: cancels every run in progress."""
    running = [(session, run) for session in magics.sessions for run in session.running]
    if not running:
        print("Nothing is running.")
        return
    for session, run in running:
        run.cancel(rest or "cancelled with %agent cancel")
        print(f"Cancelling the run in session {session.name!r}; it records how it ended in its journal.")


def cmd_undo(magics: AgentMagics, rest: str) -> None:
    """``%agent undo [RUN_ID]``: reverts one run's notebook edits (the latest run's by default)."""
    agent = magics.sessions.get().agent
    said = agent.undo_notebook(rest.strip() or None)
    print(f"{said} Reload the notebook from disk to see it (File > Reload Notebook from Disk).")


def cmd_fix(magics: AgentMagics, rest: str) -> None:
    """``%agent fix [REQUEST]``: asks the agent about the last failing cell (awaited: see ``line_async``)."""
    raise UserError("%agent fix must await the agent's run; run it in a Jupyter kernel or with %autoawait on.")


_ON_ERROR_WORDS = {"on": True, "off": False}


def cmd_on_error(magics: AgentMagics, rest: str) -> None:
    """``%agent on-error [on|off]``: whether a failing cell shows an "Ask the agent" button under
    its traceback (``jupyter.on_error``); alone, says which."""
    word = rest.strip().lower()
    if word and word not in _ON_ERROR_WORDS:
        raise UserError(f"%agent on-error {rest.strip()}: say on or off (%agent on-error alone says which it "
                        "is now).")
    if word:
        magics.on_error = _ON_ERROR_WORDS[word]
    if magics.on_error:
        print("On: a cell that raises shows an \"Ask the agent\" button under its traceback; a click asks the "
              "session's agent about that cell, as %agent fix does. %agent on-error off removes it.")
    else:
        print("Off: failing cells show no button (%agent fix still asks about the last one). "
              "%agent on-error on adds an \"Ask the agent\" button under each traceback.")


def cmd_panel(magics: AgentMagics, rest: str) -> None:
    """``%agent panel``: the session panel beside the notebook, made once and shown again after
    (``jupyter.panel``); in a front end without the extension, in the cell's output."""
    if rest:
        raise UserError(f"%agent panel takes no argument (got {rest!r}); it shows the current session, "
                        "and %%agent --session NAME makes another session current.")
    from agent_kernel.jupyter._panel import SessionPanel

    if magics.panel is None:
        magics.panel = SessionPanel(magics)
    magics.panel.show()


def cmd_reset(magics: AgentMagics, rest: str) -> None:
    """``%agent reset``: a new conversation in the current session, with the same settings."""
    session = magics.sessions.get()
    old = session.agent.journal
    magics.sessions.put(session.name, magics.new_agent(session, {}))
    kept = f"; the old journal is kept at {old.path}" if getattr(old, "path", None) else ""
    print(f"Session {session.name!r} starts a new conversation "
          f"({magics.sessions.get().agent.session_id}){kept}.")


def _journal_of(magics: AgentMagics, name: str) -> Any:
    from agent_kernel.journal._resume import resolve_journal_path

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
    """``%agent replay [SESSION]``: shows each recorded run of a session again (its transcript).

    ``SESSION`` is a session name, a session id with a journal under ``.agent_kernel/sessions``,
    or a journal path; default: the current session.
    """
    from IPython.display import display

    from agent_kernel.journal._reader import read_events
    from agent_kernel.jupyter._static_view import StaticTranscript

    source = _journal_of(magics, rest)
    events: list[AgentEvent] = source if isinstance(source, list) else read_events(source)
    runs: dict[str, list[AgentEvent]] = {}
    for event in events:
        runs.setdefault(event.run_id, []).append(event)
    if not runs:
        print("That session has no recorded runs yet.")
        return
    for run_events in runs.values():
        display(StaticTranscript.from_events(run_events))


def _journals_newest_first(magics: AgentMagics) -> list[Any]:
    """Where runs are recorded: the current session's events (with whether its runs have all
    ended), then the journals on disk (the configured ``journal_dir``, else
    ``.agent_kernel/sessions``), most recently written first."""
    from agent_kernel.journal._writer import SESSIONS_DIR

    sources: list[Any] = []
    session = magics.sessions.find()
    if session is not None:
        if session.agent.journal is not None:
            session.agent.journal.flush()
        sources.append((list(session.agent.events), not session.running))
    folder = Path(magics.journal_dir).expanduser() if magics.journal_dir else Path.cwd() / SESSIONS_DIR
    if folder.is_dir():
        sources += sorted(folder.glob("*.jsonl"), key=lambda path: path.stat().st_mtime, reverse=True)
    return sources


def cmd_show(magics: AgentMagics, rest: str) -> None:
    """``%agent show RUN``: the transcript of one recorded run, rebuilt from its journal.

    ``RUN`` is a run id (``r_...``, as ``%agent events`` lists them) or ``last`` (the default: the
    latest run of the current session, else of the journal written last). It works after a kernel
    restart, and a run the kernel died in shows as far as its journal goes.
    """
    from IPython.display import display

    from agent_kernel.journal._reader import LineCount, read_events
    from agent_kernel.jupyter._static_view import StaticTranscript

    wanted = rest.strip() or "last"
    unreadable: list[str] = []
    for source in _journals_newest_first(magics):
        if isinstance(source, Path):
            if wanted != "last" and wanted not in source.read_text(encoding="utf-8", errors="replace"):
                continue  # cheaper than parsing every journal
            count = LineCount()
            try:
                events, complete = read_events(source, count), True
                if not events and count.damaged:
                    raise JournalError("; ".join(count.describe(kept_unknown=False)))
            except JournalError as error:  # another .jsonl in the folder, or a damaged journal: the older ones still count
                unreadable.append(source.name)
                print(f"%agent show: skipped {source.name}, which cannot be read as a journal ({error})")
                continue
        else:
            events, complete = source  # the current session: a run going on is not interrupted
        runs: dict[str, list[AgentEvent]] = {}
        for event in events:
            runs.setdefault(event.run_id, []).append(event)
        run = list(runs)[-1] if wanted == "last" and runs else wanted
        if run in runs:
            display(StaticTranscript.from_events(runs[run], complete=complete or run != list(runs)[-1]))
            return
    where = Path(magics.journal_dir).expanduser() if magics.journal_dir else Path(".agent_kernel/sessions")
    skipped = f" ({len(unreadable)} file{'s' if len(unreadable) != 1 else ''} there could not be read as journals: {', '.join(unreadable[:5])})" if unreadable else ""
    if wanted == "last":
        raise UserError(f"%agent show: no recorded run yet, in this session or under {where}{skipped}.")
    raise UserError(f"%agent show {wanted}: no run with that id in this session or the journals under "
                    f"{where}{skipped}. %agent events lists the run ids of this session; %agent show last "
                    "shows the latest run.")


# ---- steering and approvals of a run in progress ---------------------------------------------


def _unquote(text: str, command: str = "say") -> str:
    """``text`` without one pair of surrounding quotes, so ``%agent say "..."`` reads naturally."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    if text[:1] in ("\"", "'"):
        quote = text[0]
        raise UserError(f"The message opens with {quote} but has no closing {quote}: close it, e.g. "
                        f"%agent {command} {quote}{text[1:]}{quote}, or leave the quotes out.")
    return text


def _running_session(magics: AgentMagics, command: str) -> Any:
    """The current session, which must have a run in progress for ``%agent command``."""
    session = magics.sessions.find()
    if session is not None and (session.running or session.agent.running):
        return session
    name = session.name if session is not None else magics.sessions.current
    raise UserError(f"%agent {command}: nothing is running in session {name!r}. It acts on a run in "
                    "progress: start one with %%agent --detach (the cell returns at once), then use "
                    f"%agent {command} in another cell; to ask something new, write an %%agent cell.")


def cmd_say(magics: AgentMagics, rest: str) -> None:
    """``%agent say "TEXT"``: sends TEXT to the session's running agent (``agent.steer``); the
    model reads it at the next turn boundary."""
    text = _unquote(rest)
    if not text:
        raise UserError('%agent say needs a message: %agent say "Use the March figures instead."')
    session = _running_session(magics, "say")
    if not session.agent.steer(text):
        raise UserError(f"%agent say: the run in session {session.name!r} ended before it could take the "
                        "message; send it in a new %%agent cell.")
    print(f"Sent to the agent of session {session.name!r}; it reads it at the next turn boundary.")


def cmd_pause(magics: AgentMagics, rest: str) -> None:
    """``%agent pause``: holds the session's running agent at its next turn boundary (``agent.pause()``)."""
    session = _running_session(magics, "pause")
    if session.agent.paused:
        print(f"Session {session.name!r} is already paused; %agent resume-run lets it go on.")
        return
    session.agent.pause()
    print(f"Session {session.name!r} pauses at the next turn boundary; %agent resume-run lets it go on.")


def cmd_resume_run(magics: AgentMagics, rest: str) -> None:
    """``%agent resume-run``: lets the session's paused run go on (``agent.resume_run()``)."""
    session = _running_session(magics, "resume-run")
    if not session.agent.paused:
        print(f"Session {session.name!r} is not paused; %agent pause holds it at the next turn boundary.")
        return
    session.agent.resume_run()
    print(f"Session {session.name!r} goes on.")


def _pending(magics: AgentMagics) -> list[tuple[Any, Any]]:
    """``(session, pending approval)`` for every approval waiting in any session, oldest first."""
    found: list[tuple[Any, Any]] = []
    for session in magics.sessions:
        broker = session.agent.approvals
        if broker is not None:
            found += [(session, pending) for pending in broker.pending]
    return found


def cmd_approvals(magics: AgentMagics, rest: str) -> pd.DataFrame:
    """``%agent approvals``: the tool calls waiting for a person's decision, in every session.

    Columns: ``call_id``, ``tool``, ``arguments`` (JSON), ``agent`` (the sub-agent that made the
    call, None for the session's own agent), ``session``, ``since`` (when it asked) and
    ``waiting_s``. Answer one with ``%agent approve CALL_ID`` or ``%agent reject CALL_ID "REASON"``.
    """
    import json
    import time

    now, wall = time.monotonic(), time.time()
    rows = [{"call_id": p.call_id, "tool": p.request.tool,
             "arguments": json.dumps(p.request.arguments, ensure_ascii=False, default=str),
             "agent": p.agent_id, "session": session.name,
             "since": pd.Timestamp(wall - (now - p.started), unit="s"),
             "waiting_s": round(now - p.started, 1)}
            for session, p in _pending(magics)]
    return pd.DataFrame(rows, columns=["call_id", "tool", "arguments", "agent", "session", "since", "waiting_s"])


def _find_pending(magics: AgentMagics, command: str, call_id: str) -> tuple[Any, Any]:
    """The pending approval ``call_id`` names: exactly, else as the start of only one call id."""
    if not call_id:
        raise UserError(f"%agent {command} needs a call id: %agent {command} CALL_ID "
                        "(%agent approvals lists the calls waiting).")
    pending = _pending(magics)
    exact = [(s, p) for s, p in pending if p.call_id == call_id]
    matches = exact or [(s, p) for s, p in pending if p.call_id.startswith(call_id)]
    if len(matches) == 1:
        return matches[0]
    if not pending:
        raise UserError(f"%agent {command} {call_id}: no tool call is waiting for approval "
                        "(it may have been answered already, or timed out).")
    listed = ", ".join(f"{p.call_id} ({p.request.tool})" for _, p in (matches or pending))
    if matches:
        raise UserError(f"%agent {command} {call_id}: several calls waiting start with that: {listed}. "
                        "Give more of the call id.")
    raise UserError(f"%agent {command} {call_id}: no call waiting for approval has that id. "
                    f"Waiting: {listed} (%agent approvals shows them in full).")


def cmd_approve(magics: AgentMagics, rest: str) -> None:
    """``%agent approve CALL_ID``: approves a waiting tool call, as its card's Approve button does."""
    from agent_kernel.guard._approvals import Approval

    session, pending = _find_pending(magics, "approve", rest.split()[0] if rest.split() else "")
    if not session.agent.approvals.resolve(pending.call_id, Approval.approve(), agent_id=pending.agent_id):
        raise UserError(f"%agent approve {pending.call_id}: it was answered meanwhile; nothing changed.")
    print(f"Approved {pending.request.tool} ({pending.call_id}) in session {session.name!r}.")


def cmd_reject(magics: AgentMagics, rest: str) -> None:
    """``%agent reject CALL_ID "REASON"``: rejects a waiting tool call; the model reads the reason."""
    from agent_kernel.guard._approvals import Approval

    parts = rest.strip().split(None, 1)
    reason = _unquote(parts[1], f"reject {parts[0]}") if len(parts) > 1 else None
    session, pending = _find_pending(magics, "reject", parts[0] if parts else "")
    if not session.agent.approvals.resolve(pending.call_id, Approval.reject(reason), agent_id=pending.agent_id):
        raise UserError(f"%agent reject {pending.call_id}: it was answered meanwhile; nothing changed.")
    print(f"Rejected {pending.request.tool} ({pending.call_id}) in session {session.name!r}"
          + (f": {reason}" if reason else "."))
