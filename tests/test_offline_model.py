"""The offline model: a keyless, deterministic stand-in that explains itself and exercises tools."""

from __future__ import annotations

import json

from agent_kernel import Agent, EventType, tool
from agent_kernel.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models.base import MessageEnd, ModelRequest, TextDelta, ToolCallEnd, ToolSpec
from agent_kernel.models.offline import OfflineModel, example_arguments
from agent_kernel.state import TerminationReason

from .helpers import of_type
from .sse import collect

WEATHER = ToolSpec("weather", "Weather in a city.", {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 3}, "unit": {"enum": ["C", "F"]}},
    "required": ["city", "unit"],
})
CLOCK = ToolSpec("clock", "The time.", {"type": "object", "properties": {}})


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_without_tools_it_says_what_it_is_and_how_to_configure_a_real_model() -> None:
    events = await collect(OfflineModel(delay=0).stream(ModelRequest((Message.user("What is 2+2?"),))))

    answer = text_of(events)
    assert "offline model" in answer and "What is 2+2?" in answer
    for variable in ("AGENT_KERNEL_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        assert variable in answer
    assert sum(isinstance(e, TextDelta) for e in events) > 5  # streamed in small chunks
    assert isinstance(events[-1], MessageEnd) and events[-1].stop_reason == "end_turn"
    assert events[-1].usage.input_tokens > 0 and events[-1].model == "offline"


async def test_it_calls_the_tools_the_prompt_names_with_arguments_from_their_schemas() -> None:
    request = ModelRequest((Message.user("Use weather please"),), tools=(WEATHER, CLOCK))
    events = await collect(OfflineModel(delay=0).stream(request))

    calls = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("weather", {"city": "example", "unit": "C"})]
    assert events[-1].stop_reason == "tool_use"


async def test_with_no_tool_named_it_calls_each_tool_once() -> None:
    events = await collect(OfflineModel(delay=0).stream(ModelRequest((Message.user("go"),), tools=(WEATHER, CLOCK))))
    assert [e.name for e in events if isinstance(e, ToolCallEnd)] == ["weather", "clock"]


async def test_once_its_tools_have_answered_it_summarises_their_results() -> None:
    conversation = (
        Message.user("Use weather and clock"),
        Message("assistant", (TextBlock("Calling."), ToolUseBlock("c1", "weather", {}), ToolUseBlock("c2", "clock", {}))),
        Message("user", (ToolResultBlock("c1", "Sunny, 21 C"), ToolResultBlock("c2", "no clock here", is_error=True))),
    )
    events = await collect(OfflineModel(delay=0).stream(ModelRequest(conversation, tools=(WEATHER, CLOCK))))

    summary = text_of(events)
    assert "weather returned: Sunny, 21 C" in summary and "clock failed: no clock here" in summary
    assert not any(isinstance(e, ToolCallEnd) for e in events)
    assert events[-1].stop_reason == "end_turn"


async def test_the_same_request_gives_the_same_stream() -> None:
    request = ModelRequest((Message.user("go"),), tools=(WEATHER,))
    assert await collect(OfflineModel(delay=0).stream(request)) == await collect(OfflineModel(delay=0).stream(request))


def test_example_arguments_follow_refs_unions_arrays_and_nested_objects() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "properties": {
            "where": {"$ref": "#/$defs/Point"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "verbose": {"type": "boolean"},
            "optional": {"type": "string"},
        },
        "required": ["where", "tags", "limit", "verbose"],
    }
    assert example_arguments(schema) == {"where": {"x": 1.0}, "tags": ["example"], "limit": 1, "verbose": True}


@tool
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@tool
def shout(text: str) -> str:
    """Upper-cases text."""
    return text.upper()


async def test_an_agent_on_the_offline_model_runs_its_tools_through_the_loop_and_summarises() -> None:
    agent = Agent(model="offline", tools=[add, shout], journal=None, permissions="bypass")
    agent.model.delay = 0  # type: ignore[attr-defined]
    result = await agent.run("please add")

    assert result.termination_reason is TerminationReason.END_TURN
    assert [(r["name"], r["content"], r["is_error"]) for r in result.tool_calls] == [("add", "2", False)]
    assert "add returned: 2" in result.text and "ANTHROPIC_API_KEY" in result.text
    assert len(of_type(result.events, EventType.LLM_COMPLETE)) == 2
    assert result.usage.input_tokens > 0
