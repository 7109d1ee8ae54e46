"""An Agent's loop settings live in one LoopConfig, which every run copies."""

from __future__ import annotations

from agent_kernel import Agent
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
