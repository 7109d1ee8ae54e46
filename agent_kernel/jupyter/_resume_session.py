"""``%agent resume``: a session back from its journal, after a restart, with its pending approvals.

After the kernel restarts (or dies) the conversation is still on disk. ``%agent resume`` makes it
the current session again. When its last run was cut off inside a turn (a call waiting for
approval, or running), it continues that run in a live view: the approval card shows again,
Approve / Reject / Always (or ``%agent approve CALL_ID`` from any cell) answer it, and the run
finishes without asking the model again (``Agent.continue_run``).

Running that run's ``%%agent`` cell again, as the new kernel's first cell, does the same
(``continue_cut_off_run``): the same prompt, from the newest journal, whose last run stopped with
a call waiting for approval. ``%%agent --new`` starts afresh instead. The Agent kernel does the
same for a prompt cell (``cut_off_agent``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel.agent._agent import Agent, RunResult
from agent_kernel.errors import UserError
from agent_kernel.events._event import EventType
from agent_kernel.journal._writer import SESSIONS_DIR
from agent_kernel.jupyter._runner import run_cell

if TYPE_CHECKING:
    from agent_kernel.jupyter._magics import AgentMagics

#: Bytes read from a journal's end to tell whether its last run closed its calls.
_TAIL_BYTES = 64 * 1024
# A journal's header and its first run's start fit well inside this.
_HEAD_BYTES = 64 * 1024
#: Lines before a run's end among which a stop that kept its calls open would be.
_STOP_LINES = 4
#: Permission modes from the most to the least permissive.
_MODES_BY_STRICTNESS = ("bypass", "accept_edits", "default", "plan")


async def resume_session(magics: AgentMagics, rest: str) -> None:
    """``%agent resume [--trust] [SESSION]``: the session whose journal is ``SESSION`` (a session id
    or a journal path; default: the most recently written journal) becomes the current session, and
    an interrupted run is continued in a live view. It keeps the sandbox and permission rules its
    journal recorded; a journal this install did not sign is resumed only with ``--trust``."""
    words = rest.split()
    trust = "--trust" in words
    rest = " ".join(word for word in words if word != "--trust")
    current = magics.sessions.find()
    if current is not None and current.running:
        raise UserError("The current session is running a prompt; wait for it (%agent wait) or cancel it "
                        "(%agent cancel), then %agent resume.")
    path = _journal_path(magics, rest.strip().strip("'\""))
    holder = _session_holding(magics, path)
    if holder is not None:  # open in this kernel already: a second Agent on one journal would fight over it
        if holder.running:
            raise UserError(f"Session {holder.name!r} holds that journal and is running a prompt; wait for it (%agent wait).")
        magics.sessions.current = holder.name
        print(f"Session {holder.name!r} already holds {path.name}; it is the current session now.")
        return
    agent = _resumed_agent(magics, path, trust=trust)
    magics.sessions.put(magics.sessions.current, agent)
    interrupted = agent.interrupted
    if interrupted is None:
        turns = sum(1 for m in agent.messages if m.role == "assistant")
        print(f"Resumed session {agent.session_id} ({turns} model answers); the next %%agent cell continues it.")
        return
    waiting = [p.call_id for p in agent.pending_approvals]
    what = f"{len(waiting)} call(s) waiting for approval ({', '.join(waiting)})" if waiting else "tool calls left unfinished"
    print(f"Resumed session {agent.session_id}: its last run stopped with {what}; continuing it.")
    await run_cell(agent, None, render_grace=magics.render_grace(), host=magics.panel)


async def continue_cut_off_run(magics: AgentMagics, prompt: str) -> RunResult | None:
    """Continues the newest journal's last run when it asked ``prompt`` and was cut off while a
    call waited for approval (the cell run again after a restart); None, doing nothing, otherwise."""
    agent = cut_off_agent(magics, prompt)
    if agent is None:
        return None
    magics.sessions.put(magics.sessions.current, agent)
    print(cut_off_notice(agent, "%%agent --new starts afresh instead."))
    return await run_cell(agent, None, render_grace=magics.render_grace(), host=magics.panel)


def cut_off_agent(magics: AgentMagics, prompt: str) -> Agent | None:
    """The agent of the newest journal, resumed, when its last run asked ``prompt`` and the kernel
    went down while a call of it waited for approval; None otherwise (and nothing is kept open).

    ``continue_cut_off_run`` runs it for a ``%%agent`` cell, the Agent kernel for a prompt cell.
    """
    try:
        path = _journal_path(magics, "")
    except UserError:  # no journal yet
        return None
    try:
        if not _may_be_cut_off(path) or _last_run_start(path).get("prompt") != prompt:
            return None
        agent = _resumed_agent(magics, path)
    except (UserError, OSError):  # a journal that cannot be resumed: the cell asks afresh
        return None
    try:
        continues = agent.interrupted is not None and bool(agent.pending_approvals) and agent.journal is not None
    except (UserError, OSError):  # opening it to go on failed (a newer schema, another kernel's lock)
        continues = False
    if not continues:
        agent.close()
        return None
    return agent


def cut_off_notice(agent: Agent, fresh: str) -> str:
    """What a cell continuing a cut-off run prints first; ``fresh`` says how to start afresh instead."""
    waiting = [p.call_id for p in agent.pending_approvals]
    return (f"This cell's run stopped with {len(waiting)} call(s) waiting for approval ({', '.join(waiting)}) when the "
            f"kernel went down; continuing it (session {agent.session_id}). {fresh}")


def _may_be_cut_off(path: Path) -> bool:
    """False when the journal's last line is a run's end that closed its calls: the common case,
    told from the file's tail without reading the whole journal."""
    with path.open("rb") as file:
        size = file.seek(0, 2)
        file.seek(max(0, size - _TAIL_BYTES))
        lines = file.read().splitlines()
    try:
        last = json.loads(lines[-1]) if lines else None
    except ValueError:  # a torn last line: the process died writing it
        return True
    if not isinstance(last, dict) or last.get("type") != EventType.RUN_FINISH.value or last.get("agent_id") is not None:
        return True
    return any(b'"keeps_calls_open"' in line for line in lines[-_STOP_LINES:])


def _journal_path(magics: AgentMagics, name: str) -> Path:
    """The journal ``name`` names (a session id, a file name or a path), else the newest one of
    this kernel's notebook (Jupyter names it in ``JPY_SESSION_NAME``; outside Jupyter, the newest)."""
    from agent_kernel.journal._resume import resolve_journal_path

    folder = Path(magics.journal_dir).expanduser() if magics.journal_dir else Path.cwd() / SESSIONS_DIR
    if name:
        candidate = folder / (name if name.endswith(".jsonl") else f"{name}.jsonl")
        return candidate if candidate.is_file() else resolve_journal_path(name)
    journals = sorted(folder.glob("*.jsonl"), key=lambda path: path.stat().st_mtime, reverse=True) if folder.is_dir() else []
    notebook = os.environ.get("JPY_SESSION_NAME")
    if notebook:
        # Two notebooks in one folder share the journal folder; each continues only its own runs.
        journals = [path for path in journals if _notebook_of(path) in (notebook, None)]
    if not journals:
        raise UserError(f"There is no journal to resume in {folder}. Run an %%agent cell first, or name one: "
                        "%agent resume SESSION_ID (or a journal path).")
    return journals[0]


def _notebook_of(path: Path) -> str | None:
    """The notebook a journal's first run names (``run_start``'s ``notebook``), read from its
    first lines only; None for a journal written outside Jupyter or before runs named theirs."""
    try:
        with path.open("rb") as file:
            head = file.read(_HEAD_BYTES).splitlines()
    except OSError:
        return None
    for line in head:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") == EventType.RUN_START.value:
            data = record.get("data")
            notebook = data.get("notebook") if isinstance(data, dict) else None
            return notebook if isinstance(notebook, str) else None
    return None


def _session_holding(magics: AgentMagics, path: Path) -> Any:
    """The session of this kernel whose journal is ``path``, or None."""
    for session in magics.sessions:
        journal = session.agent._journal  # only an opened journal holds the file
        if journal is not None and Path(journal.path).resolve() == path.resolve():
            return session
    return None


def _resumed_agent(magics: AgentMagics, path: Path, *, trust: bool = False) -> Agent:
    """``Agent.resume`` as the session last ran: its system prompt, turns and tools (by name, from
    the notebook), its recorded sandbox and permission rules (in the stricter of its mode and the
    notebook's), the notebook's namespace, and the model ``%agent model`` set (else the one the
    journal recorded)."""
    from agent_kernel.journal import read_header

    header = read_header(path)
    settings = header.get("settings") if header is not None else None
    recorded_rules = isinstance(settings, dict) and isinstance(settings.get("permissions"), dict)
    recorded = _last_run_start(path)
    tools, missing = _resolve_tools(magics, [str(t) for t in recorded.get("tools") or []])
    kwargs: dict[str, Any] = {"journal": path, "tools": tools, "namespace": magics.user_ns,
                              "system": recorded.get("system"), "max_iterations": recorded.get("max_iterations") or magics.max_turns}
    if not recorded_rules:
        kwargs["permissions"] = magics.mode
    if magics.model is not None:  # %agent model NAME chose one; else the journal's, when it can be rebuilt
        kwargs["model"] = magics.resolve_model(magics.model)
    try:
        agent = Agent.resume(path, trust=trust, **kwargs)
    except UserError as error:
        raise UserError(str(error).replace(f"Agent.resume({str(path)!r}, trust=True) (in a notebook: %agent resume --trust {path.stem})",
                                           f"%agent resume --trust {path.stem}")) from None
    if recorded_rules and _MODES_BY_STRICTNESS.index(magics.mode) > _MODES_BY_STRICTNESS.index(agent.mode):
        agent.mode = magics.mode  # the notebook asks for a stricter mode than the session had
    agent.tool_extras["namespace"] = magics.user_ns  # the python tool shares the notebook's variables
    if missing:
        print(f"Note: {', '.join(missing)} from the journal {'is' if len(missing) == 1 else 'are'} not defined in "
              "this kernel, so a call to it fails; define it in a cell (or add the MCP server) and %agent resume again.")
    return agent


def _last_run_start(path: Path) -> dict[str, Any]:
    """The data of the session's last ``run_start``: the system prompt, tools and turns it ran with."""
    from agent_kernel.journal._resume import scan

    start = scan(path, keep=0).last_run_start
    return dict(start.data) if start is not None else {}


def _resolve_tools(magics: AgentMagics, names: list[str]) -> tuple[list[Any], list[str]]:
    tools: list[Any] = []
    missing: list[str] = []
    for name in names:
        try:
            tools += magics.resolve_tools([name])
        except UserError:
            missing.append(name)
    return tools, missing
