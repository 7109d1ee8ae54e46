"""An Agent's loop settings live in one LoopConfig, which every run copies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_kernel import Agent, EventType, TerminationReason
from agent_kernel.errors import UserError
from agent_kernel.models.scripted import ScriptedModel


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
    ],
)
def test_a_setting_of_the_wrong_kind_is_refused_when_the_agent_is_made(setting: str, value: object, takes: str) -> None:
    settings = {"journal": None, setting: value}
    with pytest.raises(UserError) as refused:
        Agent(ScriptedModel(["Hi."]), **settings)
    assert str(refused.value).startswith(f"{setting}={value!r} is not accepted: {setting} takes") and takes in str(refused.value)


def test_a_loop_setting_assigned_later_is_checked_the_same_way() -> None:
    agent = Agent(ScriptedModel(["Hi."]), journal=None)
    with pytest.raises(UserError, match="stall_timeout=0 is not accepted"):
        agent.stall_timeout = 0
    agent.stall_timeout = None  # never time out: allowed
    assert agent.run_sync("hello").text == "Hi."


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
