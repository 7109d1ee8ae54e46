"""OpenTelemetry: runs become GenAI spans (exported from journals, or live), with sub-agents as
children, failures marked, and the OTLP HTTP exporter delivering them to a receiver on loopback."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agent_kernel import Agent
from agent_kernel.events._event import EventType
from agent_kernel.journal import export_otel, read_events
from agent_kernel.models.scripted import ScriptedModel

from .journal_events import recorded_run
from .journal_fleet import delegating_agent, delegating_run, fleet

NS = 1_000_000_000


def memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def tree(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> list[tuple[int, str]]:
    """The spans as (depth, name), depth first in start order: the shape of the trace."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: (s.start_time, s.name)):
            out.append((depth, span.name))
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    assert len(out) == len(spans), "every span hangs off the tree"
    return out


DELEGATING_TREE = [
    (0, "invoke_agent lead"),
    (1, "chat scripted"),
    (1, "execute_tool explode"),
    (1, "chat scripted"),
    (1, "execute_tool task"),
    (2, "invoke_agent math"),
    (3, "chat scripted"),
    (3, "execute_tool add"),
    (3, "chat scripted"),
    (1, "chat scripted"),
]


async def test_a_journal_with_a_sub_agent_and_a_failed_tool_becomes_a_genai_span_tree(tmp_path: Path) -> None:
    path = await delegating_run(tmp_path / "run.jsonl")
    provider, exporter = memory_provider()

    assert export_otel(path, provider) == 10
    spans = exporter.get_finished_spans()
    assert tree(spans) == DELEGATING_TREE

    by_name = {s.name: s for s in spans}
    root, child = by_name["invoke_agent lead"], by_name["invoke_agent math"]
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.provider.name"] == "scripted" and root.attributes["gen_ai.request.model"] == "scripted"
    assert root.attributes["agent_kernel.termination_reason"] == "end_turn"
    assert child.attributes["gen_ai.agent.id"].startswith("math-")
    events = read_events(path)
    assert root.start_time == round(events[0].ts * NS)
    assert root.end_time == round(events[-1].ts * NS)

    failed = by_name["execute_tool explode"]
    assert failed.attributes["gen_ai.operation.name"] == "execute_tool"
    assert failed.attributes["gen_ai.tool.name"] == "explode" and failed.attributes["gen_ai.tool.call.id"] == "p0"
    assert failed.attributes["error.type"] == "tool_error" and failed.status.status_code is StatusCode.ERROR
    assert "exploded: test" in (failed.status.description or "")
    assert by_name["execute_tool add"].status.status_code is StatusCode.UNSET

    # Model calls carry the usage and the stop reason of their llm_complete.
    completes = [e for e in events if e.type is EventType.LLM_COMPLETE]
    chats = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.end_time)
    assert len(chats) == len(completes)
    for chat, done in zip(chats, completes):
        assert chat.end_time == round(done.ts * NS)
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.usage.input_tokens"] == done.data["usage"]["input_tokens"]
        assert chat.attributes["gen_ai.usage.output_tokens"] == done.data["usage"]["output_tokens"]
        assert chat.attributes["gen_ai.response.finish_reasons"] == (done.data["stop_reason"],)
        assert chat.kind is trace.SpanKind.CLIENT


def test_the_recorded_run_times_its_tools_by_their_own_clock_and_keeps_the_cost() -> None:
    provider, exporter = memory_provider()
    export_otel(recorded_run(), provider)
    spans = {(s.name, s.attributes.get("gen_ai.tool.call.id")): s for s in exporter.get_finished_spans()}
    write = spans[("execute_tool write", "c3")]
    result = [e for e in recorded_run() if e.type is EventType.TOOL_RESULT and e.data["call_id"] == "c3"][0]
    assert (write.start_time, write.end_time) == (round(result.data["started_at"] * NS), round(result.data["ended_at"] * NS))
    costs = sorted(s.attributes["agent_kernel.cost_usd"] for s in exporter.get_finished_spans() if s.name.startswith("chat"))
    assert costs == [0.001, 0.002]


async def test_a_run_cut_off_mid_tool_ends_at_its_last_event_marked_interrupted(tmp_path: Path) -> None:
    cut = (await fleet(tmp_path))[2]
    provider, exporter = memory_provider()
    export_otel(cut, provider)
    spans = exporter.get_finished_spans()
    last = read_events(cut)[-1]
    assert all(s.end_time <= round(last.ts * NS) for s in spans)
    running = [s for s in spans if s.name == "execute_tool read" and s.attributes["gen_ai.tool.call.id"] == "c2"][0]
    assert running.attributes["error.type"] == "interrupted"
    root = [s for s in spans if s.parent is None][0]
    assert root.attributes["error.type"] == "interrupted" and root.status.status_code is StatusCode.ERROR


@pytest.fixture(scope="module")
def global_exporter() -> InMemorySpanExporter:
    """An in-memory exporter on the global tracer provider (set once per process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def signature(spans: Any) -> list[tuple[str, str | None, tuple[tuple[str, Any], ...], int, int]]:
    """What a span says, independent of its ids: name, parent name, attributes, times."""
    names = {s.context.span_id: s.name for s in spans}
    return sorted(
        (s.name, names.get(s.parent.span_id) if s.parent else None, tuple(sorted(s.attributes.items())), s.start_time, s.end_time)
        for s in spans
    )


async def test_a_live_agent_with_otel_gives_the_spans_its_journal_exports_to(tmp_path: Path, global_exporter: InMemorySpanExporter) -> None:
    global_exporter.clear()
    agent = delegating_agent(tmp_path / "live.jsonl", otel=True)
    await agent.run("What is 2 + 3?")
    agent.close()
    live = global_exporter.get_finished_spans()
    assert tree(live) == DELEGATING_TREE

    provider, exporter = memory_provider()
    export_otel(tmp_path / "live.jsonl", provider)
    assert signature(live) == signature(exporter.get_finished_spans())
    # The agent object exports the same as its journal.
    again, exporter_again = memory_provider()
    export_otel(agent, again)
    assert signature(exporter_again.get_finished_spans()) == signature(live)


async def test_a_reset_agent_keeps_sending_spans(global_exporter: InMemorySpanExporter) -> None:
    agent = Agent(ScriptedModel(["One.", "Two."]), journal=None, context=None, name="solo", otel=True)
    await agent.run("first")
    agent.reset()
    global_exporter.clear()
    await agent.run("second")
    spans = global_exporter.get_finished_spans()
    assert tree(spans) == [(0, "invoke_agent solo"), (1, "chat scripted")]
    assert spans[-1].attributes["gen_ai.conversation.id"] == agent.session_id


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).bodies.append((self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    _Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Receiver.bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_the_otlp_http_exporter_delivers_the_spans_to_a_collector(tmp_path: Path, receiver: tuple[str, list[Any]]) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    url, bodies = receiver
    path = await delegating_run(tmp_path / "run.jsonl")
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
    try:
        export_otel(path, provider)  # flushes the provider: the POST has been answered on return
    finally:
        provider.shutdown()

    assert bodies and all(p == "/v1/traces" and t == "application/x-protobuf" for p, t, _ in bodies)
    spans = []
    for _, _, body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                assert scope.scope.name == "agent_kernel"
                spans.extend(scope.spans)
    assert sorted(s.name for s in spans) == sorted(name for _, name in DELEGATING_TREE)
    failed = [s for s in spans if s.name == "execute_tool explode"][0]
    attributes = {a.key: a.value for a in failed.attributes}
    assert attributes["error.type"].string_value == "tool_error"
    assert attributes["gen_ai.tool.call.id"].string_value == "p0"
    child = [s for s in spans if s.name == "invoke_agent math"][0]
    task = [s for s in spans if s.name == "execute_tool task"][0]
    assert child.parent_span_id == task.span_id and child.trace_id == task.trace_id


def test_without_opentelemetry_the_errors_say_how_to_install_it() -> None:
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from agent_kernel import Agent\n"
        "from agent_kernel.journal import export_otel\n"
        "for attempt in (lambda: Agent('offline', journal=None, otel=True), lambda: export_otel([])):\n"
        "    try:\n        attempt()\n"
        "    except Exception as exc:\n        print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.count("UserError") == 2 and out.count("pip install 'agent_kernel[otel]'") == 2
