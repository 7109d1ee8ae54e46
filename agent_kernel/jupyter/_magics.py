"""jupyter.magics — ``%%agent`` (a prompt in a cell) and ``%agent`` (the session's controls).

Usage, after ``%load_ext agent_kernel``::

    %%agent -m model --tools lookup,write_file
    Summarise {df.shape} rows of sales, then save the summary.

Successive ``%%agent`` cells continue one conversation (the current session); ``--new`` starts
over, ``--session NAME`` switches to (or creates) another conversation, which then stays current.
Options given to a cell (``-m``, ``--system``, ``--tools``, ``--mode``, ``--max-turns``) apply to
that cell only: the next plain ``%%agent`` cell runs with the session's settings again. The
session's settings change only when asked (``%agent model NAME``, ``%agent tools NAMES``,
``%agent mode MODE``, ``%agent system TEXT``, ``%agent max-turns N``); ``%agent`` shows them, and
``%agent session`` hands the session's ``Agent`` to Python. Defaults come from configuration::

    %config AgentMagics.model = "anthropic:claude-sonnet-4-5"
    %config AgentMagics.mode = "accept_edits"        # permission mode
    %config AgentMagics.max_turns = 10
    %config AgentMagics.journal_dir = "runs"        # default: .agent_kernel/sessions
    %config AgentMagics.execution = "detached"      # default: auto (see runner.detect_mode)

**How a cell waits.** A magic is an ordinary synchronous call, and widget clicks are handled only
while a cell *awaits*. So the extension adds an input transformer that rewrites a ``%%agent``
cell into ``await <magics>.cell_async(line, body)`` (and a ``%agent wait`` or ``%agent compact``
line into the same kind of await) whenever the shell runs top-level ``await`` on asyncio. IPython
then runs the cell on the kernel's own loop: in blocking mode it stays busy until the run ends
while clicks are handled; in detached mode it returns the ``RunHandle`` at once. Without
autoawait the registered magics run instead: detached inside a kernel, to completion elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.utils.process import arg_split
from traitlets import Bool, Enum, Int, TraitError, Unicode, observe, validate

from agent_kernel.agent._agent import Agent, RunResult
from agent_kernel.agent._parts import file_in_the_way
from agent_kernel.errors import UserError, did_you_mean
from agent_kernel.events._turn import new_id
from agent_kernel.guard._permissions import MODES
from agent_kernel.jupyter._interpolation import InterpolationWarning, interpolate
from agent_kernel.jupyter._panel import SessionPanel
from agent_kernel.jupyter._runner import RENDER_GRACE_S, ExecutionMode, RunFailed, RunHandle, RunInterrupted, detect_mode, start_run, wait_all
from agent_kernel.jupyter._sessions import Session, Sessions
from agent_kernel.mcp._attach import PromptRequest, cell_options
from agent_kernel.runtime._state import TerminationReason
from agent_kernel.tools._registry import BUILTIN_TOOLS, ToolRegistry
from agent_kernel.tools._tool import Tool

F = TypeVar("F", bound=Callable[..., Any])

#: ``%agent`` subcommands, as ``%agent`` with no argument lists them.
SUBCOMMANDS = ("help", "session", "model", "models", "tools", "mode", "system", "max-turns", "budget", "setup", "sessions",
               "events", "turns", "history", "calls", "usage", "timeline", "compact",
               "wait", "cancel", "replay", "reset", "mcp", "show", "say", "pause", "resume-run",
               "approvals", "approve", "reject", "resume", "undo", "fix", "on-error", "panel")
_CELL = re.compile(r"^%%agent(?=\s|$)")
_AWAITED = ("wait", "compact", "resume", "fix", "undo")  # subcommands that await: the cell stays busy until they end
_AWAITED_LINE = re.compile(r"^%agent[ \t]+(?:wait|compact|resume|fix|undo)(?![\w-])[^\n]*$")
_SELF = 'get_ipython().magics_manager.registry["AgentMagics"]'


# Advice written for Python callers, and what says the same in a magic.
_MAGIC_TERMS = (
    (re.compile(r"use the offline model: Agent\(model='offline'\)"),
     "use the offline model: -m offline (this cell) or %agent model offline (the session)"),
    (re.compile(r"\(or pass api_key=\.\.\.\)"), "(%env NAME=value sets one in the notebook)"),
    (re.compile(r"agent_kernel\.models\.registry\.list_models\(\) \(or %agent models\) lists"), "%agent models lists"),
    (re.compile(r"Agent\(model=([^)]*)\)"), r"-m \1"),
    (re.compile(r"\bpass model=\.\.\. to Agent\b"), "use -m MODEL or %agent model MODEL"),
)


def in_magic_terms(message: str) -> str:
    """``message`` with Python-API advice (``Agent(model='offline')``) put as magic options."""
    for pattern, replacement in _MAGIC_TERMS:
        message = pattern.sub(replacement, message)
    return message


def _usage_errors(method: F) -> F:
    """Shows a ``UserError`` as IPython shows a usage error: its message in magic terms, no traceback."""
    if asyncio.iscoroutinefunction(method):
        @functools.wraps(method)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return await method(*args, **kwargs)
            except UserError as exc:
                raise UsageError(in_magic_terms(str(exc))) from None
        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except UserError as exc:
            raise UsageError(in_magic_terms(str(exc))) from None
    return wrapper  # type: ignore[return-value]


@dataclass
class _Cell:
    """One ``%%agent`` cell, parsed and resolved."""

    session: Session
    prompt: str
    quiet: bool
    detach: bool
    output: str | None
    raise_on_error: bool
    #: Settings for this cell's run only (``model``, ``system``, ``tools``, ``mode``, ``max_turns``).
    overrides: dict[str, Any]
    #: ``--prompt SERVER:NAME KEY=VALUE ...``: an MCP server's prompt, rendered before the run.
    mcp_prompt: PromptRequest | None = None


@magics_class
class AgentMagics(Magics):
    """The ``%%agent`` and ``%agent`` magics and their configuration (``%config AgentMagics``)."""

    model = Unicode(None, allow_none=True, help=(
        "Model for new sessions: a model string ('anthropic:claude-sonnet-4-5', 'offline') or the "
        "name of a Model object in the notebook. None: AGENT_KERNEL_MODEL, else a provider whose "
        "key is set, else the offline model.")).tag(config=True)
    mode = Enum(MODES, default_value="default",
                help="Permission mode for new sessions.").tag(config=True)
    max_turns = Int(20, help="Model turns per run before a final answer is asked for.").tag(config=True)
    journal_dir = Unicode(None, allow_none=True, help=(
        "Folder for session journals (<session_id>.jsonl). None: .agent_kernel/sessions under "
        "the current directory.")).tag(config=True)
    execution = Enum(("auto", "blocking", "detached"), default_value="auto", help=(
        "auto: blocking where the kernel handles widget clicks while a cell awaits, else "
        "detached. blocking / detached force one.")).tag(config=True)
    raise_on_error = Bool(True, help=(
        "Whether a %%agent cell whose run ends in error fails (so Run All and papermill stop "
        "there). A cell's --no-raise keeps going for that cell.")).tag(config=True)
    on_error = Bool(False, help=(
        "Whether a cell that raises shows an 'Ask the agent' button under its traceback, which "
        "asks the session's agent about that cell as %agent fix does (%agent on-error on/off).")).tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        from agent_kernel.jupyter._on_error import OnError

        super().__init__(shell=shell, **kwargs)
        self.sessions = Sessions()
        #: The session panel once ``%agent panel`` has opened it (``jupyter.panel``).
        self.panel: SessionPanel | None = None
        self.on_error_handler = OnError(self)
        if self.on_error:  # set by configuration before the handler existed
            self.on_error_handler.turn_on()

    @observe("on_error")
    def _on_error_changed(self, change: Any) -> None:
        handler = getattr(self, "on_error_handler", None)  # None while configuration loads in __init__
        if handler is None:
            return
        if change["new"]:
            handler.turn_on()
        else:
            handler.turn_off()

    @property
    def user_ns(self) -> dict[str, Any]:
        """The notebook's namespace."""
        shell = self.shell
        assert shell is not None  # the extension registers the magics on a shell
        return shell.user_ns

    @validate("max_turns")
    def _check_max_turns(self, proposal: Any) -> int:
        if proposal["value"] < 1:
            raise TraitError(f"AgentMagics.max_turns must be at least 1 (got {proposal['value']}).")
        return int(proposal["value"])

    @validate("journal_dir")
    def _check_journal_dir(self, proposal: Any) -> str | None:
        folder = proposal["value"]
        blocking = None if folder is None else file_in_the_way(Path(folder).expanduser())
        if blocking is not None:
            raise TraitError(f"AgentMagics.journal_dir = {folder!r}: {blocking} is a file, not a folder. Set a folder "
                             "(made when missing), or None for .agent_kernel/sessions.")
        return folder

    # -- execution mode and the input transformer ----------------------------------------------

    def execution_mode(self) -> ExecutionMode:
        """How cells run now (``%config AgentMagics.execution`` can force it)."""
        if self.execution == "blocking":
            return ExecutionMode(True, "forced by AgentMagics.execution")
        if self.execution == "detached":
            return ExecutionMode(False, "forced by AgentMagics.execution")
        return detect_mode(self.shell)

    def can_await(self) -> bool:
        """Whether a cell may be rewritten into top-level ``await`` on the shell's asyncio loop."""
        from IPython.core.async_helpers import _asyncio_runner

        shell = self.shell
        return bool(getattr(shell, "autoawait", False)) and getattr(shell, "loop_runner", None) is _asyncio_runner

    def transform(self, lines: list[str]) -> list[str]:
        """The input transformer (see the module docstring); leaves every other cell alone."""
        if not lines or not self.can_await():
            return lines
        first = lines[0]
        if _CELL.match(first):
            header = first.rstrip("\r\n")[len("%%agent"):]
            if header.rstrip().endswith("?"):
                return lines  # %%agent? is IPython's help
            body = "".join(lines[1:])
            return [f"await {_SELF}.cell_async({header!r}, {body!r})\n"]
        if first.startswith("%%") or not any(line.startswith("%agent") for line in lines):
            return lines
        return [f"await {_SELF}.line_async({line.rstrip()[len('%agent'):].strip()!r})\n"
                if _AWAITED_LINE.match(line.rstrip("\r\n")) else line for line in lines]

    # -- %%agent ---------------------------------------------------------------------------------

    @magic_arguments(name="%agent")  # the usage line reads %%agent
    @argument("-m", "--model", help=(
        "for this cell: a model string, or the name of a Model object in the notebook "
        "(%agent model NAME changes the session's)"))
    @argument("--system", help="for this cell: the system prompt (%agent system TEXT changes the session's)")
    @argument("--tools", nargs="+", metavar="TOOL", help=(
        "for this cell: tools the agent may call, names of @tool or plain functions in the notebook and "
        f"built-in tools ({', '.join(BUILTIN_TOOLS)}); separate with spaces or commas "
        "(%agent tools NAMES changes the session's)"))
    @argument("--mode", choices=MODES, help="for this cell: the permission mode (%agent mode MODE changes the session's)")
    @argument("--sandbox", action="store_true", help=(
        "run bash commands inside an OS sandbox (bubblewrap: the working directory writable, no "
        "network); they then run without asking unless a rule says otherwise. Stays on for the session"))
    @argument("--max-turns", type=int, help="for this cell: model turns before a final answer is asked for")
    @argument("--session", metavar="NAME", help="continue (or start) the conversation NAME; it becomes current")
    @argument("--new", action="store_true", help="start a new conversation in the session")
    @argument("-o", "--output", metavar="VAR", help="store the RunResult in VAR (a detached run: when it ends)")
    @argument("--detach", action="store_true", help="return at once; %%agent wait or `await _` waits for the run")
    @argument("--no-interpolate", action="store_true", help="send {braces} as written")
    @argument("--no-raise", action="store_true", help=(
        "a run that ends in error does not fail the cell (Run All carries on)"))
    @argument("--resource", action="append", metavar="SERVER:URI", help=(
        "attach an MCP server's resource to the prompt (repeatable), as writing @SERVER:URI in the "
        "prompt does: its text follows the prompt, capped like a tool result. %agent mcp lists "
        "each server's resources"))
    @argument("--prompt", nargs="+", metavar="SERVER:NAME", help=(
        "use an MCP server's prompt as this cell's prompt, its arguments after it as KEY=VALUE "
        "(--prompt ev:args-prompt city=Paris); lines below %%agent, if any, follow it. %agent mcp "
        "lists each server's prompts"))
    @argument("--quiet", action="store_true", help=(
        "no live view, only the summary when the run ends (approvals then come from the "
        "headless policy, AGENT_KERNEL_APPROVAL)"))
    @cell_magic("agent")  # type: ignore[arg-type]  # IPython types its decorators for plain functions only
    @_usage_errors
    def agent_cell(self, line: str, cell: str) -> RunHandle | None:
        """Sends the cell to the agent as a prompt, streaming into a live view.

        ``{name}`` in the prompt is replaced from the notebook (``{df.shape}``, ``{Out[3]}``);
        ``{{`` and ``}}`` are literal braces. Successive cells continue the same conversation.
        """
        parsed = self._parse(line, cell)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            from IPython.core.async_helpers import get_asyncio_loop

            if parsed.detach:
                raise UsageError("--detach needs a running event loop (a Jupyter kernel, or "
                                 "%autoawait on); nothing would run the agent here.") from None
            return get_asyncio_loop().run_until_complete(self._run_blocking(parsed))
        if parsed.mcp_prompt is not None:
            raise UserError("--prompt must await the MCP server, and this cell cannot (autoawait is off): "
                            "turn it on with %autoawait asyncio.")
        return self._start_detached(parsed)  # a cell that cannot await must not block the loop

    @_usage_errors
    async def cell_async(self, line: str, cell: str) -> RunHandle | None:
        """What a rewritten ``%%agent`` cell awaits: blocking or detached per ``execution_mode``."""
        line = _expand(self.shell, line)
        if await self._continue_cut_off_cell(line, cell):
            return None
        parsed = self._parse(line, cell)
        await self._render_mcp_prompt(parsed)
        if parsed.detach or not self.execution_mode().blocking:
            return self._start_detached(parsed)
        await self._run_blocking(parsed)
        return None

    async def _continue_cut_off_cell(self, line: str, cell: str) -> bool:
        """Re-running, as a kernel's first cell, the cell whose run the last kernel left waiting
        for approval continues that run, as ``%agent resume`` does, instead of asking the model
        anew; True when it did. ``--new`` (or another session, or a detached run) starts afresh."""
        if len(self.sessions):  # cells ran in this kernel: nothing of it was cut off by a restart
            return False
        args = self.parse_cell_options(line)
        if args.new or args.session or args.detach or args.resource or args.prompt:
            return False
        with warnings.catch_warnings():  # the cell's own parse warns about {names} once, not here too
            warnings.simplefilter("ignore", InterpolationWarning)
            prompt = (cell if args.no_interpolate else interpolate(cell, self.user_ns)).strip()
        from agent_kernel.jupyter._resume_session import continue_cut_off_run

        result = await continue_cut_off_run(self, prompt)
        if result is None:
            return False
        if args.output is not None and args.output.isidentifier():
            self.user_ns[args.output] = result
        return True

    def parse_cell_options(self, line: str) -> Any:
        """The ``%%agent`` options of ``line``; a mistyped option gets the closest one suggested.

        Raises:
            UserError: an option is unknown or badly given.
        """
        parser = self.agent_cell.parser
        try:
            # POSIX splitting, so --system "Answer in French." loses its quotes.
            return parser.parse_args(arg_split(line, posix=True))
        except UsageError as exc:
            message = str(exc)
        except ValueError:  # shlex's only complaint: a quote left open
            raise UserError(f"%%agent {line.strip()}: a quote is not closed in the option line; close it, "
                            "as in --system \"Answer in French.\"") from None
        options = sorted(o for o in parser._option_string_actions if o.startswith("--"))
        unknown = re.search(r"unrecognized arguments: (.*)", message)
        if unknown is not None:
            first = unknown.group(1).split()[0]
            if first.startswith("-"):
                name = first.split("=", 1)[0]
                raise UserError(f"%%agent: no option {name}.{did_you_mean(name, options)} Options: "
                                f"{', '.join(options)} (%agent help explains them).")
            raise UserError(f"%%agent: {first!r} is not an option; the prompt goes on the lines below "
                            "%%agent, not on its first line (%agent help lists the options).")
        choice = re.search(r"argument ([-\w/]+): invalid choice: '([^']*)'", message)
        if choice is not None:
            action = parser._option_string_actions.get(choice.group(1).split("/")[-1])
            known = [str(c) for c in (action.choices or [])] if action is not None else []
            raise UserError(f"%%agent {choice.group(1).split('/')[-1]} {choice.group(2)}: not one of "
                            f"{', '.join(known)}.{did_you_mean(choice.group(2), known)}")
        raise UserError(f"%%agent: {message.removeprefix('UsageError: ')} (%agent help lists the options).")

    def _parse(self, line: str, cell: str) -> _Cell:
        args = self.parse_cell_options(line)
        name = args.session or self.sessions.current
        session = self.sessions.find(name)
        if session is not None and session.running:
            raise UserError(f"Session {name!r} is still running a prompt; wait for it (%agent wait), "
                            "cancel it (%agent cancel), or use --session OTHER.")
        # Check the cell before touching any session: a mistake must not cost the conversation.
        prompt = cell if args.no_interpolate else interpolate(cell, self.user_ns)
        prompt = prompt.strip()
        hub = session.agent.mcp if session is not None else None
        mentions, mcp_prompt = cell_options(args.resource, args.prompt, list(hub.servers) if hub is not None else [])
        prompt = "\n\n".join(part for part in (prompt, mentions) if part)
        if not prompt and mcp_prompt is None:
            raise UserError("The %%agent cell has no prompt: write it on the lines below %%agent.")
        if args.output is not None and not args.output.isidentifier():
            raise UserError(f"-o {args.output!r} is not a variable name; use e.g. -o result.")
        settings = self._settings(args)
        # The sandbox stays on for the session (it says so); every other option is this cell's.
        sticky = {key: settings.pop(key) for key in ("sandbox",) if key in settings}
        if session is None or args.new:
            session = self.sessions.put(name, self._new_session_agent(session, sticky, settings))
        else:
            self.apply_settings(session.agent, sticky)
            self.sessions.current = name
        return _Cell(session, prompt, args.quiet, args.detach, args.output,
                     self.raise_on_error and not args.no_raise, settings, mcp_prompt)

    async def _render_mcp_prompt(self, parsed: _Cell) -> None:
        """Puts the server prompt of ``--prompt`` before the cell's own lines."""
        request = parsed.mcp_prompt
        if request is None:
            return
        text = await parsed.session.agent.mcp.get_prompt(request.server, request.name, request.arguments)
        parsed.prompt = "\n\n".join(part for part in (text, parsed.prompt) if part)
        parsed.mcp_prompt = None

    def _new_session_agent(self, previous: Session | None, sticky: dict[str, Any],
                           overrides: dict[str, Any]) -> Agent:
        """A new conversation with the session's settings; the cell's model if there is no default.

        With no usable default model (a key missing) a cell that names its model still runs:
        the session then keeps that model.
        """
        try:
            return self.new_agent(previous, sticky)
        except UserError:
            if "model" not in overrides:
                raise
            return self.new_agent(previous, {**sticky, "model": overrides["model"]})

    def render_grace(self) -> float:
        """Seconds an approval waits for a run's view to render (``runner.start_run``): none
        without a kernel, since no front-end can render a view there."""
        return RENDER_GRACE_S if getattr(self.shell, "kernel", None) is not None else 0.0

    def _start(self, parsed: _Cell, *, detached: bool, on_end: Callable[[RunHandle], None] | None = None,
               display: bool = True, output: Any = None, cell_id: str | None = None) -> RunHandle:
        """Starts the cell's run with its own options, restoring the session's when it ends; the
        session panel, once opened, shows it too. ``output`` and ``cell_id``: a run with no cell of
        its own (``ask_in``)."""
        agent = parsed.session.agent
        saved = _settings_of(agent, parsed.overrides)
        self.apply_settings(agent, parsed.overrides)
        cell_id = cell_id or _running_cell_id(self.shell)
        if cell_id:  # edit_notebook inserts after the agent's own cell by default
            agent.tool_extras["notebook_cell_id"] = cell_id

        def ended(handle: RunHandle) -> None:
            self.apply_settings(agent, saved)
            if on_end is not None:
                on_end(handle)

        try:
            return start_run(agent, parsed.prompt, quiet=parsed.quiet, detached=detached, display=display,
                             on_end=ended, render_grace=self.render_grace(), output=output, host=self.panel)
        except BaseException:
            self.apply_settings(agent, saved)
            raise

    async def _run_blocking(self, parsed: _Cell) -> None:
        await self._render_mcp_prompt(parsed)
        handle = self._start(parsed, detached=False)
        parsed.session.runs.append(handle)
        try:
            result = await handle.wait()
        except RunInterrupted as interrupted:
            if interrupted.result is not None:
                self._store(parsed, interrupted.result)
            raise
        failed = result.termination_reason is TerminationReason.ERROR and parsed.raise_on_error
        self._store(parsed, result, says_error=not failed)
        if failed:
            raise RunFailed(result)  # after the view and summary show it, so Run All stops here
        return None

    def _start_detached(self, parsed: _Cell) -> RunHandle:
        def ended(handle: RunHandle) -> None:
            if handle.task.cancelled():
                return
            error = handle.task.exception()
            if error is not None:
                print(f"The agent run failed: {type(error).__name__}: {error}", file=sys.stderr)
                return
            self._store(parsed, handle.task.result())

        handle = self._start(parsed, detached=True, on_end=ended)
        parsed.session.runs.append(handle)
        return handle

    def ask_in(self, output: Any, prompt: str, *, cell_id: str | None = None,
               on_end: Callable[[RunHandle], None] | None = None, asked_by: str = "You, with a button",
               shown: str | None = None) -> RunHandle:
        """Starts the session's agent on ``prompt`` (sent as written), shown in ``output``.

        For a run a widget's click starts (the "Ask the agent" button): it runs detached, as an
        ``%%agent`` cell's would, its live view and then its transcript shown in the
        ``ipywidgets.Output`` ``output``; ``cell_id`` is the cell the agent's notebook edits go
        after. The session panel, if open, shows it too, under ``asked_by`` and ``shown`` (a line
        standing for the prompt; the prompt itself when None). Call it on the kernel's loop.

        Raises:
            UserError: the session is running already, or cannot start (a model without a key).
        """
        session = self.sessions.find()
        if session is not None and session.running:
            raise UserError(f"The agent of session {session.name!r} is busy with another run; ask again once it "
                            "has ended (%agent wait waits for it, %agent cancel stops it).")
        parsed = self._parse("--no-interpolate", prompt)
        labelled = self.panel.asking(asked_by, shown) if self.panel is not None else contextlib.nullcontext()
        with labelled:
            handle = self._start(parsed, detached=True, on_end=on_end, output=output, cell_id=cell_id)
        parsed.session.runs.append(handle)
        return handle

    def start_panel_run(self, prompt: str, on_end: Callable[[RunHandle], None] | None = None) -> RunHandle:
        """Starts the current session's next run on ``prompt``, shown only in the session panel
        (its Send button): as a detached ``%%agent`` cell with no options, ``{braces}`` as typed.

        Raises:
            UserError: the session is still running, or no model is usable.
        """
        session = self.sessions.find()
        if session is not None and session.running:
            # _parse would say so in a cell's terms (--session OTHER), which the panel has not.
            raise UserError(f"Session {session.name!r} is still running a prompt; Send again once it has ended "
                            "(Stop in its live view, or %agent cancel, stops it).")
        parsed = self._parse("--no-interpolate", prompt)
        handle = self._start(parsed, detached=True, on_end=on_end, display=False)
        parsed.session.runs.append(handle)
        return handle

    def _store(self, parsed: _Cell, result: RunResult, says_error: bool = True) -> None:
        if parsed.output is not None:
            self.user_ns[parsed.output] = result
        if result.error and says_error:
            print(f"The run ended with an error: {result.error}", file=sys.stderr)

    # -- resolving options -------------------------------------------------------------------------

    def _settings(self, args: Any) -> dict[str, Any]:
        """The options a cell set, resolved and checked before anything changes."""
        settings: dict[str, Any] = {}
        if args.model is not None:
            settings["model"] = self.resolve_model(args.model)
        if args.system is not None:
            settings["system"] = args.system
        if args.tools is not None:
            settings["tools"] = self.resolve_tools(args.tools)
        if args.mode is not None:
            settings["mode"] = args.mode
        if args.sandbox:
            from agent_kernel.guard._sandbox import check

            check()  # bubblewrap missing: say so now, before the session changes
            settings["sandbox"] = True
        if args.max_turns is not None:
            if args.max_turns < 1:
                raise UserError(f"--max-turns must be at least 1 (got {args.max_turns}).")
            settings["max_turns"] = args.max_turns
        return settings

    def resolve_model(self, spec: str) -> Any:
        """A Model object named ``spec`` in the notebook, or the model a model string names.

        Raises:
            UserError: neither; the message lists the Model objects the notebook has.
        """
        from agent_kernel.models._registry import resolve_model

        ns = self.user_ns
        spec = spec.strip()
        if spec.isidentifier() and spec in ns:
            value = ns[spec]
            if isinstance(value, str):
                spec = value
            elif callable(getattr(value, "stream", None)):
                return value
            else:
                raise UserError(f"{spec!r} is a {type(value).__name__}, not a model. Pass a model string "
                                "such as 'anthropic:claude-sonnet-4-5' or 'offline', or the name of a Model "
                                "object (e.g. model = ScriptedModel([...]) in a cell above).")
        try:
            return resolve_model(spec)
        except UserError as exc:
            known = self.model_names()
            hint = (f" Model objects in this notebook: {', '.join(known)}." if known
                    else " To use a Model object (such as a ScriptedModel), assign it to a variable and pass its name.")
            raise UserError(f"{exc}{hint}") from None

    def model_names(self) -> list[str]:
        """Names of the Model objects in the notebook (what ``-m NAME`` may name)."""
        return [name for name, value in self.user_ns.items()
                if not name.startswith("_") and not isinstance(value, type)
                and callable(getattr(value, "stream", None)) and hasattr(value, "provider")]

    def resolve_tools(self, names: list[str]) -> list[Tool | Callable[..., Any] | str]:
        """The tools ``names`` (space- or comma-separated) refer to, notebook names first.

        Raises:
            UserError: a name is neither a function or @tool in the notebook nor a built-in tool.
        """
        ns = self.user_ns
        tools: list[Tool | Callable[..., Any] | str] = []
        for name in (part for item in names for part in item.split(",")):
            name = name.strip()
            if not name or name.lower() == "none":
                continue
            if name in ns:
                value = ns[name]
                if isinstance(value, Tool) or (callable(value) and not isinstance(value, type)):
                    tools.append(value)
                    continue
                raise UserError(f"--tools {name}: {name!r} is a {type(value).__name__}, not a function. Define "
                                "it with def (or @tool) in a cell above, or name a built-in tool.")
            if name in BUILTIN_TOOLS:
                tools.append(name)
                continue
            known = [*self.tool_names(), *BUILTIN_TOOLS]
            raise UserError(f"--tools {name}: no function or @tool called {name!r} in the notebook, and no such "
                            f"built-in tool.{did_you_mean(name, known)} Define it in a cell above (run that "
                            f"cell first), or use a built-in tool: {', '.join(BUILTIN_TOOLS)}.")
        return tools

    def tool_names(self) -> list[str]:
        """Names of the ``@tool`` objects in the notebook."""
        return [name for name, value in self.user_ns.items() if isinstance(value, Tool)]

    def _default_model(self) -> Any:
        return None if self.model is None else self.resolve_model(self.model)

    def new_agent(self, previous: Session | None, settings: dict[str, Any]) -> Agent:
        """A new conversation: the cell's settings, else the previous agent's, else the config."""
        old = previous.agent if previous is not None else None
        session_id = new_id("s_")
        kwargs: dict[str, Any] = {"session_id": session_id}
        if self.journal_dir is not None:
            kwargs["journal"] = Path(self.journal_dir).expanduser() / f"{session_id}.jsonl"
        model = settings["model"] if "model" in settings else (old.model if old else self._default_model())
        # An MCP server's tools belong to its connection: the new agent gets the servers instead.
        tools = settings["tools"] if "tools" in settings else ([t for t in old.tools if not hasattr(t, "remote_name")] if old else [])
        system = settings.get("system", old.system if old else None)
        mode = settings.get("mode", old.mode if old else self.mode)
        max_turns = settings.get("max_turns", old.max_iterations if old else self.max_turns)
        # Reminders describe the notebook's variables (names, types, shapes; never values).
        agent = Agent(model, tools, system, max_turns, permissions=mode, namespace=self.user_ns, **kwargs)
        # The python tool runs in the notebook's namespace: the agent and the person share variables.
        agent.tool_extras["namespace"] = self.user_ns
        for server in (old.mcp.servers.values() if old is not None and old.mcp is not None else ()):
            agent.add_mcp(server)
        if settings.get("sandbox") or (old is not None and "sandbox" in old.tool_extras):
            agent.use_sandbox(old.tool_extras["sandbox"] if old is not None and "sandbox" in old.tool_extras else True)
        return agent

    @staticmethod
    def apply_settings(agent: Agent, settings: dict[str, Any]) -> None:
        """Sets resolved cell or session settings (model, system, tools, mode, max turns) on ``agent``."""
        if "model" in settings:
            agent.model = settings["model"]
        if "system" in settings:
            agent.system = settings["system"]
        if "tools" in settings:
            tools = settings["tools"]
            agent.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        if "max_turns" in settings:
            agent.max_iterations = settings["max_turns"]
        if "mode" in settings:
            agent.mode = settings["mode"]
        if settings.get("sandbox") and "sandbox" not in agent.tool_extras:
            agent.use_sandbox(True)

    # -- %agent ----------------------------------------------------------------------------------

    @line_magic("agent")  # type: ignore[arg-type]  # as for %%agent
    @_usage_errors
    def agent_line(self, line: str) -> Any:
        """Controls the agent session. With no argument: the model, session, mode and usage.

        ``%agent help`` lists the subcommands and the ``%%agent`` options. The session:
        ``session`` (its ``Agent``, for Python), ``model NAME``, ``tools NAMES``, ``mode MODE``,
        ``system TEXT``, ``max-turns N``, ``budget DOLLARS`` (change the session's settings), ``setup``
        (a form to choose a provider, model and key, and test them), ``models``,
        ``sessions``. Its record as DataFrames: ``events``, ``turns`` (or ``history``), ``calls``
        (tool calls), ``usage`` (model calls), and ``timeline``. Runs: ``compact [FOCUS]``,
        ``wait``, ``cancel``, ``replay [SESSION]``, ``show [RUN]``, ``reset``, ``mcp`` (MCP servers; ``mcp add
        NAME [--timeout S] -- COMMAND ARGS...`` or ``mcp add NAME [--timeout S] URL`` adds one, ``mcp remove
        NAME`` stops one). A run in progress: ``say TEXT``
        (``agent.steer``), ``pause``, ``resume-run``, ``approvals``, ``approve CALL_ID``,
        ``reject CALL_ID REASON``. The notebook: ``undo [RUN_ID]`` (reverts a run's notebook edits; the
        latest run's by default), ``fix [REQUEST]`` (asks the agent about the last failing cell),
        ``on-error [on|off]`` (an "Ask the agent" button under each traceback), ``panel`` (the
        session's conversation beside the notebook: its runs, approvals and a box for the next
        prompt). After a restart: ``resume [SESSION]`` (the session back from its journal,
        a run cut off while an approval waited continued in a live view).
        """
        command, rest = _split(_without_comment(line))
        if command in _AWAITED:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                from IPython.core.async_helpers import get_asyncio_loop

                return get_asyncio_loop().run_until_complete(self.line_async(line))
            if command == "undo":
                return self._line(command, rest)  # in the saved file: the card says to reload
            raise UserError(f"%agent {command} must await, and this cell cannot (autoawait is off): "
                            f"turn it on with %autoawait asyncio, or use `await` on the handle.")
        return self._line(command, rest)

    @_usage_errors
    async def line_async(self, line: str) -> Any:
        """What a rewritten ``%agent wait`` / ``compact`` / ``resume`` line awaits."""
        command, rest = _split(_without_comment(line))
        if command == "resume":
            from agent_kernel.jupyter._resume_session import resume_session

            await resume_session(self, _expand(self.shell, rest))
            return None
        if command == "wait":
            # Silent whether or not anything was still running, so the cell's output is the same
            # however fast the run was.
            await wait_all(self.sessions.running())
            return None
        if command == "fix":
            from agent_kernel.jupyter._fix import fix_prompt

            return await self.cell_async("--no-interpolate", fix_prompt(self.user_ns, rest))
        if command == "undo":
            # Awaited so that the notebook open in Jupyter can confirm each reverted cell.
            said = await self.sessions.get().agent.undo_notebook_async(rest.strip() or None)
            if said.count(" undone in the open notebook") < said.count(" undone"):  # some went to a saved file
                said += " Reload the notebook from disk to see it (File > Reload Notebook from Disk)."
            print(said)
            return None
        if command == "compact":
            agent = self.sessions.get().agent
            events = await agent.compact(rest or None)
            done = [e for e in events if e.type.value == "compaction_complete"]
            print("Compacted the conversation." if done else "Nothing to compact.")
            return None
        return self._line(command, rest)

    def _line(self, command: str, rest: str) -> Any:
        from agent_kernel.jupyter import _controls as controls

        if command == "":
            return controls.status(self)
        handler = getattr(controls, f"cmd_{command.replace('-', '_')}", None)
        if command not in SUBCOMMANDS or handler is None:
            suggestion = did_you_mean(command, SUBCOMMANDS)
            if not suggestion and rest:
                # Words that are no subcommand are most likely a prompt typed on the line magic.
                suggestion = f" To ask the agent, start a cell with %%agent and put the prompt below it:\n%%agent\n{command} {rest}\n"
            raise UserError(f"%agent {command}: no such subcommand.{suggestion} "
                            f"Subcommands: {', '.join(SUBCOMMANDS)} (%agent help says what each does; "
                            "%agent alone shows the session).")
        return handler(self, rest)


def _without_comment(line: str) -> str:
    """``line`` without a trailing Python comment: ``agent = %agent session  # the Agent`` gives
    IPython's whole line to the magic, comment included. A ``#`` inside quotes, or not after a
    space, is kept."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def _running_cell_id(shell: Any) -> str | None:
    """The id of the cell being run, as JupyterLab and Notebook 7 send it (``metadata.cellId``)."""
    kernel = getattr(shell, "kernel", None)
    try:
        parent = kernel.get_parent() if kernel is not None else None
    except Exception:
        return None
    cell_id = ((parent or {}).get("metadata") or {}).get("cellId")
    return cell_id if isinstance(cell_id, str) else None


def _split(line: str) -> tuple[str, str]:
    parts = line.strip().split(None, 1)
    return (parts[0] if parts else "", parts[1].strip() if len(parts) > 1 else "")


def _expand(shell: Any, line: str) -> str:
    """``$name`` and ``{name}`` in the magic's option line, as IPython expands any magic's line."""
    from IPython.utils.text import DollarFormatter

    try:
        return DollarFormatter().vformat(line, (), shell.user_ns)
    except Exception:  # as IPython does: a line that does not expand is used as written
        return line


def _settings_of(agent: Agent, keys: Any) -> dict[str, Any]:
    """The agent's current values of the settings ``keys`` (to restore after one cell)."""
    now: dict[str, Any] = {"model": agent.model, "system": agent.system, "max_turns": agent.max_iterations}
    saved = {key: now[key] for key in keys if key in now}
    if "tools" in keys:
        saved["tools"] = agent.tools
    if "mode" in keys:
        saved["mode"] = agent.mode
    return saved
