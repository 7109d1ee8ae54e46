"""subagents — one agent running inside another's run: ``Agent.as_tool``, the ``task`` tool.

A sub-agent is another ``tt`` started from a tool call. It gets a fresh conversation (its own
system prompt, tools, model and limits) and joins the parent's run:

* its first TurnState points at the parent's current turn (``parent_turn_id``);
* its events are stamped from the parent's ``seq`` counter, written to the parent's sinks (the
  journal, ``agent.events``) and yielded by the parent's stream, tagged with its ``agent_id`` and
  bracketed by ``subagent_start`` and ``subagent_finish``;
* its tool calls go through the parent's permission gate, so one approval broker (one widget)
  answers for the whole tree;
* its tokens and cost are added to the parent's ``LoopStats`` when it ends;
* cancelling the parent cancels it: the parent aborts the tool call, and the sub-agent is stopped
  through its own cancel token with the parent's reason, so it records ``cancelled`` and
  ``run_finish`` before the tool call ends.

Each call starts a new conversation, so one ``Agent`` may serve several calls at once (a tool
marked ``concurrency_safe`` lets the parent run them side by side).

The one exception: a run continued after its process died (``Agent.continue_run``) runs again a
call whose sub-agent was at work then, and that sub-agent goes on under its id from the
conversation the journal recorded (``journal.resume.SubagentTurn``). Only the tools made here
(``resumable_delegation``) are run again so: they do nothing but delegate.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import typing
import weakref
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from agent_kernel._util.background import Finished
from agent_kernel.errors import ToolError, UserError
from agent_kernel.events import payloads as p
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.events._turn import TurnState, new_id
from agent_kernel.guard._permissions import NestedGate, Permissions
from agent_kernel.journal._resume import INTERRUPTED_RESULT, Interrupted, SubagentTurn
from agent_kernel.messages import Message
from agent_kernel.models._base import Usage
from agent_kernel.runtime._emitter import Emitter
from agent_kernel.runtime._loop import tt
from agent_kernel.runtime._state import ExecutionContext, LoopStats, TerminationReason
from agent_kernel.tools._registry import ToolRegistry
from agent_kernel.tools._tool import Tool, ToolContext

if TYPE_CHECKING:
    from agent_kernel.agent._agent import Agent

_NO_ANSWER = "(the sub-agent finished without an answer)"


@dataclass(frozen=True)
class Subagent:
    """A sub-agent the ``task`` tool may delegate to.

    Attributes:
        name: what the model calls it by (the ``agent`` argument of ``task``).
        agent: the agent that does the work.
        description: when to use it, shown to the model in the ``task`` tool's description
            (default: the first line of the agent's system prompt).
        concurrency_safe: its calls may run beside other calls; the ``task`` tool runs calls
            side by side only when every sub-agent says so.
    """

    name: str
    agent: Agent
    description: str = ""
    concurrency_safe: bool = False

    def __post_init__(self) -> None:
        if not self.description:
            object.__setattr__(self, "description", _describe(self.agent))


@dataclass
class SubagentResult:
    """How one sub-agent run ended.

    Attributes:
        agent_id: the id its events are tagged with.
        name: its name.
        text: its final answer.
        termination_reason: why it ended.
        usage: tokens over its model calls (already added to the parent's stats).
        cost_usd: its cost, or None when a model's price is unknown.
        stats: its ``LoopStats``.
        error: the error message when it ended with ERROR.
    """

    agent_id: str
    name: str
    text: str
    termination_reason: TerminationReason
    usage: Usage
    cost_usd: float | None
    stats: LoopStats = field(repr=False)
    error: str | None = None


def _gate_inside(parent_gate: Any, agent: Any) -> Any:
    """The gate a sub-agent's calls go through: the parent's, and its own mode and rules when it
    was given any (``Agent(permissions=...)``), the stricter deciding (``guard.NestedGate``)."""
    own = getattr(agent.permissions, "permissions", None) if getattr(agent, "own_permissions", False) else None
    if parent_gate is None or not isinstance(own, Permissions) or own is getattr(parent_gate, "permissions", None):
        return parent_gate
    return NestedGate(parent_gate, own)


async def run_subagent(
    agent: Agent,
    prompt: str,
    parent: ExecutionContext,
    *,
    name: str | None = None,
    call_id: str | None = None,
    tools: ToolRegistry | None = None,
    task: str | None = None,
    on_start: typing.Callable[[str], None] | None = None,
) -> SubagentResult:
    """Runs ``agent`` on ``prompt`` in a fresh conversation inside the run ``parent``.

    Its events go to the parent's sinks and stream (see the module docstring); its usage is
    added to ``parent.stats``. A tool reaches ``parent`` through ``ToolContext.run``.

    Args:
        agent: the agent to run (its model, system prompt, tools, limits and hooks).
        prompt: the instructions; the sub-agent sees nothing else of the parent's conversation.
        parent: the spawning run's context (its emitter, current turn, gate, stats, cancel token).
        name: shown in events (default: ``agent.name``, else ``"subagent"``).
        call_id: the parent's tool call that started it, if any.
        tools: tools to offer instead of ``agent.tools`` (a crew manager gets its workers).
        task: the crew task it does (named in its ``subagent_start``).
        on_start: called with the sub-agent's id as soon as it has one.

    Raises:
        asyncio.CancelledError: the parent cancelled the call (after the sub-agent recorded it).
    """
    name = name or agent.name or "subagent"
    parent_em = parent.emitter
    if parent_em is None:
        raise UserError("A sub-agent runs inside a parent run: call it from a tool of a running agent.")
    parent_turn = parent_em.turn
    # A continued run's call that had started this sub-agent before the process died: it goes on.
    resumed: SubagentTurn | None = parent.resumed_subagents.pop(call_id, None) if call_id is not None else None
    if resumed is not None and (resumed.name, resumed.prompt) != (name, prompt):
        raise ToolError(INTERRUPTED_RESULT)  # another sub-agent or task than the one that died: not its to finish
    agent_id = resumed.agent_id if resumed is not None else new_id(f"{name}-")
    if on_start is not None:
        on_start(agent_id)
    # A sub-agent's MCP servers start with its first task; their events follow its run_start.
    mcp_facts = await agent.mcp.connect() if getattr(agent, "mcp", None) is not None else []
    config = agent.loop_config()
    if tools is not None:
        config.tools = tools
    ctx = ExecutionContext(
        session_id=parent.session_id,
        working_dir=parent.working_dir,
        agent_id=agent_id,
        hooks=agent.hooks,
        permissions=_gate_inside(parent.permissions, agent),
        context_manager=agent.context_manager,
        redactor=parent.redactor,
        sinks=parent.sinks,
        config=config,
        tool_extras=agent.tool_extras,
    )
    em = ctx.emitter = parent_em.child(ctx.run_id, agent_id)
    turn = TurnState.initial(agent.max_iterations, parent_turn_id=parent_turn.turn_id if parent_turn else None)
    if resumed is not None and resumed.turn_state is not None:
        turn = resumed.turn_state
    em.turn = turn
    link = _Link(agent_id=agent_id, name=name, parent_agent_id=parent.agent_id, parent_call_id=call_id)
    # The parent's turn, also for a continued sub-agent, whose own TurnState points at its previous turn.
    parent_turn_id = parent_turn.turn_id if parent_turn else None
    start = p.SubagentStart(**link, parent_turn_id=parent_turn_id, prompt=prompt, model=agent.model.name)
    if task is not None:
        start["task"] = task
    if resumed is not None:
        start["continues"] = True
    em.emit(EventType.SUBAGENT_START, start)
    run_start = p.RunStart(
        prompt=None if resumed is not None else prompt,
        model=agent.model.name,
        provider=agent.model.provider,
        system=agent.system,
        tools=config.tools.names,
        max_iterations=agent.max_iterations,
        turn_state=turn.to_dict(),
        agent_name=name,
    )
    messages, answered, open_turn = [Message.user(prompt)], None, None
    if resumed is not None:
        messages, open_turn = list(resumed.messages), _open_turn(resumed, ctx)
        answered = open_turn.answered if open_turn is not None else None
        call_ids = [use.id for use in open_turn.message.tool_uses] if open_turn is not None else []
        run_start["continues"] = p.Continues(run_id=resumed.run_id, call_ids=call_ids)
    em.emit(EventType.RUN_START, run_start)
    for result in open_turn.unfinished_results() if open_turn is not None else ():
        em.emit(EventType.TOOL_RESULT, result)
    for kind, facts in mcp_facts:
        em.emit(kind, facts)
    started = time.monotonic()
    child = asyncio.ensure_future(_last_event(tt(messages, turn, ctx, answered=answered)))
    try:
        finish = await asyncio.shield(child)
    except asyncio.CancelledError:
        # The parent aborted this call: stop the child through its own token, so it closes its
        # tool calls and records why, then let the cancellation go on.
        ctx.cancel.cancel(parent.cancel.reason or "the parent run stopped this sub-agent", keep_calls_open=parent.cancel.keeps_calls_open)
        _end(em, link, ctx, await _wait_out(child), started, parent)
        raise
    return _end(em, link, ctx, finish, started, parent)


def _open_turn(resumed: SubagentTurn, ctx: ExecutionContext) -> Interrupted | None:
    """The turn a resumed sub-agent goes on in: its calls waited (finished as a top-level
    interrupted turn is, its own sub-agents picked up in turn), or None when its model was
    answering (asked again, from the conversation as recorded)."""
    if resumed.interrupted is None:
        return None
    tools = ctx.config.tools if ctx.config is not None else None
    open_turn = resumed.interrupted.keeping_subagents(lambda tool: tools is not None and resumable_delegation(tools.get(tool)))
    ctx.resumed_subagents = dict(open_turn.subagents)
    return open_turn


async def _last_event(events: AsyncIterator[AgentEvent]) -> AgentEvent:
    """Runs a child loop to the end; its events already reached the parent through the emitter."""
    last: AgentEvent | None = None
    async with contextlib.aclosing(events) as stream:  # type: ignore[type-var]
        async for event in stream:
            last = event
    assert last is not None
    return last


async def _wait_out(child: asyncio.Future[AgentEvent]) -> AgentEvent | None:
    """Waits for a cancelled child to record its end; a second cancellation stops it outright."""
    try:
        return await asyncio.shield(child)
    except asyncio.CancelledError:
        child.cancel()
        await asyncio.gather(child, return_exceptions=True)
    except Exception:  # the loop reports its own failures; this guards a bug, it does not hide one
        pass
    return child.result() if child.done() and not child.cancelled() and child.exception() is None else None


def _end(em: Emitter, link: _Link, ctx: ExecutionContext, finish: AgentEvent | None, started: float, parent: ExecutionContext) -> SubagentResult:
    """Adds the child's usage to the parent, records ``subagent_finish`` and builds the result."""
    stats = ctx.stats
    parent.stats.merge(stats, counts=False)  # its turns and tool calls stay its own
    usage = Usage(stats.input_tokens, stats.output_tokens, stats.cache_read_tokens, stats.cache_write_tokens)
    if finish is not None:  # its run_finish
        reason, text, error = TerminationReason(finish.data["reason"]), finish.data.get("text", ""), finish.data.get("error")
    else:
        reason, text, error = TerminationReason.USER_INTERRUPT, "", None
    em.emit(
        EventType.SUBAGENT_FINISH,
        p.SubagentFinish(
            **link,
            text=text,
            reason=reason.value,
            usage=usage.to_dict(),
            cost_usd=stats.cost_usd,
            turns=stats.turns,
            tool_calls=stats.tool_calls,
            duration_s=time.monotonic() - started,
            error=error,
        ),
    )
    return SubagentResult(link["agent_id"], link["name"], text, reason, usage, stats.cost_usd, stats, error)


class _Link(TypedDict):
    """Who a sub-agent is and what started it, in its ``subagent_start`` and ``subagent_finish``."""

    agent_id: str
    name: str
    parent_agent_id: str | None
    parent_call_id: str | None


_DELEGATING_TOOLS: weakref.WeakSet[Tool] = weakref.WeakSet()


def resumable_delegation(tool: Tool | None) -> bool:
    """True for a tool made by ``agent_tool`` or ``task_tool``: a call of it does nothing but run
    its sub-agent, so a continued run may run a started call again to let that sub-agent finish
    its turn (``journal.resume.SubagentTurn``). Any other tool's started call is never run twice."""
    return tool is not None and tool in _DELEGATING_TOOLS


def _delegating(tool: Tool) -> Tool:
    _DELEGATING_TOOLS.add(tool)
    return tool


def _answer(result: SubagentResult) -> str:
    """The tool result the parent's model reads."""
    if result.termination_reason is TerminationReason.ERROR:
        raise ToolError(f"Sub-agent {result.name!r} failed: {result.error or 'unknown error'}. {('Its last words: ' + result.text) if result.text else ''}".strip())
    return result.text or _NO_ANSWER


def _parent_run(ctx: ToolContext) -> ExecutionContext:
    if ctx.run is None:
        raise ToolError(f"{ctx.tool_name} runs a sub-agent and needs the run it is called from; call it from an agent's run, not directly.")
    return ctx.run


def agent_tool(
    agent: Agent, name: str | None = None, description: str | None = None, *, concurrency_safe: bool = False, background: bool = False
) -> Tool:
    """A tool whose call runs ``agent`` as a sub-agent on the model's ``instructions``.

    The delegation itself changes nothing (``read_only``), so permission modes let it run; the
    sub-agent's own tool calls are each decided by the parent's permission gate.

    Args:
        agent: the sub-agent.
        name: the tool's name (default: ``agent.name``).
        description: when the model should use it (default: from the agent's system prompt).
        concurrency_safe: let the parent run several calls of it (and other safe tools) at once.
        background: a call starts the sub-agent and returns at once (see ``start_background``);
            its answer comes back as a message at a later turn boundary.

    Raises:
        UserError: no name given and the agent has none.

    Example:
        >>> researcher = Agent("offline", system="You research.", name="researcher", journal=None)  # doctest: +SKIP
        >>> lead = Agent("offline", tools=[researcher.as_tool(description="Finds facts.")])  # doctest: +SKIP
    """
    tool_name = name or agent.name
    if not tool_name:
        raise UserError("A sub-agent tool needs a name: pass agent.as_tool('researcher', 'what it does') or create the agent with Agent(..., name='researcher').")
    label = tool_name

    async def delegate(instructions: str, ctx: ToolContext) -> str:
        """Args:
        instructions: the complete task for the sub-agent, with every fact it needs; it sees nothing else of this conversation.
        """
        if background:
            return start_background(agent, instructions, _parent_run(ctx), name=label, call_id=ctx.call_id)
        result = await run_subagent(agent, instructions, _parent_run(ctx), name=label, call_id=ctx.call_id)
        return _answer(result)

    when = (
        " It works in the background: the call returns at once, you go on, and its answer arrives later as a message."
        if background else ""
    )
    made = Tool(
        delegate,
        name=tool_name,
        description=(description or f"Delegates a task to the {tool_name} sub-agent: {_describe(agent)}") + when,
        read_only=True,
        concurrency_safe=concurrency_safe or background,  # starting one is instant and changes nothing
        category="agent",
    )
    # A background call has ended before its sub-agent did: it is never run again on resume.
    return made if background else _delegating(made)


def start_background(agent: Agent, prompt: str, parent: ExecutionContext, *, name: str, call_id: str | None) -> str:
    """Starts ``agent`` on ``prompt`` beside the run ``parent`` and returns what the calling tool
    answers at once.

    The sub-agent is a sub-agent as ``run_subagent`` makes one (its events, card and usage join
    the parent's); it runs as the parent's background work (``ExecutionContext.background``).
    When it ends, its answer is handed to the parent's model as a message at the next turn
    boundary (``subagent_report``); a parent that answers meanwhile waits for it first. A parent
    that ends otherwise (max turns, a stop, an error, a cancel) cancels it, and its
    ``run_finish`` says so (``background_cancelled``).
    """

    def named(agent_id: str) -> None:  # the task is named for the sub-agent, as run_finish lists it
        task = asyncio.current_task()
        if task is not None:
            task.set_name(f"background:{agent_id}")

    async def work() -> Finished:
        try:
            result = await run_subagent(agent, prompt, parent, name=name, call_id=call_id, on_start=named)
        except (ToolError, UserError) as exc:  # it could not start: the model hears why, as a report
            report = f"[background sub-agent {name!r}, started by tool call {call_id}, could not run]\n{exc}"
            data = p.SubagentReport(agent_id="", name=name, call_id=call_id, reason=TerminationReason.ERROR.value, text=report)
            return Finished(name, report=report, data=data)
        text = result.text or _NO_ANSWER
        if result.termination_reason is TerminationReason.ERROR:
            text = f"failed: {result.error or 'unknown error'}" + (f". Its last words: {result.text}" if result.text else "")
        report = f"[background sub-agent {name!r} ({result.agent_id}), started by tool call {call_id}, finished ({result.termination_reason.value})]\n{text}"
        data = p.SubagentReport(agent_id=result.agent_id, name=name, call_id=call_id, reason=result.termination_reason.value, text=report)
        return Finished(result.agent_id, report=report, data=data)

    parent.background.start(name, work(), reports=True)
    return f"Started the sub-agent {name!r} in the background. Its answer will arrive as a message when it finishes; go on meanwhile."


def task_tool(subagents: Iterable[Subagent]) -> Tool:
    """The ``task`` tool: delegates ``instructions`` to one of ``subagents``, chosen by name.

    Its description lists the sub-agents and when to use each; its ``agent`` argument only
    accepts their names. ``Agent(subagents=...)`` adds it for you.

    Raises:
        UserError: ``subagents`` is empty.
    """
    team = {s.name: s for s in subagents}
    if not team:
        raise UserError("The task tool needs at least one sub-agent: Agent(..., subagents={'researcher': Agent(...)}).")
    names = tuple(team)

    async def task(agent: str, instructions: str, ctx: ToolContext) -> str:
        """Args:
        agent: which sub-agent does the work.
        instructions: the complete task for it, with every fact it needs; it sees nothing else of this conversation.
        """
        chosen = team[agent]
        result = await run_subagent(chosen.agent, instructions, _parent_run(ctx), name=chosen.name, call_id=ctx.call_id)
        return _answer(result)

    # The names are known only now: annotate ``agent`` with them so the schema lists the choices.
    task.__annotations__ = {"agent": typing.Literal[names], "instructions": str, "ctx": ToolContext, "return": str}
    concurrency_safe = all(s.concurrency_safe for s in team.values())
    description = (
        "Delegates a self-contained task to a sub-agent, which works on it with its own tools and "
        "returns its final answer. Give complete instructions: it sees nothing of this conversation."
        + (" Independent tasks may be delegated at the same time." if concurrency_safe else "")
        + "\n\nSub-agents:\n"
        + "\n".join(f"- {s.name}: {s.description}" for s in team.values())
    )
    return _delegating(Tool(
        task,
        name="task",
        description=description,
        read_only=True,
        concurrency_safe=concurrency_safe,
        category="agent",
        permission_key=lambda arguments: str(arguments.get("agent", "")),
    ))


def _describe(agent: Agent) -> str:
    """A default description: the first line of the agent's system prompt."""
    system = (agent.system or "").strip()
    return system.splitlines()[0] if system else "works on the task with its own tools and returns its final answer."


def subagent(name: str, value: Agent | Subagent) -> Subagent:
    """A ``Subagent`` from an ``Agent`` (described by its system prompt) or a ``Subagent``."""
    if isinstance(value, Subagent):
        return value if value.name == name else Subagent(name, value.agent, value.description, value.concurrency_safe)
    if not hasattr(value, "loop_config"):
        raise UserError(f"Sub-agent {name!r} must be an Agent or a Subagent, got {type(value).__name__}.")
    return Subagent(name, value)
