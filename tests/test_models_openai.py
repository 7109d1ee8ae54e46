"""OpenAIModel against the real openai SDK, fed real SSE bytes through a mock transport."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_kernel.errors import MissingAPIKey, ModelError
from agent_kernel.messages import Message, SummaryBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models import OpenAIModel
from agent_kernel.models._base import MessageEnd, ModelRequest, TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, Usage
from agent_kernel.models._sdk_errors import OPENAI_BY_STATUS, OPENAI_FIXED

from .helpers import ADD, HELLO, unmapped_exceptions
from .sse import Server, collect, http, openai_chunk, openai_client, openai_sse

USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150, "prompt_tokens_details": {"cached_tokens": 100}}
LOCAL = "http://localhost:11434/v1"


def model_for(server: Server, base_url: str | None = None, **kwargs: object) -> OpenAIModel:
    """A Chat Completions model (the Responses API has its own tests), answered by ``server``."""
    kwargs.setdefault("api", "chat")
    return OpenAIModel("gpt-4.1", client=openai_client(server, base_url), **kwargs)  # type: ignore[arg-type]


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def tool_fragments(call_index: int, call_id: str, name: str, arguments: str, size: int = 4) -> list[dict[str, object]]:
    """A tool call as OpenAI streams it: id and name first, then the arguments in pieces."""
    chunks = [openai_chunk({"tool_calls": [{"index": call_index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}]})]
    for i in range(0, len(arguments), size):
        chunks.append(openai_chunk({"tool_calls": [{"index": call_index, "function": {"arguments": arguments[i : i + size]}}]}))
    return chunks


def response(*middle: dict[str, object], finish: str = "stop", usage: dict[str, object] | None = USAGE) -> bytes:
    chunks = [openai_chunk({"role": "assistant", "content": ""}), *middle, openai_chunk({}, finish_reason=finish)]
    if usage is not None:
        chunks.append(openai_chunk(None, usage=usage))
    return openai_sse(chunks)


def words(text: str) -> list[dict[str, object]]:
    """Text streamed a word per chunk (each word keeps its trailing space)."""
    return [openai_chunk({"content": word + " "}) for word in text.split(" ")]


async def failure(server: Server, request: ModelRequest = HELLO) -> tuple[list[object], ModelError]:
    events: list[object] = []
    with pytest.raises(ModelError) as caught:
        async for event in model_for(server).stream(request):
            events.append(event)
    return events, caught.value


# ---------------------------------------------------------------- streaming


async def test_text_arrives_as_deltas_and_usage_counts_cached_input_apart() -> None:
    events = await collect(model_for(Server().stream(response(*words("Grüße aus der Küche 🎉")))).stream(HELLO))

    assert text_of(events) == "Grüße aus der Küche 🎉 "
    # prompt_tokens includes cached tokens; Usage keeps them apart.
    assert events[-1] == MessageEnd("end_turn", Usage(20, 30, 100, 0), "gpt-4.1-2025-04-14")


async def test_reasoning_content_from_compatible_servers_streams_as_thinking() -> None:
    body = response(openai_chunk({"reasoning_content": "Adding 2 "}), openai_chunk({"reasoning": "and 3."}), *words("5"))
    events = await collect(model_for(Server().stream(body)).stream(HELLO))

    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "Adding 2 and 3."
    assert text_of(events) == "5 "


async def test_several_tool_calls_assemble_by_index_from_json_fragments() -> None:
    body = response(
        *words("Let me check."),
        *tool_fragments(0, "call_a", "add", '{"a": 2, "b": [3, {"c": "x y"}]}'),
        *tool_fragments(1, "call_b", "lookup", '{"query": "ünï code"}'),
        finish="tool_calls",
    )
    events = await collect(model_for(Server().stream(body)).stream(HELLO))

    starts = [e for e in events if isinstance(e, ToolCallStart)]
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert starts == [ToolCallStart(0, "call_a", "add"), ToolCallStart(1, "call_b", "lookup")]
    assert [(e.index, e.id, e.name, json.loads(e.arguments)) for e in ends] == [
        (0, "call_a", "add", {"a": 2, "b": [3, {"c": "x y"}]}),
        (1, "call_b", "lookup", {"query": "ünï code"}),
    ]
    for end in ends:
        fragments = [e.arguments for e in events if isinstance(e, ToolCallDelta) and e.index == end.index]
        assert len(fragments) > 1 and "".join(fragments) == end.arguments
    assert events[-1].stop_reason == "tool_use"


async def test_a_server_that_sends_arguments_in_one_piece_and_no_usage_still_works() -> None:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    body = response(openai_chunk({"tool_calls": [call]}), finish="tool_calls", usage=None)
    events = await collect(model_for(Server().stream(body), LOCAL).stream(HELLO))

    assert [e for e in events if isinstance(e, ToolCallEnd)] == [ToolCallEnd(0, "call_1", "add", '{"a": 1}')]
    assert events[-1] == MessageEnd("tool_use", None, "gpt-4.1-2025-04-14")  # no usage: not zero usage


async def test_a_server_that_numbers_every_call_zero_still_gives_separate_calls() -> None:
    first = {"index": 0, "id": "call_1", "function": {"name": "add", "arguments": '{"a": 1}'}}
    second = {"index": 0, "id": "call_2", "function": {"name": "add", "arguments": '{"a": 2}'}}
    body = response(openai_chunk({"tool_calls": [first]}), openai_chunk({"tool_calls": [second]}), finish="tool_calls")
    events = await collect(model_for(Server().stream(body), LOCAL).stream(HELLO))

    assert [(e.index, e.id, e.arguments) for e in events if isinstance(e, ToolCallEnd)] == [
        (0, "call_1", '{"a": 1}'), (1, "call_2", '{"a": 2}'),
    ]


async def test_a_response_cut_by_the_length_limit_says_max_tokens() -> None:
    events = await collect(model_for(Server().stream(response(*words("and so"), finish="length"))).stream(HELLO))
    assert events[-1].stop_reason == "max_tokens"


async def test_events_arrive_while_the_response_is_still_streaming() -> None:
    body = response(*words("first then the rest"))
    server = Server().stream(body, pause_after=body.index(b"then") - 20)
    stream = model_for(server).stream(HELLO)

    first = await stream.__anext__()
    assert first == TextDelta("first ")
    server.release.set()
    assert text_of([first, *await collect(stream)]) == "first then the rest "


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=1, max_value=4000), max_size=60))
def test_the_same_stream_split_at_any_byte_boundaries_assembles_the_same_events(cuts: list[int]) -> None:
    body = response(
        openai_chunk({"reasoning_content": "Ünïcode thinking…"}),
        *words("Grüße, 世界 🎉"),
        *tool_fragments(0, "call_a", "add", '{"a": "é", "b": [1, 2]}', size=3),
        *tool_fragments(1, "call_b", "mul", "{}"),
        finish="tool_calls",
    )

    async def run(split: list[int]) -> list[object]:
        return await collect(model_for(Server().stream(body, cuts=split)).stream(HELLO))

    assert asyncio.run(run(cuts)) == asyncio.run(run([]))


# ---------------------------------------------------------------- the request


async def test_the_request_carries_system_messages_tool_calls_and_results_in_chat_shape() -> None:
    server = Server().stream(response(*words("ok")))
    conversation = (
        Message.user("add 2 and 3"),
        Message("assistant", (
            ThinkingBlock("private reasoning", "sig"),
            TextBlock("Adding."),
            ToolUseBlock("call_1", "add", {"a": 2, "b": 3}),
            ToolUseBlock("call_2", "add", {"_raw": "{not json"}),
        )),
        Message("user", (ToolResultBlock("call_1", "5"), ToolResultBlock("call_2", "bad arguments", is_error=True), TextBlock("thanks"))),
        Message("user", (SummaryBlock("Earlier: sums."),)),
    )
    await collect(model_for(server).stream(ModelRequest(conversation, system="You add.", tools=(ADD,))))

    body = server.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [{"type": "function", "function": {"name": "add", "description": "Adds two numbers.", "parameters": ADD.parameters}}]
    assert body["messages"] == [
        {"role": "system", "content": "You add."},
        {"role": "user", "content": "add 2 and 3"},
        {"role": "assistant", "content": "Adding.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}},
            {"id": "call_2", "type": "function", "function": {"name": "add", "arguments": "{not json"}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: bad arguments"},
        {"role": "user", "content": "thanks"},
        {"role": "user", "content": "Earlier: sums."},
    ]


async def test_no_tools_sends_no_tools_parameter() -> None:
    server = Server().stream(response(*words("ok")))
    await collect(model_for(server).stream(HELLO))
    assert "tools" not in server.bodies[0]


async def test_max_tokens_uses_the_parameter_each_server_understands() -> None:
    server = Server().stream(response(*words("ok"))).stream(response(*words("ok")))
    request = ModelRequest((Message.user("hi"),), options={"max_tokens": 99, "thinking_budget": 4000, "reasoning_effort": "low"})
    await collect(model_for(server).stream(request))
    await collect(model_for(server, LOCAL).stream(request))

    openai_body, local_body = server.bodies
    assert openai_body["max_completion_tokens"] == 99 and "max_tokens" not in openai_body
    assert local_body["max_tokens"] == 99 and "max_completion_tokens" not in local_body
    assert openai_body["reasoning_effort"] == "low"
    assert "thinking" not in json.dumps(openai_body)  # an Anthropic setting, ignored here


async def test_a_server_that_rejects_stream_options_is_asked_again_without_them() -> None:
    rejection = {"error": {"message": "Unrecognized request argument supplied: stream_options", "type": "invalid_request_error", "param": None, "code": None}}
    server = Server().error(400, rejection).stream(response(*words("ok"), usage=None)).stream(response(*words("again"), usage=None))
    model = model_for(server, LOCAL)

    assert text_of(await collect(model.stream(HELLO))) == "ok "
    assert text_of(await collect(model.stream(HELLO))) == "again "
    assert ["stream_options" in body for body in server.bodies] == [True, False, False]


# ---------------------------------------------------------------- failures


def openai_error(message: str, type_: str, code: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


RETRYABLE = [
    (429, openai_error("Rate limit reached for gpt-4.1", "requests", "rate_limit_exceeded"), "rate_limit", False),
    (500, openai_error("The server had an error", "server_error"), "server", False),
    (502, openai_error("Bad gateway", "server_error"), "bad_gateway", False),
    (503, openai_error("The engine is currently overloaded, please try again later", "server_error"), "unavailable", True),
    (504, openai_error("Gateway timeout", "server_error"), "gateway_timeout", False),
    (529, openai_error("Overloaded", "server_error"), "overloaded", True),
]


@pytest.mark.parametrize(("status", "body", "kind", "overloaded"), RETRYABLE)
async def test_retryable_http_errors_are_marked_retryable(status: int, body: dict[str, object], kind: str, overloaded: bool) -> None:
    _, error = await failure(Server().error(status, body, {"retry-after": "3"}))
    assert (error.retryable, error.kind, error.status_code, error.overloaded, error.retry_after) == (True, kind, status, overloaded, 3.0)


NOT_RETRYABLE = [
    (400, openai_error("Invalid value for 'messages'", "invalid_request_error"), "bad_request"),
    (401, openai_error("Incorrect API key provided", "invalid_request_error", "invalid_api_key"), "auth"),
    (403, openai_error("Project does not have access to model", "invalid_request_error"), "permission"),
    (404, openai_error("The model `gpt-9` does not exist", "invalid_request_error", "model_not_found"), "not_found"),
    (400, openai_error("This model's maximum context length is 128000 tokens.", "invalid_request_error", "context_length_exceeded"), "context_length"),
    (429, openai_error("You exceeded your current quota", "insufficient_quota", "insufficient_quota"), "quota"),
]


@pytest.mark.parametrize(("status", "body", "kind"), NOT_RETRYABLE)
async def test_errors_that_will_not_change_on_retry_are_not_retryable(status: int, body: dict[str, object], kind: str) -> None:
    _, error = await failure(Server().error(status, body, {"retry-after": "3"}))
    assert (error.retryable, error.kind, error.status_code, error.retry_after) == (False, kind, status, None)
    assert body["error"]["message"] in str(error)  # type: ignore[index]


async def test_an_auth_error_names_the_key_variable() -> None:
    _, error = await failure(Server().error(401, openai_error("Incorrect API key provided", "invalid_request_error")))
    assert "OPENAI_API_KEY" in str(error)


async def test_retry_after_may_be_an_http_date() -> None:
    _, error = await failure(Server().error(429, openai_error("slow down", "requests"), {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}))
    assert error.retry_after == 0.0  # a date in the past: retry now, never a negative wait


async def test_a_connection_that_drops_before_a_response_is_a_retryable_connection_error() -> None:
    _, error = await failure(Server().drop())
    assert (error.retryable, error.kind, error.status_code) == (True, "connection", None)


async def test_a_stream_cut_mid_way_is_a_retryable_stream_cut_after_the_partial_output() -> None:
    body = response(*words("partial answer that never finishes"))
    events, error = await failure(Server().stream(body, cut_after=body.index(b"never")))

    assert text_of(events).startswith("partial")
    assert (error.retryable, error.kind) == (True, "stream_cut")


async def test_a_stream_that_ends_without_a_finish_reason_is_a_stream_cut() -> None:
    body = openai_sse([openai_chunk({"content": "half"})], done=False)
    _, error = await failure(Server().stream(body))
    assert (error.retryable, error.kind) == (True, "stream_cut")


async def test_an_error_sent_mid_stream_is_mapped_by_its_type() -> None:
    body = openai_sse([openai_chunk({"content": "half"}), openai_error("The server had an error while processing", "server_error")], done=False)
    events, error = await failure(Server().stream(body))

    assert text_of(events) == "half"
    assert (error.retryable, error.kind) == (True, "server")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_connection_lost_at_any_byte_is_retryable_unless_the_answer_was_complete(data: st.DataObject) -> None:
    body = response(*words("Grüße 🎉"), *tool_fragments(0, "call_a", "add", '{"a": 1}'), finish="tool_calls")
    cut = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
    # The finishing chunk counts once its blank line has arrived.
    finished = body.index(b"\n\n", body.index(b'"finish_reason": "tool_calls"')) + 2

    async def run() -> list[object] | ModelError:
        try:
            return await collect(model_for(Server().stream(body, cut_after=cut)).stream(HELLO))
        except ModelError as error:
            return error

    outcome = asyncio.run(run())
    if isinstance(outcome, ModelError):
        assert outcome.retryable and outcome.kind in ("connection", "stream_cut")
        assert cut < finished
    else:
        assert cut >= finished  # the answer was complete; at most the usage was lost
        assert [e for e in outcome if isinstance(e, ToolCallEnd)] == [ToolCallEnd(0, "call_a", "add", '{"a": 1}')]
        assert outcome[-1].stop_reason == "tool_use"


def test_every_exception_class_the_sdk_exports_is_mapped() -> None:
    unmapped = unmapped_exceptions(openai, OPENAI_FIXED, OPENAI_BY_STATUS)
    assert not unmapped, f"add these openai exceptions to agent_kernel/models/sdk_errors.py: {unmapped}"


# ---------------------------------------------------------------- configuration


def test_a_missing_key_fails_before_any_request_naming_the_variable_and_the_offline_model() -> None:
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY.*offline"):
        OpenAIModel("gpt-4.1")


def test_a_compatible_server_needs_only_a_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    local = OpenAIModel("qwen2.5:7b", base_url=LOCAL)
    assert (str(local.client.base_url), local.client.max_retries) == (LOCAL + "/", 0)
    assert local.context_window == 128_000  # an unknown model gets the provider default
    monkeypatch.setenv("OPENAI_BASE_URL", LOCAL)
    assert OpenAIModel("llama3.1").client.base_url == local.client.base_url


def test_a_key_from_the_environment_builds_a_client_with_sdk_retries_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    model = OpenAIModel("gpt-4.1-mini", organization="org-1")
    assert (model.client.api_key, model.client.organization, model.client.max_retries) == ("sk-env", "org-1", 0)
    assert (model.provider, model.name, model.context_window) == ("openai", "gpt-4.1-mini", 1_047_576)


def test_the_mock_transport_is_the_sdk_transport() -> None:
    assert isinstance(openai_client(Server())._client, http.AsyncClient)
