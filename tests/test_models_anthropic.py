"""AnthropicModel against the real anthropic SDK, fed real SSE bytes through a mock transport."""

from __future__ import annotations

import asyncio
import json

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_kernel import EventType, tool
from agent_kernel.errors import MissingAPIKey, ModelError, UserError
from agent_kernel.messages import Message, SummaryBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models import AnthropicModel, OpenAIModel
from agent_kernel.models._base import MessageEnd, ModelRequest, TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, ToolSpec, Usage
from agent_kernel.models._sdk_errors import ANTHROPIC_BY_STATUS, ANTHROPIC_FIXED

from .helpers import ADD, HELLO, make_agent, of_type, unmapped_exceptions
from .sse import Server, anthropic_client, anthropic_response, anthropic_sse, collect, http, openai_chunk, openai_client, openai_sse

MUL = ToolSpec("mul", "Multiplies.", {"type": "object", "properties": {}})


def model_for(server: Server, **kwargs: object) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-6", client=anthropic_client(server), **kwargs)  # type: ignore[arg-type]


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def failure(server: Server, request: ModelRequest = HELLO) -> tuple[list[object], ModelError]:
    """Events streamed before the failure, and the ModelError raised."""
    events: list[object] = []
    with pytest.raises(ModelError) as caught:
        async for event in model_for(server).stream(request):
            events.append(event)
    return events, caught.value


# ---------------------------------------------------------------- streaming


async def test_text_arrives_as_deltas_and_the_message_ends_with_usage_including_cache() -> None:
    body = anthropic_sse(anthropic_response(
        [("text", "Hello, wörld! 🎉")],
        usage={"input_tokens": 12, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 300},
        output_tokens=9,
    ))
    events = await collect(model_for(Server().stream(body)).stream(HELLO))

    assert text_of(events) == "Hello, wörld! 🎉"
    assert sum(isinstance(e, TextDelta) for e in events) > 1
    assert events[-1] == MessageEnd("end_turn", Usage(12, 9, 900, 300), "claude-sonnet-4-5-20250929")


async def test_thinking_streams_as_thinking_deltas_and_keeps_its_signature() -> None:
    body = anthropic_sse(anthropic_response([("thinking", ("Let me add them.", "EqQBCgIYAh==")), ("text", "5")]))
    events = await collect(model_for(Server().stream(body)).stream(HELLO))

    thinking = [e for e in events if isinstance(e, ThinkingDelta)]
    assert "".join(e.text for e in thinking) == "Let me add them."
    assert [e.signature for e in thinking if e.signature] == ["EqQBCgIYAh=="]
    assert text_of(events) == "5"


async def test_several_tool_calls_assemble_from_json_fragments_and_each_ends_at_its_block_stop() -> None:
    body = anthropic_sse(anthropic_response([
        ("text", "Working on it."),
        ("tool_use", ("toolu_01", "add", '{"a": 2, "b": [3, {"c": "x y"}]}')),
        ("tool_use", ("toolu_02", "mul", '{"x": 1.5, "label": "ünï"}')),
        ("tool_use", ("toolu_03", "add", '{"a": 7}')),
    ], chunk=3))
    events = await collect(model_for(Server().stream(body)).stream(HELLO))

    calls = [e for e in events if isinstance(e, (ToolCallStart, ToolCallEnd))]
    # Each call ends before the next one starts, so the executor can start it at once.
    assert [(type(e).__name__, e.index, e.id) for e in calls] == [
        ("ToolCallStart", 0, "toolu_01"), ("ToolCallEnd", 0, "toolu_01"),
        ("ToolCallStart", 1, "toolu_02"), ("ToolCallEnd", 1, "toolu_02"),
        ("ToolCallStart", 2, "toolu_03"), ("ToolCallEnd", 2, "toolu_03"),
    ]
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [json.loads(e.arguments) for e in ends] == [
        {"a": 2, "b": [3, {"c": "x y"}]}, {"x": 1.5, "label": "ünï"}, {"a": 7},
    ]
    for end in ends:
        fragments = [e.arguments for e in events if isinstance(e, ToolCallDelta) and e.index == end.index]
        assert len(fragments) > 1 and "".join(fragments) == end.arguments
    assert events[-1].stop_reason == "tool_use"


async def test_a_tool_call_without_arguments_ends_with_an_empty_object() -> None:
    body = anthropic_sse(anthropic_response([("tool_use", ("toolu_01", "now", ""))]))
    events = await collect(model_for(Server().stream(body)).stream(HELLO))

    assert [e for e in events if isinstance(e, ToolCallEnd)] == [ToolCallEnd(0, "toolu_01", "now", "{}")]


async def test_events_arrive_while_the_response_is_still_streaming() -> None:
    body = anthropic_sse(anthropic_response([("text", "first part, then the rest")]))
    second_delta = body.index(b"event: content_block_delta", body.index(b"event: content_block_delta") + 1)
    server = Server().stream(body, pause_after=second_delta)
    stream = model_for(server).stream(HELLO)

    first = await stream.__anext__()
    assert first == TextDelta("first")  # delivered although the server has not finished
    server.release.set()
    rest = await collect(stream)
    assert text_of([first, *rest]) == "first part, then the rest"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=1, max_value=4000), max_size=60))
def test_the_same_stream_split_at_any_byte_boundaries_assembles_the_same_events(cuts: list[int]) -> None:
    body = anthropic_sse(anthropic_response([
        ("thinking", ("Ünïcode thinking…", "sig/+==")),
        ("text", "Grüße, 世界 🎉"),
        ("tool_use", ("toolu_01", "add", '{"a": "é", "b": [1, 2]}')),
        ("tool_use", ("toolu_02", "mul", "{}")),
    ], chunk=4))

    async def run(split: list[int]) -> list[object]:
        return await collect(model_for(Server().stream(body, cuts=split)).stream(HELLO))

    assert asyncio.run(run(cuts)) == asyncio.run(run([]))


# ---------------------------------------------------------------- the request


async def test_the_request_carries_messages_system_tools_and_cache_breakpoints() -> None:
    server = Server().stream(anthropic_sse(anthropic_response([("text", "ok")])))
    conversation = (
        Message.user("add 2 and 3"),
        Message("assistant", (
            ThinkingBlock("I should add.", "sig1"),
            ThinkingBlock("unsigned reasoning from another provider"),
            TextBlock("Adding."),
            ToolUseBlock("toolu_01", "add", {"a": 2, "b": 3}),
        )),
        Message("user", (TextBlock("also, hurry"), ToolResultBlock("toolu_01", "boom", is_error=True))),
        Message("assistant", (TextBlock(""),)),
        Message("user", (SummaryBlock("Earlier we talked about sums.", messages_replaced=4),)),
    )
    request = ModelRequest(conversation, system="You add numbers.", tools=(ADD, MUL))
    await collect(model_for(server).stream(request))

    body = server.bodies[0]
    assert body["stream"] is True and body["model"] == "claude-sonnet-4-6"
    assert body["system"] == [{"type": "text", "text": "You add numbers.", "cache_control": {"type": "ephemeral"}}]
    assert [t["name"] for t in body["tools"]] == ["add", "mul"]
    assert body["tools"][0]["input_schema"] == ADD.parameters and "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "add 2 and 3"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should add.", "signature": "sig1"},
            {"type": "text", "text": "Adding."},
            {"type": "tool_use", "id": "toolu_01", "name": "add", "input": {"a": 2, "b": 3}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "boom", "is_error": True},
            {"type": "text", "text": "also, hurry"},
        ]},
        {"role": "user", "content": [
            {"type": "text", "text": "Earlier we talked about sums.", "cache_control": {"type": "ephemeral"}},
        ]},
    ]


async def test_no_tools_sends_no_tools_parameter_and_caching_can_be_turned_off() -> None:
    server = Server().stream(anthropic_sse(anthropic_response([("text", "ok")])))
    await collect(model_for(server, prompt_caching=False).stream(ModelRequest((Message.user("hi"),), system="S")))

    body = server.bodies[0]
    assert "tools" not in body
    assert "cache_control" not in json.dumps(body)


async def test_cache_breakpoints_go_only_where_prompt_caching_says() -> None:
    server = Server().stream(anthropic_sse(anthropic_response([("text", "ok")])))
    model = model_for(server, prompt_caching={"system", "tools"})
    await collect(model.stream(ModelRequest((Message.user("hi"),), system="S", tools=(ADD,))))
    body = server.bodies[0]
    assert "cache_control" in body["system"][-1] and "cache_control" in body["tools"][-1]
    assert "cache_control" not in json.dumps(body["messages"])
    with pytest.raises(UserError, match="'system', 'tools', 'messages'; got 'history'"):
        model_for(server, prompt_caching={"history"})


async def test_a_thinking_budget_enables_extended_thinking_with_room_left_for_the_answer() -> None:
    server = Server().stream(anthropic_sse(anthropic_response([("text", "ok")])))
    await collect(model_for(server, max_tokens=4000).stream(ModelRequest((Message.user("hi"),), options={"thinking_budget": 8000})))

    body = server.bodies[0]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8000}
    assert body["max_tokens"] > 8000


async def test_adaptive_thinking_lets_the_model_choose_its_budget() -> None:
    server = Server().stream(anthropic_sse(anthropic_response([("text", "ok")])))
    await collect(model_for(server, thinking_budget="adaptive").stream(HELLO))
    assert server.bodies[0]["thinking"] == {"type": "adaptive"}


async def test_options_map_to_the_messages_api_and_a_typo_is_named() -> None:
    server = Server().stream(anthropic_sse(anthropic_response([("text", "ok")])))
    options = {"max_tokens": 321, "temperature": 0.2, "stop": ["END"], "reasoning_effort": "low", "anthropic": {"top_k": 7}}
    await collect(model_for(server).stream(ModelRequest((Message.user("hi"),), options=options)))

    body = server.bodies[0]
    assert (body["max_tokens"], body["temperature"], body["stop_sequences"], body["top_k"]) == (321, 0.2, ["END"], 7)
    assert "reasoning_effort" not in body  # an OpenAI setting, ignored here so fallbacks keep working
    with pytest.raises(UserError, match="'temprature'.*Did you mean 'temperature'"):
        model_for(Server()).stream(ModelRequest((Message.user("hi"),), options={"temprature": 1}))


# ---------------------------------------------------------------- failures

RETRYABLE = [
    (429, "rate_limit_error", "rate_limit", False),
    (500, "api_error", "server", False),
    (502, "api_error", "bad_gateway", False),
    (503, "api_error", "unavailable", False),
    (504, "timeout_error", "gateway_timeout", False),
    (529, "overloaded_error", "overloaded", True),
]


@pytest.mark.parametrize(("status", "error_type", "kind", "overloaded"), RETRYABLE)
async def test_retryable_http_errors_are_marked_retryable(status: int, error_type: str, kind: str, overloaded: bool) -> None:
    server = Server().error(status, {"type": "error", "error": {"type": error_type, "message": "try later"}})
    _, error = await failure(server)

    assert (error.retryable, error.kind, error.status_code, error.overloaded) == (True, kind, status, overloaded)
    assert "try later" in str(error)


NOT_RETRYABLE = [
    (400, "invalid_request_error", "messages: roles must alternate", "bad_request"),
    (401, "authentication_error", "invalid x-api-key", "auth"),
    (403, "permission_error", "no access to this model", "permission"),
    (404, "not_found_error", "model: claude-nope", "not_found"),
    (400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", "context_length"),
    (429, "rate_limit_error", "Your workspace has reached its enforced spend limit", "quota"),
]


@pytest.mark.parametrize(("status", "error_type", "message", "kind"), NOT_RETRYABLE)
async def test_errors_that_will_not_change_on_retry_are_not_retryable(status: int, error_type: str, message: str, kind: str) -> None:
    server = Server().error(status, {"type": "error", "error": {"type": error_type, "message": message}})
    _, error = await failure(server)

    assert (error.retryable, error.kind, error.status_code) == (False, kind, status)
    assert message in str(error)


async def test_an_auth_error_names_the_key_variable() -> None:
    _, error = await failure(Server().error(401, {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}))
    assert "ANTHROPIC_API_KEY" in str(error)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [({"retry-after": "7"}, 7.0), ({"retry-after": "1.5"}, 1.5), ({"retry-after-ms": "250", "retry-after": "9"}, 0.25)],
)
async def test_retry_after_is_read_from_the_response_headers(headers: dict[str, str], seconds: float) -> None:
    server = Server().error(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}, headers)
    _, error = await failure(server)
    assert error.retry_after == seconds


async def test_a_connection_that_drops_before_a_response_is_a_retryable_connection_error() -> None:
    _, error = await failure(Server().drop())
    assert (error.retryable, error.kind, error.status_code) == (True, "connection", None)


async def test_a_stream_cut_mid_way_is_a_retryable_stream_cut_after_the_partial_output() -> None:
    body = anthropic_sse(anthropic_response([("text", "partial answer that never finishes")]))
    events, error = await failure(Server().stream(body, cut_after=body.index(b"never")))

    assert text_of(events).startswith("partial")
    assert not any(isinstance(e, MessageEnd) for e in events)
    assert (error.retryable, error.kind) == (True, "stream_cut")


async def test_a_stream_that_ends_without_message_stop_is_a_stream_cut() -> None:
    events = anthropic_response([("text", "half")])
    _, error = await failure(Server().stream(anthropic_sse(events[:-2])))
    assert (error.retryable, error.kind) == (True, "stream_cut")


async def test_an_overloaded_error_sent_mid_stream_is_an_overload() -> None:
    events = anthropic_response([("text", "partial")])[:4]
    events.append({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    streamed, error = await failure(Server().stream(anthropic_sse(events)))

    assert text_of(streamed)
    assert (error.retryable, error.overloaded, error.kind) == (True, True, "overloaded")


async def test_closing_the_stream_early_closes_the_http_response() -> None:
    server = Server().stream(anthropic_sse(anthropic_response([("text", "a long answer " * 20)])))
    stream = model_for(server).stream(HELLO)
    await stream.__anext__()
    await stream.aclose()  # what the loop does when a run is cancelled mid-stream
    assert server.responses[0].is_closed


def test_every_exception_class_the_sdk_exports_is_mapped() -> None:
    unmapped = unmapped_exceptions(anthropic, ANTHROPIC_FIXED, ANTHROPIC_BY_STATUS)
    assert not unmapped, f"add these anthropic exceptions to agent_kernel/models/sdk_errors.py: {unmapped}"


# ---------------------------------------------------------------- configuration


def test_a_missing_key_fails_before_any_request_naming_the_variable_and_the_offline_model() -> None:
    with pytest.raises(MissingAPIKey, match="ANTHROPIC_API_KEY.*offline"):
        AnthropicModel("claude-sonnet-4-6")


def test_a_key_from_the_environment_builds_a_client_with_sdk_retries_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    model = AnthropicModel("claude-haiku-4-5", base_url="http://127.0.0.1:9/")

    assert model.client.api_key == "sk-ant-env"
    assert model.client.max_retries == 0  # the loop retries, visibly
    assert str(model.client.base_url) == "http://127.0.0.1:9/"
    assert (model.provider, model.name, model.context_window) == ("anthropic", "claude-haiku-4-5", 200_000)


def test_a_base_url_or_auth_token_stands_in_for_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert AnthropicModel(base_url="http://127.0.0.1:9/").client.api_key is None
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "token")
    assert AnthropicModel().client.auth_token == "token"


def test_the_mock_transport_is_the_sdk_transport() -> None:
    # The tests above are only meaningful if the SDK sends through the module they mock.
    assert isinstance(anthropic_client(Server())._client, http.AsyncClient)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_connection_lost_at_any_byte_is_a_retryable_failure(data: st.DataObject) -> None:
    body = anthropic_sse(anthropic_response([("text", "Grüße 🎉"), ("tool_use", ("toolu_01", "add", '{"a": 1}'))]))
    cut = data.draw(st.integers(min_value=0, max_value=len(body) - 1))

    async def run() -> ModelError:
        return (await failure(Server().stream(body, cut_after=cut)))[1]

    error = asyncio.run(run())
    assert error.retryable and error.kind in ("connection", "stream_cut")


# ---------------------------------------------------------------- through the loop, real SDKs


async def test_through_the_loop_tool_calls_run_and_each_call_is_priced() -> None:
    @tool(read_only=True)
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    server = (
        Server()
        .stream(anthropic_sse(anthropic_response([("tool_use", ("toolu_01", "add", '{"a": 2, "b": 3}'))], model="claude-sonnet-4-6", usage={"input_tokens": 1_000_000}, output_tokens=0)))
        .stream(anthropic_sse(anthropic_response([("text", "It is 5.")], model="claude-sonnet-4-6", usage={"input_tokens": 0, "cache_read_input_tokens": 1_000_000}, output_tokens=100_000)))
    )
    result = await make_agent(model_for(server), [add]).run("add 2 and 3")

    assert result.text == "It is 5."
    assert server.bodies[1]["messages"][-1]["content"][0]["content"] == "5"
    assert [c.data["cost_usd"] for c in of_type(result.events, EventType.LLM_COMPLETE)] == pytest.approx([3.0, 0.3 + 1.5])
    assert result.cost_usd == pytest.approx(4.8)


async def test_through_the_loop_a_cut_stream_is_retried_and_its_partial_text_discarded() -> None:
    body = anthropic_sse(anthropic_response([("text", "Half an answer, then silence")]))
    server = Server().stream(body, cut_after=body.index(b"message_delta")).stream(anthropic_sse(anthropic_response([("text", "Whole.")])))
    agent = make_agent(model_for(server))
    result = await agent.run("go")

    retry = of_type(result.events, EventType.RETRY)[0]
    assert (retry.data["kind"], retry.data["partial"]) == ("stream_cut", True)
    assert result.text == "Whole." and [m.text for m in agent.messages] == ["go", "Whole."]


async def test_through_the_loop_an_overloaded_anthropic_falls_back_to_openai() -> None:
    overloaded = Server().error(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    chunks = [openai_chunk({"content": "From the fallback."}), openai_chunk({}, finish_reason="stop")]
    backup = OpenAIModel("gpt-4.1", client=openai_client(Server().stream(openai_sse(chunks))), api="chat")
    result = await make_agent(model_for(overloaded), fallback_model=backup).run("go")

    assert result.text == "From the fallback."
    fallback = of_type(result.events, EventType.MODEL_FALLBACK)[0]
    assert (fallback.data["from_model"], fallback.data["to_model"], fallback.data["kind"]) == ("claude-sonnet-4-6", "gpt-4.1", "overloaded")


async def test_through_the_loop_a_stalled_sse_stream_is_detected_then_retried() -> None:
    body = anthropic_sse(anthropic_response([("text", "Never finished")]))
    server = Server().stream(body, pause_after=body.index(b"message_delta")).stream(anthropic_sse(anthropic_response([("text", "Recovered.")])))
    result = await make_agent(model_for(server), stall_timeout=0.05).run("go")

    assert result.text == "Recovered."
    assert of_type(result.events, EventType.STALL_DETECTED)[0].data["partial"] is True
    assert server.responses[0].is_closed  # the stalled connection was closed, not left open
