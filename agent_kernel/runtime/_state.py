"""state — ExecutionContext, LoopState, the run's controls and stats.

``TurnState`` (``agent_kernel.events``) is what changes between recursions of ``tt``. ``ExecutionContext`` is what does not change during a run:
ids, the working directory, the cancel token and the per-run services.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_kernel._util.background import BackgroundWork
from agent_kernel.events._turn import new_id

if TYPE_CHECKING:
    from agent_kernel.context._policy import ContextPolicy
    from agent_kernel.events.payloads import StatsDict
    from agent_kernel.models._base import Usage
    from agent_kernel.runtime._emitter import Emitter
    from agent_kernel.runtime._hooks import Hooks
    from agent_kernel.runtime._loop import LoopConfig


class TerminationReason(str, Enum):
    """Why a run ended."""

    END_TURN = "end_turn"
    MAX_TURNS = "max_turns"
    STOP_REASON = "stop_reason"
    USER_INTERRUPT = "user_interrupt"
    ERROR = "error"
    TOOL_STOP = "tool_stop"
    BUDGET = "budget"

    def __str__(self) -> str:
        return self.value


class LoopState(str, Enum):
    """The phase the loop is in."""

    IDLE = "idle"
    RECEIVING_INPUT = "receiving_input"
    CALLING_LLM = "calling_llm"
    PROCESSING_RESPONSE = "processing_response"
    EXECUTING_TOOLS = "executing_tools"
    CHECKING_CONTEXT = "checking_context"
    COMPLETED = "completed"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


StateCallback = Callable[[LoopState, LoopState], None]


class LoopStateMachine:
    """Holds the current ``LoopState`` and calls ``on_state_change(old, new)`` callbacks.

    A callback that raises ends the run: ``set`` raises ``HookError`` (the loop reports it as an
    ``error`` of kind ``hook``) and calls no callback again, so the run's own move to ``error``
    cannot fail the same way a second time.
    """

    __slots__ = ("state", "_callbacks")

    def __init__(self, callbacks: Iterable[StateCallback] = ()) -> None:
        self.state = LoopState.IDLE
        self._callbacks: list[StateCallback] = list(callbacks)

    def on_state_change(self, callback: StateCallback) -> StateCallback:
        """Registers ``callback(old, new)``; returns it so this can be used as a decorator."""
        self._callbacks.append(callback)
        return callback

    def set(self, new: LoopState) -> None:
        """Moves to ``new`` (a no-op if already there) and notifies callbacks.

        Raises:
            HookError: a callback raised (the state has moved all the same).
        """
        old = self.state
        if old is new:
            return
        self.state = new
        for cb in self._callbacks:
            try:
                cb(old, new)
            except Exception as exc:
                from agent_kernel.runtime._hooks import HookError

                self._callbacks = []
                name = getattr(cb, "__qualname__", None) or repr(cb)
                raise HookError(f"state callback {name} ({old} -> {new}) raised {type(exc).__name__}: {exc}") from exc


class RunControl:
    """Steering and pausing a run from outside it: safe from any thread.

    ``steer`` queues a user message and ``pause`` asks the run to hold; the loop acts on both at
    its next turn boundary (after a turn's tool results, before the next model call). A run that
    is held still honours its ``CancelToken``.
    """

    __slots__ = ("_lock", "_steers", "_paused", "_loop", "_resumed")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steers: list[str] = []
        self._paused = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._resumed: asyncio.Event | None = None

    @property
    def paused(self) -> bool:
        """True from ``pause`` until ``resume``."""
        return self._paused

    @property
    def has_steers(self) -> bool:
        """True while a steered message waits for the next turn boundary."""
        return bool(self._steers)

    @property
    def waiting(self) -> int:
        """How many steered messages wait for the next turn boundary."""
        return len(self._steers)

    def steer(self, text: str) -> None:
        """Queues ``text`` as a user message for the next turn boundary."""
        with self._lock:
            self._steers.append(text)

    def take_steers(self) -> list[str]:
        """The queued messages, in order, leaving the queue empty."""
        with self._lock:
            steers, self._steers = self._steers, []
        return steers

    def pause(self) -> None:
        """Asks the run to hold at its next turn boundary."""
        self._paused = True

    def resume(self) -> None:
        """Lets a held run go on (or cancels a pause it has not reached yet)."""
        self._paused = False
        loop, resumed = self._loop, self._resumed
        if loop is not None and resumed is not None and not loop.is_closed():
            loop.call_soon_threadsafe(resumed.set)

    def bind(self) -> None:
        """Binds to the running event loop (called by the loop when a run starts)."""
        self._loop = asyncio.get_running_loop()
        self._resumed = asyncio.Event()

    async def wait_resumed(self) -> None:
        """Returns once the run is no longer paused."""
        resumed = self._resumed
        assert resumed is not None  # bound by the loop before it can pause
        while self._paused:
            resumed.clear()
            if not self._paused:  # resumed between the check and the clear
                break
            await resumed.wait()


class CancelToken:
    """Cancellation with a reason, able to interrupt the loop while it awaits.

    ``cancel()`` is safe from any thread. When the loop is suspended inside one of its own awaits
    (a model stream, a tool wait), the task running it is cancelled so the await ends at once;
    the loop catches that, sees ``cancelled``, cleans up and finishes with USER_INTERRUPT.
    """

    __slots__ = ("reason", "keeps_calls_open", "_task", "_armed", "_loop", "interrupt_kind")

    def __init__(self) -> None:
        self.reason: str | None = None
        self.keeps_calls_open = False  # the stop leaves the turn's calls open for a resumed agent
        self.interrupt_kind: str | None = None
        self._task: asyncio.Task[Any] | None = None
        self._armed = False
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def cancelled(self) -> bool:
        """True once ``cancel`` has been called."""
        return self.reason is not None

    def bind(self) -> None:
        """Binds to the running task (called by the loop when a run starts)."""
        self._task = asyncio.current_task()
        self._loop = asyncio.get_running_loop()

    @property
    def armed(self) -> bool:
        """True while the loop is inside one of its interruptible awaits (not with its consumer)."""
        return self._armed

    def arm(self) -> None:
        """Marks the loop as inside an interruptible await."""
        self._armed = True

    def disarm(self) -> None:
        """Marks the loop as outside its awaits (about to yield to the consumer)."""
        self._armed = False

    def cancel(self, reason: str = "cancelled by the user", *, keep_calls_open: bool = False) -> None:
        """Requests cancellation; interrupts the loop's current await if it is in one.

        The first cancel gives the reason (and ``keep_calls_open``, see ``Agent.cancel``).
        """
        if self.reason is None:
            self.reason = reason
            self.keeps_calls_open = keep_calls_open
        self._interrupt("cancel")

    def interrupt(self, kind: str) -> None:
        """Interrupts the loop's current await for ``kind`` (e.g. ``"stall"``) without cancelling."""
        self._interrupt(kind)

    def _interrupt(self, kind: str) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._interrupt_now(kind)
        else:
            loop.call_soon_threadsafe(self._interrupt_now, kind)

    def _interrupt_now(self, kind: str) -> None:
        if self._armed and self._task is not None and not self._task.done():
            self.interrupt_kind = kind
            self._armed = False
            self._task.cancel()

    def consume_interrupt(self) -> str | None:
        """Returns and clears the pending interrupt kind, undoing our own ``task.cancel()``."""
        kind, self.interrupt_kind = self.interrupt_kind, None
        if kind is not None:
            task = asyncio.current_task()
            if task is not None and hasattr(task, "uncancel"):
                task.uncancel()
        return kind


@dataclass
class LoopStats:
    """Totals for one run (and, summed, for a session)."""

    turns: int = 0
    llm_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = 0.0
    start: float = field(default_factory=time.time)
    end: float | None = None
    errors: int = 0  # failed model attempts (retried or not) and tool calls that ended in an error

    @property
    def duration(self) -> float | None:
        """Seconds from start to end, once the run has ended."""
        return None if self.end is None else self.end - self.start

    def add_usage(self, usage: Usage, cost: float | None) -> None:
        """Adds one model call's usage; an unknown cost makes the total unknown (None)."""
        self.llm_calls += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        if cost is None or self.cost_usd is None:
            self.cost_usd = None
        else:
            self.cost_usd += cost

    def merge(self, other: LoopStats, *, counts: bool = True) -> None:
        """Adds ``other``'s totals to these: a session summing its runs, a crew its tasks.

        Args:
            other: the totals to add; an unknown cost there makes the sum unknown (None).
            counts: also add its turns and tool calls and take its end. A parent rolling up a
                sub-agent's usage passes False: the child's turns and calls stay the child's.
        """
        self.llm_calls += other.llm_calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cost_usd = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        if counts:
            self.errors += other.errors
            self.turns += other.turns
            self.tool_calls += other.tool_calls
            self.end = other.end

    def to_dict(self) -> StatsDict:
        """A JSON-serialisable dict."""
        return {
            "turns": self.turns,
            "llm_calls": self.llm_calls,
            "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cost_usd": self.cost_usd,
            "start": self.start,
            "end": self.end,
            "duration": self.duration,
            "errors": self.errors,
        }


@dataclass
class ExecutionContext:
    """What stays fixed for one run: ids, working directory, cancel token, services.

    ``config`` (the ``LoopConfig``: model, tools, retries) is what ``tt`` needs; ``emitter``
    stamps, redacts and journals events (``tt`` makes one from ``sinks`` and ``redactor`` when it
    is None). The other services are optional seams the loop calls: ``permissions`` (an approval
    gate), ``control`` (steering and pausing, see ``RunControl``), ``context_manager`` (a
    ``ContextPolicy``: micro- and auto-compaction), ``hooks``, ``redactor`` and ``sinks`` (the journal and any other writer that must see every event before
    it is yielded). ``tool_extras`` reaches every tool as ``ToolContext.extras``; ``extras`` is
    free for hooks and callers, and the loop never reads it. ``resumed_subagents`` holds the
    sub-agent turns a continued run picks up (``journal.resume.SubagentTurn``, by the call id that
    started each): the sub-agent a call of that id starts goes on from there instead of anew.
    ``background`` holds the work the run started beside its turns (background sub-agents,
    session-memory updates; see ``_util.background``).
    """

    session_id: str
    run_id: str = field(default_factory=lambda: new_id("r_"))
    working_dir: Path = field(default_factory=Path.cwd)
    cancel: CancelToken = field(default_factory=CancelToken)
    control: RunControl = field(default_factory=RunControl)
    agent_id: str | None = None
    hooks: Hooks | None = None
    permissions: Any = None
    context_manager: ContextPolicy | None = None
    redactor: Any = None
    sinks: list[Any] = field(default_factory=list)
    state: LoopStateMachine = field(default_factory=LoopStateMachine)
    stats: LoopStats = field(default_factory=LoopStats)
    config: LoopConfig | None = None
    emitter: Emitter | None = None
    tool_extras: dict[str, Any] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    resumed_subagents: dict[str, Any] = field(default_factory=dict)
    background: BackgroundWork = field(default_factory=BackgroundWork)
