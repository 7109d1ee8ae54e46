"""An Agent's settings: declared once (AgentSettings), checked when given, and the loop's kept in
one LoopConfig, which every run copies."""

from __future__ import annotations

import dataclasses
import inspect
import os
from pathlib import Path

import pytest

from agent_kernel import Agent, EventType, TerminationReason, tool
from agent_kernel.agent import AgentSettings
from agent_kernel.errors import UserError
from agent_kernel.models.scripted import ScriptedModel
from agent_kernel.runtime import LoopConfig


def test_loop_settings_set_on_the_agent_are_the_ones_its_next_run_uses() -> None:
    agent = Agent(ScriptedModel(["Hi."]), journal=None)
    agent.retry_max_delay = 2.0
    agent.stall_timeout = 5.0
    agent.model_options = {"max_tokens": 64}
    config = agent.loop_config()
    assert (config.retry_max_delay, config.stall_timeout, config.model_options) == (2.0, 5.0, {"max_tokens": 64})
    assert agent.config.retry_max_delay == 2.0  # one place holds them


def test_a_runs_copy_of_the_settings_cannot_change_the_agent() -> None:
    agent = Agent(ScriptedModel(["Hi."]), journal=None, model_options={"temperature": 0})
    config = agent.loop_config()
    config.model_options["temperature"] = 1
    config.stall_timeout = 1.0
    assert agent.model_options == {"temperature": 0} and agent.stall_timeout == 30.0


@pytest.mark.parametrize(
    ("setting", "value", "takes"),
    [
        ("tools", "read_file", "a list of tools"),
        ("max_iterations", "5", "a whole number of at least 1"),
        ("max_iterations", True, "a whole number of at least 1"),
        ("stall_timeout", -5, "above 0, or None"),
        ("max_parallel_tools", 0, "at least 1"),
        ("model_options", "x", "a dict of options"),
        ("system", 42, "a str, or None"),
        ("context", "bogus", "ContextManager"),
        ("hooks", "x", "Hooks()"),
        ("on_state_change", 1, "a function"),
        ("subagents", ["helper"], "a dict of name to Agent"),
        ("keep_events", "x", "a whole number of at least 0"),
        ("working_dir", 42, "a folder path"),
        ("session_id", 42, "a non-empty str"),
        ("journal", 42, "a file or folder path"),
        ("on_stall", "later", "'retry', 'abort' or 'fallback'"),
        ("on_tool_error", "stop", "'continue' (a failed call's siblings still run) or 'cancel'"),
        ("max_cost", -1, "a number of US dollars, at least 0"),
        ("retry_base_delay", "1s", "a number of seconds, at least 0"),
        ("model_options", {1: "x"}, "a dict of options"),
        ("otel", "yes", "True or False"),
        ("memory", 1, "True or False"),
        ("mcp", "time", "a list of MCP servers"),
        ("namespace", 42, "the notebook's variables"),
    ],
)
def test_a_setting_of_the_wrong_kind_is_refused_when_the_agent_is_made(setting: str, value: object, takes: str) -> None:
    settings = {"journal": None, setting: value}
    with pytest.raises(UserError) as refused:
        Agent(ScriptedModel(["Hi."]), **settings)
    assert str(refused.value).startswith(f"{setting}={value!r} is not accepted: {setting} takes") and takes in str(refused.value)
    # The message is the whole story: no validation error of the library underneath is chained to it.
    assert refused.value.__suppress_context__ and "pydantic" not in str(refused.value)


def test_a_loop_setting_assigned_later_is_checked_the_same_way() -> None:
    agent = Agent(ScriptedModel(["Hi."]), journal=None)
    with pytest.raises(UserError, match="stall_timeout=0 is not accepted"):
        agent.stall_timeout = 0
    agent.stall_timeout = None  # never time out: allowed
    assert agent.run_sync("hello").text == "Hi."


def test_every_setting_says_what_it_takes_or_is_checked_by_the_part_built_from_it() -> None:
    from pydantic import SkipValidation

    from agent_kernel.agent._settings import Takes

    for name, field in AgentSettings.model_fields.items():
        assert any(isinstance(item, Takes) or item is SkipValidation for item in field.metadata), name


def test_options_set_to_none_later_are_no_options() -> None:
    agent = Agent(ScriptedModel(["Hi."]), journal=None, model_options={"temperature": 0})
    agent.model_options = None
    assert agent.model_options == {} and agent.run_sync("hello").text == "Hi."


def test_no_tools_may_be_given_as_none() -> None:
    assert Agent(ScriptedModel(["Hi."]), tools=None, journal=None).tools.names == []


def test_a_journal_under_a_file_is_refused_at_once_and_one_that_cannot_be_opened_at_the_first_run(tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("a file")
    with pytest.raises(UserError, match="notes is a file, not a folder"):
        Agent(ScriptedModel(["Hi."]), journal=tmp_path / "notes" / "run.jsonl")
    (tmp_path / "locked").mkdir(mode=0o500)
    agent = Agent(ScriptedModel(["Hi."]), journal=tmp_path / "locked" / "sub" / "run.jsonl")
    if os.geteuid() == 0:  # root writes anywhere: a path under /proc cannot be made by anyone
        agent = Agent(ScriptedModel(["Hi."]), journal="/proc/agent-kernel-test/run.jsonl")
    # The run says so and ends (no bare OSError escapes run_sync), naming the way out.
    result = agent.run_sync("hello")
    assert result.termination_reason == TerminationReason.ERROR
    [error] = [e.data for e in result.events if e.type is EventType.ERROR]
    assert error["kind"] == "journal" and "cannot open the journal" in error["message"] and "journal=None" in error["message"]


@pytest.mark.parametrize(
    ("given", "meant"),
    [({"max_turns": 3}, "max_iterations (the magic's --max-turns)"), ({"stall_timout": 5}, "'stall_timeout'"), ({"mode": "plan"}, "permissions")],
)
def test_a_setting_agent_does_not_take_names_the_one_meant(given: dict[str, object], meant: str) -> None:
    with pytest.raises(UserError, match="which Agent does not take") as raised:
        Agent(ScriptedModel(["hi"]), journal=None, **given)  # type: ignore[arg-type]
    assert f"Did you mean {meant}" in str(raised.value) and "Agent's settings: tools, system, max_iterations" in str(raised.value)


def test_a_subclass_that_takes_its_own_keywords_judges_them_itself() -> None:
    class Tagged(Agent):
        def __init__(self, *args: object, tag: str = "", **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            self.tag = tag

    assert Tagged(ScriptedModel(["hi"]), journal=None, tag="x").tag == "x"


@tool(read_only=True)
def echo(text: str) -> str:
    """Returns the text."""
    return text


def test_the_first_four_settings_may_be_given_by_position() -> None:
    agent = Agent(ScriptedModel(["Hi."]), [echo], "Be brief.", 3, journal=None)
    assert (agent.tools.names, agent.system, agent.max_iterations) == (["echo"], "Be brief.", 3)


def test_more_settings_by_position_or_one_given_twice_says_how_to_pass_them() -> None:
    with pytest.raises(TypeError, match=r"takes at most 4 settings by position \(model, tools, system, max_iterations\) but 5 were given; pass the others by name"):
        Agent(ScriptedModel(["Hi."]), [echo], "Be brief.", 3, None)
    with pytest.raises(TypeError, match="got 'tools' both by position and by name; give it once"):
        Agent(ScriptedModel(["Hi."]), [echo], tools=[echo])


def test_help_shows_every_setting_with_its_default_and_what_it_is() -> None:
    parameters = inspect.signature(Agent).parameters
    assert list(parameters) == list(AgentSettings.model_fields)
    assert parameters["stall_timeout"].default == 30.0 and parameters["stall_timeout"].kind is inspect.Parameter.KEYWORD_ONLY
    doc = inspect.getdoc(Agent.__init__) or ""
    for name, field in AgentSettings.model_fields.items():
        assert field.description, f"{name} has no documentation"
        assert f"\n    {name}: " in doc


def test_a_loop_run_without_an_agent_has_the_defaults_an_agent_has() -> None:
    shared = [f for f in dataclasses.fields(LoopConfig) if f.name in AgentSettings.model_fields and f.name not in ("model", "tools")]
    assert len(shared) > 10
    for field in shared:
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        setting = AgentSettings.model_fields[field.name].default
        assert default == ({} if setting is None and field.name == "model_options" else setting), field.name


def test_every_loop_setting_reads_and_writes_the_agents_loop_config() -> None:
    agent = Agent(ScriptedModel(["Hi."]), journal=None)
    shared = [f.name for f in dataclasses.fields(LoopConfig) if f.name in AgentSettings.model_fields]
    for name in shared:
        assert getattr(agent, name) is getattr(agent.config, name), name
    agent.max_parallel_tools = 3
    assert agent.config.max_parallel_tools == 3
    with pytest.raises(UserError, match="max_parallel_tools=0 is not accepted"):
        agent.max_parallel_tools = 0
