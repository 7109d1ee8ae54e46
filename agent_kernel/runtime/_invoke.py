"""tools.invoke — running one tool call: lookup, arguments, permission, hooks, the tool, its result.

The loop hands each call the model makes to its ``StreamingToolExecutor``, which runs them through
a ``ToolInvoker``. Whatever happens (an unknown or nameless tool, arguments that are not JSON or do
not fit the schema, a refusal, a tool that raises or times out), the call ends with a
``tool_result`` the model can read, never an exception. Every result the model sees passes through
``answer``: made encodable, redacted and capped (the whole output is kept on disk past the cap).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pydantic

from agent_kernel._util.text import encodable
from agent_kernel.errors import StopRun, ToolError
from agent_kernel.events import payloads as p
from agent_kernel.events._event import EventType
from agent_kernel.guard._permissions import ToolRequest
from agent_kernel.guard._seal import RunSeal
from agent_kernel.models._response import NAMELESS_TOOL
from agent_kernel.runtime._emitter import Emitter
from agent_kernel.runtime._executor import PendingCall
from agent_kernel.runtime._hooks import HookPoint
from agent_kernel.runtime._state import ExecutionContext
from agent_kernel.runtime._streaming import validation_summary
from agent_kernel.tools._output import cap_tool_output
from agent_kernel.tools._registry import ToolRegistry
from agent_kernel.tools._tool import ToolContext, ToolResult

#: Runs a lifecycle hook for the current turn: ``hook(point, turn, **data)``.
RunHook = Callable[..., Awaitable[Any]]  # returns the hooks' HookOutcome, or None


class ToolInvoker:
    """Runs the tool calls of one run and records each one's events.

    Args:
        tools: the tools the model may call.
        ctx: the run's context (permissions, working directory, tool extras, redactor).
        emitter: where the call's events go (queued with ``later``: calls run beside the loop).
        hook: runs the ``before_tool_execution`` and ``after_tool_execution`` hooks.
        result_limit: characters of a result the model sees (None: no cap).
        output_dir: where results past the cap are kept whole.
    """

    def __init__(
        self,
        tools: ToolRegistry,
        ctx: ExecutionContext,
        emitter: Emitter,
        hook: RunHook,
        result_limit: int | None,
        output_dir: Path | None,
    ) -> None:
        self.tools = tools
        self.ctx = ctx
        self.em = emitter
        self.hook = hook
        self.result_limit = result_limit
        self.output_dir = output_dir
        # The gate's settings and the redactor as the run started; a tool must not change them.
        self.seal = RunSeal(ctx, emitter)

    async def __call__(self, call: PendingCall) -> ToolResult:
        """Runs ``call`` to its result (the executor's run function)."""
        em, name = self.em, call.name
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(self.tools.names) or "none"
            if name == NAMELESS_TOOL:
                return self.answer(call, ToolResult(f"This tool call had no name, so nothing ran. Call one of the available tools by name: {known}.", is_error=True))
            return self.answer(call, ToolResult(f"Unknown tool {name!r}. Available tools: {known}.", is_error=True))
        if call.parse_error is not None:
            raw = str(call.arguments.get("_raw", ""))[:500]
            return self.answer(
                call,
                ToolResult(f"The arguments for {name} are not valid JSON ({call.parse_error}). Received: {raw!r}. Send a JSON object that matches the tool's schema.", is_error=True),
            )
        try:
            arguments = tool.validate(call.arguments)
            # The gate judges the call that will run: validated, defaults filled (docs/security.md).
            judged = tool.judged(call.arguments) if hasattr(tool, "judged") else dict(call.arguments)
        except pydantic.ValidationError as exc:
            return self.answer(call, ToolResult(f"Invalid arguments for {name}: {validation_summary(exc)}", is_error=True))

        tampered = self._tampered(call)
        if tampered is not None:
            return self.answer(call, ToolResult(f"{tampered} This call was refused. Do not change the agent's settings from a tool.", is_error=True))
        gate = self.ctx.permissions
        approved_file = None
        if gate is not None:
            auth = await gate.authorize(ToolRequest(call.call_id, self.seal.view(tool), judged, em.agent_id, self.ctx.working_dir), em.later)
            if not auth.allowed:
                return self.answer(call, ToolResult(auth.message or f"{name} was not allowed to run.", is_error=True))
            approved_file = getattr(auth, "file", None)
            if auth.arguments != judged:
                try:
                    arguments = tool.validate(auth.arguments)
                except pydantic.ValidationError as exc:
                    return self.answer(call, ToolResult(f"Invalid edited arguments for {name}: {validation_summary(exc)}", is_error=True))
                call.arguments = dict(auth.arguments)

        turn = em.turn
        assert turn is not None  # set by the loop before any call is made
        try:
            hooked = await self.hook(HookPoint.BEFORE_TOOL_EXECUTION, turn, call=call)
        except StopRun as stop:
            # A hook ending the run from a tool task: the call is answered, then the run stops.
            return self.answer(call, ToolResult(stop.reason, is_error=True, stop=True, final_message=stop.final_message))
        decision = getattr(hooked, "decision", None)
        if decision is not None and not decision.approved:
            # Rejected by a hook: the tool never runs, and the model reads why.
            reason = decision.reason or "no reason given"
            em.later(EventType.APPROVAL_DECISION, p.ApprovalDecision(call_id=call.call_id, tool=name, decision="reject", decided_by="hook", reason=reason, wait_s=0.0))
            return self.answer(call, ToolResult(f"{name} was rejected before it ran: {reason}", is_error=True))
        started = time.time()
        em.later(EventType.TOOL_START, p.ToolStart(call_id=call.call_id, name=name, arguments=call.arguments, started_at=started))
        if not tool.concurrency_safe and em.agent_id is None:
            # A call that may have effects is journaled as started (its approval too) before it
            # runs: a process that dies inside it leaves that record, and a resumed run answers
            # the call as interrupted instead of running it a second time. Such a call runs
            # alone, after the response is whole, so stamping now keeps the stream in seq order.
            em.settle()
        outcome = await self._run(tool, arguments, call, approved_file)
        tampered = self._tampered(call)
        if tampered is not None:  # this call did it: the model reads that it was undone
            outcome = ToolResult(f"{outcome.content}\n\n{tampered} Do not change the agent's settings from a tool.", is_error=True,
                                 stop=outcome.stop, final_message=outcome.final_message, images=outcome.images)
        result = self.answer(call, outcome, started)
        try:
            await self.hook(HookPoint.AFTER_TOOL_EXECUTION, turn, call=call, result=result)
        except StopRun as stop:
            result = ToolResult(result.content, result.is_error, True, stop.final_message, result.images)
        return result

    def _tampered(self, call: PendingCall) -> str | None:
        """Restores the sealed settings if a tool changed them, journals it, and says so (or None)."""
        changed = self.seal.check()
        if not changed:
            return None
        message = (
            f"The run's permission or redaction settings were changed while it ran ({'; '.join(changed)}); "
            "they were restored to what they were when the run started."
        )
        self.em.later(
            EventType.ERROR,
            p.Error(message=message, kind="tampering", status_code=None, fatal=False, call_id=call.call_id, tool=call.name, changed=changed),
        )
        return message

    async def _run(self, tool: Any, arguments: Any, call: PendingCall, approved_file: Any = None) -> ToolResult:
        """The tool itself, its failures turned into results the model can read."""
        em, name = self.em, call.name

        def report(message: str, fraction: float | None) -> None:
            em.later(EventType.TOOL_PROGRESS, p.ToolProgress(call_id=call.call_id, name=name, message=message, fraction=fraction))

        tctx = ToolContext(call.call_id, name, self.ctx.working_dir, self.ctx.tool_extras, report, run=self.ctx, approved_file=approved_file)
        try:
            if tool.timeout is not None:
                content = await asyncio.wait_for(tool.invoke(arguments, tctx), tool.timeout)
            else:
                content = await tool.invoke(arguments, tctx)
            return content if isinstance(content, ToolResult) else ToolResult(content)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        except asyncio.TimeoutError:
            return ToolResult(f"{name} timed out after {tool.timeout:g} s.", is_error=True)
        except StopRun as stop:
            return ToolResult(stop.final_message or f"{name} ended the run.", stop=True, final_message=stop.final_message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return ToolResult(f"{name} raised {type(exc).__name__}: {exc}", is_error=True)

    def answer(self, call: PendingCall, result: ToolResult, started: float | None = None) -> ToolResult:
        """Records ``result`` as the call's ``tool_result``: encodable, redacted and capped."""
        content = encodable(result.content)
        redactor = self.ctx.redactor
        if redactor is not None and getattr(redactor, "active", True):
            content = redactor.redact(content)
        content = cap_tool_output(content, self.result_limit, self.output_dir, call.call_id)
        if content is not result.content:
            result = ToolResult(content, result.is_error, result.stop, result.final_message, result.images)
        ended = time.time()
        data = p.ToolResult(
            call_id=call.call_id,
            name=call.name,
            content=result.content,
            is_error=result.is_error,
            duration_s=None if started is None else ended - started,
            started_at=started,
            ended_at=ended,
        )
        if result.images:
            data["images"] = [image.to_dict() for image in result.images]
        self.em.later(EventType.TOOL_RESULT, data)
        return result

