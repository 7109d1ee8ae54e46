"""jupyter.kernel — ``AgentKernel``: a Jupyter kernel whose cells are prompts to an agent.

Every cell is a prompt to the session's agent and shows the same live view and static summary
as ``%%agent``. Python is one escape away, and shares one namespace with the agent:

* a cell whose first line is ``%%python`` runs the rest as ordinary IPython code;
* a cell starting with any other cell magic (``%%time``, ``%%html``, ...) runs as IPython code;
* a cell made only of line magics (``%...``) and shell escapes (``!...``), or an empty one,
  runs as IPython code;
* everything else is a prompt.

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

The kernel subclasses ``IPythonKernel``, so widgets, comms, display and magics all work;
completion and inspection go to IPython (in a prompt, completion offers names for the word
at the cursor).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from ipykernel.ipkernel import IPythonKernel
from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult

from .. import __version__
from ..agent import Agent, RunResult
from ..errors import UserError
from ..events import EventType
from ..state import TerminationReason
from .extension import load_ipython_extension, loaded_magics
from .runner import RunInterrupted, run_cell

__all__ = ["AGENT_NAME", "PYTHON_ESCAPE", "AgentKernel", "PromptRunner", "is_python_cell", "strip_python_escape"]

#: The first line that makes a cell ordinary Python.
PYTHON_ESCAPE = "%%python"
#: The name the agent has in the namespace.
AGENT_NAME = "agent"

#: Runs one prompt cell, displaying its live view and summary (``runner.run_cell``).
PromptRunner = Callable[[Agent, str], Awaitable[RunResult]]

#: Seconds between tries to cancel a run that an interrupt arrived just before.
_RETRY_CANCEL_S = 0.02
#: The cell arguments ``IPythonKernel.do_execute`` takes (``cell_meta`` only since ipykernel 7).
_PARENT_CELL_ARGS = frozenset(inspect.signature(IPythonKernel.do_execute).parameters) & {"cell_meta", "cell_id"}
_PYTHON_LINE = re.compile(r"^\s*(%[^%]|!|$)")
# The word being typed in a prompt: a name, maybe dotted (``df.col``), at the cursor.
_WORD_AT_END = re.compile(r"[A-Za-z_][\w.]*$")


def is_python_cell(code: str) -> bool:
    """Whether ``code`` runs as IPython code (see the module docstring) rather than as a prompt."""
    if code.lstrip().startswith("%%"):
        return True
    return all(_PYTHON_LINE.match(line) for line in code.splitlines())


def _header_length(code: str) -> int:
    """Characters of the ``%%python`` line (with its newline) at the start of ``code``, else 0."""
    first, newline, _ = code.partition("\n")
    if first.strip() == PYTHON_ESCAPE:
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
            ``runner.run_cell`` by default, the same as ``%%agent``.
    """

    implementation = "agent_kernel"
    implementation_version = __version__
    # language_info stays IPython's: Python is what the kernel executes, and what front-ends
    # should highlight and export; prompts are plain text to them.

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run_prompt: PromptRunner = run_cell
        self._agent: Agent | None = None
        self._agent_error: str | None = None
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
            self._adopt(self._agent)
            shell.user_ns[AGENT_NAME] = self._published = self._agent

    def _create_agent(self) -> Agent:
        """The kernel's first agent: the default model with the ``python`` tool."""
        return Agent(tools=["python"])

    @property
    def banner(self) -> str:  # type: ignore[override]
        """What consoles print on connecting."""
        model = self._agent.model.name if self._agent is not None else "unavailable"
        return (
            f"Agent kernel {__version__} (model: {model}) on IPython.\n"
            f"Each cell is a prompt to the agent. Start a cell with {PYTHON_ESCAPE} to run Python;\n"
            f"`{AGENT_NAME}` in Python is the agent, and its python tool shares your variables.\n"
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

    async def do_execute(  # type: ignore[override]
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
        if is_python_cell(code):
            # So `agent` in this cell is the session's agent; a conflict (rebinding `agent` while
            # the session runs) is reported by the next prompt, which needs it settled.
            with contextlib.suppress(UserError):
                self._sync_agent()
            cell = {"cell_meta": cell_meta, "cell_id": cell_id}
            return await super().do_execute(  # type: ignore[no-any-return]
                code, silent, store_history, user_expressions, allow_stdin,
                **{name: value for name, value in cell.items() if name in _PARENT_CELL_ARGS})
        return await self._execute_prompt(code, silent, store_history, user_expressions,
                                          cell_meta=cell_meta, cell_id=cell_id)

    async def _execute_prompt(self, prompt: str, silent: bool, store_history: bool,
                              user_expressions: dict[str, Any] | None, *,
                              cell_meta: dict[str, Any] | None, cell_id: str | None) -> dict[str, Any]:
        shell = self.shell
        assert shell is not None
        store_history = store_history and not silent
        count = shell.execution_count
        info = ExecutionInfo(prompt, store_history, silent, True, cell_id)
        info.cell_meta = cell_meta  # type: ignore[assignment]  # an attribute since IPython 9; harmless before
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
        # The python tool runs code in extras["namespace"]: bind it to the notebook's.
        agent.tool_extras["namespace"] = self.shell.user_ns  # type: ignore[union-attr]
        running = asyncio.ensure_future(self.run_prompt(agent, prompt))
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

        def cancel() -> None:
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

    # -- editing help ------------------------------------------------------------------------

    # Coroutines, as Kernel declares them (ipykernel awaits whatever these return).

    async def do_is_complete(self, code: str) -> dict[str, Any]:
        """A prompt is always complete; Python cells are judged by IPython."""
        if is_python_cell(code):
            # Judged on the body: a blank line in place of the escape would change IPython's
            # answer for one-line bodies (``)`` is invalid, ``\n)`` merely incomplete).
            return super().do_is_complete(code[_header_length(code):])  # type: ignore[no-any-return]
        return {"status": "complete"}

    async def do_complete(self, code: str, cursor_pos: int | None) -> dict[str, Any]:
        """Completes Python in Python cells, and the name at the cursor in prompts."""
        if cursor_pos is None:
            cursor_pos = len(code)
        if is_python_cell(code):
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
