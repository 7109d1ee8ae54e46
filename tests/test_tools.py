"""@tool: schemas from type hints, descriptions from docstrings, flags, invocation."""

from __future__ import annotations

import asyncio
from typing import Literal

import pydantic
import pytest

from agent_kernel import ToolContext, tool
from agent_kernel.errors import UnknownTool
from agent_kernel.models.scripted import ScriptedModel, tool_call
from agent_kernel.tools._registry import ToolRegistry, as_tool

from .helpers import make_agent


@tool
def search(query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast") -> list[str]:
    """Searches the notes.

    Args:
        query: what to look for.
        limit: how many results
            at most.
        mode: how hard to look.
    """
    return [query] * limit


def test_schema_comes_from_type_hints() -> None:
    params = search.spec.parameters
    assert params["required"] == ["query"]
    assert params["properties"]["limit"]["type"] == "integer"
    assert params["properties"]["limit"]["default"] == 5
    assert params["properties"]["mode"]["enum"] == ["fast", "deep"]


def test_descriptions_come_from_the_docstring_including_each_parameter() -> None:
    assert search.description == "Searches the notes."
    props = search.spec.parameters["properties"]
    assert props["query"]["description"] == "what to look for."
    assert props["limit"]["description"] == "how many results at most."


def test_sphinx_style_parameter_docs_are_read_too() -> None:
    @tool
    def f(x: int) -> int:
        """Doubles.

        :param x: the number
        """
        return 2 * x

    assert f.spec.parameters["properties"]["x"]["description"] == "the number"
    assert f.description == "Doubles."


def test_flags_default_from_read_only() -> None:
    @tool(read_only=True, timeout=2.5)
    def look() -> str:
        """Looks."""
        return "ok"

    assert look.read_only and look.concurrency_safe and look.timeout == 2.5
    assert not search.read_only and not search.concurrency_safe


def test_context_parameter_is_not_in_the_schema_and_receives_progress() -> None:
    reports: list[tuple[str, float | None]] = []

    @tool
    async def work(n: int, ctx: ToolContext) -> str:
        """Works."""
        ctx.progress("half", 0.5)
        return f"did {n}"

    assert "ctx" not in work.spec.parameters["properties"]
    context = ToolContext("c1", "work", _report=lambda m, f: reports.append((m, f)))
    assert asyncio.run(work.invoke({"n": 2}, context)) == "did 2"
    assert reports == [("half", 0.5)]


def test_validate_converts_and_rejects() -> None:
    assert search.validate({"query": "q", "limit": "3"})["limit"] == 3
    with pytest.raises(pydantic.ValidationError):
        search.validate({"limit": 3})


def test_results_that_are_not_strings_become_json() -> None:
    out = asyncio.run(search.invoke({"query": "a", "limit": 2, "mode": "fast"}, ToolContext("c", "search")))
    assert out == '["a", "a"]'


def test_a_tool_is_still_a_plain_function() -> None:
    assert search("x", limit=1) == ["x"]


def test_plain_functions_become_tools_and_unknown_names_suggest_builtins() -> None:
    def shout(text: str) -> str:
        """Shouts."""
        return text.upper()

    registry = ToolRegistry([shout])
    assert registry.names == ["shout"] and registry.get("shout").description == "Shouts."
    with pytest.raises(UnknownTool, match="Did you mean 'read_file'"):
        as_tool("read_fil")


async def test_a_sync_tool_may_take_an_argument_called_name() -> None:
    @tool
    def greet(name: str) -> str:
        """Greets someone."""
        return f"hello {name}"

    result = await make_agent(ScriptedModel([tool_call("greet", {"name": "Ada"}), "done"]), [greet], permissions="bypass").run("go")
    assert [c["content"] for c in result.tool_calls] == ["hello Ada"]
