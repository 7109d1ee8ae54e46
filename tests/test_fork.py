"""Forking a session at a turn, running the rest another way, and diffing the two runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_kernel import Agent, EventType, TerminationReason, tool
from agent_kernel.errors import UserError
from agent_kernel.journal import diff_runs, read_events, read_header
from agent_kernel.messages import Message, TextBlock
from agent_kernel.models._base import ModelRequest
from agent_kernel.models.scripted import ScriptedModel, tool_call

from .helpers import make_agent


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@tool(read_only=True)
def mul(a: int, b: int) -> int:
    """Multiplies two integers."""
    return a * b


async def original(tmp_path: Path) -> tuple[Agent, ScriptedModel]:
    """A finished three-turn run: add, add again, answer."""
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), tool_call("add", {"a": 3, "b": 4}), "1+2=3 and 3+4=7."])
    agent = make_agent(model, [add], journal=tmp_path / "original.jsonl", system="You add.")
    await agent.run("add some numbers")
    return agent, model


async def test_a_fork_resends_the_turn_it_was_made_at_to_its_new_model(tmp_path: Path) -> None:
    agent, model = await original(tmp_path)
    new_model = ScriptedModel(["Only 1+2=3, then."])
    fork = agent.fork(at=1, model=new_model, journal=tmp_path / "fork.jsonl")
    result = await fork.continue_run()
    # The new model saw exactly what the original saw at the start of turn 1.
    assert new_model.requests[0].messages == model.requests[1].messages
    assert new_model.requests[0].system == "You add."
    assert result.text == "Only 1+2=3, then." and result.termination_reason is TerminationReason.END_TURN
    assert fork.history[-1].turn_counter == 1
    assert agent.messages[-1].text == "1+2=3 and 3+4=7."  # the original is untouched


async def test_a_fork_journal_records_where_it_came_from_and_resumes_to_the_same_conversation(tmp_path: Path) -> None:
    agent, _ = await original(tmp_path)
    turn = agent.history[1]
    fork = agent.fork(at=turn.turn_id, model=ScriptedModel(["Done differently."]), journal=tmp_path / "fork.jsonl")
    await fork.continue_run()
    fork.close()
    header = read_header(tmp_path / "fork.jsonl")
    assert header is not None and header["session_id"] == fork.session_id
    run_id = read_events(tmp_path / "original.jsonl")[0].run_id
    assert header["forked_from"] == {"session_id": agent.session_id, "run_id": run_id, "turn_id": turn.turn_id, "iteration": 1}
    assert fork.forked_from == header["forked_from"]
    resumed = Agent.resume(tmp_path / "fork.jsonl", model=ScriptedModel([]), journal=None, context=None)
    assert resumed.messages == fork.messages and resumed.forked_from == header["forked_from"]


async def test_a_fork_can_run_with_other_tools_and_options(tmp_path: Path) -> None:
    agent, _ = await original(tmp_path)
    new_model = ScriptedModel([tool_call("mul", {"a": 3, "b": 4}), "3*4=12."])
    fork = agent.fork(at=1, model=new_model, journal=None, tools=[add, mul], system="You multiply.", model_options={"temperature": 0})
    result = await fork.continue_run()
    assert new_model.requests[0].system == "You multiply." and new_model.requests[0].options == {"temperature": 0}
    assert [t.name for t in new_model.requests[0].tools] == ["add", "mul"]
    assert new_model.requests[1].messages[-1].tool_results[0].content == "12"
    assert result.text == "3*4=12."


async def test_a_fork_can_replace_one_tool_result(tmp_path: Path) -> None:
    agent, model = await original(tmp_path)
    first_call = model.requests[1].messages[-1].tool_results[0].tool_use_id
    new_model = ScriptedModel(["So 1+2 is 42."])
    fork = agent.fork(at=1, model=new_model, journal=tmp_path / "fork.jsonl", replace_result={first_call: "42"})
    await fork.continue_run()
    sent = new_model.requests[0].messages[-1].tool_results[0]
    assert (sent.content, sent.is_error) == ("42", False)
    fork.close()
    journaled = [e.data["content"] for e in read_events(tmp_path / "fork.jsonl") if e.type is EventType.TOOL_RESULT]
    assert journaled == ["42"]


async def test_forking_at_the_first_turn_resends_the_prompt(tmp_path: Path) -> None:
    agent, _ = await original(tmp_path)
    new_model = ScriptedModel(["No tools needed."])
    await agent.fork(at=0, model=new_model, journal=None).continue_run()
    assert new_model.requests[0].messages == (Message.user("add some numbers"),)


async def test_forking_at_a_turn_that_does_not_exist_says_which_exist(tmp_path: Path) -> None:
    agent, _ = await original(tmp_path)
    with pytest.raises(UserError, match="0, 1, 2"):
        agent.fork(at=7, journal=None)
    with pytest.raises(UserError, match="call_nope"):
        agent.fork(at=1, journal=None, replace_result={"call_nope": "x"})


async def test_diff_runs_starts_at_the_first_divergence_and_shows_both_sides(tmp_path: Path) -> None:
    agent, _ = await original(tmp_path)
    fork = agent.fork(at=1, model=ScriptedModel([tool_call("add", {"a": 30, "b": 40}), "30+40=70."]), journal=tmp_path / "fork.jsonl")
    await fork.continue_run()
    df = diff_runs(tmp_path / "original.jsonl", fork.journal)
    assert df.attrs["first_divergence"] == 1
    assert list(df.index) == [1, 2] and not df["same"].any()
    assert df.loc[1, "a_tool_calls"] == ['add({"a": 3, "b": 4})'] and df.loc[1, "b_tool_calls"] == ['add({"a": 30, "b": 40})']
    assert (df.loc[1, "a_results"], df.loc[1, "b_results"]) == (["7"], ["70"])
    assert (df.loc[2, "a_text"], df.loc[2, "b_text"]) == ("1+2=3 and 3+4=7.", "30+40=70.")
    assert {"a_tokens", "b_tokens", "a_cost_usd", "b_cost_usd", "a_duration_s", "b_duration_s"} <= set(df.columns)
    everything = diff_runs(agent, fork, all_turns=True)
    assert list(everything.index) == [0, 1, 2] and bool(everything.loc[0, "same"])


async def test_diff_runs_of_two_runs_that_agree_is_empty(tmp_path: Path) -> None:
    agent, _ = await original(tmp_path)
    fork = agent.fork(at=1, model=ScriptedModel([tool_call("add", {"a": 3, "b": 4}), "1+2=3 and 3+4=7."]), journal=None)
    await fork.continue_run()
    df = diff_runs(agent, fork)
    assert df.attrs["first_divergence"] is None and df.empty


async def test_diff_runs_shows_a_turn_only_one_side_took(tmp_path: Path) -> None:
    agent, _ = await original(tmp_path)
    fork = agent.fork(at=1, model=ScriptedModel(["Stopping early."]), journal=None)
    await fork.continue_run()
    df = diff_runs(agent, fork)
    assert list(df.index) == [1, 2]
    assert df.loc[2, "a_text"] == "1+2=3 and 3+4=7." and df.loc[2, "b_text"] is None and df.loc[2, "b_tokens"] is None


def test_continue_run_sync_runs_a_fork_from_synchronous_code(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"])
    agent = make_agent(model, [add])
    agent.run_sync("1+2?")
    fork = agent.fork(at=1, model=ScriptedModel(["three"]), journal=None)
    assert fork.continue_run_sync().text == "three"


def test_a_fork_that_cannot_be_made_leaves_no_journal_behind_and_names_a_mistyped_setting(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(["one", "two"]), journal=f"{tmp_path}/runs/", working_dir=tmp_path)
    agent.run_sync("hi")
    with pytest.raises(UserError, match="fork\\(\\) got 'max_iteration', which Agent does not take. Did you mean 'max_iterations'"):
        agent.fork(at=0, max_iteration=3)
    for bad in ({"max_iterations": 0}, {"model": "no-such-model"}):
        with pytest.raises(UserError):
            agent.fork(at=0, journal=f"{tmp_path}/forks/", **bad)
    assert not list((tmp_path / "forks").glob("*.jsonl"))  # the journals made for them are gone
    fork = agent.fork(at=0, journal=f"{tmp_path}/forks/")
    assert [p.name for p in (tmp_path / "forks").glob("*.jsonl")] == [f"{fork.session_id}.jsonl"]


def test_a_fork_has_every_setting_of_its_agent_that_it_does_not_override(tmp_path: Path) -> None:
    from agent_kernel import Hooks
    from agent_kernel.agent import AgentSettings

    namespace = {"x": 1}
    agent = Agent(
        ScriptedModel(["one", "two"]), [add], "You add.", 5, journal=None, context=None, hooks=Hooks(), working_dir=tmp_path,
        max_retries=1, retry_base_delay=0.5, retry_max_delay=2.0, stall_timeout=9.0, on_stall="abort", max_parallel_tools=2,
        model_options={"temperature": 0}, tool_result_limit=500, on_tool_error="cancel", max_cost=0.25, name="adder",
        otel=True, keep_events=7, on_state_change=lambda old, new: None, memory=True, reminders=False, namespace=namespace,
    )
    agent.run_sync("hi")
    fork = agent.fork(at=0, journal=None, system="You add twice.")
    carried, forked = AgentSettings.carried(agent), AgentSettings.carried(fork)
    assert forked.pop("system") == "You add twice." and carried.pop("system") == "You add."
    assert forked == carried
    assert fork.events.keep == 7 and fork.memory.namespace is namespace and fork.max_cost == 0.25


def test_a_subclass_that_takes_its_own_settings_forks_with_them(tmp_path: Path) -> None:
    class Tinted(Agent):
        def __init__(self, *args: object, colour: str = "red", **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            self.colour = colour

    agent = Tinted(ScriptedModel(["one", "two"]), journal=tmp_path / "a.jsonl")
    agent.run_sync("hi")
    fork = agent.fork(at=0, colour="blue", journal=tmp_path / "f.jsonl")
    assert isinstance(fork, Tinted) and fork.colour == "blue"


async def test_a_request_a_hook_replaced_is_shown_by_resume_fork_and_diff_runs(tmp_path: Path) -> None:
    from agent_kernel import Hooks

    def narrower(ctx):  # the second call is sent a narrower question than the conversation holds
        if ctx.turn_state.turn_counter != 1:
            return None
        request = ctx.data["request"]
        return ModelRequest((*request.messages, Message("assistant", (TextBlock("Noted."),)), Message.user("Only add 3 and 4.")), "Be terse.")

    hooks = Hooks()
    hooks.on("before_llm_call", narrower)
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), tool_call("add", {"a": 3, "b": 4}), "1+2=3 and 3+4=7."])
    agent = make_agent(model, [add], journal=tmp_path / "original.jsonl", system="You add.", hooks=hooks)
    await agent.run("add some numbers")
    sent = model.requests[1]
    [replaced] = agent.replaced_requests
    assert replaced.messages == sent.messages and replaced.system == "Be terse." and replaced.turn_id == agent.history[1].turn_id
    agent.close()

    resumed = Agent.resume(tmp_path / "original.jsonl", model=ScriptedModel([]), tools=[add])
    assert [r.messages for r in resumed.replaced_requests] == [sent.messages]  # read back from the journal
    resumed.close()

    # A fork after that turn keeps what it was sent; one without the hook, made at it, differs there.
    later = agent.fork(at=2, model=ScriptedModel(["1+2=3 and 3+4=7."]), journal=None)
    assert [r.messages for r in later.replaced_requests] == [sent.messages]
    plain = agent.fork(at=1, model=ScriptedModel([tool_call("add", {"a": 3, "b": 4}), "1+2=3 and 3+4=7."]), journal=None, hooks=None)
    await plain.continue_run()
    df = diff_runs(tmp_path / "original.jsonl", plain)
    assert df.attrs["first_divergence"] == 1
    assert df.loc[1, "a_sent"] == "system: Be terse.\nassistant: Noted.\nuser: Only add 3 and 4." and df.loc[1, "b_sent"] == ""
    assert df.loc[1, "a_tool_calls"] == df.loc[1, "b_tool_calls"]  # the same answer: only what was sent differs


async def test_a_fork_keeps_the_pinned_context(tmp_path: Path) -> None:
    from agent_kernel.context import ContextManager, Priority

    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3."])
    agent = make_agent(model, [add], journal=tmp_path / "original.jsonl", system="You add.", context=ContextManager())
    agent.context.add("rules", "Show your working.", priority=Priority.HIGH, truncatable=False)
    await agent.run("add")
    new_model = ScriptedModel(["Working shown."])
    fork = agent.fork(at=1, model=new_model, journal=None)
    await fork.continue_run()
    assert fork.context.items == {"rules": "Show your working."}
    assert '<context name="rules">\nShow your working.\n</context>' in new_model.requests[0].system
