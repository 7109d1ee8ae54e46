"""OpenAIModel(api="responses") against the real openai SDK, fed real Responses SSE bytes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_kernel.errors import ModelError, UserError
from agent_kernel.messages import Message, SummaryBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models import OpenAIModel
from agent_kernel.models._base import MessageEnd, ModelRequest, TextDelta, ThinkingDelta, ToolCallDelta, ToolCallEnd, ToolCallStart, Usage
from agent_kernel.models._openai_responses import reasoning_item, reasoning_signature

from .fakes.errors import StrictAPIError
from .fakes.responses_api import (
    check_responses_request,
    responses_events,
    responses_failed,
    responses_sse,
)
from .fakes.turns import turn
from .helpers import ADD, HELLO
from .sse import Server, collect, openai_client

LOCAL = "http://localhost:11434/v1"


def model_for(server: Server, base_url: str | None = None, **kwargs: Any) -> OpenAIModel:
    return OpenAIModel("gpt-4.1", client=openai_client(server, base_url), **kwargs)


def sse(events: list[dict[str, Any]]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def thinking_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, ThinkingDelta))


async def failure(server: Server, request: ModelRequest = HELLO) -> tuple[list[object], ModelError]:
    events: list[object] = []
    with pytest.raises(ModelError) as caught:
        async for event in model_for(server).stream(request):
            events.append(event)
    return events, caught.value


# ---------------------------------------------------------------- which API


def test_openai_own_endpoint_defaults_to_the_responses_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert OpenAIModel("gpt-4.1").api == "responses"
    assert OpenAIModel("gpt-4.1", base_url="https://api.openai.com/v1").api == "responses"
    assert OpenAIModel("gpt-4.1", client=openai_client(Server())).api == "responses"


def test_a_compatible_server_defaults_to_chat_completions_however_its_url_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    assert OpenAIModel("llama3.1", base_url=LOCAL).api == "chat"
    assert OpenAIModel("llama3.1", client=openai_client(Server(), LOCAL)).api == "chat"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
    assert OpenAIModel("llama3.1").api == "chat"
    # A host that merely contains OpenAI's name is another server.
    assert OpenAIModel("x", base_url="https://api.openai.com.example.net/v1").api == "chat"


def test_an_explicit_api_wins_over_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert OpenAIModel("gpt-4.1", api="chat").api == "chat"
    assert OpenAIModel("gpt-oss", base_url=LOCAL, api="responses").api == "responses"


def test_an_unknown_api_is_a_user_error_naming_the_choices() -> None:
    with pytest.raises(UserError, match="'responses'.*'chat'.*got 'completions'"):
        OpenAIModel("gpt-4.1", base_url=LOCAL, api="completions")  # type: ignore[arg-type]


async def test_each_api_posts_to_its_own_path() -> None:
    server = Server().stream(responses_sse(turn("hi"), "gpt-4.1"))
    await collect(model_for(server).stream(HELLO))
    assert server.requests[0].url.path == "/v1/responses"


# ---------------------------------------------------------------- streaming


async def test_text_and_thinking_stream_as_deltas_and_the_reasoning_item_signs_the_thinking() -> None:
    body = responses_sse(turn("Grüße aus der Küche 🎉", thinking=("Ünïcode thinking…", "enc-abc"), usage={"input_tokens": 120, "output_tokens": 30}), "gpt-5-2025-08-07")
    events = await collect(model_for(Server().stream(body)).stream(HELLO))

    assert text_of(events) == "Grüße aus der Küche 🎉" and len([e for e in events if isinstance(e, TextDelta)]) > 1
    assert thinking_of(events) == "Ünïcode thinking…"
    signatures = [e.signature for e in events if isinstance(e, ThinkingDelta) and e.signature]
    assert signatures == [reasoning_signature("rs_fake_0", "enc-abc")]
    assert reasoning_item(ThinkingBlock("Ünïcode thinking…", signatures[0])) == {
        "type": "reasoning", "encrypted_content": "enc-abc", "summary": [{"type": "summary_text", "text": "Ünïcode thinking…"}],
    }
    assert events[-1] == MessageEnd("end_turn", Usage(120, 30), "gpt-5-2025-08-07")


async def test_each_function_call_ends_at_its_own_item_done_before_the_next_starts() -> None:
    body = responses_sse(turn("Let me check.", calls=[("call_a", "add", {"a": 2, "b": [3, {"c": "x y"}]}), ("call_b", "lookup", {"query": "ünï code"})]), "gpt-4.1")
    events = await collect(model_for(Server().stream(body)).stream(HELLO))

    calls = [e for e in events if isinstance(e, (ToolCallStart, ToolCallEnd))]
    assert [(type(e).__name__, e.index, e.id, e.name) for e in calls] == [
        ("ToolCallStart", 0, "call_a", "add"), ("ToolCallEnd", 0, "call_a", "add"),
        ("ToolCallStart", 1, "call_b", "lookup"), ("ToolCallEnd", 1, "call_b", "lookup"),
    ]
    ends = [e for e in calls if isinstance(e, ToolCallEnd)]
    assert [json.loads(e.arguments) for e in ends] == [{"a": 2, "b": [3, {"c": "x y"}]}, {"query": "ünï code"}]
    for end in ends:
        fragments = [e.arguments for e in events if isinstance(e, ToolCallDelta) and e.index == end.index]
        assert len(fragments) > 1 and "".join(fragments) == end.arguments
    assert events[-1].stop_reason == "tool_use"


async def test_reasoning_that_came_without_encrypted_content_is_shown_but_not_sent_back() -> None:
    body = responses_sse(turn("5.", thinking=("Adding.", "enc")), "gpt-5", encrypted=False)
    events = await collect(model_for(Server().stream(body)).stream(HELLO))

    signature = next(e.signature for e in events if isinstance(e, ThinkingDelta) and e.signature)
    assert thinking_of(events) == "Adding." and json.loads(signature)["id"] == "rs_fake_0"
    assert reasoning_item(ThinkingBlock("Adding.", signature)) is None


async def test_an_incomplete_response_for_max_output_tokens_says_max_tokens() -> None:
    events = await collect(model_for(Server().stream(responses_sse(turn("and so", stop="max_tokens"), "gpt-4.1"))).stream(HELLO))
    assert text_of(events) == "and so" and events[-1].stop_reason == "max_tokens"


async def test_a_call_cut_off_by_the_output_limit_still_ends() -> None:
    events = responses_events(turn(calls=[("call_1", "add", {"a": 123456})], stop="max_tokens"), "gpt-4.1")
    cut = [e for e in events if e["type"] not in ("response.function_call_arguments.done", "response.output_item.done")]
    out = await collect(model_for(Server().stream(sse(cut[:4] + cut[-1:]))).stream(HELLO))

    ends = [e for e in out if isinstance(e, ToolCallEnd)]
    assert [(e.id, e.name) for e in ends] == [("call_1", "add")] and ends[0].arguments == '{"a": 1'
    assert out[-1].stop_reason == "max_tokens"


async def test_usage_counts_cached_input_apart_and_a_response_without_usage_has_unknown_usage() -> None:
    cached = responses_sse(turn("ok", usage={"input_tokens": 120, "output_tokens": 30, "cache_read_tokens": 100}), "gpt-4.1")
    bare = responses_sse(turn("ok", no_usage=True), "gpt-4.1")
    model = model_for(Server().stream(cached).stream(bare))

    assert (await collect(model.stream(HELLO)))[-1].usage == Usage(20, 30, 100, 0)
    assert (await collect(model.stream(HELLO)))[-1].usage is None  # unknown, not zero


async def test_items_a_server_sends_whole_without_deltas_still_arrive() -> None:
    events = responses_events(turn("whole text", thinking=("whole thought", "enc"), calls=[("call_1", "add", {"a": 1})]), "gpt-oss")
    whole = [e for e in events if "delta" not in e["type"] and e["type"] != "response.output_item.added"]
    out = await collect(model_for(Server().stream(sse(whole))).stream(HELLO))

    assert (thinking_of(out), text_of(out)) == ("whole thought", "whole text")
    assert [e for e in out if isinstance(e, ToolCallEnd)] == [ToolCallEnd(0, "call_1", "add", '{"a": 1}')]
    assert [e for e in out if isinstance(e, ToolCallStart)] == [ToolCallStart(0, "call_1", "add")]


async def test_a_refusal_streams_as_text_and_stops_as_a_refusal() -> None:
    events = responses_events(turn("x"), "gpt-4.1")
    for e in events:
        if e["type"] == "response.output_text.delta":
            e["type"] = "response.refusal.delta"
            del e["logprobs"]
    out = await collect(model_for(Server().stream(sse([e for e in events if e["type"] != "response.output_text.done"]))).stream(HELLO))
    assert text_of(out) == "x" and out[-1].stop_reason == "refusal"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(min_value=1, max_value=6000), max_size=60))
def test_the_same_stream_split_at_any_byte_boundaries_assembles_the_same_events(cuts: list[int]) -> None:
    body = responses_sse(turn("Grüße, 世界 🎉", thinking=("Ünïcode…", "enc"), calls=[("a", "add", {"a": "é"}), ("b", "mul", {})]), "gpt-4.1")

    async def run(split: list[int]) -> list[object]:
        return await collect(model_for(Server().stream(body, cuts=split)).stream(HELLO))

    assert asyncio.run(run(cuts)) == asyncio.run(run([]))


# ---------------------------------------------------------------- the request


async def test_the_request_carries_instructions_input_items_and_flat_non_strict_tools() -> None:
    server = Server().stream(responses_sse(turn("ok"), "gpt-4.1"))
    conversation = (
        Message.user("add 2 and 3"),
        Message("assistant", (
            ThinkingBlock("Adding them.", reasoning_signature("rs_1", "enc-1")),
            TextBlock("Adding."),
            ToolUseBlock("call_1", "add", {"a": 2, "b": 3}),
            ToolUseBlock("call_2", "add", {"_raw": "{not json"}),
        )),
        Message("user", (ToolResultBlock("call_1", "5"), ToolResultBlock("call_2", "bad arguments", is_error=True), TextBlock("thanks"))),
        # Thinking signed by another provider (before a fallback), or reasoning that came without
        # its encrypted content, cannot go to this API.
        Message("assistant", (
            ThinkingBlock("private", "anthropic-signature"), ThinkingBlock("unencrypted", reasoning_signature("rs_2")), TextBlock("You're welcome."),
        )),
        Message("user", (SummaryBlock("Earlier: sums."),)),
    )
    await collect(model_for(server).stream(ModelRequest(conversation, system="You add.", tools=(ADD,))))

    body = server.bodies[0]
    check_responses_request(body)  # what the real API would accept
    assert (body["model"], body["stream"], body["instructions"]) == ("gpt-4.1", True, "You add.")
    assert body["tools"] == [{"type": "function", "name": "add", "description": "Adds two numbers.", "parameters": ADD.parameters, "strict": False}]
    assert body["input"] == [
        {"role": "user", "content": "add 2 and 3"},
        # Sent statelessly: by id, the API would demand the ids of the items that followed it.
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Adding them."}], "encrypted_content": "enc-1"},
        {"role": "assistant", "content": "Adding."},
        {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": '{"a": 2, "b": 3}'},
        {"type": "function_call", "call_id": "call_2", "name": "add", "arguments": "{not json"},
        {"type": "function_call_output", "call_id": "call_1", "output": "5"},
        {"type": "function_call_output", "call_id": "call_2", "output": "Error: bad arguments"},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "You're welcome."},
        {"role": "user", "content": "Earlier: sums."},
    ]
    assert "tool_choice" not in body and "extra_body" not in json.dumps(body)


@pytest.mark.parametrize(("choice", "wire"), [
    ("auto", "auto"), ("none", "none"), ("required", "required"), ({"name": "add"}, {"type": "function", "name": "add"}),
])
async def test_the_neutral_tool_choice_is_sent_in_the_responses_shape(choice: Any, wire: Any) -> None:
    server = Server().stream(responses_sse(turn("ok"), "gpt-4.1"))
    await collect(model_for(server).stream(ModelRequest((Message.user("hi"),), tools=(ADD,), options={"tool_choice": choice})))
    assert server.bodies[0]["tool_choice"] == wire
    check_responses_request(server.bodies[0])


async def test_options_map_to_responses_parameters_and_settings_it_lacks_are_not_sent() -> None:
    server = Server().stream(responses_sse(turn("ok"), "gpt-5")).stream(responses_sse(turn("ok"), "gpt-5"))
    options = {
        "max_tokens": 99, "temperature": 0.2, "top_p": 0.9, "reasoning_effort": "low", "thinking_budget": 4000,
        "stop": ["END"], "openai": {"reasoning": {"summary": "auto"}, "store": False},
    }
    await collect(model_for(server).stream(ModelRequest((Message.user("hi"),), options=options)))
    await collect(model_for(server, max_tokens=512).stream(HELLO))

    body, default = server.bodies
    check_responses_request(body)
    assert (body["max_output_tokens"], body["temperature"], body["top_p"]) == (99, 0.2, 0.9)
    assert body["reasoning"] == {"effort": "low", "summary": "auto"}  # the extras add to the effort
    assert (body["store"], body["include"]) == (False, ["reasoning.encrypted_content"])
    assert "reasoning" not in default and "include" not in default
    assert not {"stop", "thinking", "max_tokens", "max_completion_tokens", "stream_options"} & set(body)
    assert default["max_output_tokens"] == 512


# ---------------------------------------------------------------- failures


def openai_error(message: str, type_: str, code: str | None = None) -> dict[str, object]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


@pytest.mark.parametrize(("status", "body", "kind", "retryable"), [
    (429, openai_error("Rate limit reached for gpt-4.1", "requests", "rate_limit_exceeded"), "rate_limit", True),
    (503, openai_error("The engine is currently overloaded", "server_error"), "unavailable", True),
    (400, openai_error("Your input exceeds the context window of this model.", "invalid_request_error", "context_length_exceeded"), "context_length", False),
    (401, openai_error("Incorrect API key provided", "invalid_request_error", "invalid_api_key"), "auth", False),
])
async def test_http_errors_are_mapped_as_for_chat_completions(status: int, body: dict[str, object], kind: str, retryable: bool) -> None:
    _, error = await failure(Server().error(status, body, {"retry-after": "3"}))
    assert (error.kind, error.retryable, error.status_code) == (kind, retryable, status)
    assert error.retry_after == (3.0 if retryable else None)


@pytest.mark.parametrize(("code", "message", "kind", "retryable"), [
    ("rate_limit_exceeded", "Rate limit reached for gpt-4.1 on tokens per min.", "rate_limit", True),
    ("server_error", "The server had an error while processing your request.", "server", True),
    ("context_length_exceeded", "Your input exceeds the context window of this model.", "context_length", False),
    ("invalid_prompt", "Invalid prompt: your prompt was flagged.", "bad_request", False),
])
async def test_a_failed_response_mid_stream_is_a_model_error_of_its_kind(code: str, message: str, kind: str, retryable: bool) -> None:
    head = responses_events(turn("half"), "gpt-4.1")[:5]  # created ... the first text delta
    events, error = await failure(Server().stream(sse([*head, responses_failed(code, message)])))

    assert text_of(events) == "half"
    assert (error.kind, error.retryable) == (kind, retryable)
    assert message in str(error) and "mid-stream" in str(error)


async def test_an_error_event_is_a_model_error_of_its_kind() -> None:
    head = responses_events(turn("half"), "gpt-4.1")[:2]
    error_event = {"type": "error", "sequence_number": 2, "code": "rate_limit_exceeded", "message": "Slow down.", "param": None}
    _, error = await failure(Server().stream(sse([*head, error_event])))
    assert (error.kind, error.retryable) == ("rate_limit", True)


async def test_an_error_event_with_a_nested_error_is_classified_too() -> None:
    nested = {"type": "error", "sequence_number": 1, "error": {"type": "server_error", "code": "server_error", "message": "Oops."}}
    _, error = await failure(Server().stream(sse([nested])))
    assert (error.kind, error.retryable) == ("server", True)


async def test_a_stream_that_ends_before_the_response_completes_is_a_stream_cut() -> None:
    events = responses_events(turn("partial answer"), "gpt-4.1")
    partial, error = await failure(Server().stream(sse(events[:-1])))
    assert text_of(partial) == "partial answer"
    assert (error.kind, error.retryable) == ("stream_cut", True)


async def test_a_connection_lost_mid_stream_is_a_retryable_stream_cut_after_the_partial_output() -> None:
    body = responses_sse(turn("partial answer that never finishes"), "gpt-4.1")
    events, error = await failure(Server().stream(body, cut_after=body.index(b"never")))
    assert text_of(events).startswith("partial")
    assert (error.kind, error.retryable) == ("stream_cut", True)


async def test_a_connection_lost_after_the_response_completed_loses_nothing() -> None:
    body = responses_sse(turn("all of it"), "gpt-4.1")
    events = await collect(model_for(Server().stream(body, cut_after=len(body))).stream(HELLO))
    assert text_of(events) == "all of it" and events[-1].stop_reason == "end_turn"


# ---------------------------------------------------------------- the strict fake


GOOD_INPUT = [
    {"role": "user", "content": "hi"},
    {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "5"},
]
TOOLS = [{"type": "function", "name": "add", "parameters": {"type": "object"}, "strict": False}]


@pytest.mark.parametrize(("change", "wording"), [
    ({"stop": ["x"]}, "Unknown parameter: 'stop'."),
    ({"input": None}, "Missing required parameter: 'input'."),
    ({"tool_choice": {"type": "function", "function": {"name": "add"}}}, "Unknown parameter: 'tool_choice.function'."),
    ({"tool_choice": {"type": "function", "name": "mul"}}, "Tool choice 'function' not found in 'tools' parameter."),
    ({"tool_choice": "any"}, "Supported values are: 'none', 'auto', and 'required'."),
    ({"tools": [{"type": "function", "function": {"name": "add"}}]}, "Missing required parameter: 'tools[0].name'."),
    ({"tools": [{"type": "function", "name": "add", "parameters": {"type": "object", "properties": {"a": {}}}}]}, "'additionalProperties' is required"),
    ({"input": [GOOD_INPUT[0], GOOD_INPUT[2]]}, "No tool call found for function call output with call_id c1."),
    ({"input": [*GOOD_INPUT[:2], {"role": "user", "content": "and?"}, GOOD_INPUT[2]]}, "No tool output found for function call c1."),
    ({"input": [{"role": "tool", "content": "x"}]}, "Invalid value: 'tool'."),
    ({"input": [{"type": "tool_result", "content": "x"}]}, "Invalid value: 'tool_result'."),
    ({"input": [{"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}]}, "Supported values are: 'output_text' and 'refusal'."),
    ({"input": [{"type": "reasoning", "encrypted_content": "e"}]}, "Missing required parameter: 'input[0].summary'."),
    ({"input": [{"type": "reasoning", "summary": []}]}, "Missing required parameter: 'input[0].id'."),
    ({"input": [{"type": "reasoning", "id": "rs_1", "summary": []}, *GOOD_INPUT[1:]]}, "Item 'rs_1' of type 'reasoning' was provided without its required following item."),
    ({"include": ["reasoning.summary"]}, "Invalid value: 'reasoning.summary'."),
    ({"max_output_tokens": 5}, "Expected a value >= 16"),
])
def test_the_fake_endpoint_refuses_what_the_real_api_refuses(change: dict[str, Any], wording: str) -> None:
    body = {"model": "gpt-4.1", "input": GOOD_INPUT, "tools": TOOLS, "stream": True}
    check_responses_request(body)
    body.update(change)
    if body.get("input") is None:
        del body["input"]
    with pytest.raises(StrictAPIError) as caught:
        check_responses_request(body)
    assert caught.value.status == 400 and wording in caught.value.message
