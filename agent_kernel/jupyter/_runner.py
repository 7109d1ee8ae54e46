"""jupyter.runner — runs an agent for a notebook cell, blocking or detached, with its live view.

One run = one ``AgentView`` (the live widget), one task on the kernel's event loop, and, when the
run ends, one static transcript in its place. The ``%%agent`` magic and the Agent kernel both
call this module; neither drives ``agent.stream`` itself.

**Blocking** (``run_cell``): the caller awaits the run, so the cell stays busy until it ends and
"Run All" keeps its order. A person can click Approve / Reject / Stop meanwhile only if the kernel
handles widget messages while a cell awaits, which ``detect_mode`` checks (ipykernel >= 7.4).
A cancelled await (a kernel interrupt) cancels the run with a reason, waits for the loop to record
how it ended (journal intact), then raises ``RunInterrupted``.

**Detached** (``start_run``): the run is a task on the kernel's loop and the call returns a
``RunHandle`` at once; ``await handle`` (or ``%agent wait``) sequences later cells. This is the
mode on kernels that process widget messages only between cells, and on Colab and VS Code.

**Who answers approvals.** A person can answer only once a front-end has rendered the view: its
JS sends ``{"type": "sync"}`` when it renders, and only then is the approval broker made
interactive. Until that message arrives (nbval, papermill, nbconvert and other headless clients
never send it) a call needing approval goes to the headless policy (``AGENT_KERNEL_APPROVAL``) or
is refused with a message naming that policy, so no run waits forever for a click. Because a view
may render a moment after the first call asks, the runner gives it ``RENDER_GRACE_S`` to appear
before the question falls through (only when the policy would not decide anyway).

**Interrupts and restarts.** A kernel interrupt cancels the cell's wait, which stops the run and
answers its open calls. A kernel shutting down (or restarting) stops it too, but as the process
going down (``keep_calls_open``): the calls stay open and ``%agent resume`` asks again. Jupyter
interrupts a kernel just before it shuts it down, so an interrupt that finds a call waiting for
approval holds off ``SHUTDOWN_WINDOW_S`` for a shutdown to follow.

**What a cell shows.** The live view while the run goes on; when it ends, the view's output is
replaced (a display update of the same display id) by its ``StaticTranscript``: the same picture
as static HTML, with the run's deterministic summary as ``text/plain``. A saved notebook so needs
no widget state, and shows each run once. Checkers such as nbval and papermill-style executors
never render the view and nbval ignores display updates, so when no front-end rendered the view
the transcript is displayed as a new output instead, and the view's output emptied: both ways a
saved notebook holds one transcript per run, which a headless re-run reproduces. The view is then
closed (``AgentView.dispose``): no comm stays open, and its handle keeps only the ``RunResult``
and the ``RunSummary``, so a kernel of hundreds of runs holds a bounded amount per run. A run
that raises instead of ending (an MCP resource that would not load, a bug) ends the same way, its
transcript showing it cut off where it raised, and its error then reaches the caller. ``quiet``
drops the view and shows only the transcript; ``display=False`` shows nothing (the caller
renders).

**A run with no cell.** A run a widget's click starts (the "Ask the agent" button of
``on_error.py``) has no cell to display in: what it sends goes to the click's message, which the
page has stopped listening to once the click was handled. Its view and transcript therefore go
into an ``ipywidgets.Output`` (``output=``) by setting the widget's outputs, which reach the page
as widget state whenever they are sent; and the view's ``saved`` transcript names that Output,
so the page puts the final transcript in the Output's place in the notebook.

**Somewhere else too.** A ``ViewHost`` (the session panel, ``jupyter.panel``) is handed the run
when it starts, live view included, and its static transcript when it ends, just before the view
closes: the same view then shows in the cell and in the host, or in the host alone
(``display=False``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent_kernel.agent._agent import Agent, RunResult
from agent_kernel.errors import AgentKernelError, RunCancelled
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.guard._approvals import Approval
from agent_kernel.jupyter._static_view import StaticTranscript
from agent_kernel.jupyter._summary import RunSummary

_log = logging.getLogger("agent_kernel.jupyter")

if TYPE_CHECKING:
    from agent_kernel.jupyter._view import AgentView

#: Seconds a call needing approval waits for the run's view to render before it falls through
#: to the headless policy (or is refused). Only paid when no front-end ever renders the view.
RENDER_GRACE_S = 3.0
#: Seconds a cancelled run gets to record how it ended before the interrupt is reported anyway.
CANCEL_GRACE_S = 10.0
#: The cancel reasons the journal records for the Stop button and for a kernel interrupt.
STOP_REASON = "stopped from the live view"
INTERRUPT_REASON = "kernel interrupt"
SHUTDOWN_REASON = "the kernel shut down"
#: Seconds an interrupt that finds a call waiting for approval holds off: Jupyter interrupts a
#: kernel just before it shuts it down (a restart too), and a shutdown that follows in this time
#: stops the run as the kernel going down, leaving the approval for ``%agent resume``.
SHUTDOWN_WINDOW_S = 1.0
#: Environment variables whose presence means the kernel was started by VS Code.
_VSCODE_ENV = ("VSCODE_PID", "VSCODE_CWD", "VSCODE_IPC_HOOK_CLI")
#: The task of each agent's latest run: ``agent.running`` turns True only once the task has
#: started, so two runs started in the same moment are told apart here. Weak: no agent is kept.
_IN_FLIGHT: weakref.WeakKeyDictionary[Agent, asyncio.Task[Any]] = weakref.WeakKeyDictionary()


# ---- which mode ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecutionMode:
    """How ``%%agent`` cells run here, and why.

    Attributes:
        blocking: the cell can await the run while widget clicks are still handled.
        reason: why, in words (``%agent`` shows it).
    """

    blocking: bool
    reason: str

    @property
    def name(self) -> str:
        """``blocking`` or ``detached``."""
        return "blocking" if self.blocking else "detached"


def kernel_handles_comms_while_awaiting(kernel: Any) -> bool:
    """Whether ``kernel`` (an instance or a class) dispatches widget (comm) messages while a cell is awaiting.

    ipykernel 7.4 added a keyword-only ``concurrent`` parameter to ``Kernel.dispatch_shell``:
    with it, a comm message that arrives while the shell's lock is held (a cell awaiting) is
    dispatched at once as its own task. Earlier kernels queue it until the cell ends, so a cell
    awaiting a click would wait forever. The signature is the capability; the version string is
    not consulted.
    """
    kernel_class = kernel if isinstance(kernel, type) else type(kernel)
    dispatch = getattr(kernel_class, "dispatch_shell", None)
    if dispatch is None:
        return False
    try:
        return "concurrent" in inspect.signature(dispatch).parameters
    except (TypeError, ValueError):
        return False


def detect_mode(shell: Any = None, *, environ: Mapping[str, str] | None = None,
                modules: Mapping[str, Any] | None = None) -> ExecutionMode:
    """Whether a cell can block on a run here (see ``ExecutionMode``).

    Detached when: the shell cannot run top-level ``await`` on its own asyncio loop (autoawait
    off, or another loop runner such as trio); the front-end is Colab (``google.colab`` is
    imported) or VS Code (``VSCODE_PID``/``VSCODE_CWD``/``VSCODE_IPC_HOOK_CLI`` in the kernel's
    environment, unless ``JPY_SESSION_NAME`` says a Jupyter server started it, as when JupyterLab
    runs from a VS Code terminal), whose widget managers load the view from a CDN and may never
    render it; or the kernel does not handle widget messages while a cell awaits
    (``kernel_handles_comms_while_awaiting``). Blocking otherwise, including plain IPython with no
    kernel (there is no widget to click). ``%config AgentMagics.execution`` overrides this.
    """
    env = os.environ if environ is None else environ
    mods = sys.modules if modules is None else modules
    if shell is None:
        return ExecutionMode(False, "no IPython shell: runs are tasks on the running loop")
    if not getattr(shell, "autoawait", False):
        return ExecutionMode(False, "autoawait is off (%autoawait), so a cell cannot await the run")
    runner = getattr(shell, "loop_runner", None)
    from IPython.core.async_helpers import _asyncio_runner

    if runner is not _asyncio_runner:
        return ExecutionMode(False, "the shell's loop runner is not asyncio")
    if "google.colab" in mods:
        return ExecutionMode(False, "Colab's front-end: the view may not render while a cell runs")
    if any(env.get(name) for name in _VSCODE_ENV) and not env.get("JPY_SESSION_NAME"):
        return ExecutionMode(False, "VS Code's front-end: the view may not render while a cell runs")
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return ExecutionMode(True, "IPython without a kernel: the cell awaits the run")
    if kernel_handles_comms_while_awaiting(kernel):
        return ExecutionMode(True, "the kernel handles widget messages while a cell awaits")
    return ExecutionMode(False, "this ipykernel handles widget messages only between cells "
                                "(ipykernel >= 7.4 lets a cell wait for a click)")


# ---- the handle ----------------------------------------------------------------------------


class RunInterrupted(RunCancelled):
    """A cell awaiting a run was interrupted; the run was cancelled and its end recorded.

    An ``Exception``, not a ``KeyboardInterrupt``: raised from a task, a ``KeyboardInterrupt``
    would escape the event loop itself.

    Attributes:
        result: the cancelled run's ``RunResult``, or None if it did not stop in time.
    """

    def __init__(self, result: RunResult | None) -> None:
        super().__init__("the agent run was cancelled by a kernel interrupt")
        self.result = result

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback: one line, no internals."""
        ended = "its end is recorded in the journal" if self.result is not None \
            else "it did not stop in time and is still being cancelled"
        return [f"Interrupted: the agent run was cancelled ({ended})."]


class RunFailed(AgentKernelError):
    """A ``%%agent`` run ended in ``error``: raised once its view shows it, so Run All stops.

    Attributes:
        result: the failed run's ``RunResult`` (its journal holds every event).
    """

    def __init__(self, result: RunResult) -> None:
        super().__init__(f"the agent run ended with an error: {result.error or 'no message'}")
        self.result = result

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback: what failed and how to carry on past it."""
        return [
            f"AgentError: {self.result.error or 'the agent run failed'}",
            "The run above ended with an error, so this cell failed and Run All stops here. "
            "To keep going after a failed run, add --no-raise to %%agent, or set "
            "%config AgentMagics.raise_on_error = False.",
        ]


class RunHandle:
    """One run started by ``start_run``: await it for the ``RunResult``.

    A finished run's handle holds what a notebook needs of it and no more: its result (whose
    ``events`` are read from ``agent.events`` while held there, else from the journal) and its
    ``summary``. Its live view is closed when the run ends (its output is then the static
    transcript), so a notebook of many runs holds, and saves, a bounded amount per run.

    Attributes:
        agent: the agent running.
        prompt: what it was asked.
        view: its live view while the run goes on; None once it has ended (or with ``quiet``
            or ``display=False``).
        task: the asyncio task driving the run.
        events: the run's events: those recorded so far while it runs, then the result's.
        summary: the finished run's ``RunSummary`` (None until it ends).

    Example:
        >>> handle = start_run(agent, "Summarise the data")  # doctest: +SKIP
        >>> result = await handle  # doctest: +SKIP
    """

    def __init__(self, agent: Agent, prompt: str | None, view: AgentView | None,
                 task: asyncio.Task[RunResult] | None, events: list[AgentEvent]) -> None:
        self.agent = agent
        self.prompt = prompt
        self.view = view
        self.task: asyncio.Task[RunResult] = task  # type: ignore[assignment]  # set by start_run
        self.events: Sequence[AgentEvent] = events
        self.summary: RunSummary | None = None

    def _ended(self, result: RunResult, summary: RunSummary) -> None:
        """The run ended: keep its result and summary; let go of its view and its own event list."""
        self.events = result.events
        self.summary = summary
        self.view = None

    def __repr__(self) -> str:
        return f"RunHandle(session={self.agent.session_id!r}, {self.state})"

    def _ipython_display_(self) -> None:
        """Shows nothing as a cell's result: the cell's view (then its transcript) shows the run,
        and a line saying ``running`` would stay under the finished transcript and be saved.
        ``_`` still holds the handle, so ``await _`` waits for it."""

    @property
    def state(self) -> str:
        """``running``, ``finished``, ``cancelled`` or ``failed``."""
        if not self.task.done():
            return "running"
        if self.task.cancelled():
            return "cancelled"
        return "failed" if self.task.exception() is not None else "finished"

    def done(self) -> bool:
        """True once the run has ended."""
        return self.task.done()

    def result(self) -> RunResult:
        """The ``RunResult`` of a finished run.

        Raises:
            asyncio.InvalidStateError: the run has not ended; ``await`` the handle first.
        """
        return self.task.result()

    def cancel(self, reason: str = "cancelled by the user", *, keep_calls_open: bool = False) -> bool:
        """Asks the run to stop (safe from any thread); False if it is not running.
        ``keep_calls_open``: as ``Agent.cancel``."""
        return self.agent.cancel(reason, keep_calls_open=keep_calls_open) if not self.task.done() else False

    async def wait(self) -> RunResult:
        """Waits for the run to end. Cancelling the wait (a kernel interrupt) cancels the run."""
        try:
            return await asyncio.shield(self.task)
        except asyncio.CancelledError:
            _uncancel()
            raise RunInterrupted(await self._stop()) from None

    def __await__(self) -> Any:
        return self.wait().__await__()

    async def _stop(self, going: bool | None = None) -> RunResult | None:
        """Cancels the run for the wait that was cancelled, and waits (bounded) for the loop to
        record how it ended.

        A kernel shutting down (or restarting) cancels the cell's wait too; its run is not
        stopped by anyone's decision, so the calls it cuts stay open for ``%agent resume``.
        """
        if going is None:
            going = await _going_down([self.agent])
        self.cancel(SHUTDOWN_REASON if going else INTERRUPT_REASON, keep_calls_open=going)
        try:
            return await asyncio.wait_for(asyncio.shield(self.task), CANCEL_GRACE_S)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            return None
        except Exception:
            # The run failed while stopping: the interrupt still wins, but the failure is shown.
            _log.exception("the agent run failed while it was being stopped")
            return None


def _kernel_shutting_down() -> bool:
    """True once the kernel has been asked to shut down or restart: ipykernel sets the shell's
    ``exit_now`` when the request arrives, before it stops the event loop (which cancels the
    cells still awaiting)."""
    from IPython import get_ipython

    return bool(getattr(get_ipython(), "exit_now", False))


async def _going_down(agents: Sequence[Agent]) -> bool:
    """Whether a cancelled wait on ``agents``' runs is the kernel going down: known at once when
    it is, else, while a call waits for approval, once a shutdown has had ``SHUTDOWN_WINDOW_S``
    to follow the interrupt (one wait, however many runs)."""
    if _kernel_shutting_down():
        return True
    if any(awaits_approval(agent) for agent in agents):
        return await _shutdown_follows(SHUTDOWN_WINDOW_S)
    return False


async def _shutdown_follows(seconds: float) -> bool:
    """True if the kernel is asked to shut down within ``seconds`` (it sets the shell's
    ``exit_now``, on its control thread)."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None or not shell.has_trait("exit_now"):
        return False
    loop = asyncio.get_running_loop()
    asked = asyncio.Event()

    def on_exit_now(_change: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed: nothing waits
            loop.call_soon_threadsafe(asked.set)

    shell.observe(on_exit_now, "exit_now")
    try:
        if not shell.exit_now:
            await asyncio.wait_for(asked.wait(), seconds)
    except asyncio.TimeoutError:
        pass
    except asyncio.CancelledError:  # the kernel's teardown cancels what still awaits
        _uncancel()
    finally:
        shell.unobserve(on_exit_now, "exit_now")
    return _kernel_shutting_down()


def awaits_approval(agent: Agent) -> bool:
    """True while a call of ``agent``'s run (a sub-agent's included) waits for an approval."""
    decided: set[tuple[str | None, Any]] = set()
    for event in reversed(agent.events):
        if event.type is EventType.APPROVAL_DECISION:
            decided.add((event.agent_id, event.data.get("call_id")))
        elif event.type is EventType.APPROVAL_REQUIRED:
            if (event.agent_id, event.data.get("call_id")) not in decided:
                return True
        elif event.type is EventType.RUN_START and event.agent_id is None:
            return False
    return False


def _uncancel() -> None:
    """Clears the pending cancellation of the current task after it has been handled, so later
    awaits and timeouts in the same cell behave normally (Python >= 3.11)."""
    task = asyncio.current_task()
    uncancel = getattr(task, "uncancel", None)
    if uncancel is not None:
        uncancel()


# ---- starting runs -------------------------------------------------------------------------


class ViewHost(Protocol):
    """Somewhere besides the cell that shows runs (the session panel): called on the loop."""

    def run_started(self, handle: RunHandle) -> None:
        """A run started; ``handle.view`` is its live view (None for a quiet run)."""

    def run_ended(self, handle: RunHandle, transcript: StaticTranscript) -> None:
        """The run ended and ``transcript`` is what it showed; its view closes right after."""


def start_run(agent: Agent, prompt: str | None, *, display: bool = True, quiet: bool = False,
              detached: bool = True, on_end: Callable[[RunHandle], None] | None = None,
              render_grace: float = RENDER_GRACE_S, output: Any = None, host: ViewHost | None = None) -> RunHandle:
    """Starts ``agent`` on ``prompt`` as a task on the running loop and returns at once.

    Must be called on the kernel's event loop thread (a cell, a magic, ``do_execute``).

    Args:
        agent: the agent; it must not be running already.
        prompt: the user's message; None continues the conversation (``Agent.continue_run``).
        display: show output in the current cell: the live view now (unless ``quiet``), replaced
            by the static transcript when the run ends. False shows nothing (the caller renders).
        quiet: no live view; only the transcript at the end. Without a view no person can answer
            approvals, so they go to the headless policy.
        detached: the caller will not await the run in this cell, so the transcript may replace a
            placeholder shown now (it may arrive after the cell has finished); False displays it
            directly when the run ends, as ``run_cell`` does.
        on_end: called with the handle when the run has ended (any outcome), on the loop.
        render_grace: seconds an approval waits for the view to render (see the module docs).
        output: an ``ipywidgets.Output`` to show the run in instead of the current cell (a
            button's click has no cell of its own): its outputs become the live view, then the
            transcript, and the page keeps the transcript in the Output's place in the notebook.
        host: also shows the run (its live view, then its transcript) somewhere else, such as
            the session panel; with ``display=False`` it is the only place the run shows.

    Raises:
        UserError: the agent is already running.
        RuntimeError: no event loop is running in this thread.
    """
    from agent_kernel.errors import UserError

    loop = asyncio.get_running_loop()
    starting = _IN_FLIGHT.get(agent)
    if agent.running or (starting is not None and not starting.done()):
        raise UserError("This agent is already running; wait for it (%agent wait or await the handle) "
                        "or cancel it (%agent cancel) first.")
    live = _LiveApprovals(agent, loop, render_grace) if (display or host is not None) and not quiet else None
    view = live.view if live is not None else None
    slots = _Slots(output)
    if display:
        if view is not None:
            slots.show_view(view)
        if detached:
            slots.show_placeholder()
    handle = RunHandle(agent, prompt, view, None, [])
    task = handle.task = loop.create_task(_drive(agent, prompt, handle, live, display, slots, host),
                                          name=f"agent_kernel run {agent.session_id}")
    _IN_FLIGHT[agent] = task
    if host is not None:
        _tell_host(host.run_started, handle)
    if on_end is not None:
        task.add_done_callback(lambda _t: on_end(handle))
    return handle


async def run_cell(agent: Agent, prompt: str | None, *, display: bool = True, quiet: bool = False,
                   render_grace: float = RENDER_GRACE_S, host: ViewHost | None = None) -> RunResult:
    """Runs ``agent`` on ``prompt`` and returns when the run ends (blocking mode).

    The cell (or ``do_execute``) awaiting this stays busy for the whole run while the kernel's
    loop keeps streaming to the view and handling its clicks. Cancelling this coroutine (a
    kernel interrupt) cancels the run with the reason ``"kernel interrupt"``, waits for it to
    record its end, and raises ``RunInterrupted``.

    Args: as ``start_run`` (``display``, ``quiet``, ``render_grace``, ``host``).

    Returns:
        The run's ``RunResult``.

    Raises:
        RunInterrupted: the await was cancelled; the run has been cancelled too.
        UserError: the agent is already running.

    Example:
        >>> result = await run_cell(agent, "What is in data.csv?")  # doctest: +SKIP
    """
    handle = start_run(agent, prompt, display=display, quiet=quiet, detached=False,
                       render_grace=render_grace, host=host)
    return await handle.wait()


async def _drive(agent: Agent, prompt: str | None, handle: RunHandle, live: _LiveApprovals | None,
                 display: bool, slots: _Slots, host: ViewHost | None = None) -> RunResult:
    """Feeds every event of the run to the view; puts the transcript in its place at the end,
    closes the view, and leaves the handle the result and summary alone."""
    view = live.view if live is not None else None
    events: list[AgentEvent] = handle.events  # type: ignore[assignment]  # the list start_run gave
    start = len(agent.events)
    try:
        if live is not None:
            live.attach()
        async with contextlib.aclosing(agent.stream(prompt)) as stream:
            async for event in stream:
                events.append(event)
                if view is not None:
                    view.handle(event)
                    if event.type is EventType.APPROVAL_REQUIRED:
                        _show_write_diff(view, agent, event)
    except Exception:
        # The run raised (an MCP resource that would not load, a bug): it still ends as every run
        # does, its transcript (shown as cut off there) in its view's place in the cell, the
        # Output or the panel, so no dead widget is left to be saved; then the error propagates.
        _end_unfinished(handle, view, slots if display else None, host, rendered=live is not None and live.rendered_flag)
        raise
    except BaseException:
        # Cancelled (the kernel going down): the cell keeps what was seen; the host its transcript.
        _end_unfinished(handle, view, None, host, rendered=False)
        raise
    finally:
        if live is not None:
            live.detach()
    result = agent.result_type.from_events(events)  # what ``agent.run`` returns (a CrewResult for a crew)
    if getattr(agent.events, "journaled", False):  # a Crew keeps a plain list
        # As ``Agent.run``: the journal keeps the run, so the result reads its events back from
        # the agent's window (or the journal) instead of pinning them for the kernel's lifetime.
        result.events = agent.events.view(start, len(agent.events))
    summary = view.summary() if view is not None else RunSummary.from_events(events)
    if display or host is not None:
        transcript = view.static() if view is not None else StaticTranscript.from_events(events)
        if display:
            slots.finish(transcript, rendered=live is not None and live.rendered_flag)
        if host is not None:
            _tell_host(host.run_ended, handle, transcript)
    if view is not None:
        view.dispose()  # its output is the transcript now: no widget state kept, no comm left open
    handle._ended(result, summary)
    return result


def _end_unfinished(handle: RunHandle, view: AgentView | None, slots: _Slots | None, host: ViewHost | None,
                    *, rendered: bool) -> None:
    """Ends the showing of a run that stopped without its end event: its transcript, drawn from
    the events it had, goes to the host and (given ``slots``) where its view was, which then
    closes; without ``slots`` the view stays, as the run left it. Nothing here may raise over
    the run's own error."""
    if view is not None:
        view.close_run()
    if host is None and slots is None:
        return
    try:
        transcript = StaticTranscript.from_events(list(handle.events))
        if host is not None:
            _tell_host(host.run_ended, handle, transcript)
        if slots is not None:
            slots.finish(transcript, rendered=rendered)
            if view is not None:
                view.dispose()
    except Exception as exc:  # a warning, not a traceback: a kernel prints what is logged in a cell
        _log.debug("showing the transcript of a run that raised", exc_info=True)
        _log.warning("The transcript of the run could not be shown (%s: %s); %%agent show rebuilds it "
                     "from the journal.", type(exc).__name__, exc)


def _tell_host(call: Callable[..., None], *args: Any) -> None:
    """Calls a ``ViewHost`` method; a host that fails must not fail the run, so it is logged: a
    one-line warning, since a kernel prints what is logged in whichever cell is current."""
    try:
        call(*args)
    except Exception as exc:
        _log.debug("the session panel could not show the run", exc_info=True)
        _log.warning("The session panel could not show this run (%s: %s); %%agent show rebuilds its "
                     "transcript from the journal.", type(exc).__name__, exc)


def _show_write_diff(view: AgentView, agent: Agent, event: AgentEvent) -> None:
    """Puts on a ``write_file`` / ``edit_file`` card waiting for approval the diff it would make."""
    from agent_kernel.jupyter._write_diff import write_diff

    arguments = event.data.get("arguments")
    if not isinstance(arguments, dict):
        return
    try:
        diff = write_diff(str(event.data.get("tool")), arguments, Path(getattr(agent, "working_dir", ".")))
    except OSError:
        diff = None  # the card keeps the arguments
    if diff is not None:
        view.show_diff(str(event.data.get("call_id")), event.agent_id, diff)


#: What an emptied output holds: no data at all, so nothing to see and nothing a checker compares.
_EMPTY: dict[str, str] = {}


class _Slots:
    """The outputs a run owns: in its cell, the live view's and, when detached, the placeholder;
    or, given an ``ipywidgets.Output``, that widget's outputs."""

    def __init__(self, output: Any = None) -> None:
        self.output = output
        self.view: Any = None
        self.placeholder: Any = None

    def show_view(self, view: AgentView) -> None:
        """Shows the live view where the run's output goes."""
        if self.output is not None:
            # The page puts the final transcript in the Output's place in the notebook (the
            # ``saved`` trait names it): the view inside is not a cell output of its own.
            view.saved_in = self.output.model_id
            self.output.outputs = (_display_data(view, exclude=["text/plain"]),)
            return
        from IPython.display import display as show

        # The widget alone, without its text/plain: nbval, which never sees the update that
        # puts the transcript in its place, then has nothing of it to compare.
        self.view = show(view, display_id=True, exclude=["text/plain"])

    def show_placeholder(self) -> None:
        """Says, where the transcript will appear, that the run is going on (a detached run in a
        cell: an Output shows the view, then the transcript, in the same place)."""
        if self.output is None:
            from IPython.display import display as show

            self.placeholder = show(_Placeholder(), display_id=True)

    def finish(self, transcript: StaticTranscript, *, rendered: bool) -> None:
        """Puts ``transcript`` where the run's live output was (see the module docs)."""
        from IPython.display import display as show

        if self.output is not None:
            self.output.outputs = (_display_data(transcript),)
            return
        if self.view is not None and rendered:
            self.view.update(transcript)  # in place: the person sees the view settle
            if self.placeholder is not None:
                self.placeholder.update(_EMPTY, raw=True)
            return
        if self.view is not None:
            self.view.update(_EMPTY, raw=True)
        if self.placeholder is not None:
            self.placeholder.update(transcript)
        else:
            show(transcript)


def _display_data(obj: Any, exclude: Sequence[str] = ()) -> dict[str, Any]:
    """``obj`` as a ``display_data`` output, as an ``ipywidgets.Output`` holds it."""
    from IPython.core.interactiveshell import InteractiveShell

    formatter = InteractiveShell.instance().display_formatter
    assert formatter is not None  # every shell has one once it is initialised
    data, metadata = formatter.format(obj, exclude=list(exclude))
    return {"output_type": "display_data", "data": data, "metadata": metadata}


class _Placeholder:
    """What a detached run shows where its transcript may appear."""

    _TEXT = "The agent is running; its summary appears here when it ends (%agent wait waits for it)."

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self._TEXT, "text/markdown": f"*{self._TEXT}*"}


# ---- the view and approvals ----------------------------------------------------------------


class _LiveApprovals:
    """Connects one run's view to its agent: clicks to the approval broker, Stop to cancel, the
    steering box and Pause / Resume to ``agent.steer`` / ``pause`` / ``resume_run``, and the
    view's first render to ``broker.interactive`` (see the module docs)."""

    def __init__(self, agent: Agent, loop: asyncio.AbstractEventLoop, render_grace: float) -> None:
        from agent_kernel.jupyter._view import AgentView

        self.agent = agent
        self.loop = loop
        self.render_grace = render_grace
        self.gate = agent.permissions
        self.broker = getattr(self.gate, "broker", None)
        self.rendered = asyncio.Event()
        self.rendered_flag = False
        # Steering goes straight to the agent: its methods are safe from any thread. A crew has
        # none (its members run their own loops), and its view says so when asked.
        self.view = AgentView(on_decision=self.decide, on_stop=self.stop, on_steer=getattr(agent, "steer", None),
                              on_pause=getattr(agent, "pause", None), on_resume=getattr(agent, "resume_run", None))
        self.view.on_msg(self._on_front_end_msg)
        self._approver: Any = None
        self._was_interactive = False
        self._attached = False
        self._early: dict[tuple[str | None, str], Approval] = {}  # (agent, call id) -> a click
        self._unsubscribe: Callable[[], None] | None = None

    # Comm callbacks: may run on a kernel subshell thread (ipykernel 7.0-7.3), hence the
    # thread-safe hand-offs.

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "sync":
            self.rendered_flag = True  # read by _AwaitRender; a bool store is atomic
            with contextlib.suppress(RuntimeError):  # the loop has closed: nothing waits
                self.loop.call_soon_threadsafe(self.rendered.set)

    def decide(self, call_id: str, decision: str, reason: str | None, agent: str | None = None) -> None:
        """A click on ``agent``'s card: hands the decision to the broker on the loop's thread."""
        makers: dict[str, Callable[[], Approval]] = {"approve": Approval.approve, "always_allow": Approval.always}
        maker = makers.get(decision)
        approval = maker() if maker is not None else Approval.reject(reason)
        self.rendered_flag = True  # a click means a person is watching
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._decide_on_loop, call_id, approval, agent)

    def _decide_on_loop(self, call_id: str, approval: Approval, agent: str | None) -> None:
        # The card shows "awaiting approval" as soon as the gate asks, a moment before the broker
        # registers the question (the render wait comes between): a click in that moment is kept
        # and answers the question when it is registered (``_on_pending``).
        self.rendered.set()
        if self.broker is not None and not self.broker.resolve(call_id, approval, agent_id=agent):
            self._early[(agent, call_id)] = approval

    def _on_pending(self, pending: Any) -> None:
        approval = self._early.pop((pending.agent_id, pending.call_id), None)
        if approval is not None and self.broker is not None:
            self.broker.resolve(pending.call_id, approval, agent_id=pending.agent_id)

    def stop(self) -> None:
        """The Stop button: cancels the run."""
        self.agent.cancel(STOP_REASON)

    # The run's lifetime.

    async def ask_elicitation(self, request: dict[str, Any]) -> Any:
        """An MCP server's question, as a form in the view; None (the headless policy decides)
        when no view renders within the grace."""
        if not self.rendered_flag:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.rendered.wait(), self.render_grace)
        if not self.rendered_flag:
            return None
        return await self.view.ask_elicitation(request)

    def attach(self) -> None:
        """Puts the render wait in front of the gate's own approver for the length of the run;
        it makes the broker interactive once the view has rendered."""
        hub = getattr(self.agent, "mcp", None)
        if hub is not None:
            hub.ask = self.ask_elicitation  # an MCP server's questions become forms in the view
        if self.broker is None or not hasattr(self.gate, "approver"):
            return
        self._was_interactive = self.broker.interactive
        self.broker.interactive = False
        self._approver = self.gate.approver
        self.gate.approver = _AwaitRender(self._approver, self)
        self._unsubscribe = self.broker.subscribe(self._on_pending)
        self._attached = True

    def detach(self) -> None:
        """Restores the gate's approver and the broker's flag."""
        hub = getattr(self.agent, "mcp", None)
        if hub is not None and hub.ask == self.ask_elicitation:
            hub.ask = None
        if not self._attached:
            return
        self._attached = False
        self.gate.approver = self._approver
        if self.broker is not None:
            self.broker.interactive = self._was_interactive
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._early.clear()


class _AwaitRender:
    """An approver in front of the agent's own that decides nothing itself: it asks the agent's
    own approver first; then, unless the headless policy will decide, gives the live view up to
    ``render_grace`` seconds to render, and makes the broker interactive if it did, so that the
    gate asks the person next (it reads ``broker.interactive`` right after the approvers)."""

    def __init__(self, inner: Any, live: _LiveApprovals) -> None:
        self.inner = inner
        self.live = live

    async def __call__(self, request: Any) -> Any:
        if self.inner is not None:
            answer = self.inner(request)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is not None:
                return answer
        live = self.live
        policy = getattr(live.gate, "policy", None)
        if policy is not None and policy.decide(request) is not None:
            return None  # the policy answers next
        if not live.rendered_flag:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(live.rendered.wait(), live.render_grace)
        if live.rendered_flag and live.broker is not None:
            live.broker.interactive = True
        return None


async def wait_all(handles: Sequence[RunHandle]) -> list[RunResult]:
    """Waits for every run in ``handles``, in order.

    Raises:
        RunInterrupted: the wait was cancelled (a kernel interrupt); every run still going has
            been cancelled and has recorded its end.
    """
    try:
        return [await asyncio.shield(handle.task) for handle in handles]
    except asyncio.CancelledError:
        _uncancel()
        going = await _going_down([handle.agent for handle in handles if not handle.done()])
        stopped = [await handle._stop(going) for handle in handles]
        raise RunInterrupted(stopped[-1] if stopped else None) from None
