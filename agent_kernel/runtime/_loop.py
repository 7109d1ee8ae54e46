"""loop — ``tt``: the tail-recursive agent loop, an async generator of ``AgentEvent``.

One recursion: ``iteration_start`` → context (micro- and auto-compaction) → one streamed model
call, whose tool calls start executing the moment each block completes → wait for the results in
declared order → ``recursion`` with ``turn_state.next_turn()``. No tool calls is the base case.
Between two turns the run holds while paused and takes in the messages steered into it
(``ExecutionContext.control``); hooks may replace a request, add context or reject a call.

The recursion is a tail call, so it is eliminated: each turn runs in the same generator frame
with a new immutable ``TurnState``. That keeps the cost of an event flat however long the run
(nested generators would pay one frame per turn for every token).

Resilience is the loop's, so it is visible as events: retries with backoff (``retry``), a
fallback model on overload (``model_fallback``), a stall watchdog (``stall_detected``).
Cancellation (``context.cancel``) interrupts a model stream, a backoff or a tool wait at once;
every dangling tool_use then gets a synthetic result so the history stays valid.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Mapping
from typing import Any, TypeVar

from typing_extensions import TypedDict

from agent_kernel._util.text import encodable
from agent_kernel.errors import JournalWriteError, ModelError, StopRun, UserError
from agent_kernel.events import payloads as p
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.events._turn import TurnState
from agent_kernel.messages import Message, ToolResultBlock, add_user_text, with_user_text
from agent_kernel.models import _pricing as pricing
from agent_kernel.models._base import MessageEnd, Model, ModelRequest, TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, Usage
from agent_kernel.models._response import NAMELESS_TOOL, ResponseBuilder, call_ids_in, parse_arguments
from agent_kernel.models._transport import on_stream_activity
from agent_kernel.runtime._config import CONTINUE_INSTRUCTION, FINAL_TURN_INSTRUCTION, LoopConfig
from agent_kernel.runtime._emitter import Emitter
from agent_kernel.runtime._executor import ABORT_FALLBACK, ABORT_RETRY, ABORT_USER, PendingCall, StreamingToolExecutor
from agent_kernel.runtime._fallback import max_turns_fallback
from agent_kernel.runtime._hooks import HOOK_CONTEXT_TAG, HookError, HookOutcome, HookPoint, Hooks
from agent_kernel.runtime._invoke import ToolInvoker
from agent_kernel.runtime._sent import context_usage, request_diff
from agent_kernel.runtime._state import ExecutionContext, LoopState, TerminationReason
from agent_kernel.runtime._streaming import Watchdog, backoff
from agent_kernel.tools._output import result_limit_for_window
from agent_kernel.tools._tool import ToolResult

ABORT_FINAL = "tools are disabled for the final answer"
ABORT_ENDED = "the run ended before this call finished"
ABORT_FAILED = "the run failed before this call finished"

T = TypeVar("T")

# Stop reasons that end a response normally; anything else (max_tokens, refusal, ...) is reported.
_NORMAL_STOPS = frozenset({"end_turn", "stop", "tool_use", "tool_calls", "stop_sequence", "pause_turn"})


class _Interrupted(Exception):
    """The cancel token interrupted an await (the loop's own cancellation, not a foreign one)."""


class _Ending(TypedDict, total=False):
    """What ``run_finish`` adds about how the run ended (``payloads.RunFinish``'s optional keys)."""

    stop_reason: str
    error: str
    tool: str
    stop: str
    background_cancelled: list[str]
    max_cost: float
    next_cost_estimate: float | None


class _HookNotes(TypedDict, total=False):
    """What hooks changed in a turn's request, as ``llm_start`` says it."""

    hook_context: list[str]
    request_replaced: bool
    sent: dict[str, Any]


class _Finish(Exception):
    """Ends the run with a reason (raised from deep inside a turn)."""

    def __init__(self, reason: TerminationReason, text: str = "", data: _Ending | None = None) -> None:
        super().__init__(reason.value)
        self.reason = reason
        self.text = text
        self.data: _Ending = data or {}


def tt(
    messages: list[Message],
    turn_state: TurnState,
    context: ExecutionContext,
    *,
    answered: Mapping[str, ToolResultBlock] | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """Runs the agent loop from ``turn_state`` on ``messages``, yielding every event.

    ``messages`` is the conversation and is extended in place (assistant messages, tool
    results). ``context.config`` is the ``LoopConfig``; ``context.emitter`` records the events
    (one is made from ``context.sinks`` and ``context.redactor`` when it is None). The stream
    always ends with ``run_finish``; failures end with ``error`` then ``run_finish`` (ERROR), never
    with an exception out of the generator, except a foreign ``CancelledError`` (one the cancel
    token did not cause), which is journaled and re-raised.

    ``answered`` continues a turn that was interrupted between the model's tool calls and their
    results (the process died while a call ran or waited for approval): ``messages`` then ends
    with that assistant message, the first turn runs the calls ``answered`` has no result for
    (asking for approval again where the rules say so), and the model is not asked again.

    Raises:
        UserError: ``context.config`` is not set, or ``answered`` is given and ``messages`` does
            not end with the assistant's tool calls.

    Example:
        >>> ctx = ExecutionContext(session_id="s1", config=LoopConfig(model=ScriptedModel(["Hi."])))  # doctest: +SKIP
        >>> events = [e async for e in tt([Message.user("Hello")], TurnState.initial(), ctx)]  # doctest: +SKIP
    """
    if context.config is None:
        raise UserError("tt needs the loop's configuration: ExecutionContext(session_id=..., config=LoopConfig(model=...)). "
                        "Agent.run builds both for you.")
    if context.emitter is None:
        redactor = context.redactor
        context.emitter = Emitter(context.session_id, context.run_id, sinks=context.sinks, redact=redactor, agent_id=context.agent_id)
    if answered is not None and (not messages or messages[-1].role != "assistant" or not messages[-1].tool_uses):
        raise UserError("There are no tool calls to continue: the conversation does not end with the assistant's tool calls.")
    loop = _Loop(messages, context)
    loop.answered = answered
    return loop.run(turn_state)


class _Loop:
    """The per-run machinery behind ``tt`` (one instance per run)."""

    def __init__(self, messages: list[Message], ctx: ExecutionContext) -> None:
        self.messages = messages
        self.ctx = ctx
        assert ctx.config is not None and ctx.emitter is not None  # tt checked and filled them
        self.config: LoopConfig = ctx.config
        self.em: Emitter = ctx.emitter
        self.hooks: Hooks | None = ctx.hooks if ctx.hooks else None
        self.token = ctx.cancel
        cfg = self.config
        cm = ctx.context_manager
        bind = getattr(cm, "bind_output_dir", None)
        if bind is not None:
            bind(cfg.tool_output_dir)  # micro-compaction keeps what it clears beside the capped outputs
        # One result may fill at most a share of the model's window (30,000 characters is more
        # than a small local model's whole window).
        window_of = getattr(cm, "window", None)
        window = window_of(cfg.model) if window_of is not None else getattr(cfg.model, "context_window", None)
        limit = result_limit_for_window(cfg.tool_result_limit, window)
        self.invoke = ToolInvoker(cfg.tools, ctx, self.em, self._hook, limit, cfg.tool_output_dir)
        self.model: Model = self.config.model
        self.executor: StreamingToolExecutor | None = None
        self.partial: ResponseBuilder | None = None
        self.call_ids = call_ids_in(messages)  # a new call's id is kept unique against them
        self.call_id_suffixes: dict[str, int] = {}  # the last suffix given to each repeated id
        self.last_text = ""
        # What one phase leaves for the next (set before each is read).
        self._prepared: tuple[ModelRequest, TurnState] = (ModelRequest(()), TurnState.initial(1))
        self._completed = Message("assistant")
        self._answer = ""  # the turn's answer text, continuations joined
        self._last_usage: Usage | None = None  # the latest model call's: the next one's estimate
        self._last_model: str | None = None
        self._stop_reason = ""
        self._end: MessageEnd | None = None
        self._error: ModelError | None = None
        self._held: list[PendingCall] = []  # unsafe tool calls waiting for the whole response
        self._shrunk: ModelRequest | None = None
        self._finished_calls: list[PendingCall] = []
        self._hook_notes: _HookNotes = {}  # what hooks changed in this turn's request (llm_start says)
        self._hook_failure: HookError | None = None  # a hook that failed inside a tool task
        self._turn_ended = ""  # the turn after_iteration_end was last called for
        self._left_running: list[str] = []  # background work the run's end cancelled
        # The permission mode as the last turn began ("" before the first; None: no mode to read).
        self.plan_mode: str | None = "" if getattr(ctx.permissions, "permissions", None) is not None else None
        self.answered: Mapping[str, ToolResultBlock] | None = None  # an interrupted turn to continue (tt)

    # -- the recursion ----------------------------------------------------------------------

    async def run(self, turn: TurnState) -> AsyncGenerator[AgentEvent, None]:
        em, ctx = self.em, self.ctx
        self.token.bind()
        ctx.control.bind()
        ctx.background.on_change = em.wake
        finished = False
        try:
            while True:  # one pass per turn: the tail call of the recursion, eliminated
                em.turn = turn
                try:
                    if ctx.state.state is LoopState.IDLE:  # the run takes in its prompt
                        for ev in self._enter(LoopState.RECEIVING_INPUT):
                            yield ev
                    yield em.emit(EventType.ITERATION_START, p.IterationStart(turn_state=turn.to_dict()))
                    if self.plan_mode is not None and self._plan_mode_changed():
                        yield em.emit(EventType.PLAN_MODE, p.PlanMode(active=self.plan_mode == "plan", mode=self.plan_mode))
                    await self._hook(HookPoint.BEFORE_ITERATION_START, turn)
                    self._check_cancelled()
                    final = turn.is_final
                    if self.answered is not None:  # an interrupted turn: its response is in hand
                        message, final = self._continue_calls(self.answered), False
                        self.answered = None
                    else:
                        async for ev in self._prepare(turn, self._request(final)):  # context
                            yield ev
                        request, turn = self._prepared
                        self._check_budget(request)  # before the call: a cap is never passed knowingly
                        hooked = await self._hook(HookPoint.BEFORE_LLM_CALL, turn, request=request)
                        if hooked is not None and hooked.request is not None:
                            request = self._replaced(request, hooked.request)
                        try:
                            async for ev in self._respond(request, final):  # the model, continued past max_tokens
                                yield ev
                        except ModelError as failed:
                            if not final:
                                raise
                            async for ev in self._final_answer_failed(turn, failed):  # the run keeps its work
                                yield ev
                        turn = em.turn or turn  # a forced compaction marks the turn compacted
                        message = self._completed
                        await self._hook(HookPoint.AFTER_LLM_RESPONSE, turn, message=message)
                    if final:  # base case: the tools-disabled final answer
                        yield em.emit(EventType.MAX_ITERATIONS_REACHED, p.MaxIterationsReached(max_iterations=_limit(turn)))
                        raise _Finish(TerminationReason.MAX_TURNS, self._answer)
                    if message.tool_uses:
                        async for ev in self._run_tools(message):  # tools; their results join the history
                            yield ev
                        await self._hook(HookPoint.BEFORE_RECURSION, turn)
                        nxt = turn.next_turn()
                        yield em.emit(EventType.RECURSION, p.Recursion(tool_results=[_result_dict(b) for b in self.messages[-1].tool_results], next_turn_id=nxt.turn_id))
                    elif not (ctx.control.has_steers or ctx.background.has_reports or ctx.background.reporting):  # base case: the model answered
                        reason = TerminationReason.END_TURN if self._stop_reason in _NORMAL_STOPS else TerminationReason.STOP_REASON
                        raise _Finish(reason, self._answer, {"stop_reason": self._stop_reason})
                    else:
                        # The model answered, but a message waits (steered in, or a background
                        # sub-agent's report) or will (a background sub-agent still works): the
                        # run waits for it, and the model answers it next.
                        async for ev in self._await_background():
                            yield ev
                        nxt = turn.next_turn()
                    em.flush()
                    ctx.stats.turns += 1
                    self._turn_ended = turn.turn_id  # a StopRun from this hook must not call it again
                    await self._hook(HookPoint.AFTER_ITERATION_END, turn)
                    if ctx.control.paused or ctx.control.has_steers or ctx.background.has_finished:  # the turn boundary
                        async for ev in self._boundary():
                            yield ev
                    turn = nxt
                except Exception as ending:  # _Finish, a cancel, StopRun, a model error or a bug
                    async for ev in self._ending_events(ending):
                        yield ev
                    finished = True
                    return
        finally:
            if not finished:
                # A foreign cancellation or the consumer closed the stream: record it, close the
                # history, and let the exception go on. Nothing can be yielded from here.
                with contextlib.suppress(BaseException):  # a second cancellation must not skip the record
                    await self._settle_tools(ABORT_USER)
                with contextlib.suppress(BaseException):
                    self._left_running = await ctx.background.cancel()
                em.drain()  # journals what the settling queued; the stream itself is gone
                why = self.token.reason or "the run was stopped from outside (task cancelled or stream closed)"
                with contextlib.suppress(JournalWriteError):  # queued; the exception on its way out wins
                    em.emit(EventType.CANCELLED, self._cancelled_data(why))
                ctx.stats.turns += 1  # the turn it stopped in counts, as for a cancel from inside
                self._record_finish(TerminationReason.USER_INTERRUPT, self.last_text)
                ctx.state.set(LoopState.COMPLETED)

    # -- phases -----------------------------------------------------------------------------

    def _check_budget(self, request: ModelRequest) -> None:
        """Ends the run (reason ``budget``) when the call about to be made could pass ``max_cost``.

        The call is estimated at its request's input tokens (four characters a token, or the last
        call's input if more: the history only grows) and the last call's output, at the model's
        price. What the run spent plus that estimate passing the cap ends the run; so does a cost
        that is unknown (a model with no price, a server that reports no usage): a cap that
        cannot be checked is not kept by luck (fail closed). Only runs with a cap pay for this.
        """
        cap = self.config.max_cost
        if cap is None:
            return
        from agent_kernel.models.scripted import estimate_request_tokens

        last = self._last_usage or Usage()
        tokens = max(estimate_request_tokens(request), last.input_tokens + last.cache_read_tokens + last.cache_write_tokens)
        estimate = pricing.cost(self._last_model or self.config.model.name, Usage(input_tokens=tokens, output_tokens=last.output_tokens))
        spent = self.ctx.stats.cost_usd
        if spent is not None and estimate is not None and spent + estimate <= cap:
            return
        raise _Finish(TerminationReason.BUDGET, self.last_text, {"max_cost": cap, "next_cost_estimate": estimate})

    def _request(self, final: bool) -> ModelRequest:
        cfg = self.config
        options = cfg.model_options
        messages = tuple(self.messages)
        if final:
            # Tools stay declared (providers reject tool blocks without them) but cannot be chosen.
            options = {**options, "tool_choice": "none"}
            messages = with_user_text(messages, FINAL_TURN_INSTRUCTION)
        return ModelRequest(messages, cfg.system, cfg.tools.specs(), options)

    async def _prepare(self, turn: TurnState, request: ModelRequest) -> AsyncIterator[AgentEvent]:
        """The context phase: hooks around assembly and compaction; leaves ``_prepared``."""
        for changed in self._enter(LoopState.CHECKING_CONTEXT):
            yield changed
        await self._hook(HookPoint.BEFORE_CONTEXT_ASSEMBLY, turn, request=request)
        async for ev in self._assemble(turn, request):
            yield ev
        request, turn = self._prepared
        self._hook_notes = {}
        hooked = await self._hook(HookPoint.AFTER_CONTEXT_ASSEMBLY, turn, request=request)
        if hooked is not None and hooked.context:
            # Extra context goes into this request only: the conversation stays as it was. It
            # counts in the budget: what the window has no room for is cut or left out.
            fit_extra = getattr(self.ctx.context_manager, "fit_extra", None)
            texts = list(hooked.context) if fit_extra is None else fit_extra(hooked.context, self.model, self.em.later)
            for ev in self.em.drain():
                yield ev
            blocks = "\n\n".join(f"<{HOOK_CONTEXT_TAG}>\n{text}\n</{HOOK_CONTEXT_TAG}>" for text in texts)
            request = ModelRequest(with_user_text(request.messages, blocks), request.system, request.tools, request.options)
            self._prepared = (request, turn)
            self._hook_notes["hook_context"] = texts
        self._check_cancelled()

    def _replaced(self, before: ModelRequest, after: ModelRequest) -> ModelRequest:
        """A request a ``before_llm_call`` hook returned: what is sent instead is journaled (with
        ``llm_start``, as a diff against ``before``) and checked against the window first."""
        self._hook_notes["request_replaced"] = True
        self._hook_notes["sent"] = request_diff(before, after)
        check = getattr(self.ctx.context_manager, "check_fits", None)
        if check is not None:
            check(after, self.model)
        return after

    async def _respond(self, request: ModelRequest, final: bool) -> AsyncIterator[AgentEvent]:
        """The model phase: one response, asked to go on while ``max_tokens`` cuts it off.

        Leaves ``_completed`` (the last message) and ``_answer`` (the text of all its parts).
        """
        said: list[str] = []  # text of the responses cut off, then continued
        while True:
            async for ev in self._call_model(request, final):
                yield ev
            message = self._completed
            if self._stop_reason != "max_tokens" or message.tool_uses or len(said) >= self.config.max_continuations:
                break
            said.append(message.text)
            self._hook_notes = {}  # the continuation's request is the loop's own, not a hook's
            self.messages.append(Message.user(CONTINUE_INSTRUCTION))
            yield self.em.emit(EventType.CONTINUATION, p.Continuation(attempt=len(said), max_continuations=self.config.max_continuations, instruction=CONTINUE_INSTRUCTION))
            turn = self.em.turn
            assert turn is not None
            async for ev in self._assemble(turn, self._request(final)):
                yield ev
            request, _ = self._prepared
        self._answer = "".join(said) + message.text
        if said:
            self.last_text = self._answer

    async def _final_answer_failed(self, turn: TurnState, error: ModelError) -> AsyncIterator[AgentEvent]:
        """The tools-disabled final answer failed for good: the run still ends ``max_turns``,
        its text written from what the tools returned, the error recorded (not fatal).

        Raises:
            _Finish: always.
        """
        async for ev in self._discard(ABORT_FINAL):
            yield ev
        message = str(error)
        yield self.em.emit(EventType.ERROR, p.Error(message=message, kind=error.kind, status_code=error.status_code, fatal=False))
        yield self.em.emit(EventType.MAX_ITERATIONS_REACHED, p.MaxIterationsReached(max_iterations=_limit(turn)))
        text = max_turns_fallback(self.messages, self.config.tools, turn.max_iterations, message)
        raise _Finish(TerminationReason.MAX_TURNS, text, {"error": message})

    async def _run_tools(self, message: Message) -> AsyncIterator[AgentEvent]:
        """The tools phase: waits for every call, then adds their results to the history.

        Raises:
            _Finish: a tool asked to stop the run (``ToolResult.stop``).
        """
        for changed in self._enter(LoopState.EXECUTING_TOOLS):
            yield changed
        async for ev in self._await_tools():
            yield ev
        self.messages.append(Message("user", tuple(self._tool_result_blocks())))
        self.executor = None
        if self._hook_failure is not None:
            raise self._hook_failure  # a tool hook failed: the run ends with it, history whole
        stop = next((c for c in self._finished_calls if c.result is not None and c.result.stop), None)
        if stop is not None and stop.result is not None:
            raise _Finish(TerminationReason.TOOL_STOP, stop.result.final_message or message.text, {"tool": stop.name})

    def _continue_calls(self, answered: Mapping[str, ToolResultBlock]) -> Message:
        """Starts the tool calls of the interrupted response that ends the history (``tt``'s
        ``answered``): those with a recorded result keep it, the others run now."""
        message = self.messages[-1]
        self.executor = executor = self._new_executor()
        for use in message.tool_uses:
            block = answered.get(use.id)
            if block is not None:
                executor.record(use.id, use.name, dict(use.input), ToolResult(block.content, block.is_error, images=block.images))
            else:
                # Arguments that were not JSON are kept as {"_raw": text}: refused again, never run.
                unparsed = set(use.input) == {"_raw"}
                executor.submit(use.id, use.name, dict(use.input), parse_error="not a JSON object" if unparsed else None)
        self._completed, self._answer, self._stop_reason = message, message.text, "tool_use"
        return message

    async def _boundary(self) -> AsyncIterator[AgentEvent]:
        """Between two turns: holds while paused, then delivers the messages steered in.

        A steered message joins the conversation as a user message (merged into the tool
        results before it, so roles alternate) and is journaled as ``steer`` before the next
        model call can read it.
        """
        control, em = self.ctx.control, self.em
        if control.paused:
            yield em.emit(EventType.PAUSED, p.Paused(steers=control.waiting))
            em.flush()  # a run may stay held for long: the journal says so now
            held = time.monotonic()
            await self._interruptible(control.wait_resumed())
            yield em.emit(EventType.RESUMED, p.Resumed(paused_s=time.monotonic() - held))
        for changed in self._enter(LoopState.RECEIVING_INPUT):
            yield changed
        for text in control.take_steers():
            add_user_text(self.messages, text)
            yield em.emit(EventType.STEER, p.Steer(text=text))
        for done in self.ctx.background.take():  # work that finished beside the turn
            if done.usage is not None:
                self.ctx.stats.add_usage(done.usage, done.cost_usd)  # a model call it made
            if done.report is not None:
                add_user_text(self.messages, done.report)
                yield em.emit(EventType.SUBAGENT_REPORT, done.data)
        em.flush()

    async def _await_background(self) -> AsyncIterator[AgentEvent]:
        """Waits, streaming its events, until a background sub-agent's report is ready (or no
        such work runs any more)."""
        work, em = self.ctx.background, self.em
        while work.reporting and not work.has_reports and not self.ctx.control.has_steers:
            for ev in em.drain():
                yield ev
            if work.reporting and not work.has_reports:
                await self._interruptible(em.wait())
        for ev in em.drain():
            yield ev

    async def _assemble(self, turn: TurnState, request: ModelRequest) -> AsyncIterator[AgentEvent]:
        """Runs the context manager on ``request``, yielding its events; leaves ``_prepared``."""
        cm = self.ctx.context_manager
        if cm is None:
            self._prepared = (request, turn)
        elif cm.due(request, self.model):
            # Compaction calls a model: run it as a task so its events stream live.
            async for ev in self._drive(self._prepare_context(turn, request)):
                yield ev
        else:
            await self._prepare_context(turn, request)  # no model call: no task needed
            for ev in self.em.drain():
                yield ev

    async def _prepare_context(self, turn: TurnState, request: ModelRequest) -> None:
        cm = self.ctx.context_manager
        assert cm is not None  # only called when there is one
        prepared = await cm.prepare(self.messages, turn, request, self.model, self.em.later)
        if prepared.history is not None:
            self.messages[:] = prepared.history
        if prepared.compacted:
            turn = turn.with_compacted()
            self.em.turn = turn
        summary = prepared.compaction
        if summary is not None and summary.usage is not None:
            self.ctx.stats.add_usage(summary.usage, summary.cost_usd)  # the summary was a model call
        self._prepared = (prepared.request, turn)

    async def _call_model(self, request: ModelRequest, final: bool) -> AsyncIterator[AgentEvent]:
        """Streams one model response into events, retrying and falling back as configured."""
        em, cfg, ctx = self.em, self.config, self.ctx
        attempt = 0
        recovered = False  # one forced compaction per model call after a context-length error
        while True:
            model = self.model
            builder = self.partial = ResponseBuilder(self.call_ids, self.call_id_suffixes)
            self.executor = self._new_executor()
            started = time.monotonic()
            async for ev in self._attempt(request, final, attempt):
                yield ev
            error = self._error
            if error is None:
                break
            ctx.stats.errors += 1
            # Failure: recover, fall back, retry or give up. Whatever ran or streamed for a
            # discarded response reaches the stream as events, not only the journal.
            if error.kind == "context_length" and not recovered and ctx.context_manager is not None:
                recovered = True
                async for ev in self._discard(ABORT_RETRY):
                    yield ev
                async for ev in self._drive(self._shrink_context(str(error), final)):
                    yield ev
                if self._shrunk is not None:
                    request = self._shrunk
                    self._hook_notes = {}  # the shrunk request is prepared again, without the hooks' changes
                    continue
                raise error
            # Overload falls back at once; a rate limit once its retries are spent (the limit
            # is this model's, so another model may answer).
            exhausted = error.kind == "rate_limit" and attempt >= cfg.max_retries
            if cfg.fallback_model is not None and (error.overloaded or exhausted) and self.model is not cfg.fallback_model:
                async for ev in self._discard(ABORT_FALLBACK):
                    yield ev
                self.model = cfg.fallback_model
                yield em.emit(
                    EventType.MODEL_FALLBACK,
                    p.ModelFallback(from_model=model.name, to_model=self.model.name, reason=str(error), kind=error.kind, partial=builder.has_output),
                )
                attempt = 0
                continue
            if error.retryable and attempt < cfg.max_retries:
                async for ev in self._discard(ABORT_RETRY):
                    yield ev
                delay = backoff(attempt, cfg.retry_base_delay, cfg.retry_max_delay, error.retry_after)
                attempt += 1
                retry = p.Retry(
                    attempt=attempt, max_retries=cfg.max_retries, delay_s=delay, error=str(error),
                    kind=error.kind, status_code=error.status_code, partial=builder.has_output,
                )
                if error.retry_after is not None and error.retry_after > delay:
                    retry["retry_after_s"] = error.retry_after  # the server asked for longer than retry_max_delay
                yield em.emit(EventType.RETRY, retry)
                await self._sleep(delay)
                continue
            raise error

        # Success: tool calls held back until the response was whole may start now.
        end = self._end
        assert end is not None and self.executor is not None
        for call in self._held:
            self.executor.submit(call.call_id, call.name, call.arguments, parse_error=call.parse_error)
        message = builder.build()
        self.partial = None
        duration = time.monotonic() - started
        # No usage reported (llama.cpp never streams it): the cost is unknown, not free.
        usage = Usage() if end.usage is None else end.usage
        cost = None if end.usage is None else pricing.cost(model.name if end.model is None else end.model, usage)
        ctx.stats.add_usage(usage, cost)
        self._last_usage = usage
        self._last_model = end.model or model.name
        self.messages.append(message)
        self._completed = message
        self._stop_reason = end.stop_reason
        if message.text:
            self.last_text = message.text
        cm = ctx.context_manager
        if cm is not None:
            cm.record_usage(request, usage)
        complete = p.LlmComplete(
            message=message.to_dict(),
            usage=usage.to_dict(),
            cost_usd=cost,
            model=end.model or model.name,
            stop_reason=end.stop_reason,
            duration_s=duration,
            attempts=attempt + 1,
        )
        if end.usage is not None:
            complete["cache_hit"] = usage.cache_read_tokens > 0
        figure = context_usage(cm, model, None if end.usage is None else usage)
        if figure is not None:
            complete["context_usage"] = figure
        yield em.emit(EventType.LLM_COMPLETE, complete)

    async def _attempt(self, request: ModelRequest, final: bool, attempt: int) -> AsyncIterator[AgentEvent]:
        """One streaming attempt; leaves ``_end`` (success) or ``_error`` (failure) set.

        A concurrency-safe tool starts the moment its block completes. Any other call is held
        until the response is whole: if the stream is cut and retried, a side effect that already
        ran would run again.
        """
        em, cfg, token = self.em, self.config, self.token
        builder, executor, model = self.partial, self.executor, self.model
        assert builder is not None and executor is not None
        self._end, self._error, self._held = None, None, []
        for changed in self._enter(LoopState.CALLING_LLM):
            yield changed
        start: p.LlmStart = {"model": model.name, "provider": model.provider, "attempt": attempt, "messages": len(request.messages), "tools_enabled": not final, **self._hook_notes}
        yield em.emit(EventType.LLM_START, start)
        for changed in self._enter(LoopState.PROCESSING_RESPONSE):  # the stream is read from here on
            yield changed
        watchdog = Watchdog(cfg.stall_timeout, token) if cfg.stall_timeout else None
        tools = cfg.tools
        try:
            with on_stream_activity(watchdog.touch) if watchdog is not None else contextlib.nullcontext():
                token.arm()
                stream = model.stream(request)
                # aclosing: a run that ends mid-stream (an interrupt, a journal that cannot be
                # written) closes the response here, on this loop, not when it is collected.
                async with _closing(stream):
                    async for sev in stream:
                        token.disarm()
                        if em.holding_text and not isinstance(sev, TextDelta):
                            yield em.release()  # text held back for redaction: its block has ended
                        if em.holding_deltas:  # thinking or tool-call arguments held back: a block that ends
                            keep = ((EventType.THINKING_DELTA, 0) if isinstance(sev, ThinkingDelta) and not sev.signature
                                    else (EventType.TOOL_CALL_DELTA, sev.index) if isinstance(sev, ToolCallDelta) else None)
                            for held in em.release_deltas(keep):
                                yield held
                        # A lone surrogate (JSON may escape one) would break every later request: out.
                        if isinstance(sev, TextDelta):  # the common case first
                            text = encodable(sev.text)
                            builder.text(text)
                            delta: p.TextDelta = {"text": text}  # a literal: the hottest line of the loop
                            yield em.emit(EventType.TEXT_DELTA, delta)
                        elif isinstance(sev, ThinkingDelta):
                            text = encodable(sev.text)
                            builder.thinking(text, sev.signature)
                            yield em.emit(EventType.THINKING_DELTA, p.ThinkingDelta(text=text, signature=sev.signature))
                        elif isinstance(sev, ToolCallStart):
                            name = encodable(sev.name or NAMELESS_TOOL)
                            call_id = builder.tool_start(sev.index, encodable(sev.id), name)
                            yield em.emit(EventType.TOOL_CALL_START, p.ToolCallStart(call_id=call_id, name=name, index=sev.index))
                        elif isinstance(sev, ToolCallDelta):
                            yield em.emit(EventType.TOOL_CALL_DELTA, p.ToolCallDelta(call_id=builder.call_id(sev.index), index=sev.index, delta=sev.arguments))
                        elif isinstance(sev, ToolCallEnd):
                            name = encodable(sev.name or NAMELESS_TOOL)
                            call_id = builder.call_id(sev.index) or builder.tool_start(sev.index, encodable(sev.id), name)
                            arguments, parse_error = parse_arguments(sev.arguments)
                            builder.tool_use(call_id, name, arguments)
                            ready = p.ToolCallReady(call_id=call_id, name=name, arguments=arguments, index=sev.index)
                            if parse_error:
                                ready["parse_error"] = parse_error
                            yield em.emit(EventType.TOOL_CALL_READY, ready)
                            if not final:
                                tool = tools.get(name)
                                # An unknown name runs nothing: it is answered at once, as its own call,
                                # and holds back none of the calls beside it.
                                if tool is not None and (self._held or not tool.concurrency_safe):
                                    self._held.append(PendingCall(call_id, name, arguments, sev.index, False, parse_error))
                                else:
                                    executor.submit(call_id, name, arguments, parse_error=parse_error)
                        elif isinstance(sev, MessageEnd):
                            self._end = sev
                        if em.has_pending:
                            for ev in em.drain():
                                yield ev
                        if token.reason is not None:
                            raise _Interrupted
                        if watchdog is not None:
                            # Back from the consumer: the model's silence is measured from now.
                            watchdog.touch()
                        token.arm()
                token.disarm()
        except asyncio.CancelledError:
            token.disarm()
            interrupt = token.consume_interrupt()
            if interrupt is None:
                raise
            if interrupt == "cancel":
                raise _Interrupted from None
            # A stall: the watchdog interrupted a silent stream.
            seconds = cfg.stall_timeout or 0.0
            yield em.emit(EventType.STALL_DETECTED, p.StallDetected(seconds=seconds, action=cfg.on_stall, model=model.name, partial=builder.has_output))
            self._error = ModelError(
                f"no stream event for {seconds:g} s from {model.name}",
                retryable=cfg.on_stall == "retry",
                overloaded=cfg.on_stall == "fallback",
                kind="stall",
            )
        except ModelError as exc:
            token.disarm()
            self._error = exc
        finally:
            if watchdog is not None:
                watchdog.stop()
        if self._error is None and self._end is None:
            self._error = ModelError(f"the stream from {model.name} ended without a final message", retryable=True, kind="stream_cut")

    async def _await_tools(self) -> AsyncIterator[AgentEvent]:
        executor = self.executor
        assert executor is not None
        while not executor.done:
            for ev in self.em.drain():
                yield ev
            if executor.done:
                break
            await self._interruptible(self.em.wait())
        for ev in self.em.drain():
            yield ev
        self._finished_calls = calls = executor.results()
        stats = self.ctx.stats
        stats.tool_calls += len(calls)
        stats.errors += sum(1 for c in calls if c.result is None or c.result.is_error)

    def _tool_result_blocks(self) -> list[ToolResultBlock]:
        blocks = []
        for call in self._finished_calls:
            result = call.result or ToolResult("Tool call produced no result.", is_error=True)
            blocks.append(ToolResultBlock(call.call_id, result.content, result.is_error, result.images))
        return blocks

    # -- endings ----------------------------------------------------------------------------

    async def _ending_events(self, ending: Exception) -> AsyncIterator[AgentEvent]:
        """The run's last events, for whatever ended it."""
        if not isinstance(ending, JournalWriteError):
            try:  # what the run recorded is in the journal, or its end says why not
                self.em.flush()
            except JournalWriteError as fault:
                ending = fault
        if isinstance(ending, JournalWriteError):
            if ending.event is not None:  # the event whose write found the fault: it is queued, and shown
                yield ending.event
            self.ctx.stats.turns += 1
            events = self._failed("journal", str(ending))
        elif isinstance(ending, _Finish):
            self.ctx.stats.turns += 1
            events = self._finish(ending)
        elif isinstance(ending, _Interrupted):
            self.ctx.stats.turns += 1  # the turn it stopped in was taken: it counts, as views show
            events = self._cancelled()
        elif isinstance(ending, HookError):
            events = self._failed("hook", str(ending))
        elif isinstance(ending, StopRun):
            events = self._finish(_Finish(TerminationReason.STOP_REASON, ending.final_message or self.last_text, {"stop": ending.reason}))
        elif isinstance(ending, ModelError):
            events = self._failed(ending.kind, str(ending), status_code=ending.status_code)
        else:  # a bug in a hook, a model adapter or the loop: reported, not raised
            events = self._failed(type(ending).__name__, f"{type(ending).__name__}: {ending}")
        last = self.em.turn or TurnState.initial(1)
        if not isinstance(ending, (_Interrupted, HookError)) and last.turn_id != self._turn_ended:
            try:  # the last turn ends too, as every other turn does, however the run ends
                await self._hook(HookPoint.AFTER_ITERATION_END, last)
            except StopRun:
                pass  # the run is ending already
            except HookError as exc:
                events = self._failed("hook", str(exc))
        try:
            async for ev in events:
                yield ev
        except HookError as exc:  # a state callback failed while the run ended: it ends failed
            async for ev in self._failed("hook", str(exc)):
                yield ev

    async def _finish(self, fin: _Finish) -> AsyncIterator[AgentEvent]:
        # Tools still running (a hook stopped the run mid-turn) or tool calls the final,
        # tools-disabled answer made anyway: every call gets a result before the run ends.
        await self._settle_tools(ABORT_FINAL if fin.reason is TerminationReason.MAX_TURNS else ABORT_ENDED)
        async for ev in self._end_background(cancel=False):
            yield ev
        self.ctx.state.set(LoopState.COMPLETED)  # no state_change: run_finish records the end
        yield self._record_finish(fin.reason, fin.text, fin.data)

    async def _cancelled(self) -> AsyncIterator[AgentEvent]:
        await self._settle_tools(ABORT_USER)
        async for ev in self._end_background(cancel=True):
            yield ev
        reason = self.token.reason or "cancelled"
        yield self.em.emit(EventType.CANCELLED, self._cancelled_data(reason))
        self.ctx.state.set(LoopState.COMPLETED)
        yield self._record_finish(TerminationReason.USER_INTERRUPT, self.last_text)

    def _cancelled_data(self, reason: str) -> p.Cancelled:
        data = p.Cancelled(reason=reason, phase=str(self.ctx.state.state))
        if self.token.keeps_calls_open:
            data["keeps_calls_open"] = True
        # Sync work cannot be killed: the run ends without it, and says which calls left some.
        running = self.executor.still_running() if self.executor is not None else []
        if running:
            data["still_running"] = running
        return data

    async def _failed(self, kind: str, message: str, *, status_code: int | None = None) -> AsyncIterator[AgentEvent]:
        await self._settle_tools(ABORT_FAILED)
        async for ev in self._end_background(cancel=True):
            yield ev
        self.ctx.state.set(LoopState.ERROR)
        yield self.em.emit(EventType.ERROR, p.Error(message=message, kind=kind, status_code=status_code))
        yield self._record_finish(TerminationReason.ERROR, self.last_text, {"error": message})

    async def _settle_tools(self, reason: str) -> None:
        """Stops the turn's tool calls and answers every tool_use in the history.

        Running calls are cancelled and awaited (their cleanup, such as killing a process group,
        finishes first); calls that never ran get a synthetic error result, journaled like any
        other ``tool_result``, so the history, the journal and a resumed agent all agree.
        """
        if self.executor is not None:
            self._abort_tools(reason)
            await self.executor.aclose()
        made_up = self._close_dangling(f"Tool call not completed: {reason}.")
        # The calls answered are the assistant message's before the results (a response cut
        # mid-stream has just been added as that message).
        names = {u.id: u.name for u in self.messages[-2].tool_uses} if made_up else {}
        for block in made_up:
            self.em.later(EventType.TOOL_RESULT, _synthetic_result(block.tool_use_id, names.get(block.tool_use_id, NAMELESS_TOOL), block.content))

    async def _end_background(self, *, cancel: bool) -> AsyncIterator[AgentEvent]:
        """Background work as the run ends: sub-agents still at work are cancelled (the run
        ended otherwise than by its answer; ``run_finish`` names them); a session-memory update
        is waited for, or cancelled too when the run was stopped or failed. Usage is charged."""
        work = self.ctx.background
        if work.running:
            self._left_running = await work.cancel(reporting_only=not cancel)
            await work.finish()
        for done in work.take():
            if done.usage is not None:
                self.ctx.stats.add_usage(done.usage, done.cost_usd)
        for ev in self.em.drain():
            yield ev

    def _enter(self, state: LoopState) -> tuple[AgentEvent, ...]:
        """Moves the loop to a phase of the run (callbacks first) and journals the change: its
        event, or none when the loop is in ``state`` already. (The end, ``completed`` or
        ``error``, is set directly: ``run_finish`` records it.)

        Raises:
            HookError: a state callback raised (the state has moved all the same).
        """
        machine = self.ctx.state
        old = machine.state
        if old is state:
            return ()
        machine.set(state)
        return (self.em.emit(EventType.STATE_CHANGE, p.StateChange(old=old.value, new=state.value)),)

    def _plan_mode_changed(self) -> bool:
        """Reads the permission mode; True when it entered or left ``plan`` since the last turn
        (a run that starts in plan mode counts as entering it)."""
        mode = str(getattr(self.ctx.permissions.permissions, "mode", ""))
        was, self.plan_mode = self.plan_mode, mode
        return (mode == "plan") != (was == "plan") if was != "" else mode == "plan"

    def _record_finish(self, reason: TerminationReason, text: str, data: _Ending | None = None) -> AgentEvent:
        stats = self.ctx.stats
        stats.end = time.time()
        data = data or {}
        if self._left_running:
            data = {**data, "background_cancelled": self._left_running}
        try:
            ev = self.em.emit(EventType.RUN_FINISH, p.RunFinish(reason=reason.value, text=text, stats=stats.to_dict(), **data))
        except JournalWriteError as fault:  # the disk filled up just now: the end is queued; the next run reports it
            ev = fault.event
        self.em.sync()
        return ev

    # -- helpers ----------------------------------------------------------------------------

    def _check_cancelled(self) -> None:
        if self.token.reason is not None:
            raise _Interrupted

    async def _hook(self, point: HookPoint, turn: TurnState, **data: Any) -> HookOutcome | None:
        if self.hooks is None or not self.hooks.has(point):
            return None
        try:
            return await self.hooks.run(point, turn, self.ctx, **data)
        except HookError as exc:
            # Raised in a tool task, it would become that call's result: keep it to end the run.
            if self._hook_failure is None:
                self._hook_failure = exc
            raise

    async def _interruptible(self, awaitable: Coroutine[Any, Any, T]) -> T:
        """Awaits inside the loop's own task so the cancel token can interrupt it."""
        token = self.token
        if token.reason is not None:
            awaitable.close()
            raise _Interrupted
        token.arm()
        try:
            return await awaitable
        except asyncio.CancelledError:
            if token.consume_interrupt() is None:
                raise
            raise _Interrupted from None
        finally:
            token.disarm()

    async def _sleep(self, seconds: float) -> None:
        await self._interruptible(asyncio.sleep(seconds))

    async def _drive(self, coro: Coroutine[Any, Any, None]) -> AsyncIterator[AgentEvent]:
        """Runs ``coro`` as a task, yielding the events it queues while it runs."""
        task = asyncio.ensure_future(coro)
        task.add_done_callback(lambda _: self.em.wake())
        try:
            while not task.done():
                for ev in self.em.drain():
                    yield ev
                if task.done():
                    break
                await self._interruptible(self.em.wait())
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        for ev in self.em.drain():
            yield ev
        task.result()

    def _new_executor(self) -> StreamingToolExecutor:
        tools = self.config.tools

        default_on_error = self.config.on_tool_error

        def is_safe(name: str) -> bool:
            t = tools.get(name)
            return t is None or t.concurrency_safe  # an unknown name is refused without running anything

        def cancels_on_error(name: str) -> bool:
            t = tools.get(name)
            return ((t.on_error if t is not None else None) or default_on_error) == "cancel"

        return StreamingToolExecutor(
            self.invoke,
            is_safe=is_safe,
            max_concurrency=self.config.max_parallel_tools,
            on_change=self.em.wake,
            on_abort=self._record_abort,
            cancels_on_error=cancels_on_error,
        )

    def _record_abort(self, call: PendingCall) -> None:
        assert call.result is not None
        self.em.later(EventType.TOOL_RESULT, _synthetic_result(call.call_id, call.name, call.result.content))

    def _abort_tools(self, reason: str) -> None:
        if self.executor is not None:
            self.executor.abort_all(reason)

    async def _discard(self, reason: str) -> AsyncIterator[AgentEvent]:
        """Drops the response being built: its tool calls stop and their results are yielded."""
        self._abort_tools(reason)
        if self.executor is not None:
            await self.executor.aclose()
        self.partial = None
        self.executor = None
        for ev in self.em.drain():
            yield ev

    async def _shrink_context(self, error: str, final: bool) -> None:
        """After a context-length error: one forced compaction, and the request to send again.

        Leaves ``_shrunk`` None when nothing could be made smaller.
        """
        cm = self.ctx.context_manager
        self._shrunk = None
        history = None if cm is None else await cm.shrink(self.messages, self.model, self.em.later, reason=error)
        if history is None:
            return
        self.messages[:] = history
        turn = self.em.turn
        assert turn is not None  # set by the recursion before any model call
        await self._prepare_context(turn, self._request(final))
        self._shrunk = self._prepared[0]

    def _close_dangling(self, content: str) -> list[ToolResultBlock]:
        """Gives every tool_use without a result a synthetic error result, keeping history valid.

        Returns the results it had to make up (those no finished call provided).
        """
        if self.partial is not None and self.partial.has_output:
            # Cancelled mid-stream: keep what was said, with the tool calls that had completed.
            self.messages.append(self.partial.build())
            self.partial = None
        if not self.messages or self.messages[-1].role != "assistant":
            return []
        uses = self.messages[-1].tool_uses
        if not uses:
            return []
        done = {c.call_id: c.result for c in (self.executor.calls if self.executor else []) if c.result is not None}
        blocks, made_up = [], []
        for use in uses:
            result = done.get(use.id)
            if result is None:
                made_up.append(ToolResultBlock(use.id, content, True))
            blocks.append(ToolResultBlock(use.id, result.content, result.is_error, result.images) if result else made_up[-1])
        self.messages.append(Message("user", tuple(blocks)))
        return made_up


def _limit(turn: TurnState) -> int:
    """The turn limit of a final turn (one that has a limit, or it would not be final)."""
    assert turn.max_iterations is not None
    return turn.max_iterations


def _closing(stream: Any) -> contextlib.AbstractAsyncContextManager[Any]:
    """Closes ``stream`` on the way out when it can be closed (an async generator can)."""
    return contextlib.aclosing(stream) if hasattr(stream, "aclose") else contextlib.nullcontext()


def _result_dict(block: ToolResultBlock) -> p.BlockDict:
    # Images are left out: the call's tool_result event holds them once.
    return {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": block.content, "is_error": block.is_error}


def _synthetic_result(call_id: str, name: str, content: str) -> p.ToolResult:
    """The ``tool_result`` of a call the loop answered itself (it never ran, or was stopped)."""
    return p.ToolResult(call_id=call_id, name=name, content=content, is_error=True, synthetic=True, duration_s=None, started_at=None, ended_at=None)
