"""crew — ``Crew``: several agents working through tasks, sequential, parallel or hierarchical.

A crew is a run with no model of its own: each task runs an agent as a sub-agent of the crew
(see ``subagents``), so the whole crew shares one session, one ``seq`` counter, one journal and
one permission gate, and ``crew.stream()`` yields every agent's events tagged with its
``agent_id``, between the crew's own ``run_start`` and ``run_finish``.

Modes:

* ``sequential``: tasks run one at a time, in order (a task listed before one it depends on
  waits for it);
* ``parallel``: every task starts as soon as the tasks it depends on have finished;
* ``hierarchical``: a ``manager`` agent takes the tasks in order and gets each done by
  delegating to the crew's agents through the ``task`` tool, answering with the task's result.

A task receives the outputs of the tasks it ``depends_on`` in its prompt. When a task fails, the
tasks that depend on it are skipped, the others still run, and the crew ends with ``error``.

Routing: a task with ``when=`` runs only if its condition holds when its turn comes (it reads
the outcomes so far and the shared state, see ``crew_state.Outcomes``; in parallel mode it should
read only the tasks it depends on, the ones sure to have finished). A task whose condition does
not hold is skipped (``task_condition``), and so are the tasks that depend on it; that is a
route not taken, not a failure. ``Crew(..., state={...})`` gives the agents a shared state they
read and write through tools (``read_state``, ``write_state``), each write journaled.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from agent_kernel._util.blocking import run_blocking
from agent_kernel.agent._agent import Agent, RunResult
from agent_kernel.agent._parts import DEFAULT, open_journal
from agent_kernel.errors import UserError
from agent_kernel.events import payloads as p
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.events._sink import EventRecorder, EventSink
from agent_kernel.events._turn import TurnState, new_id
from agent_kernel.guard._redaction import Redactor
from agent_kernel.models._base import Usage
from agent_kernel.runtime._emitter import Emitter
from agent_kernel.runtime._state import ExecutionContext, LoopStats, TerminationReason
from agent_kernel.team._crew_state import Outcomes, state_tools
from agent_kernel.team._subagents import Subagent, run_subagent, task_tool
from agent_kernel.tools._registry import ToolRegistry

MODES = ("sequential", "parallel", "hierarchical")
Mode = Literal["sequential", "parallel", "hierarchical"]
Status = Literal["done", "failed", "skipped", "cancelled"]


@dataclass(eq=False)
class Task:
    """One piece of a crew's work.

    Attributes:
        description: what to do; this is the prompt the agent receives.
        agent: who does it: an ``Agent`` of the crew or its name (optional when the crew has one
            agent; in hierarchical mode, a suggestion to the manager).
        depends_on: tasks (or their names) whose outputs this one needs; it starts after them
            and their outputs are added to its prompt.
        name: how outputs and dependencies refer to it (default: ``task_1``, ``task_2``, ...).
        expected_output: what the result should look like, added to the prompt.
        when: a condition: the task runs only if ``when(outcomes)`` returns True when its turn
            comes (``Outcomes``: the outputs so far by task name, and ``outcomes.state``, the
            crew's shared state). Otherwise it is skipped, with the tasks that depend on it.
    """

    description: str
    agent: Agent | str | None = None
    depends_on: Sequence[Task | str] = ()
    name: str | None = None
    expected_output: str | None = None
    when: Callable[[Outcomes], bool] | None = None


@dataclass
class TaskOutput:
    """What one task produced.

    Attributes:
        task: the task's name.
        agent: the name of the agent that ran it (the manager in hierarchical mode).
        agent_id: the id its events are tagged with (None if it never started).
        text: its final answer.
        status: ``done``, ``failed``, ``skipped`` (a task it depends on did not succeed) or
            ``cancelled``.
        termination_reason: why its run ended (None if it never started).
        usage: its tokens (sub-agents it delegated to included).
        cost_usd: its cost, or None when a model's price is unknown.
        error: what went wrong, for ``failed`` and ``skipped``.
    """

    task: str
    agent: str | None
    agent_id: str | None
    text: str
    status: Status
    termination_reason: TerminationReason | None = None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (as recorded in the crew's ``run_finish``)."""
        return {
            "task": self.task,
            "agent": self.agent,
            "agent_id": self.agent_id,
            "text": self.text,
            "status": self.status,
            "reason": None if self.termination_reason is None else self.termination_reason.value,
            "usage": self.usage.to_dict(),
            "cost_usd": self.cost_usd,
            "error": self.error,
        }


@dataclass(repr=False)
class CrewResult(RunResult):
    """What a crew run produced: a ``RunResult`` with each task's output.

    ``text`` is the output of the last task that ran (tasks a ``when`` condition skipped, and
    those after them that depended on them, do not count); ``termination_reason`` is ``end_turn`` when every
    task succeeded, ``error`` when one failed (``error`` says which), ``user_interrupt`` when the
    crew was cancelled; ``turns``, ``usage``, ``cost_usd`` and ``stats`` sum over every agent.

    Attributes:
        outputs: every task's output, by task name, in task order (also ``result["task"]``).
        state: the crew's shared state at the end (empty without one).
    """

    outputs: dict[str, TaskOutput] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, task: str) -> TaskOutput:
        return self.outputs[task]

    @classmethod
    def _extra_fields(cls, finish: AgentEvent) -> dict[str, Any]:
        outputs = {}
        for o in finish.data.get("outputs", []):
            reason = o.get("reason")
            outputs[o["task"]] = TaskOutput(
                o["task"],
                o.get("agent"),
                o.get("agent_id"),
                o.get("text", ""),
                o["status"],
                None if reason is None else TerminationReason(reason),
                Usage(**o.get("usage", {})),
                o.get("cost_usd"),
                o.get("error"),
            )
        return {"outputs": outputs, "state": dict(finish.data.get("state") or {})}



@dataclass(eq=False)
class _Run:
    """One crew run in progress."""

    ctx: ExecutionContext
    outputs: dict[str, TaskOutput] = field(default_factory=dict)
    unmet: set[str] = field(default_factory=set)  # tasks a condition routed away from (and their dependents)
    work: asyncio.Task[None] | None = None
    loop: asyncio.AbstractEventLoop | None = None


class Crew:
    """Agents working through tasks, streamed and journaled as one run.

    Args:
        agents: the crew's agents: a list of named agents (``Agent(..., name="researcher")``)
            or a ``{name: agent}`` mapping.
        tasks: the work, in order.
        mode: ``sequential``, ``parallel`` or ``hierarchical`` (see the module docstring).
        manager: the agent that delegates in hierarchical mode.
        name: the crew's display name.
        permissions, approver: the permission gate every agent's tool calls go through (as for
            ``Agent``; the agents' own settings are not used inside the crew).
        journal: where the crew's events are recorded (as for ``Agent``): one journal for all.
        session_id, working_dir: as for ``Agent``.
        max_parallel: most tasks running at once in parallel mode (None: no limit).
        state: a shared state for the crew's agents (a dict of JSON values; ``{}`` to start
            empty): each agent gets ``read_state`` and ``write_state`` tools, every write is
            journaled (``crew_state``), and ``when`` conditions read it. It is ``crew.state``,
            kept across runs. None: no shared state and no such tools.

    Example:
        >>> crew = Crew([researcher, writer], [  # doctest: +SKIP
        ...     Task("Find three facts about otters.", researcher, name="facts"),
        ...     Task("Write a paragraph from the facts.", writer, depends_on=["facts"]),
        ... ])
        >>> result = await crew.run()  # doctest: +SKIP
    """

    #: What ``run`` returns; the notebook runner builds it from a run's events the same way.
    result_type = CrewResult

    def __init__(
        self,
        agents: Iterable[Agent] | Mapping[str, Agent],
        tasks: Iterable[Task],
        mode: Mode = "sequential",
        *,
        manager: Agent | None = None,
        name: str = "crew",
        permissions: Any = None,
        approver: Any = None,
        journal: Any = DEFAULT,
        session_id: str | None = None,
        working_dir: str | os.PathLike[str] | None = None,
        max_parallel: int | None = None,
        state: Mapping[str, Any] | None = None,
    ) -> None:
        if mode not in MODES:
            raise UserError(f"Crew mode must be one of {', '.join(MODES)} (got {mode!r}).")
        if mode == "hierarchical" and manager is None:
            raise UserError("A hierarchical crew needs a manager: Crew(agents, tasks, mode='hierarchical', manager=Agent(...)).")
        if max_parallel is not None and max_parallel < 1:
            raise UserError(f"max_parallel must be at least 1 (got {max_parallel}).")
        self.mode: Mode = mode
        self.name = name
        self.manager = manager
        self.max_parallel = max_parallel
        #: The shared state the agents read and write (None: the crew has none).
        self.state: dict[str, Any] | None = None if state is None else dict(state)
        self.agents = _named_agents(agents)
        self.tasks = _resolve_tasks(list(tasks), self.agents, mode)
        self.session_id = session_id or new_id("s_")
        self.working_dir = Path(working_dir) if working_dir is not None else Path.cwd()
        from agent_kernel.guard._permissions import build_gate

        self.permissions = build_gate(permissions, approver)
        self.events: list[AgentEvent] = []
        self.stats = LoopStats()
        self._seq = itertools.count(1)
        self._journal = open_journal(journal, self.session_id, self.working_dir)
        self._sinks: list[EventSink] = [EventRecorder(self.events)] + ([self._journal] if self._journal is not None else [])
        self._run: _Run | None = None

    def __repr__(self) -> str:
        return f"Crew({self.name!r}, mode={self.mode!r}, agents={list(self.agents)}, tasks={[t.name for t in self.tasks]})"

    @property
    def journal(self) -> Any:
        """The journal the crew's events are recorded in, or None."""
        return self._journal

    @property
    def approvals(self) -> Any:
        """The approval broker where a person answers every agent's pending approvals."""
        return getattr(self.permissions, "broker", None)

    @property
    def running(self) -> bool:
        """True while a run is in progress."""
        return self._run is not None

    # -- running ----------------------------------------------------------------------------

    async def stream(self, inputs: str | None = None) -> AsyncIterator[AgentEvent]:
        """Runs every task, yielding every agent's events as they happen.

        Args:
            inputs: context added to every task's prompt (what the crew is working on).

        Raises:
            UserError: a run of this crew is already in progress.
        """
        if self._run is not None:
            raise UserError("This crew is already running; await that run or call crew.cancel() first.")
        redactor = Redactor.from_environ()
        ctx = ExecutionContext(session_id=self.session_id, working_dir=self.working_dir, permissions=self.permissions, redactor=redactor, sinks=self._sinks)
        em = Emitter(self.session_id, ctx.run_id, self._seq, self._sinks, redactor)  # a Redactor also streams text deltas
        ctx.emitter = em
        em.turn = TurnState.initial(1)
        run = self._run = _Run(ctx)
        finished = False
        try:
            yield em.emit(EventType.RUN_START, self._start_data(inputs, em.turn))
            run.loop = asyncio.get_running_loop()
            work = run.work = asyncio.ensure_future(self._work(run, inputs))
            work.add_done_callback(lambda _: em.wake())
            if ctx.cancel.cancelled:  # cancelled before the work could start
                work.cancel()
            try:
                while not work.done():
                    for event in em.drain():
                        yield event
                    if not work.done():
                        await em.wait()
            finally:
                if not work.done():  # the consumer closed the stream, or a foreign cancellation
                    ctx.cancel.cancel(ctx.cancel.reason or "the crew's run was stopped from outside (task cancelled or stream closed)")
                    work.cancel()
                    await asyncio.gather(work, return_exceptions=True)
            for event in em.drain():
                yield event
            ending = self._finish(run, work)
            finished = True
            for event in ending:
                yield event
        finally:
            if not finished:
                # Nothing can be yielded any more: record how the crew ended all the same.
                em.drain()
                self._record_end(run, TerminationReason.USER_INTERRUPT, ctx.cancel.reason or "the crew's stream was closed")
            self._run = None
            self.stats.merge(ctx.stats)

    async def run(self, inputs: str | None = None) -> CrewResult:
        """Runs every task to the end and returns the ``CrewResult``."""
        events = [event async for event in self.stream(inputs)]
        return CrewResult.from_events(events)

    def run_sync(self, inputs: str | None = None) -> CrewResult:
        """Runs to the end from synchronous code (see ``Agent.run_sync``)."""
        return run_blocking(lambda: self.run(inputs), thread_name="agent_kernel-crew")

    def cancel(self, reason: str = "cancelled by the user", *, keep_calls_open: bool = False) -> bool:
        """Cancels the run in progress and every agent in it (safe from any thread).

        Returns False if none is running. ``keep_calls_open``: as ``Agent.cancel``.
        """
        run = self._run
        if run is None:
            return False
        run.ctx.cancel.cancel(reason, keep_calls_open=keep_calls_open)
        if run.work is not None and run.loop is not None and not run.loop.is_closed():
            run.loop.call_soon_threadsafe(run.work.cancel)
        return True

    def close(self) -> None:
        """Flushes and closes the journal."""
        if self._journal is not None:
            self._journal.close()

    # -- the work ---------------------------------------------------------------------------

    async def _work(self, run: _Run, inputs: str | None) -> None:
        if self.mode == "parallel":
            await self._parallel(run, inputs)
            return
        for task in self.tasks:
            await self._one(run, task, inputs)

    async def _parallel(self, run: _Run, inputs: str | None) -> None:
        waiting = list(self.tasks)
        running: dict[asyncio.Task[None], Task] = {}
        try:
            while waiting or running:
                for task in list(waiting):
                    if self.max_parallel is not None and len(running) >= self.max_parallel:
                        break
                    if all(_name(dep) in run.outputs for dep in task.depends_on):
                        waiting.remove(task)
                        running[asyncio.ensure_future(self._one(run, task, inputs))] = task
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for finished in done:
                    del running[finished]
                    finished.result()
        finally:
            for pending in running:
                pending.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)

    async def _one(self, run: _Run, task: Task, inputs: str | None) -> None:
        """Runs one task (or records why it cannot run) into ``run.outputs``."""
        name = task.name or ""
        blocked = [_name(dep) for dep in task.depends_on if run.outputs[_name(dep)].status != "done"]
        if blocked or run.ctx.cancel.cancelled:
            status: Status = "cancelled" if run.ctx.cancel.cancelled else "skipped"
            if status == "cancelled":
                error = None
            elif all(dep in run.unmet for dep in blocked):  # a route not taken, not a failure
                run.unmet.add(name)
                error = f"not run: {', '.join(blocked)} did not run (a condition routed the crew elsewhere)"
            else:
                error = f"not run: {', '.join(blocked)} did not succeed"
            run.outputs[name] = TaskOutput(name, _agent_name(task), None, "", status, error=error)
            return
        if task.when is not None and not self._condition_holds(run, task):
            return
        prompt = _prompt(task, run.outputs, inputs)
        tools = None
        if self.mode == "hierarchical":
            assert self.manager is not None
            agent, agent_name = self.manager, self.manager.name or "manager"
            prompt = self._manager_prompt(task, prompt)
            workers = [Subagent(n, a, concurrency_safe=True) for n, a in self.agents.items()]
            tools = ToolRegistry([*self.manager.tools, task_tool(workers)])
        else:
            agent = task.agent  # type: ignore[assignment]
            assert isinstance(agent, Agent)
            agent_name = _agent_name(task) or "agent"
        if self.state is not None:  # the shared state's tools, for this task's agent
            tools = ToolRegistry([*(tools if tools is not None else agent.tools), *state_tools(self.state, name)])
        try:
            result = await run_subagent(agent, prompt, run.ctx, name=agent_name, tools=tools, task=name)
        except asyncio.CancelledError:
            run.outputs[name] = TaskOutput(name, agent_name, None, "", "cancelled", TerminationReason.USER_INTERRUPT)
            raise
        failed = result.termination_reason is TerminationReason.ERROR
        cancelled = result.termination_reason is TerminationReason.USER_INTERRUPT
        run.outputs[name] = TaskOutput(
            name,
            agent_name,
            result.agent_id,
            result.text,
            "failed" if failed else "cancelled" if cancelled else "done",
            result.termination_reason,
            result.usage,
            result.cost_usd,
            result.error,
        )
        run.ctx.stats.turns += result.stats.turns
        run.ctx.stats.tool_calls += result.stats.tool_calls

    def _condition_holds(self, run: _Run, task: Task) -> bool:
        """Reads ``task.when`` and journals the answer; records the task skipped when it does not
        hold, failed when the condition raised."""
        name = task.name or ""
        assert task.when is not None
        em = run.ctx.emitter
        assert em is not None
        try:
            runs = bool(task.when(Outcomes(run.outputs, self.state or {})))
        except Exception as exc:  # the user's condition: its failure is the task's, not the crew's scheduling
            message = f"its condition raised {type(exc).__name__}: {exc}"
            run.outputs[name] = TaskOutput(name, _agent_name(task), None, "", "failed", error=message)
            return False
        em.later(EventType.TASK_CONDITION, p.TaskCondition(task=name, runs=runs))
        if not runs:
            run.unmet.add(name)
            run.outputs[name] = TaskOutput(name, _agent_name(task), None, "", "skipped", error="not run: its condition did not hold")
        return runs

    def _manager_prompt(self, task: Task, prompt: str) -> str:
        lines = [
            f"You lead the crew {self.name!r}. Get the task below done by delegating to the crew's members with the task tool "
            "(give each complete instructions: they see nothing else), check what they return, then answer with the task's result.",
            "",
            f"Task {task.name}:",
            prompt,
        ]
        suggested = _agent_name(task)
        if suggested:
            lines += ["", f"Suggested member: {suggested}."]
        return "\n".join(lines)

    # -- endings ----------------------------------------------------------------------------

    def _finish(self, run: _Run, work: asyncio.Task[None]) -> list[AgentEvent]:
        if run.ctx.cancel.cancelled or work.cancelled():
            return self._record_end(run, TerminationReason.USER_INTERRUPT, run.ctx.cancel.reason or "cancelled")
        error = work.exception()
        if error is not None:  # a bug in the crew's scheduling: reported, not raised
            return self._record_end(run, TerminationReason.ERROR, f"{type(error).__name__}: {error}")
        failed = [o for o in run.outputs.values() if o.status == "failed"]
        if failed:
            message = "; ".join(f"task {o.task!r} failed: {o.error}" for o in failed)
            return self._record_end(run, TerminationReason.ERROR, message)
        return self._record_end(run, TerminationReason.END_TURN, None)

    def _record_end(self, run: _Run, reason: TerminationReason, message: str | None) -> list[AgentEvent]:
        em = run.ctx.emitter
        assert em is not None  # set when the run began
        events = []
        if reason is TerminationReason.USER_INTERRUPT:
            events.append(em.emit(EventType.CANCELLED, p.Cancelled(reason=message or "cancelled", phase="crew")))
        elif reason is TerminationReason.ERROR:
            events.append(em.emit(EventType.ERROR, p.Error(message=message or "the crew failed", kind="crew", status_code=None)))
        for task in self.tasks:  # tasks a cancellation (or a crash) kept from starting
            if task.name not in run.outputs:
                run.outputs[task.name or ""] = TaskOutput(task.name or "", _agent_name(task), None, "", "cancelled", error="not run: the crew stopped first")
        stats = run.ctx.stats
        stats.end = time.time()
        outputs = [run.outputs[t.name or ""] for t in self.tasks]
        ran = [o for o in outputs if o.task not in run.unmet]  # a route not taken has no say in the answer
        data = p.RunFinish(
            reason=reason.value,
            text=ran[-1].text if ran and ran[-1].status == "done" else "",
            stats=stats.to_dict(),
            outputs=[o.to_dict() for o in outputs],
        )
        if self.state is not None:
            data["state"] = dict(self.state)
        if reason is TerminationReason.ERROR:
            data["error"] = message or "the crew failed"
        events.append(em.emit(EventType.RUN_FINISH, data))
        em.sync()
        return events

    def _start_data(self, inputs: str | None, turn: TurnState) -> p.RunStart:
        start = p.RunStart(
            prompt=inputs,
            model=None if self.manager is None else self.manager.model.name,
            agent_name=self.name,
            mode=self.mode,
            agents=list(self.agents),
            tasks=[
                p.CrewTask(name=t.name or "", agent=_agent_name(t), depends_on=[_name(d) for d in t.depends_on], description=t.description)
                for t in self.tasks
            ],
            turn_state=turn.to_dict(),
        )
        if self.state is not None:
            start["state"] = dict(self.state)
        return start


# -- validation -----------------------------------------------------------------------------


def _named_agents(agents: Iterable[Agent] | Mapping[str, Agent]) -> dict[str, Agent]:
    if isinstance(agents, Mapping):
        named = dict(agents)
    else:
        named = {}
        for agent in agents:
            if not agent.name:
                raise UserError(f"Every agent of a crew needs a name: Agent(..., name='researcher') (got {agent!r}), or pass agents as a dict {{name: agent}}.")
            if agent.name in named:
                raise UserError(f"Two agents of the crew are named {agent.name!r}; give each a different name.")
            named[agent.name] = agent
    if not named:
        raise UserError("A crew needs at least one agent.")
    return named


def _resolve_tasks(tasks: list[Task], agents: dict[str, Agent], mode: str) -> list[Task]:
    """Copies of the tasks, named, with agents and dependencies resolved, in dependency order."""
    if not tasks:
        raise UserError("A crew needs at least one task: Crew(agents, [Task('...', agent)]).")
    copies = {id(task): replace(task) for task in tasks}  # the caller's Task objects stay as they are
    members = {id(a) for a in agents.values()}
    known: dict[str, Task] = {}
    for i, task in enumerate(copies.values(), 1):
        task.name = task.name or f"task_{i}"
        if task.name in known:
            raise UserError(f"Two tasks are named {task.name!r}; give each a different name.")
        known[task.name] = task
        if isinstance(task.agent, str):
            if task.agent not in agents:
                raise UserError(f"Task {task.name!r} names agent {task.agent!r}, which is not in the crew. Crew agents: {', '.join(agents)}.")
            task.agent = agents[task.agent]
        elif task.agent is not None and id(task.agent) not in members:
            raise UserError(f"Task {task.name!r} uses an agent that is not in the crew; add it to Crew(agents=[...]).")
        elif task.agent is None and mode != "hierarchical":
            if len(agents) != 1:
                raise UserError(f"Task {task.name!r} has no agent; say who does it: Task('...', agent=researcher).")
            task.agent = next(iter(agents.values()))
    for task in known.values():
        resolved = []
        for dep in task.depends_on:
            target = copies.get(id(dep)) if isinstance(dep, Task) else known.get(dep)
            if target is None:
                raise UserError(f"Task {task.name!r} depends on {_name(dep)!r}, which is not one of the crew's tasks.")
            resolved.append(target)
        task.depends_on = resolved
    return _in_dependency_order(list(known.values()))


def _in_dependency_order(tasks: list[Task]) -> list[Task]:
    """The tasks in their given order, except that each comes after what it depends on."""
    ordered: list[Task] = []
    placed: set[str] = set()
    visiting: set[str] = set()

    def place(task: Task) -> None:
        name = task.name or ""
        if name in placed:
            return
        if name in visiting:
            raise UserError(f"Task {name!r} depends on itself through its dependencies; remove the cycle.")
        visiting.add(name)
        for dep in task.depends_on:
            place(dep)  # type: ignore[arg-type]
        visiting.discard(name)
        placed.add(name)
        ordered.append(task)

    for task in tasks:
        place(task)
    return ordered


def _name(task: Task | str) -> str:
    return task if isinstance(task, str) else task.name or ""


def _agent_name(task: Task) -> str | None:
    agent = task.agent
    if agent is None or isinstance(agent, str):
        return agent
    return agent.name


def _prompt(task: Task, outputs: Mapping[str, TaskOutput], inputs: str | None) -> str:
    parts = []
    if inputs:
        parts.append(f"Context for the whole crew:\n{inputs}")
    parts.append(task.description)
    if task.expected_output:
        parts.append(f"Expected output: {task.expected_output}")
    if task.depends_on:
        earlier = "\n\n".join(f"## {_name(dep)}\n{outputs[_name(dep)].text}" for dep in task.depends_on)
        parts.append(f"Results of the tasks this one builds on:\n\n{earlier}")
    return "\n\n".join(parts)
