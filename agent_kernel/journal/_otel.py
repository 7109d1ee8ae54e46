"""journal.otel — OpenTelemetry spans built from agent events, after the GenAI semantic conventions.

One ``SpanBuilder`` turns a session's events, fed in order, into spans; ``export_otel`` feeds it
a journal's events, and ``OtelSink`` (``Agent(..., otel=True)``) feeds it each event as the
emitter writes it, so a live run and an exported journal give the same span tree:

* ``invoke_agent {name}`` per run (``gen_ai.operation.name = invoke_agent``); a sub-agent's run
  (its own ``run_id`` and ``agent_id``, bracketed by ``subagent_start`` / ``subagent_finish``) is a
  child of the ``execute_tool`` span of the call that started it;
* ``chat {model}`` per model call, from ``llm_start`` to ``llm_complete`` (a call that failed and
  was retried ends at the ``retry`` with ``error.type``);
* ``execute_tool {name}`` per tool call, from ``tool_start`` to ``tool_result`` (the tool's own
  ``started_at`` / ``ended_at`` when recorded); a failed call has ``error.type`` and an error status;
* ``chat {model}`` for each completion an MCP server asked the model for (``mcp_sampling``,
  accepted), a child of the server's call in flight, with ``agent_kernel.purpose = sampling``.

Span times are the events' ``ts`` (the spans of an exported journal sit where the run happened,
not when it was exported). Attributes: ``gen_ai.operation.name``, ``gen_ai.provider.name``,
``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.response.finish_reasons``,
``gen_ai.usage.input_tokens`` / ``output_tokens``, ``gen_ai.agent.name`` / ``gen_ai.agent.id``,
``gen_ai.conversation.id`` (the session), ``gen_ai.tool.name`` / ``gen_ai.tool.call.id`` /
``gen_ai.tool.type``, ``error.type``, and this package's own under ``agent_kernel.``:
``agent_kernel.cost_usd``, ``agent_kernel.run_id``, ``agent_kernel.termination_reason``.
Prompts, answers and tool arguments are not recorded: spans often leave the machine, the journal
keeps the content.

Only the OpenTelemetry API is used here (the SDK is the application's choice); importing this
module imports it, so the core imports this module only when asked (``otel=True``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

try:
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    from agent_kernel.errors import UserError

    raise UserError(
        "OpenTelemetry export needs the OpenTelemetry SDK, which is not installed; run: pip install 'agent_kernel[otel]'"
    ) from exc

from agent_kernel._util import VERSION
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.events._sink import EventSink

_TRACER_NAME = "agent_kernel"
_NS = 1_000_000_000


def tracer_of(tracer_provider: Any = None) -> Tracer:
    """The tracer spans are made with: from ``tracer_provider``, or the global provider."""
    if tracer_provider is None:
        return trace.get_tracer(_TRACER_NAME, VERSION)
    return tracer_provider.get_tracer(_TRACER_NAME, VERSION)


def _ns(seconds: Any, fallback: float) -> int:
    value = seconds if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds else fallback
    return int(round(value * _NS))


@dataclass
class _Run:
    """The open spans of one run."""

    span: Span
    agent_id: str | None
    provider: str | None = None
    model: str | None = None
    sub: bool = False  # ended by subagent_finish rather than run_finish
    chat: Span | None = None
    tools: dict[str, Span] = field(default_factory=dict)
    tool_names: dict[str, str] = field(default_factory=dict)  # the open calls' tool names
    failed: bool = False


# Every event type the builder reads; the live sink ignores the others (the per-token deltas).
HANDLED = frozenset(
    {
        EventType.RUN_START,
        EventType.LLM_START,
        EventType.LLM_COMPLETE,
        EventType.RETRY,
        EventType.MODEL_FALLBACK,
        EventType.TOOL_START,
        EventType.TOOL_RESULT,
        EventType.ERROR,
        EventType.CANCELLED,
        EventType.RUN_FINISH,
        EventType.SUBAGENT_START,
        EventType.SUBAGENT_FINISH,
        EventType.MCP_SAMPLING,
    }
)


class SpanBuilder:
    """Turns one session's events, fed in order, into OpenTelemetry spans.

    Args:
        tracer: where spans are made (``tracer_of(provider)``).

    Attributes:
        spans: how many spans were started.
    """

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.spans = 0
        self._runs: dict[str, _Run] = {}
        self._agent_run: dict[str | None, str] = {}  # each agent's current run
        self._last_ts = 0.0

    # -- spans ------------------------------------------------------------------------------

    def _start(self, name: str, ts: int, parent: Span | None, kind: SpanKind, attributes: dict[str, Any]) -> Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        self.spans += 1
        clean = {k: v for k, v in attributes.items() if v is not None}
        return self.tracer.start_span(name, context=context, kind=kind, attributes=clean, start_time=ts)

    @staticmethod
    def _fail(span: Span, error_type: str, description: str | None = None) -> None:
        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR, description))

    def _open_run(self, event: AgentEvent, parent: Span | None, *, sub: bool, name: str | None, model: Any) -> _Run:
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.agent.id": event.agent_id,
            "gen_ai.conversation.id": event.session_id,
            "gen_ai.request.model": model if isinstance(model, str) else None,
            "agent_kernel.run_id": event.run_id,
        }
        span = self._start(f"invoke_agent {name}" if name else "invoke_agent", _ns(event.ts, 0), parent, SpanKind.INTERNAL, attributes)
        run = self._runs[event.run_id] = _Run(span, event.agent_id, sub=sub)
        self._agent_run[event.agent_id] = event.run_id
        return run

    def _close_children(self, run: _Run, ts: int, reason: str) -> None:
        """Ends the run's open model call and tool calls (the run ended under them)."""
        if run.chat is not None:
            self._fail(run.chat, reason)
            run.chat.end(end_time=ts)
            run.chat = None
        for span in run.tools.values():
            self._fail(span, reason)
            span.end(end_time=ts)
        run.tools.clear()
        run.tool_names.clear()

    # -- events -----------------------------------------------------------------------------

    def feed(self, event: AgentEvent) -> None:
        """Reads one event (in ``seq`` order); events of other types are ignored."""
        kind = event.type
        if kind not in HANDLED:
            return
        self._last_ts = max(self._last_ts, event.ts)
        data = event.data
        ts = _ns(event.ts, 0)
        run = self._runs.get(event.run_id)
        if kind is EventType.SUBAGENT_START:
            parent_run = self._runs.get(self._agent_run.get(data.get("parent_agent_id"), ""))
            parent = None
            if parent_run is not None:
                parent = parent_run.tools.get(str(data.get("parent_call_id")), parent_run.span)
            self._open_run(event, parent, sub=True, name=data.get("name"), model=data.get("model"))
        elif kind is EventType.RUN_START:
            if run is None:
                run = self._open_run(event, None, sub=False, name=data.get("agent_name"), model=data.get("model"))
            run.provider = data.get("provider") if isinstance(data.get("provider"), str) else None
            run.model = data.get("model") if isinstance(data.get("model"), str) else None
            run.span.set_attribute("gen_ai.provider.name", run.provider or "unknown")
            if run.model:
                run.span.set_attribute("gen_ai.request.model", run.model)
            if isinstance(data.get("agent_name"), str):
                run.span.set_attribute("gen_ai.agent.name", data["agent_name"])
        elif run is None:
            return  # the run began before this journal did (a resumed file's tail): nothing to hang it on
        elif kind is EventType.LLM_START:
            if run.chat is not None:  # the previous attempt ended without a word: it failed
                self._fail(run.chat, "incomplete")
                run.chat.end(end_time=ts)
            model = data.get("model") if isinstance(data.get("model"), str) else run.model
            provider = data.get("provider") if isinstance(data.get("provider"), str) else run.provider
            run.chat = self._start(
                f"chat {model}" if model else "chat",
                ts,
                run.span,
                SpanKind.CLIENT,
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": provider or "unknown",
                    "gen_ai.request.model": model,
                    "gen_ai.conversation.id": event.session_id,
                    "agent_kernel.attempt": data.get("attempt") if isinstance(data.get("attempt"), int) else None,
                },
            )
        elif kind is EventType.LLM_COMPLETE:
            if run.chat is None:
                return
            given = data.get("usage")
            usage: dict[str, Any] = given if isinstance(given, dict) else {}
            attributes: dict[str, Any] = {
                "gen_ai.response.model": data.get("model"),
                "gen_ai.usage.input_tokens": usage.get("input_tokens"),
                "gen_ai.usage.output_tokens": usage.get("output_tokens"),
                "gen_ai.usage.cache_read.input_tokens": usage.get("cache_read_tokens"),
                "gen_ai.usage.cache_creation.input_tokens": usage.get("cache_write_tokens"),
                "agent_kernel.cost_usd": data.get("cost_usd"),
            }
            if isinstance(data.get("stop_reason"), str):
                attributes["gen_ai.response.finish_reasons"] = [data["stop_reason"]]
            run.chat.set_attributes({k: v for k, v in attributes.items() if isinstance(v, (str, int, float, list)) and not isinstance(v, bool)})
            run.chat.end(end_time=ts)
            run.chat = None
        elif kind in (EventType.RETRY, EventType.MODEL_FALLBACK, EventType.ERROR):
            if run.chat is not None:
                self._fail(run.chat, str(data.get("kind") or kind.value), str(data.get("error") or data.get("reason") or data.get("message") or ""))
                run.chat.end(end_time=ts)
                run.chat = None
            if kind is EventType.ERROR:
                self._fail(run.span, str(data.get("kind") or "error"), str(data.get("message") or ""))
                run.failed = True
        elif kind is EventType.TOOL_START:
            call_id = str(data.get("call_id"))
            name = data.get("name") if isinstance(data.get("name"), str) else None
            run.tool_names[call_id] = name or ""
            run.tools[call_id] = self._start(
                f"execute_tool {name}" if name else "execute_tool",
                _ns(data.get("started_at"), event.ts),
                run.span,
                SpanKind.INTERNAL,
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.type": "function",
                },
            )
        elif kind is EventType.TOOL_RESULT:
            call_id = str(data.get("call_id"))
            span = run.tools.pop(call_id, None)
            run.tool_names.pop(call_id, None)
            name = data.get("name") if isinstance(data.get("name"), str) else None
            if span is None:  # a call that never ran (refused, or cut short before it began)
                span = self._start(
                    f"execute_tool {name}" if name else "execute_tool",
                    ts,
                    run.span,
                    SpanKind.INTERNAL,
                    {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function"},
                )
            if data.get("is_error"):
                content = data.get("content")
                self._fail(span, "cancelled" if data.get("synthetic") else "tool_error", content[:200] if isinstance(content, str) else None)
            span.end(end_time=_ns(data.get("ended_at"), event.ts))
        elif kind is EventType.MCP_SAMPLING:
            if data.get("action") == "accept":
                self._sampling(run, event, ts)
        elif kind is EventType.CANCELLED:
            run.span.set_attribute("error.type", "cancelled")
        elif kind is EventType.RUN_FINISH:
            self._close_children(run, ts, "run_ended")
            reason = data.get("reason")
            recorded = data.get("stats")
            stats: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
            attributes = {
                "agent_kernel.termination_reason": reason,
                "gen_ai.usage.input_tokens": stats.get("input_tokens"),
                "gen_ai.usage.output_tokens": stats.get("output_tokens"),
                "agent_kernel.cost_usd": stats.get("cost_usd"),
            }
            run.span.set_attributes({k: v for k, v in attributes.items() if isinstance(v, (str, int, float)) and not isinstance(v, bool)})
            if reason == "error" and not run.failed:
                self._fail(run.span, "error", str(data.get("error") or ""))
                run.failed = True
            if not run.sub:
                run.span.end(end_time=ts)
                del self._runs[event.run_id]
        elif kind is EventType.SUBAGENT_FINISH:
            self._close_children(run, ts, "run_ended")
            if data.get("reason") == "error" and not run.failed:
                self._fail(run.span, "error", str(data.get("error") or ""))
            run.span.end(end_time=ts)
            del self._runs[event.run_id]

    def _sampling(self, run: _Run, event: AgentEvent, ts: int) -> None:
        """A ``chat`` span for a completion an MCP server asked for, under the server's call in
        flight (the latest one to that server; the run's span when none is open)."""
        data = event.data
        server = data.get("server")
        prefix = f"mcp__{server}__"
        calls = [span for call_id, span in run.tools.items() if run.tool_names.get(call_id, "").startswith(prefix)]
        parent = calls[-1] if calls else run.span
        duration = data.get("duration_s")
        took = duration if isinstance(duration, (int, float)) and not isinstance(duration, bool) and duration >= 0 else 0.0
        model = data.get("model") if isinstance(data.get("model"), str) else None
        given = data.get("usage")
        usage: dict[str, Any] = given if isinstance(given, dict) else {}
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": run.provider or "unknown",
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
            "gen_ai.conversation.id": event.session_id,
            "gen_ai.usage.input_tokens": usage.get("input_tokens"),
            "gen_ai.usage.output_tokens": usage.get("output_tokens"),
            "agent_kernel.cost_usd": data.get("cost_usd"),
            "agent_kernel.purpose": "sampling",
            "agent_kernel.mcp.server": server if isinstance(server, str) else None,
        }
        if isinstance(data.get("stop_reason"), str):
            attributes["gen_ai.response.finish_reasons"] = [data["stop_reason"]]
        clean = {k: v for k, v in attributes.items() if isinstance(v, (str, int, float, list)) and not isinstance(v, bool)}
        span = self._start(f"chat {model}" if model else "chat", ts - int(took * _NS), parent, SpanKind.CLIENT, clean)
        span.end(end_time=ts)

    def finish(self) -> None:
        """Ends every span still open at the last event's time (a run cut off mid-way)."""
        ts = _ns(self._last_ts, 0)
        for run in reversed(list(self._runs.values())):  # children before their parents
            self._close_children(run, ts, "interrupted")
            self._fail(run.span, "interrupted", "the journal ends before the run did")
            run.span.end(end_time=ts)
        self._runs.clear()


class OtelSink(EventSink):
    """An event sink that makes spans as events are written (``Agent(..., otel=True)``).

    Spans go to the global tracer provider (``opentelemetry.trace.set_tracer_provider``), or to
    ``tracer_provider`` when given.
    """

    def __init__(self, tracer_provider: Any = None) -> None:
        self.builder = SpanBuilder(tracer_of(tracer_provider))

    def write(self, event: AgentEvent) -> None:
        """Feeds the event to the span builder (the per-token deltas are skipped at once)."""
        if event.type in HANDLED:
            self.builder.feed(event)

    def close(self) -> None:
        """Ends the spans of a run that never finished."""
        self.builder.finish()
