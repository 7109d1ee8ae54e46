"""jupyter.kernel — ``AgentKernel``: a Jupyter kernel whose cells are prompts to an agent.

A prompt cell goes to the session's agent and shows the same live view and static summary as
``%%agent``; Python cells run as in IPython, in one namespace shared with the agent. The rule,
first match wins (``classify``):

* a cell whose first line is ``%%python`` runs the rest as Python; ``%%prompt`` sends the rest
  to the agent;
* a cell starting with any other cell magic (``%%time``, ``%%html``, ...) runs as IPython code;
* a cell made only of line magics (``%...``) and shell escapes (``!...``), or an empty one,
  runs as IPython code;
* a cell that parses as Python (line magics and shell escapes aside) and reads only names that
  are defined (in the namespace, as builtins, or by the cell itself) runs as Python, and so does
  one that reads as code (a call, an assignment, an import...) whatever its names: a typo such as
  ``prnt('hello')`` shows IPython's NameError, with the marker naming ``%%prompt``:
  ``print('hello')``, ``x = 1``, ``df.describe()``, ``df?``. A lone name runs as Python only if
  the notebook defined it, so ``help`` or ``Thanks`` is a prompt;
* everything else is a prompt.

Where the kernel had to judge (the last two rules), the cell's first output is a one-line
marker saying what it did and how to force the other way (``▶ ran as Python`` / ``▶ sent to the
agent``). Front-ends highlight cells as Markdown (``language_info.codemirror_mode``): most cells
are prose, and Markdown shows their ``code`` spans.

Prompts go to the current session of the ``agent_kernel`` magics, which the kernel loads: the
same agent that ``%%agent`` cells continue and that ``%agent model NAME``, ``%agent reset``,
``%agent usage`` and the other ``%agent`` commands act on. It starts as the kernel's own agent:
the default model (``AGENT_KERNEL_MODEL``, else a provider whose key is set, else the offline
model) with the built-in ``python`` tool. The agent is also ``agent`` in the namespace, so a
``%%python`` cell can configure it (``agent.model = ...``) or replace it (``agent = Agent(...)``
makes the new one the session's agent). Its ``python`` tool runs in the notebook's namespace, so
the person and the agent share variables.

Interrupting the kernel during a prompt cancels the run (``agent.cancel``); the cell ends with
the run's view and summary, and an error reply so "Run All" stops there, as for Python code.
Jupyter also interrupts a kernel just before it shuts it down or restarts it. So an interrupt
that finds a call waiting for approval gives a shutdown ``runner.SHUTDOWN_WINDOW_S`` to follow: if one
does, the run stops as the kernel going down, its approval stays open, and ``%agent resume``
after the restart shows the card again, as does running the same prompt cell again as the new
kernel's first cell; else the interrupt cancels the run as usual.

The kernel subclasses ``IPythonKernel``, so widgets, comms, display and magics all work;
completion and inspection go to IPython (in a prompt, completion offers names for the word
at the cursor).
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import contextlib
import inspect
import re
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

from ipykernel.ipkernel import IPythonKernel
from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult

from agent_kernel import __version__
from agent_kernel.agent._agent import Agent, RunResult
from agent_kernel.errors import UserError
from agent_kernel.events._event import EventType
from agent_kernel.jupyter._extension import load_ipython_extension, loaded_magics
from agent_kernel.jupyter._runner import SHUTDOWN_REASON, SHUTDOWN_WINDOW_S, RunInterrupted, awaits_approval, run_cell
from agent_kernel.runtime._state import TerminationReason

#: The first line that makes a cell ordinary Python.
PYTHON_ESCAPE = "%%python"
#: The first line that makes a cell a prompt, whatever it holds.
PROMPT_ESCAPE = "%%prompt"
#: The name the agent has in the namespace.
AGENT_NAME = "agent"

#: Runs one prompt cell, displaying its live view and summary (``runner.run_cell``).
#: Runs one prompt cell: ``await run_prompt(agent, prompt)``; a prompt of None continues the
#: agent's interrupted run (a call that waited for approval when the last kernel went down).
PromptRunner = Callable[[Agent, "str | None"], Awaitable[RunResult]]

#: Seconds between tries to cancel a run that an interrupt arrived just before.
_RETRY_CANCEL_S = 0.02
#: The cell arguments ``IPythonKernel.do_execute`` takes (``cell_meta`` only since ipykernel 7).
_PARENT_CELL_ARGS = frozenset(inspect.signature(IPythonKernel.do_execute).parameters) & {"cell_meta", "cell_id"}
_PYTHON_LINE = re.compile(r"^\s*(%[^%]|!|$)")
# The word being typed in a prompt: a name, maybe dotted (``df.col``), at the cursor.
_WORD_AT_END = re.compile(r"[A-Za-z_][\w.]*$")


_HELP_LINE = re.compile(r"^\s*(?:\?{1,2}\s*([A-Za-z_]\w*)[\w.]*|([A-Za-z_]\w*)[\w.]*\s*\?{1,2})\s*$")


@dataclass(frozen=True)
class CellKind:
    """What the kernel does with a cell (``classify``).

    Attributes:
        python: run it as IPython code; else send it to the agent.
        judged: the kernel decided from the code (no escape, magic or empty cell said so); such
            cells get a marker saying what was done.
        reason: why, in a few words, for the marker.
    """

    python: bool
    judged: bool = False
    reason: str = ""


def classify(code: str, namespace: Mapping[str, Any] | None = None) -> CellKind:
    """Whether ``code`` runs as Python or goes to the agent (the rule is in the module docstring).

    Args:
        code: the cell.
        namespace: the notebook's variables (None: only builtins count as defined).
    """
    first = code.lstrip().split("\n", 1)[0].strip()
    if first == PROMPT_ESCAPE:
        return CellKind(False, reason=f"{PROMPT_ESCAPE}")
    if first.startswith("%%"):
        return CellKind(True, reason=first.split()[0])
    if all(_PYTHON_LINE.match(line) for line in code.splitlines()):
        return CellKind(True, reason="magics and shell lines")
    ns: Mapping[str, Any] = namespace if namespace is not None else {}
    help_line = _HELP_LINE.match(code) if "\n" not in code.strip() else None
    if help_line is not None:
        name = help_line.group(1) or help_line.group(2)
        if name in ns or hasattr(builtins, name):
            return CellKind(True, True, f"asks for help on {name}")
        return CellKind(False, True, f"{name!r} is not defined")
    # Line magics and shell escapes become `pass`, so a cell mixing them with Python is judged
    # on its Python.
    source = "\n".join(re.sub(r"^(\s*)[%!](?!%).*$", r"\1pass", line) for line in code.splitlines())
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return CellKind(False, True, "it is not Python")
    missing = _undefined_names(tree, ns)
    if missing and _looks_like_code(tree):  # prnt('hello'): a typo, which IPython's NameError shows
        return CellKind(True, True, f"it reads as Python code, though {missing[0]!r} is not defined")
    if missing:
        return CellKind(False, True, f"{missing[0]!r} is not defined")
    body = tree.body
    if len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Name) \
            and body[0].value.id not in ns:
        return CellKind(False, True, f"{body[0].value.id!r} is a word, not a variable of the notebook")
    return CellKind(True, True, "it is Python and every name in it is defined")


#: What prose that happens to parse as Python never has: calls, attribute and item access,
#: assignments, imports, definitions and blocks ("not sure" or "tables and charts" parse too,
#: as names joined by operators, and stay prompts).
_CODE_NODES = (ast.Call, ast.Attribute, ast.Subscript, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Import,
               ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor,
               ast.While, ast.With, ast.AsyncWith, ast.If, ast.Try, ast.Return, ast.Lambda, ast.Await)


def _looks_like_code(tree: ast.AST) -> bool:
    """Whether the parsed cell is code a person wrote as code, names undefined or not."""
    return any(isinstance(node, _CODE_NODES) for node in ast.walk(tree))


def _undefined_names(tree: ast.AST, ns: Mapping[str, Any]) -> list[str]:
    """Names the code reads that nothing defines: not the namespace, builtins, or the code itself.

    Scopes are flattened: a name bound anywhere in the cell counts as defined everywhere in it,
    which errs towards Python for code that uses a name before binding it.
    """
    bound: set[str] = set()
    read: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read.append(node.id) if isinstance(node.ctx, ast.Load) else bound.add(node.id))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return [name for name in dict.fromkeys(read)
            if name not in bound and name not in ns and not hasattr(builtins, name)]


def is_python_cell(code: str, namespace: Mapping[str, Any] | None = None) -> bool:
    """Whether ``code`` runs as IPython code rather than as a prompt (``classify(...).python``)."""
    return classify(code, namespace).python


def _marker(kind: CellKind) -> dict[str, str]:
    """The one-line display saying what the kernel did with a cell it judged."""
    if kind.python:
        what, other = "▶ ran as Python", f"start the cell with {PROMPT_ESCAPE} to send it to the agent"
    else:
        what, other = "▶ sent to the agent", f"start the cell with {PYTHON_ESCAPE} to run it as Python"
    plain = f"{what} ({kind.reason}; {other})"
    html = (f'<div class="agent-kernel-marker" style="font-size:0.85em;'
            f'color:var(--jp-ui-font-color2,#777)">{escape(what)} '
            f'<span style="opacity:0.8">({escape(kind.reason)}; {escape(other)})</span></div>')
    return {"text/plain": plain, "text/html": html}


def _header_length(code: str) -> int:
    """Characters of a ``%%python`` or ``%%prompt`` line (with its newline) starting ``code``, else 0."""
    first, newline, _ = code.partition("\n")
    if first.strip() in (PYTHON_ESCAPE, PROMPT_ESCAPE):
        return len(first) + len(newline)
    return 0


def strip_python_escape(lines: list[str]) -> list[str]:
    """IPython input transformer: blanks a leading ``%%python`` line, keeping line numbers.

    Installed in the kernel's shell, so execution, the parsed history and tracebacks see the
    Python the cell holds, while the raw history keeps the cell as typed.
    """
    if lines and lines[0].strip() == PYTHON_ESCAPE:
        return ["\n", *lines[1:]]
    return lines


def _shift_completions(reply: dict[str, Any], offset: int) -> dict[str, Any]:
    """Moves a completion reply computed on a suffix of the cell back to cell positions."""
    if offset:
        reply["cursor_start"] += offset
        reply["cursor_end"] += offset
        for entry in reply.get("metadata", {}).get("_jupyter_types_experimental", []):
            entry["start"] += offset
            entry["end"] += offset
    return reply


class AgentKernel(IPythonKernel):
    """A Jupyter kernel where each cell is a prompt to an agent, and ``%%python`` cells are Python.

    Attributes:
        run_prompt: runs one prompt cell (``await run_prompt(agent, prompt)`` → ``RunResult``);
            ``runner.run_cell`` by default, the same as ``%%agent`` (and so shown in the session
            panel too).
    """

    implementation = "agent_kernel"
    implementation_version = __version__
    # Still Python to exporters and tools (name, file extension), but highlighted as Markdown:
    # most cells are prompts, and Python highlighting colours their words as keywords.
    language_info = {**IPythonKernel.language_info, "codemirror_mode": "markdown", "pygments_lexer": "markdown"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_prompt: PromptRunner = self._run_cell
        self._agent: Agent | None = None
        self._agent_error: str | None = None
        self._prompted = False  # a prompt cell has run in this kernel
        #: The agent this kernel created: only it may give way to a cut-off run, never one the
        #: person made or chose (``agent = Agent(...)``, ``%agent resume``, ``%%agent --new``).
        self._own: Agent | None = None
        #: The agent last put in the namespace as ``agent``: another value there means the
        #: person rebound the name.
        self._published: Agent | None = None
        shell = self.shell
        assert shell is not None
        shell.input_transformers_cleanup.append(strip_python_escape)
        load_ipython_extension(shell)  # %agent / %%agent, sharing the session with prompt cells
        try:
            self._agent = self._create_agent()
        except UserError as exc:  # a bad AGENT_KERNEL_MODEL must not stop the kernel starting
            self._agent_error = str(exc)
        else:
            self._own = self._agent
            self._adopt(self._agent)
            shell.user_ns[AGENT_NAME] = self._published = self._agent

    async def _run_cell(self, agent: Agent, prompt: str | None) -> RunResult:
        """``runner.run_cell``, shown in the session panel too once ``%agent panel`` opened it."""
        magics = loaded_magics(self.shell)
        return await run_cell(agent, prompt, host=magics.panel if magics is not None else None)

    def _create_agent(self) -> Agent:
        """The kernel's first agent: the default model with the ``python`` tool."""
        return Agent(tools=["python"])

    @property
    def banner(self) -> str:  # type: ignore[override]
        """What consoles print on connecting."""
        model = self._agent.model.name if self._agent is not None else "unavailable"
        return (
            f"Agent kernel {__version__} (model: {model}) on IPython.\n"
            f"A cell is a prompt to the agent unless it is Python whose names are all defined;\n"
            f"{PYTHON_ESCAPE} or {PROMPT_ESCAPE} on a cell's first line decides it. `{AGENT_NAME}` in\n"
            f"Python is the agent, and its python tool shares your variables.\n"
        )

    @property
    def agent(self) -> Agent:
        """The agent prompts go to: the magics' current session's (see the module docstring).

        Raises:
            UserError: no agent could be created (the message says why and how to fix it).
        """
        agent = self._sync_agent()
        if agent is None:
            raise UserError(
                f"The agent kernel has no agent: {self._agent_error} Fix the model setting and "
                f"restart the kernel, or create one in a cell: {PYTHON_ESCAPE} / "
                f"from agent_kernel import Agent / {AGENT_NAME} = Agent(model=..., tools=['python'])")
        return agent

    def _sync_agent(self) -> Agent | None:
        """Reconciles the session's agent with ``agent`` in the namespace; returns it.

        A rebound ``agent`` becomes the session's agent; an agent the magics replaced
        (``%agent reset``, ``%%agent --new``) becomes ``agent`` in the namespace.
        """
        shell = self.shell
        assert shell is not None
        named = shell.user_ns.get(AGENT_NAME)
        if isinstance(named, Agent) and named is not self._published:
            self._adopt(named)
            self._published = named
        magics = loaded_magics(shell)
        session = magics.sessions.find() if magics is not None else None
        if session is not None:
            self._agent = session.agent
        elif self._agent is not None:
            self._adopt(self._agent)  # the extension was reloaded: its sessions start empty
        current = shell.user_ns.get(AGENT_NAME)
        # A name the person has used for something else is theirs; prompts still have an agent.
        if self._agent is not None and current is not self._agent and (current is None or isinstance(current, Agent)):
            shell.user_ns[AGENT_NAME] = self._published = self._agent
        return self._agent

    def _adopt(self, agent: Agent) -> None:
        """Makes ``agent`` the agent of the magics' current session and of prompt cells."""
        shell = self.shell
        assert shell is not None
        magics = loaded_magics(shell)
        session = magics.sessions.find() if magics is not None else None
        if session is not None:
            # Not sessions.put(): it closes the replaced agent's journal, and the person may
            # still hold that agent (previous = agent; agent = Agent(...); agent = previous).
            session.agent = agent
        elif magics is not None:
            magics.sessions.put(magics.sessions.current, agent)
        self._agent = agent

    # -- execution ---------------------------------------------------------------------------

    async def do_execute(
        self,
        code: str,
        silent: bool,
        store_history: bool = True,
        user_expressions: dict[str, Any] | None = None,
        allow_stdin: bool = False,
        *,
        cell_meta: dict[str, Any] | None = None,
        cell_id: str | None = None,
    ) -> dict[str, Any]:
        """Runs a Python cell through IPython, or a prompt cell through the agent."""
        shell = self.shell
        assert shell is not None
        kind = classify(code, shell.user_ns)
        if kind.judged and not silent:
            shell.display_pub.publish(data=_marker(kind), metadata={"agent_kernel": {"python": kind.python}})
        if kind.python:
            # So `agent` in this cell is the session's agent; a conflict (rebinding `agent` while
            # the session runs) is reported by the next prompt, which needs it settled.
            with contextlib.suppress(UserError):
                self._sync_agent()
            cell = {"cell_meta": cell_meta, "cell_id": cell_id}
            return await super().do_execute(
                code, silent, store_history, user_expressions, allow_stdin,
                **{name: value for name, value in cell.items() if name in _PARENT_CELL_ARGS})
        return await self._execute_prompt(code[_header_length(code):] if not kind.judged else code,
                                          silent, store_history, user_expressions,
                                          cell_meta=cell_meta, cell_id=cell_id)

    async def _execute_prompt(self, prompt: str, silent: bool, store_history: bool,
                              user_expressions: dict[str, Any] | None, *,
                              cell_meta: dict[str, Any] | None, cell_id: str | None) -> dict[str, Any]:
        shell = self.shell
        assert shell is not None
        store_history = store_history and not silent
        count = shell.execution_count
        info = ExecutionInfo(prompt, store_history, silent, True, cell_id)
        info.cell_meta = cell_meta  # an attribute since IPython 9; harmless before
        result = ExecutionResult(info)
        result.execution_count = count
        if store_history:
            shell.execution_count += 1
            # The raw and the "transformed" source are both the prompt: there is no Python form.
            shell.history_manager.store_inputs(count, prompt, prompt)
        # IPython's own cell events, so extensions (autoreload, inline figures) behave as usual.
        shell.events.trigger("pre_execute")
        if not silent:
            shell.events.trigger("pre_run_cell", info)
        failure: tuple[str, str] | None
        try:
            failure = await self._run_prompt(prompt, count)
        except Exception as exc:  # a bug in a runner or the agent: reported in the cell, not fatal
            failure = (type(exc).__name__, str(exc))
            result.error_in_exec = exc
        finally:
            shell.events.trigger("post_execute")
            if not silent:
                shell.events.trigger("post_run_cell", result)
        reply: dict[str, Any] = {"execution_count": count}
        if failure is None:
            reply["status"] = "ok"
            reply["user_expressions"] = shell.user_expressions(user_expressions or {})
        else:
            ename, evalue = failure
            traceback = [f"{ename}: {evalue}"]
            reply.update(status="error", ename=ename, evalue=evalue, traceback=traceback,
                         user_expressions={})
            if not silent:
                self.send_response(self.iopub_socket, "error",
                                   {"ename": ename, "evalue": evalue, "traceback": traceback})
        reply["payload"] = shell.payload_manager.read_payload()
        shell.payload_manager.clear_payload()
        return reply

    async def _run_prompt(self, prompt: str, count: int) -> tuple[str, str] | None:
        """Runs one prompt; returns None on success, else ``(ename, evalue)`` for the reply."""
        try:
            agent = self.agent
        except UserError as exc:
            return "UserError", str(exc)
        asked: str | None = prompt
        cut_off = self._cut_off_run(agent, prompt)
        if cut_off is not None:  # this cell's run, cut off by the last kernel's end: it goes on
            agent, asked = cut_off, None
        # The python tool runs code in extras["namespace"]: bind it to the notebook's.
        agent.tool_extras["namespace"] = self.shell.user_ns  # type: ignore[union-attr]
        running = asyncio.ensure_future(self.run_prompt(agent, asked))
        try:
            with self._interrupt_cancels(agent, running, f"kernel interrupt in cell [{count}]"):
                result = await running
        except RunInterrupted as exc:  # the await itself was cancelled; the run was stopped too
            return "KeyboardInterrupt", str(exc)
        if result.termination_reason is TerminationReason.USER_INTERRUPT:
            why = next((e.data.get("reason") for e in reversed(result.events)
                        if e.type is EventType.CANCELLED), None)
            return "KeyboardInterrupt", f"the agent's run was cancelled ({why or 'interrupted'})"
        if result.termination_reason is TerminationReason.ERROR:
            return "AgentError", result.error or "the agent's run failed"
        return None

    def _cut_off_run(self, agent: Agent, prompt: str) -> Agent | None:
        """The run the last kernel left waiting for approval, when this is the kernel's first
        prompt, its agent is the kernel's own and has not begun a conversation, and the newest
        journal's last run asked the same prompt: its agent, resumed, made the session's agent.
        None otherwise.

        So running a cut-off prompt cell again after a restart shows its card again, as
        ``%agent resume`` does, instead of asking the model anew."""
        first, self._prompted = not self._prompted, True
        shell = self.shell
        magics = loaded_magics(shell) if shell is not None else None
        if not first or magics is None or agent is not self._own or agent.messages:
            return None
        from agent_kernel.jupyter._resume_session import cut_off_agent, cut_off_notice

        resumed = cut_off_agent(magics, prompt)
        if resumed is None:
            return None
        self._adopt(resumed)
        agent.close()  # the kernel's own agent, unused: its journal was never opened
        assert shell is not None
        if isinstance(shell.user_ns.get(AGENT_NAME, agent), Agent):  # a name put to other use stays theirs
            shell.user_ns[AGENT_NAME] = self._published = resumed
        print(cut_off_notice(resumed, "Run %agent reset, then the cell again, to start afresh instead."))
        return resumed

    @contextlib.contextmanager
    def _interrupt_cancels(self, agent: Agent, running: asyncio.Future[Any], reason: str) -> Iterator[None]:
        """While ``running`` (a prompt) runs, SIGINT (a kernel interrupt) cancels the agent's run.

        Without this, SIGINT would raise KeyboardInterrupt at an arbitrary point of the event
        loop. Signals reach only the main thread, so a prompt in a subshell is stopped with the
        live view's Stop button instead.
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        loop = asyncio.get_running_loop()
        held = False

        def cancel() -> None:
            nonlocal held
            if not held and awaits_approval(agent):
                held = True  # a second interrupt, or the window passing, cancels
                loop.call_later(SHUTDOWN_WINDOW_S, cancel)
                return
            # An interrupt in the moment between the cell starting and the run starting finds
            # nothing to cancel yet: try again shortly, until the run starts or the cell ends.
            if not agent.cancel(reason) and not running.done():
                loop.call_later(_RETRY_CANCEL_S, cancel)

        previous = signal.getsignal(signal.SIGINT)
        try:
            # The loop's own handler wakes the loop whichever thread the OS delivers the signal
            # to. A signal.signal handler would run only at the main thread's next bytecode,
            # which a loop idling on a silent model stream may not execute for a long time.
            loop.add_signal_handler(signal.SIGINT, cancel)
            on_loop = True
        except (NotImplementedError, RuntimeError):  # Windows: no loop signal handlers
            signal.signal(signal.SIGINT, lambda signum, frame: loop.call_soon_threadsafe(cancel))
            on_loop = False
        try:
            yield
        finally:
            if on_loop:
                loop.remove_signal_handler(signal.SIGINT)
            signal.signal(signal.SIGINT, previous)

    async def do_shutdown(self, restart: bool) -> dict[str, Any]:
        """Stops a prompt's run as the kernel going down, so that its open calls stay open.

        Runs on the control thread (``Agent.cancel`` is safe from any thread), before the event
        loop stops. A cancel that came first (an interrupt) keeps its reason.
        """
        agent = self._agent
        if agent is not None and agent.running:
            agent.cancel(SHUTDOWN_REASON, keep_calls_open=True)
        reply = super().do_shutdown(restart)  # IPythonKernel's is synchronous, Kernel's a coroutine
        return dict(await reply if inspect.isawaitable(reply) else reply)

    # -- editing help ------------------------------------------------------------------------

    # Coroutines, as Kernel declares them (ipykernel awaits whatever these return).

    async def do_is_complete(self, code: str) -> dict[str, Any]:
        """A prompt is always complete; Python cells are judged by IPython."""
        if is_python_cell(code, self.shell.user_ns if self.shell is not None else None):
            # Judged on the body: a blank line in place of the escape would change IPython's
            # answer for one-line bodies (``)`` is invalid, ``\n)`` merely incomplete).
            return super().do_is_complete(code[_header_length(code):])
        return {"status": "complete"}

    async def do_complete(self, code: str, cursor_pos: int | None) -> dict[str, Any]:
        """Completes Python in Python cells, and the name at the cursor in prompts."""
        if cursor_pos is None:
            cursor_pos = len(code)
        if is_python_cell(code, self.shell.user_ns if self.shell is not None else None):
            offset = _header_length(code)
            if cursor_pos < offset:  # on the %%python line itself
                offset = 0
            reply = super().do_complete(code[offset:], cursor_pos - offset)
            return _shift_completions(reply, offset)
        word = _WORD_AT_END.search(code[:cursor_pos])
        if word is None:
            return {"matches": [], "cursor_start": cursor_pos, "cursor_end": cursor_pos,
                    "metadata": {}, "status": "ok"}
        reply = super().do_complete(word.group(), len(word.group()))
        return _shift_completions(reply, word.start())
