"""The offline model: a keyless, deterministic stand-in that explains itself and exercises tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_kernel import Agent, EventType, tool
from agent_kernel.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models._base import MessageEnd, ModelRequest, TextDelta, ToolCallEnd, ToolSpec
from agent_kernel.models._offline import OfflineModel, example_arguments
from agent_kernel.runtime._state import TerminationReason

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


async def test_it_calls_the_tool_the_prompt_names_with_arguments_from_the_prompt_and_schema() -> None:
    request = ModelRequest((Message.user("Use weather for 'Paris' in F"),), tools=(WEATHER, CLOCK))
    events = await collect(OfflineModel(delay=0).stream(request))

    calls = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("weather", {"city": "Paris", "unit": "F"})]
    assert events[-1].stop_reason == "tool_use"


async def test_a_required_argument_the_prompt_does_not_give_is_named_not_invented() -> None:
    events = await collect(OfflineModel(delay=0).stream(ModelRequest((Message.user("What is the weather?"),), tools=(WEATHER, CLOCK))))

    assert not any(isinstance(e, ToolCallEnd) for e in events)
    answer = text_of(events)
    assert "weather" in answer and "`city`" in answer and "'example'" not in answer


async def test_with_no_tool_matching_it_answers_in_text_and_names_its_tools() -> None:
    events = await collect(OfflineModel(delay=0).stream(ModelRequest((Message.user("hello"),), tools=(WEATHER, CLOCK))))

    assert not any(isinstance(e, ToolCallEnd) for e in events)
    assert "weather, clock" in text_of(events) and events[-1].stop_reason == "end_turn"


async def test_once_its_tools_have_answered_it_answers_from_their_results() -> None:
    conversation = (
        Message.user("Use weather and clock"),
        Message("assistant", (TextBlock("Calling."), ToolUseBlock("c1", "weather", {}), ToolUseBlock("c2", "clock", {}))),
        Message("user", (ToolResultBlock("c1", "Sunny, 21 C"), ToolResultBlock("c2", "no clock here", is_error=True))),
    )
    events = await collect(OfflineModel(delay=0).stream(ModelRequest(conversation, tools=(WEATHER, CLOCK))))

    answer = text_of(events)
    assert "clock failed: no clock here" in answer and "weather worked" in answer
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


async def test_an_agent_on_the_offline_model_fills_numbers_from_the_prompt_and_answers_from_the_result() -> None:
    agent = Agent(model="offline", tools=[add, shout], journal=None, permissions="bypass")
    agent.model.delay = 0  # type: ignore[attr-defined]
    result = await agent.run("please add 2 and 40")

    assert result.termination_reason is TerminationReason.END_TURN
    assert [(r["name"], r["content"], r["is_error"]) for r in result.tool_calls] == [("add", "42", False)]
    assert "add returned: 42" in result.text and "offline model" in result.text
    assert len(of_type(result.events, EventType.LLM_COMPLETE)) == 2
    assert result.usage.input_tokens > 0


async def test_it_reads_the_file_the_prompt_names_and_lists_its_items(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.md").write_text("# To do\n\n- water the plants\n- [ ] call Ada\n")
    agent = Agent(model="offline", tools=["read_file"], journal=None, permissions="bypass", working_dir=tmp_path)
    agent.model.delay = 0  # type: ignore[attr-defined]
    result = await agent.run("What is on my to-do list in notes/todo.md?")

    assert [(r["name"], r["is_error"]) for r in result.tool_calls] == [("read_file", False)]
    assert "notes/todo.md lists:\n- water the plants\n- call Ada" in result.text


async def test_it_follows_a_short_plan_list_then_read_then_answer(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.md").write_text("- buy milk\n")
    (tmp_path / "notes" / "ideas.md").write_text("- fly\n")
    agent = Agent(model="offline", tools=["read_file", "list_files"], journal=None, permissions="bypass",
                  working_dir=tmp_path)
    agent.model.delay = 0  # type: ignore[attr-defined]
    result = await agent.run("What is in todo.md?")  # not at the top: it has to look for it

    assert [r["name"] for r in result.tool_calls] == ["read_file", "list_files", "read_file"]
    assert json.loads(agent.tool_calls_df()["arguments"].iloc[-1]) == {"path": "notes/todo.md"}
    assert "notes/todo.md lists:\n- buy milk" in result.text


async def test_arithmetic_in_the_prompt_becomes_code_for_a_python_like_tool() -> None:
    code = ToolSpec("python", "Runs Python code.", {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]})
    events = await collect(OfflineModel(delay=0).stream(ModelRequest((Message.user("What is 6 * 7?"),), tools=(code,))))
    assert [json.loads(e.arguments) for e in events if isinstance(e, ToolCallEnd)] == [{"code": "6 * 7"}]


@tool(read_only=True)
def multiply(a: float, b: float) -> float:
    """Multiplies two numbers."""
    return a * b


async def test_a_sum_in_the_prompt_goes_to_the_tool_that_adds_and_the_answer_is_its_result() -> None:
    agent = Agent("offline", tools=[multiply, add], journal=None, permissions="bypass")
    result = await agent.run("What is 2 + 3?")
    [call] = [e for e in result.events if e.type is EventType.TOOL_CALL_READY]
    assert call.data["name"] == "add" and call.data["arguments"] == {"a": 2, "b": 3}
    assert result.text.endswith("add returned: 5")
    product = await agent.run("And 4 * 2.5?")
    assert product.text.endswith("multiply returned: 10.0")


async def test_a_quoted_value_goes_to_the_argument_the_prompt_names_for_it(tmp_path: Path) -> None:
    agent = Agent("offline", tools=["write_file"], journal=None, working_dir=tmp_path, permissions="bypass")
    await agent.run("write 'hello' to 'restart_test.md'")
    assert (tmp_path / "restart_test.md").read_text() == "hello"
    await agent.run("Write content 'bye' into the file 'b.md'")
    assert (tmp_path / "b.md").read_text() == "bye"


async def test_what_the_session_adds_to_a_prompt_is_neither_followed_nor_echoed() -> None:
    prompt = "Which region sold more?<system-reminder>Variables changed: sales (DataFrame 4x2)</system-reminder>"
    said = text_of(await collect(OfflineModel(delay=0).stream(ModelRequest((Message.user(prompt),)))))
    assert 'You said: "Which region sold more?"' in said and "system-re" not in said


# ---- notebook moves -----------------------------------------------------------------------------


async def test_offline_model_reads_the_notebook_adds_a_plot_runs_it_and_describes_the_figure(tmp_path: Path, monkeypatch: Any) -> None:
    import nbformat

    monkeypatch.chdir(tmp_path)  # the kernel's folder: code in the user's namespace reads files from there
    (tmp_path / "sales.csv").write_text("month,revenue,units\nJan,10,1\nFeb,14,2\nMar,9,3\n")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Sales")]
    nbformat.write(nb, tmp_path / "work.ipynb")
    agent = Agent("offline", tools=["read_notebook", "edit_notebook", "run_cell"], permissions="bypass",
                  working_dir=tmp_path, journal=None)
    agent.model.delay = 0
    agent.tool_extras.update(notebook_path="work.ipynb", namespace={})
    result = await agent.run("Load sales.csv and plot the revenue column.")
    calls = [e.data["name"] for e in result.events if e.type is EventType.TOOL_START]
    assert calls == ["read_notebook", "edit_notebook", "run_cell"]
    assert "a figure titled 'revenue by month' with x axis 'month' and y axis 'revenue'" in result.text
    cells = nbformat.read(tmp_path / "work.ipynb", as_version=4).cells
    assert "pd.read_csv('sales.csv')" in cells[1].source and cells[1].metadata["agent_kernel"]["action"] == "insert"
    assert any("image/png" in o.get("data", {}) for o in cells[1].outputs)


def test_offline_model_answers_a_fix_prompt_with_the_closest_key() -> None:
    from agent_kernel.models._offline_notebook import fix_answer

    prompt = ("The last notebook cell failed with KeyError: 'prices'. Explain.\n\n<notebook-data>\n"
              "The names it uses, as they are now:\n- sales: DataFrame (2, 1): price 0 1 1 2\n- total: not defined\n</notebook-data>")
    answer = fix_answer(prompt)
    assert answer is not None and "KeyError: 'prices'" in answer
    assert "'price'" in answer and "total" in answer
