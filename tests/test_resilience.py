"""Retries, fallback and the stall watchdog, owned by the loop and visible as events."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_kernel import EventType, TerminationReason, tool
from agent_kernel.models.scripted import ScriptedModel, fail, stall, text, tool_call
from agent_kernel.runtime._streaming import backoff

from .helpers import make_agent, of_type, types
from .sse import Server, anthropic_client, anthropic_response, anthropic_sse


@pytest.mark.parametrize("kind", ["rate_limit", "server", "bad_gateway", "unavailable", "gateway_timeout", "overloaded", "connection", "stream_cut"])
async def test_retryable_failures_are_retried_with_a_retry_event(kind: str) -> None:
    model = ScriptedModel([fail(kind), "recovered"])
    result = await make_agent(model).run("go")
    assert result.text == "recovered"
    retry = of_type(result.events, EventType.RETRY)
    assert len(retry) == 1 and retry[0].data["kind"] == kind and retry[0].data["attempt"] == 1
    assert retry[0].data["partial"] is False


async def test_a_retry_after_partial_output_says_so() -> None:
    model = ScriptedModel([[text("Half an ans"), fail("stream_cut")], "A whole answer."])
    agent = make_agent(model)
    result = await agent.run("go")
    assert of_type(result.events, EventType.RETRY)[0].data["partial"] is True
    # The partial message is discarded: the history holds only the retried answer.
    assert [m.text for m in agent.messages] == ["go", "A whole answer."]
    assert result.text == "A whole answer."


async def test_tools_started_by_a_discarded_response_are_aborted() -> None:
    @tool(read_only=True)
    async def look() -> str:
        """Looks."""
        return "seen"

    model = ScriptedModel([[tool_call("look"), text("and", delay=0.01), fail("server")], "fine"])
    result = await make_agent(model, [look]).run("go")
    assert result.text == "fine"
    # Only the surviving response reaches the history; no orphan tool_use.
    assert all(not m.tool_uses for m in model.requests[1].messages)


@pytest.mark.parametrize("kind", ["bad_request", "auth", "permission", "not_found", "context_length"])
async def test_non_retryable_failures_end_with_a_clear_error(kind: str) -> None:
    model = ScriptedModel([fail(kind), "never"])
    result = await make_agent(model).run("go")
    assert result.termination_reason is TerminationReason.ERROR
    assert types(result.events)[-2:] == ["error", "run_finish"]
    assert of_type(result.events, EventType.ERROR)[0].data["kind"] == kind
    assert len(model.requests) == 1


async def test_retries_stop_at_the_configured_count() -> None:
    model = ScriptedModel([fail("server")] * 3 + ["too late"])
    result = await make_agent(model, max_retries=2).run("go")
    assert result.termination_reason is TerminationReason.ERROR
    assert len(of_type(result.events, EventType.RETRY)) == 2 and len(model.requests) == 3


def test_backoff_grows_exponentially_and_honours_retry_after_up_to_the_cap() -> None:
    delays = [backoff(a, 1.0, 30.0, None) for a in range(6)]
    for attempt, d in enumerate(delays):
        nominal = min(30.0, 2.0**attempt)
        assert nominal / 2 <= d <= nominal
    assert backoff(0, 1.0, 30.0, 7.0) == 7.0
    assert backoff(0, 1.0, 30.0, 3600.0) == 30.0  # a server asking for an hour waits the cap


async def test_retry_after_from_the_server_sets_the_delay() -> None:
    model = ScriptedModel([fail("rate_limit", retry_after=0.02), "ok"])
    result = await make_agent(model).run("go")
    assert of_type(result.events, EventType.RETRY)[0].data["delay_s"] == 0.02


async def test_overload_switches_to_the_fallback_model() -> None:
    primary = ScriptedModel([fail("overloaded")], name="big")
    backup = ScriptedModel(["from the fallback"], name="small")
    result = await make_agent(primary, fallback_model=backup).run("go")
    assert result.text == "from the fallback"
    fb = of_type(result.events, EventType.MODEL_FALLBACK)[0]
    assert (fb.data["from_model"], fb.data["to_model"]) == ("big", "small")
    assert not of_type(result.events, EventType.RETRY)


async def test_the_fallback_keeps_serving_later_turns() -> None:
    @tool(read_only=True)
    def ping() -> str:
        """Pings."""
        return "pong"

    primary = ScriptedModel([fail("overloaded")], name="big")
    backup = ScriptedModel([tool_call("ping"), "done"], name="small")
    result = await make_agent(primary, [ping], fallback_model=backup).run("go")
    assert result.text == "done" and len(primary.requests) == 1 and len(backup.requests) == 2


@pytest.mark.usefixtures("fake_clock")  # a stall is decided exactly, whatever the load
async def test_a_stalled_stream_is_detected_then_retried() -> None:
    model = ScriptedModel([[text("a"), stall(5)], "after the stall"])
    result = await make_agent(model, stall_timeout=0.05).run("go")
    assert result.text == "after the stall"
    stalled = of_type(result.events, EventType.STALL_DETECTED)[0]
    assert stalled.data == {"seconds": 0.05, "action": "retry", "model": "scripted", "partial": True}
    assert of_type(result.events, EventType.RETRY)[0].data["kind"] == "stall"


@pytest.mark.usefixtures("fake_clock")  # a stall is decided exactly, whatever the load
async def test_a_stall_can_abort_the_run() -> None:
    model = ScriptedModel([stall(5), "never"])
    result = await make_agent(model, stall_timeout=0.05, on_stall="abort").run("go")
    assert result.termination_reason is TerminationReason.ERROR
    assert of_type(result.events, EventType.ERROR)[0].data["kind"] == "stall"


@pytest.mark.usefixtures("fake_clock")  # a stall is decided exactly, whatever the load
async def test_a_stall_can_fall_back() -> None:
    model = ScriptedModel([stall(5)], name="slow")
    backup = ScriptedModel(["quick answer"], name="quick")
    result = await make_agent(model, stall_timeout=0.05, on_stall="fallback", fallback_model=backup).run("go")
    assert result.text == "quick answer"
    assert types(result.events).index("stall_detected") < types(result.events).index("model_fallback")


@pytest.mark.usefixtures("fake_clock")  # a stall is decided exactly, whatever the load
async def test_a_slow_but_steady_stream_is_not_a_stall() -> None:
    # 13 gaps of 0.05 s: the stream lasts longer than the timeout, no single gap comes near it.
    model = ScriptedModel([text("steady stream", chunk=1, delay=0.05)])
    result = await make_agent(model, stall_timeout=0.4).run("go")
    assert result.text == "steady stream" and not of_type(result.events, EventType.STALL_DETECTED)


def _claude_over(server: Server) -> Any:
    """The Anthropic adapter over the real SDK, answered by ``server`` (real SSE bytes, in the test's loop)."""
    from agent_kernel.models.anthropic import AnthropicModel

    return AnthropicModel("claude-sonnet-4-6", client=anthropic_client(server))  # type: ignore[arg-type]


async def _held_on_first_delta(agent: Any, hold: float) -> list[Any]:
    """Runs ``agent``; the consumer holds the first text delta for ``hold`` seconds (a slow notebook view)."""
    events = []
    held = False
    async for event in agent.stream("go"):
        events.append(event)
        if event.type is EventType.TEXT_DELTA and not held:
            held = True
            await asyncio.sleep(hold)  # the fake clock: the consumer is busy, no real time passes
    return events


@pytest.mark.usefixtures("fake_clock")  # a stall is decided exactly, whatever the load
async def test_a_consumer_holding_an_event_past_the_stall_timeout_does_not_disarm_the_watchdog() -> None:
    body = anthropic_sse(anthropic_response([("text", "Hello there, slowly.")], chunk=4))
    frames = body.split(b"\n\n")
    deltas = [i for i, frame in enumerate(frames) if frame.startswith(b"event: content_block_delta")]
    after_two = sum(len(frame) + 2 for frame in frames[: deltas[1] + 1])
    # The model sends two deltas, then falls silent for good; the retry answers.
    server = Server().stream(body, pause_after=after_two).stream(anthropic_sse(anthropic_response([("text", "After the stall.")])))
    agent = make_agent(_claude_over(server), stall_timeout=20.0)
    # A watchdog switched off would wait on the silent stream for ever: 10 minutes (of the fake clock) is plenty.
    events = await asyncio.wait_for(_held_on_first_delta(agent, hold=45.0), timeout=600)
    stalls = of_type(events, EventType.STALL_DETECTED)
    assert [s.data["seconds"] for s in stalls] == [20.0] and len(server.requests) == 2
    assert of_type(events, EventType.RUN_FINISH)[0].data["text"] == "After the stall."


@pytest.mark.usefixtures("fake_clock")  # a stall is decided exactly, whatever the load
async def test_time_a_consumer_holds_an_event_is_not_model_silence() -> None:
    server = Server().stream(anthropic_sse(anthropic_response([("text", "Every word arrives.")], chunk=4)))
    agent = make_agent(_claude_over(server), stall_timeout=20.0)
    events = await _held_on_first_delta(agent, hold=45.0)
    assert not of_type(events, EventType.STALL_DETECTED) and len(server.requests) == 1
    assert of_type(events, EventType.RUN_FINISH)[0].data["text"] == "Every word arrives."


async def test_usage_and_cost_are_summed_per_run() -> None:
    model = ScriptedModel([tool_call("nothing"), "done"])
    result = await make_agent(model).run("go")
    completes = of_type(result.events, EventType.LLM_COMPLETE)
    assert result.usage.input_tokens == sum(c.data["usage"]["input_tokens"] for c in completes)
    assert result.usage.output_tokens == sum(c.data["usage"]["output_tokens"] for c in completes)
    # The scripted model has no price: the cost is unknown, never a made-up zero.
    assert result.cost_usd is None
