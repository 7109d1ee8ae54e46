"""agent — the ``Agent`` facade: configuration, one conversation, and run / stream / run_sync.

An ``Agent`` owns a conversation (``messages``), the TurnState history of its runs, its event
journal and its services (permissions, context management, hooks). Each ``run`` or ``stream``
call continues the same conversation through ``tt``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from pathlib import Path
from typing import Any

from agent_kernel._util.blocking import run_blocking
from agent_kernel._util.text import encodable
from agent_kernel.agent._memory import AgentMemory
from agent_kernel.agent._parts import DEFAULT, ContextOff, LoopSetting, build_context_manager, build_permissions, is_journal_folder, journal_path, open_journal, otel_sink, resolve_model_arg
from agent_kernel.agent._result import RunResult
from agent_kernel.agent._settings import AgentSettings, typed_as_settings
from agent_kernel.errors import JournalWriteError, UserError
from agent_kernel.events import payloads as p
from agent_kernel.events._event import AgentEvent, EventType, Payload
from agent_kernel.events._sink import EventRecorder, EventSink
from agent_kernel.events._turn import TurnState, new_id
from agent_kernel.guard._approvals import ApprovalRequest
from agent_kernel.guard._redaction import Redactor
from agent_kernel.journal._event_log import EventLog
from agent_kernel.journal._resume import Interrupted
from agent_kernel.journal._writer import SESSIONS_DIR
from agent_kernel.memory import Reminders
from agent_kernel.messages import Message, add_user_text
from agent_kernel.models._base import Model
from agent_kernel.runtime._emitter import Emitter
from agent_kernel.runtime._loop import LoopConfig, tt
from agent_kernel.runtime._state import ExecutionContext, LoopStateMachine, LoopStats, TerminationReason
from agent_kernel.tools._registry import ToolRegistry
from agent_kernel.tools._tool import Tool


class Agent:
    """An LLM agent with tools, streaming every step as an ``AgentEvent``.

    Its settings are the fields of ``AgentSettings``, where each is documented with its type,
    default and what it accepts (``help(Agent)`` lists them too); the first four may be given
    by position: ``Agent(model, tools, system, max_iterations)``. A setting of the wrong kind
    or an unknown one is refused at once with a ``UserError`` that says what it takes.

    Example:
        >>> from agent_kernel import Agent
        >>> from agent_kernel.models.scripted import ScriptedModel
        >>> agent = Agent(ScriptedModel(["Hello!"]), journal=None)
        >>> agent.run_sync("Hi").text
        'Hello!'
    """

    #: What ``run`` returns; the notebook runner builds it from a run's events the same way.
    result_type = RunResult

    # The loop's settings as ``self.config`` holds them (the model and tools built, see
    # ``LoopConfig``); ``AgentSettings`` declares them and checks each value assigned.
    model = LoopSetting[Model]()
    tools = LoopSetting[ToolRegistry]()
    system = LoopSetting[str | None]()
    fallback_model = LoopSetting[Model | None]()
    max_retries = LoopSetting[int]()
    retry_base_delay = LoopSetting[float]()
    retry_max_delay = LoopSetting[float]()
    stall_timeout = LoopSetting[float | None]()
    on_stall = LoopSetting[str]()
    max_parallel_tools = LoopSetting[int]()
    model_options = LoopSetting[dict[str, Any]]()
    tool_result_limit = LoopSetting[int | None]()
    on_tool_error = LoopSetting[str]()
    max_cost = LoopSetting[float | None]()

    @typed_as_settings(AgentSettings)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Makes an agent of the settings given (see ``agent_kernel.agent.AgentSettings``)."""
        settings = AgentSettings.given(type(self).__name__, args, kwargs)  # a setting of the wrong kind is refused here, not deep in a run
        # The loop's settings live in one LoopConfig; the attributes of the same names (model,
        # tools, system, stall_timeout, ...) read and write it, and each run gets a copy.
        self.config = settings.loop_config(
            model=resolve_model_arg(settings.model),
            tools=ToolRegistry(settings.tools or ()),
            fallback_model=None if settings.fallback_model is None else resolve_model_arg(settings.fallback_model),
        )
        self.max_iterations = settings.max_iterations
        self.name = settings.name
        self.session_id = settings.session_id or new_id("s_")
        self.working_dir = Path(settings.working_dir) if settings.working_dir is not None else Path.cwd()
        self.hooks = settings.hooks
        self.on_state_change = settings.on_state_change
        self.permissions = build_permissions(settings.permissions, settings.approver)
        #: Whether this agent was given permissions of its own: as a sub-agent, its mode and rules
        #: then apply inside it, never looser than its parent's (``guard.NestedGate``).
        self.own_permissions = settings.permissions is not None
        if settings.approval_timeout is not None:
            self.approval_timeout = settings.approval_timeout
        self.context_manager = build_context_manager(settings.context, self.model)
        # Watches os.environ: secrets are found by name and by value, keys set later included.
        self.redactor = Redactor.from_environ()
        self.messages: list[Message] = []
        self.history: list[TurnState] = []
        # Every event of the session by position: this run and the keep_events before it in
        # memory, older ones read back from the journal.
        self.events = EventLog(settings.keep_events)
        self.stats = LoopStats()
        self.stats.cost_usd = 0.0
        self.tool_extras: dict[str, Any] = {}
        #: The memory tiers, session memory and reminders (see ``memory.agent_memory``).
        self.memory = AgentMemory(self, enabled=settings.memory, reminders=Reminders.coerce(settings.reminders), namespace=settings.namespace)
        self.tool_extras["memory"] = self.memory  # where the memory and todo_write tools keep their state
        if settings.memory:
            from agent_kernel.tools.builtin._memory import memory as memory_tool
            from agent_kernel.tools.builtin._todo import todo_write

            self.tools.add(memory_tool)
            self.tools.add(todo_write)
        if hasattr(self.context_manager, "bind_session"):
            self.context_manager.bind_session(self.memory.session)
        if settings.sandbox:
            self.use_sandbox(settings.sandbox)
        self._seq = itertools.count(1)
        # The journal file is opened on first use, so an agent that never runs (a sub-agent, a
        # crew member) leaves no empty journal behind; a Journal object passed in is used as is.
        journal = None if settings.journal is False else settings.journal  # journal=False reads as "no journal", as None does
        if isinstance(journal, (str, os.PathLike)):
            journal_path(journal, self.session_id, self.working_dir)  # a bad path fails here, not at the first run
        self._journal_spec = journal
        self._journal: Any = None
        self._sinks: list[EventSink] = [EventRecorder(self.events)]
        self._otel_sink = otel_sink() if settings.otel else None
        if self._otel_sink is not None:
            self._sinks.append(self._otel_sink)
        if journal is not None and journal is not DEFAULT and not isinstance(journal, (str, os.PathLike)):
            self._attach_journal(journal)
        self._context: ExecutionContext | None = None
        self._start_turn: TurnState | None = None  # where a fork's next run begins
        self._interrupted: Interrupted | None = None  # a turn a dead process left open (resume)
        #: For a fork: the session, run and turn it was made from (``fork``); else None.
        self.forked_from: dict[str, Any] | None = None
        self.subagents: dict[str, Any] = {}
        for sub_name, sub in (settings.subagents or {}).items():
            self.add_subagent(sub_name, sub)
        self.mcp: Any = None  # an agent_kernel.mcp.MCPHub once a server is added
        for server in settings.mcp:
            self.add_mcp(server)

    def __repr__(self) -> str:
        return f"Agent(model={self.model.name!r}, tools={self.tools.names}, session_id={self.session_id!r})"

    # -- running ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """True while a run is in progress."""
        return self._context is not None

    @property
    def approvals(self) -> Any:
        """The approval broker where a person answers pending approvals (None for a custom gate)."""
        return getattr(self.permissions, "broker", None)

    @property
    def approval_timeout(self) -> float | None:
        """Seconds a tool call waits for a decision before it is rejected (None: no limit).

        Raises:
            UserError: (on setting) not a positive number, or the agent has a custom gate.
        """
        return getattr(self.permissions, "timeout", None)

    @approval_timeout.setter
    def approval_timeout(self, seconds: float | None) -> None:
        from agent_kernel.guard._permissions import check_approval_timeout

        if not hasattr(self.permissions, "timeout"):
            raise UserError("This agent has a custom permission gate, so approval_timeout cannot be set here; time out inside the gate.")
        self.permissions.timeout = check_approval_timeout(seconds)

    @property
    def mode(self) -> str:
        """The permission mode: ``default``, ``accept_edits``, ``plan`` or ``bypass``.

        Setting it changes the mode of this agent's rules for its next tool calls.

        Raises:
            UserError: (on setting) the agent has a custom permission gate, or the mode is unknown.
        """
        permissions = getattr(self.permissions, "permissions", None)
        return str(getattr(permissions, "mode", "default"))

    @mode.setter
    def mode(self, mode: str) -> None:
        permissions = getattr(self.permissions, "permissions", None)
        if permissions is None:
            raise UserError("This agent has a custom permission gate, so its mode cannot be set here; set the mode on the gate itself.")
        permissions.set_mode(mode)

    @property
    def journal(self) -> Any:
        """The journal events are recorded in (opened on first use), or None when off."""
        if self._journal is None and self._journal_spec is not None:
            from agent_kernel.agent._continuation import recorded_settings  # the header records them, signed

            self._attach_journal(open_journal(self._journal_spec, self.session_id, self.working_dir, recorded_settings(self)))
        return self._journal

    def _attach_journal(self, journal: Any) -> None:
        self._journal = journal
        self._sinks.append(journal)
        self.events.journal = journal  # where the events let go from memory are read back

    def _new_context(self) -> ExecutionContext:
        ctx = ExecutionContext(
            session_id=self.session_id,
            working_dir=self.working_dir,
            agent_id=None,
            hooks=self.hooks,
            permissions=self.permissions,
            context_manager=self.context_manager,
            redactor=self.redactor,
            sinks=self._sinks,
            state=LoopStateMachine([self.on_state_change] if self.on_state_change is not None else []),
            config=self.loop_config(),
            tool_extras=self.tool_extras,
        )
        ctx.emitter = Emitter(self.session_id, ctx.run_id, self._seq, self._sinks, self._redact())
        return ctx

    def _redact(self) -> Callable[[Any], Any] | None:
        """What every event's data goes through before it is recorded (None: no secrets to hide)."""
        # The redactor itself (callable like redact_data) so the emitter can also use its text stream.
        return self.redactor if self.redactor is not None else None  # only kept when active

    def loop_config(self) -> LoopConfig:
        """How this agent's loop calls the model and runs tools, as a fresh ``LoopConfig``.

        Each run gets one; a sub-agent's run is built from its agent's. Changing the returned
        object changes nothing here: set the agent's attributes instead.
        """
        return dataclasses.replace(
            self.config,
            system=self.memory.system_prompt(self.config.system),  # the startup memory block, when on
            model_options=dict(self.config.model_options),
            tool_output_dir=self.working_dir / SESSIONS_DIR / self.session_id / "tool-output",
        )

    async def stream(self, prompt: str | None) -> AsyncGenerator[AgentEvent, None]:
        """Runs the agent on ``prompt``, yielding every event as it happens.

        ``prompt`` None adds no message: the run answers the conversation as it stands, which
        must end with a user message (a fork's, see ``continue_run``).

        Raises:
            UserError: a run of this agent is already in progress, or ``prompt`` is None and the
                conversation does not end with a user message.
        """
        if self._context is not None:
            raise UserError("This agent is already running; await that run or call agent.cancel() first.")
        interrupted = self._interrupted if prompt is None else None
        if prompt is None and interrupted is None and (not self.messages or self.messages[-1].role != "user"):
            raise UserError("There is nothing to continue: the conversation does not end with a user message. Pass a prompt.")
        unwritable: JournalWriteError | None = None
        try:
            _ = self.journal  # open it before the emitter copies the sinks
        except JournalWriteError as exc:  # a read-only folder, a full disk: the run says so and ends
            unwritable = exc
        # Session memory takes in the last run's events before the log may let them go.
        self.memory.session.catch_up()
        self.events.begin_run()  # memory holds this run and the keep_events before it
        # MCP servers start before run_start, so it lists their tools; their events follow it.
        # An @server:uri mention in the prompt gets that resource's text appended (mcp.attach).
        mcp_facts: list[tuple[EventType, Payload]] = []
        if self.mcp is not None and prompt is not None:
            tool_output = self.working_dir / SESSIONS_DIR / self.session_id / "tool-output"
            prompt, mcp_facts = await self.mcp.prepare(prompt, self.tool_result_limit, tool_output)
        ctx = self._new_context()
        self._context = ctx
        self.memory.session.background = ctx.background  # summary updates run beside the turns
        em = ctx.emitter
        assert em is not None
        loop_started = False
        try:
            # A fork goes on from the turn it was made at, a continued run from the turn it was
            # interrupted in; any other run starts at turn 0.
            turn, self._start_turn = self._start_turn or TurnState.initial(self.max_iterations), None
            if interrupted is not None and interrupted.turn_state is not None:
                turn = interrupted.turn_state
            if prompt is not None:
                prompt = encodable(prompt)  # a lone surrogate would break every later request
                self._add_user_message(prompt)
            em.turn = turn
            start = p.RunStart(
                prompt=prompt,
                model=self.model.name,
                provider=self.model.provider,
                system=self.system,
                tools=self.tools.names,
                max_iterations=self.max_iterations,
                turn_state=turn.to_dict(),
                agent_name=self.name,
            )
            if self.max_cost is not None:
                start["max_cost"] = self.max_cost
            notebook = os.environ.get("JPY_SESSION_NAME")
            if notebook:  # a kernel's cut-off check and %agent resume find this notebook's own runs
                start["notebook"] = notebook
            if interrupted is not None:
                uses = interrupted.message.tool_uses
                start["continues"] = p.Continues(run_id=interrupted.run_id, call_ids=[use.id for use in uses])
            try:
                yield em.emit(EventType.RUN_START, start)
            except JournalWriteError as exc:  # the journal's file cannot take it (it is queued)
                unwritable = exc
                yield exc.event
            if unwritable is not None:
                # Nothing of this run can be kept: it ends before its prompt is answered, and says
                # why. The prompt stays in the conversation, as the journal records it.
                loop_started = True
                for event in self._journal_failed(em, ctx, unwritable):
                    yield event
                return
            if interrupted is not None:
                self._interrupted = None  # from here on the run owns the turn
                for result in interrupted.unfinished_results():
                    yield em.emit(EventType.TOOL_RESULT, result)
            for kind, fact in mcp_facts:
                yield em.emit(kind, fact)
            # Memory loaded at session start, then the reminder, which joins the prompt's message.
            for kind, data, reminder in self.memory.at_prompt(prompt is not None):
                event = em.emit(kind, data)
                if reminder is not None:
                    self._add_user_message(reminder)
                yield event
            # aclosing: a consumer that stops early still lets the loop record how the run ended.
            loop_started = True
            answered = interrupted.answered if interrupted is not None else None
            if interrupted is not None:
                ctx.resumed_subagents = dict(interrupted.subagents)  # their calls run again and they go on
            async with contextlib.aclosing(tt(self.messages, turn, ctx, answered=answered)) as events:
                async for event in events:
                    if event.run_id != ctx.run_id:
                        pass  # a sub-agent's event: its turns are not this conversation's
                    elif event.type is EventType.ITERATION_START:
                        state = TurnState.from_dict(event.data["turn_state"])
                        if not self.history or self.history[-1].turn_id != state.turn_id:  # a continued turn is one turn
                            self.history.append(state)
                    elif event.type is EventType.COMPACTION_COMPLETE and self.history:
                        self.history[-1] = self.history[-1].with_compacted()
                    yield event
        finally:
            if not loop_started and interrupted is not None:
                # A continued turn stopped before its calls ran: the journal's run_finish closes
                # them (as replay does), so the conversation here closes them the same way.
                self._interrupted = interrupted
                self._close_interrupted()
            if not loop_started and em.turn is not None:
                # The consumer stopped at run_start, before the loop began: record the end here.
                em.emit(EventType.CANCELLED, p.Cancelled(reason="the stream was closed before the run began", phase="idle"))
                ctx.stats.end = time.time()
                em.emit(EventType.RUN_FINISH, p.RunFinish(reason=TerminationReason.USER_INTERRUPT.value, text="", stats=ctx.stats.to_dict()))
                em.sync()
            self._context = None
            self.memory.session.background = None
            self.stats.merge(ctx.stats)

    def _journal_failed(self, em: Any, ctx: ExecutionContext, fault: JournalWriteError) -> list[AgentEvent]:
        """The ``error`` (kind ``journal``) and ``run_finish`` of a run whose journal cannot be written."""
        message = str(fault)
        events = [em.emit(EventType.ERROR, p.Error(message=message, kind="journal", status_code=None))]
        ctx.stats.end = time.time()
        try:
            events.append(em.emit(EventType.RUN_FINISH, p.RunFinish(reason=TerminationReason.ERROR.value, text="", stats=ctx.stats.to_dict(), error=message)))
        except JournalWriteError as again:  # the fault cleared and came back between two writes: queued all the same
            events.append(again.event)
        em.sync()
        return events

    async def run(self, prompt: str | None) -> RunResult:
        """Runs the agent on ``prompt`` to the end and returns the ``RunResult`` (None: see ``stream``)."""
        start = len(self.events)
        events = [event async for event in self.stream(prompt)]
        result = RunResult.from_events(events)
        if self.events.journaled:
            # The journal keeps the run, so the result need not pin its events in memory: it
            # reads them from the agent's window while held there, else back from the journal.
            result.events = self.events.view(start, len(self.events))
        return result

    def run_sync(self, prompt: str) -> RunResult:
        """Runs to the end from synchronous code, with or without a running event loop.

        Outside a loop it uses ``asyncio.run``; inside one (a notebook cell, an async app) it
        runs the agent on a private loop in a worker thread and waits, so it never nests loops.
        Prefer ``await agent.run(...)`` in notebooks: approvals in the live view need the
        kernel's loop to be free.
        """
        return run_blocking(lambda: self.run(prompt))

    def cancel(self, reason: str = "cancelled by the user", *, keep_calls_open: bool = False) -> bool:
        """Cancels the run in progress (safe from any thread). Returns False if none is running.

        The run stops and records its end either way. With ``keep_calls_open`` the stop is the
        process going down rather than a decision: the journal marks it (``cancelled``'s
        ``keeps_calls_open``), and an agent resumed from it takes the turn up where it was, as
        after a crash (``pending_approvals`` lists the calls that waited for a decision, and
        ``continue_run()`` asks again). ``%%agent`` cancels this way when its kernel shuts down.
        """
        ctx = self._context
        if ctx is None:
            return False
        ctx.cancel.cancel(reason, keep_calls_open=keep_calls_open)
        return True

    def steer(self, text: str) -> bool:
        """Sends ``text`` to the run in progress as a user message (safe from any thread).

        It joins the conversation at the next turn boundary, after the current turn's tool
        calls, and the model reads it in its next call; a ``steer`` event records it. A message
        steered while the model gives its final answer makes the run go on to answer it; one
        still waiting when the run ends otherwise (cancelled, failed, out of turns) is dropped.
        Returns False (nothing queued) when no run is in progress: start one with ``run(text)``.
        """
        ctx = self._context
        if ctx is None:
            return False
        ctx.control.steer(encodable(text))
        return True

    def pause(self) -> bool:
        """Holds the run in progress at its next turn boundary (safe from any thread).

        The run emits ``paused`` and waits for ``resume_run()``; ``cancel()`` still ends it.
        Returns False when no run is in progress.
        """
        ctx = self._context
        if ctx is None:
            return False
        ctx.control.pause()
        return True

    def resume_run(self) -> bool:
        """Lets a paused run go on (``resumed``); returns False when no run is in progress."""
        ctx = self._context
        if ctx is None:
            return False
        ctx.control.resume()
        return True

    @property
    def paused(self) -> bool:
        """True while the run in progress is asked to hold (see ``pause``)."""
        ctx = self._context
        return ctx is not None and ctx.control.paused

    @property
    def replaced_requests(self) -> list[Any]:
        """The requests ``before_llm_call`` hooks replaced in this session, as the model was sent
        them (``journal.ReplacedRequest``: messages, and system, tools and options where the hook
        changed them), oldest first. Read from the journal, so a resumed agent and a fork (for
        the turns before its fork point) show them too.
        """
        from agent_kernel.journal import replaced_requests

        return replaced_requests(self.events)

    @property
    def context(self) -> Any:
        """The agent's context manager: pinned or retrieved text for every request, in budget.

        ``agent.context.add(name, text, priority=..., truncatable=...)`` puts ``text`` into each
        later request (after the system prompt) until ``agent.context.remove(name)``; each
        ``context_assembled`` event says whether it was included, cut or left out to fit the
        window. See ``ContextManager.add``.

        Raises:
            UserError: (on use) context management is off (``context=None``).

        Example:
            >>> from agent_kernel import Agent
            >>> from agent_kernel.context import Priority
            >>> agent = Agent("offline", journal=None)
            >>> agent.context.add("schema", "orders(id, total, placed_at)", priority=Priority.HIGH)
        """
        if self.context_manager is None or not hasattr(self.context_manager, "add"):
            return ContextOff(self.context_manager)
        return self.context_manager

    async def compact(self, focus: str | None = None) -> list[AgentEvent]:
        """Compacts the conversation now, optionally focusing the summary; returns its events."""
        if self.context_manager is None:
            raise UserError("Context management is off for this agent (context=None); create it with the default context to compact.")
        if self._context is not None:
            raise UserError("Cannot compact while a run is in progress; wait for it to finish.")
        if self._interrupted is not None:
            raise UserError("The last run stopped inside a turn with tool calls open (the process died): finish it "
                            "with continue_run() (pending_approvals lists what waits), or send a new prompt, then compact.")
        _ = self.journal
        em = Emitter(self.session_id, new_id("r_"), self._seq, self._sinks, self._redact())
        em.turn = self.history[-1] if self.history else None
        before = len(self.events)
        self.messages[:] = await self.context_manager.compact(self.messages, self.model, em.later, focus)
        em.drain()
        em.flush()
        if self.history:
            self.history[-1] = self.history[-1].with_compacted()
        return self.events[before:]

    def undo_notebook(self, run: Any = None) -> str:
        """Reverts the notebook edits of one run (``edit_notebook``) as a single step per notebook,
        in the saved files (``undo_notebook_async`` also reverts them in a notebook open in Jupyter).

        Args:
            run: a ``RunResult`` or a run id; None: the latest run that edited a notebook.

        Returns:
            What was undone. Each undo is journaled as a ``notebook_edit`` event of action ``undo``.

        Raises:
            UserError: a run is in progress, or no run (or not that one) edited a notebook.
            ToolError: a cell the run wrote was changed since; nothing was written to that notebook.
        """
        from agent_kernel.tools.builtin._notebook import undo_run_edits

        run_id, mine = self._edits_to_undo(run)
        said, written = undo_run_edits(mine, self.working_dir, run_id=run_id)
        self._journal_undo(written)
        return said

    async def undo_notebook_async(self, run: Any = None) -> str:
        """``undo_notebook``, shown at once in the kernel's own notebook where it is open in
        JupyterLab or Notebook 7 (the person's save then writes the file); elsewhere the files."""
        from agent_kernel.tools.builtin._notebook import undo_run_edits_async

        run_id, mine = self._edits_to_undo(run)
        said, written = await undo_run_edits_async(mine, self.working_dir, run_id=run_id)
        self._journal_undo(written)
        return said

    def _edits_to_undo(self, run: Any) -> tuple[str, list[dict[str, Any]]]:
        if self._context is not None:
            raise UserError("Cannot undo notebook edits while a run is in progress; wait for it to finish.")
        run_id = getattr(run, "run_id", run)
        edits = [e for e in self.events if e.type is EventType.NOTEBOOK_EDIT and e.agent_id is None]
        undone = {e.data.get("undoes") for e in edits if e.data.get("action") == "undo"}
        if run_id is None:
            run_id = next((e.run_id for e in reversed(edits) if e.data.get("action") != "undo" and e.run_id not in undone), None)
            if run_id is None:
                raise UserError("No run of this agent has notebook edits left to undo.")
        if run_id in undone:
            raise UserError(f"The notebook edits of run {run_id} were already undone.")
        mine = [dict(e.data) for e in edits if e.run_id == run_id and e.data.get("action") != "undo"]
        if not mine:
            raise UserError(f"Run {run_id!r} made no notebook edits in this session; pass the RunResult or run id of a run that did.")
        return str(run_id), mine

    def _journal_undo(self, written: list[dict[str, Any]]) -> None:
        _ = self.journal
        em = Emitter(self.session_id, new_id("r_"), self._seq, self._sinks, self._redact())
        em.turn = self.history[-1] if self.history else None
        for data in written:
            em.later(EventType.NOTEBOOK_EDIT, data)
        em.drain()
        em.flush()

    # -- sub-agents -------------------------------------------------------------------------

    def as_tool(self, name: str | None = None, description: str | None = None, *, concurrency_safe: bool = False, background: bool = False) -> Tool:
        """This agent as a tool another agent calls to delegate a task (see ``subagents``).

        ``background=True``: a call starts the sub-agent and returns at once; it works while the
        parent goes on, and its answer reaches the parent's model as a message at a later turn
        boundary (``subagent_report``). A parent that answers while it still works waits for it.

        Example:
            >>> researcher = Agent("offline", system="Finds facts.", name="researcher", journal=None)
            >>> researcher.as_tool().name
            'researcher'
        """
        # team sits above agent (a crew is made of agents); only these two doors go up, when called.
        from agent_kernel.team._subagents import agent_tool

        return agent_tool(self, name, description, concurrency_safe=concurrency_safe, background=background)

    def add_subagent(self, name: str, agent: Any, description: str | None = None, *, concurrency_safe: bool = False) -> None:
        """Lets the ``task`` tool delegate to ``agent`` under ``name`` (adding or rebuilding the tool).

        Args:
            name: what the model calls it by.
            agent: an ``Agent`` or a ``Subagent``.
            description: when to use it (default: the first line of its system prompt).
            concurrency_safe: its tasks may run beside others (all sub-agents must allow it).
        """
        from agent_kernel.team._subagents import Subagent, subagent, task_tool  # upward, lazily: see as_tool

        entry = subagent(name, agent)
        if description is not None or concurrency_safe:
            entry = Subagent(name, entry.agent, description or entry.description, concurrency_safe or entry.concurrency_safe)
        self.subagents[name] = entry
        self.tools.add(task_tool(self.subagents.values()))

    # -- conversation -----------------------------------------------------------------------

    def _add_user_message(self, prompt: str) -> None:
        self._close_interrupted()
        add_user_text(self.messages, prompt)  # joined to the tool results a stopped run ended with

    def _close_interrupted(self) -> None:
        """Answers an interrupted turn's open tool calls as ``Agent.resume`` found them, when the
        conversation moves on without ``continue_run`` (the journal's replay does the same)."""
        if self._interrupted is not None:
            self.messages.append(self._interrupted.closing)
            self._interrupted = None

    def reset(self) -> None:
        """Starts a new conversation (a new session id and journal; the old journal is kept)."""
        if self._context is not None:
            raise UserError("Cannot reset while a run is in progress; call agent.cancel() first.")
        self.close()
        self.session_id = new_id("s_")
        self.messages.clear()
        self.history.clear()
        self._interrupted = None
        # Results of the old session read their events back from its journal, not from memory.
        self.events.release()
        self.events = EventLog(self.events.keep)
        self.stats = LoopStats()
        self._seq = itertools.count(1)
        self._journal = None
        # The new session records where the old one did: in the same folder, else the default file.
        if not is_journal_folder(self._journal_spec):
            self._journal_spec = DEFAULT if self._journal_spec is not None else None
        self._sinks = [EventRecorder(self.events)]
        if self._otel_sink is not None:
            self._sinks.append(self._otel_sink)
        self.memory.reset()

    def close(self) -> None:
        """Flushes and closes the journal, closes the models' pooled connections (the next request
        opens new ones), and stops the MCP servers this agent started."""
        if self.mcp is not None:
            self.mcp.close()
        for model in self._models():
            close = getattr(model, "close", None)
            if callable(close):
                close()
        if self._journal is not None:
            self._journal.close()

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """``close`` for async code (a notebook cell): returns once the MCP servers have stopped.

        ``close()`` called on a running event loop can only schedule their stop, since blocking
        the loop would freeze the kernel; await this instead.
        """
        if self.mcp is not None:
            await self.mcp.aclose()  # stopping servers takes a moment; keep the loop free
        for model in self._models():
            aclose = getattr(model, "aclose", None)
            if callable(aclose):
                await aclose()  # the running loop's client closes its connections before this returns
        self.close()

    def _models(self) -> list[Any]:
        """The models this agent calls (its model and its fallback), each once."""
        models = [self.model, self.fallback_model]
        return [m for i, m in enumerate(models) if m is not None and all(m is not n for n in models[:i])]

    def use_sandbox(self, sandbox: Any = True) -> None:
        """Runs this agent's ``bash`` commands inside an OS sandbox from now on.

        Args:
            sandbox: True, a ``Sandbox``, or a dict of its fields (``{"network": True}``).

        Raises:
            UserError: the spec is not understood, bubblewrap cannot run here (the message says
                how to install it), or a protection the sandbox promises cannot be had here (the
                message names it and the ``allow_weaker`` opt-in); commands are never run with less.
        """
        from agent_kernel.guard._sandbox import check, sandbox_from

        spec = sandbox_from(sandbox)
        if spec is None:
            raise UserError("use_sandbox() needs a sandbox: True, a Sandbox(...) or a dict like {'network': True}.")
        check()
        spec.verify()  # a protection this machine cannot give: say which now, not at the first command
        self.tool_extras["sandbox"] = spec
        permissions = getattr(self.permissions, "permissions", None)
        if permissions is not None and hasattr(permissions, "sandboxed"):
            permissions.sandboxed = True

    def add_mcp(self, server: Any) -> None:
        """Adds an MCP server (``MCPServer.stdio(...)`` / ``MCPServer.http(...)``); it starts on the next run.

        Raises:
            UserError: a server of that name is already there, or ``server`` is not an MCPServer.
        """
        if self.mcp is None:
            from agent_kernel.mcp import MCPHub

            self.mcp = MCPHub(lambda: self.tools, gate=lambda: self.permissions, model=lambda: self.model, redactor=lambda: self.redactor)
        self.mcp.add(server)

    def remove_mcp(self, name: str) -> None:
        """Stops the MCP server ``name`` if it runs and removes it and its tools from this agent.

        Raises:
            UserError: a run is in progress, or no server has that name.
        """
        if self._context is not None:
            raise UserError(f"Cannot remove the MCP server {name!r} while a run is in progress; wait for it or call agent.cancel() first.")
        if self.mcp is None:
            raise UserError(f"There is no MCP server named {name!r}; this agent has none.")
        self.mcp.remove(name)

    # -- journal: resume and DataFrames -----------------------------------------------------

    @classmethod
    def resume(cls, session_id_or_path: str | os.PathLike[str], *, trust: bool = False, **agent_kwargs: Any) -> Agent:
        """Rebuilds an agent from its journal and continues the conversation there.

        The conversation (compactions included), the TurnState history and the ``seq`` counter
        come back. A run whose process died inside a turn (a tool call running or waiting for
        approval) is left open: ``pending_approvals`` lists the calls that waited for a decision,
        and ``continue_run()`` asks again, runs the calls that had not run, and completes the run
        without asking the model again; a new prompt instead closes those calls, a call that had
        started getting an "interrupted" error result. A sub-agent the process died in goes on
        too (pass the same sub-agent tools): a call of its own waiting for approval is listed
        there, and ``continue_run()`` lets it finish that turn under its id, or ask its model
        again for an answer that never completed, instead of starting it over. ``agent_kwargs`` are those of ``Agent`` (another ``model``, more
        ``tools``, ...); without ``model`` the recorded provider and model are used when they can
        be rebuilt from a string, else the default model.

        The session's sandbox and permission settings, recorded in the journal's header, come back
        too (unless given here). A journal is resumed only when its header was signed by this
        install (``guard._signing``); ``trust=True`` resumes another one on the person's word.

        Raises:
            JournalError: no such session or journal (the message lists those that exist).
            UserError: the journal's header is unsigned or its signature does not match, and
                ``trust`` is not set.

        Example:
            >>> agent = Agent.resume("s_1a2b3c4d5e6f", model="offline")  # doctest: +SKIP
            >>> agent.run_sync("Carry on.")  # doctest: +SKIP
        """
        from agent_kernel.agent._continuation import restore

        return restore(cls, session_id_or_path, agent_kwargs, trust=trust)

    def fork(
        self,
        at: int | str,
        model: str | Model | None = None,
        *,
        journal: Any = DEFAULT,
        replace_result: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Agent:
        """A new agent whose history is this one's up to the start of turn ``at``.

        ``await fork.continue_run()`` then runs that turn again and the rest, with the fork's
        model, tools and options, sending the turn's prompt (the user's message or the tool
        results it began with) as the loop did. Compare the two with ``journal.diff_runs``.

        Args:
            at: a turn counter of the last run (0 is its first turn) or any turn's ``turn_id``.
            model: the fork's model (default: this agent's).
            journal: the fork's journal, as for ``Agent`` (default: a new session's file). Its
                header records ``forked_from`` (session, run, turn); it starts with this
                session's events before the turn, so both journals line up turn by turn.
            replace_result: ``{call_id: text}``: results of calls made before the turn that the
                fork sees instead of the recorded ones.
            overrides: other ``Agent`` arguments (``tools``, ``system``, ``max_iterations``,
                ``model_options``, ...); the rest are this agent's.

        Raises:
            UserError: a run is in progress, no such turn, or a call_id has no result before it.

        Example:
            >>> fork = agent.fork(at=2, model="openai:gpt-4.1")  # doctest: +SKIP
            >>> await fork.continue_run()  # doctest: +SKIP
        """
        from agent_kernel.agent._continuation import fork_of

        return fork_of(self, at, model, journal, replace_result, overrides)

    @property
    def interrupted(self) -> Interrupted | None:
        """The turn ``Agent.resume`` found open (its process died between the model's tool calls
        and their results), which ``continue_run`` finishes; None otherwise."""
        return self._interrupted

    @property
    def pending_approvals(self) -> list[ApprovalRequest]:
        """Tool calls waiting for a decision: those of a turn ``Agent.resume`` found interrupted
        (``continue_run`` asks again), else those a person is being asked about now."""
        if self._interrupted is not None:
            from agent_kernel.agent._continuation import request_of

            return [request_of(data) for data in self._interrupted.all_approvals]
        broker = self.approvals
        return [entry.request for entry in broker.pending] if broker is not None else []

    async def continue_run(self) -> RunResult:
        """Runs on from the conversation as it stands, with no new message.

        After ``Agent.resume`` found a turn interrupted, it finishes that turn: the tool calls
        without a result run (a pending approval is asked again through the approver, policy or
        person), then the loop goes on; the model call that asked for them is not repeated. For a
        fork it runs the fork's turn.

        Raises:
            UserError: a run is in progress, or there is nothing to continue (no interrupted turn,
                and the conversation does not end with a user message).
        """
        return await self.run(None)

    def continue_run_sync(self) -> RunResult:
        """``continue_run`` from synchronous code (see ``run_sync``)."""
        return run_blocking(lambda: self.run(None))

    def events_df(self) -> Any:
        """``journal.frames.events_df`` of this session (a run in progress included)."""
        from agent_kernel.journal._frames import events_df

        return events_df(self.events)

    def turns_df(self) -> Any:
        """``journal.frames.turns_df`` of this session: one row per turn."""
        from agent_kernel.journal._frames import turns_df

        return turns_df(self.events)

    def tool_calls_df(self) -> Any:
        """``journal.frames.tool_calls_df`` of this session: one row per tool call."""
        from agent_kernel.journal._frames import tool_calls_df

        return tool_calls_df(self.events)

    def usage_df(self) -> Any:
        """``journal.frames.usage_df`` of this session: one row per model call."""
        from agent_kernel.journal._frames import usage_df

        return usage_df(self.events)

    def messages_df(self) -> Any:
        """``journal.frames.messages_df`` of this session: the conversation, one row per message."""
        from agent_kernel.journal._frames import messages_df

        return messages_df(self.events)

    def timeline(self) -> Any:
        """A picture of this session's runs over time (``journal.timeline``)."""
        from agent_kernel.journal import timeline

        return timeline(self.events)
