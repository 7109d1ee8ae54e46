"""Sub-agents: Agent.as_tool and the task tool, inside the parent's run, stream, journal and gate."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agent_kernel import Agent, AgentEvent, EventType, TerminationReason, tool
from agent_kernel.errors import UnknownTool, UserError
from agent_kernel.guard._approvals import Approval, ApprovalRequest
from agent_kernel.guard._permissions import Permissions
from agent_kernel.journal import read_events
from agent_kernel.messages import Message, TextBlock
from agent_kernel.models._base import ToolSpec
from agent_kernel.models.scripted import FunctionModel, ScriptedModel, fail, text, tool_call
from agent_kernel.team._subagents import Subagent

from .helpers import Overlap, make_agent, of_type, types


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def mathematician(responses: list[Any], **kwargs: Any) -> Agent:
    kwargs.setdefault("name", "math")
    return make_agent(ScriptedModel(responses), [add], system="You do arithmetic.", **kwargs)


def delegation(instructions: str, answer: str, *, call_id: str = "p1", agent: str = "math") -> ScriptedModel:
    """A parent model that delegates once through ``task`` and then answers."""
    return ScriptedModel([[text("Delegating."), tool_call("task", {"agent": agent, "instructions": instructions}, id=call_id)], answer])


def child_events(events: list[AgentEvent]) -> list[AgentEvent]:
    return [e for e in events if e.agent_id is not None]


async def test_as_tool_runs_the_sub_agent_with_its_own_prompt_tools_and_a_fresh_conversation() -> None:
    child_model = ScriptedModel([tool_call("add", {"a": 2, "b": 3}, id="c1"), "2 + 3 = 5"])
    child = make_agent(child_model, [add], system="You do arithmetic.", name="math")
    parent_model = ScriptedModel([tool_call("math", {"instructions": "Add 2 and 3."}, id="p1"), "The answer is 5."])
    parent = make_agent(parent_model, [child.as_tool(description="Does arithmetic.")], system="You lead.")
    parent.messages.append(Message.user("earlier question"))
    parent.messages.append(Message("assistant", (TextBlock("earlier answer"),)))

    result = await parent.run("What is 2 + 3?")

    assert result.text == "The answer is 5."
    assert parent_model.requests[1].messages[-1].tool_results[0].content == "2 + 3 = 5"
    first = child_model.requests[0]
    assert first.system == "You do arithmetic."
    assert [t.name for t in first.tools] == ["add"]
    assert first.messages == (Message.user("Add 2 and 3."),)  # nothing of the parent's conversation
    assert child.messages == [] and child.events == []  # each call is a conversation of its own
    assert result.tool_calls == [result.tool_calls[0]] and result.tool_calls[0]["name"] == "math"


async def test_child_turns_point_at_the_parent_turn_that_spawned_them() -> None:
    parent = make_agent(delegation("Add 2 and 3.", "Five."), subagents={"math": mathematician([tool_call("add", {"a": 2, "b": 3}, id="c1"), "5"])})
    result = await parent.run("go")

    starts = of_type(result.events, EventType.ITERATION_START)
    parent_turns = [e for e in starts if e.agent_id is None]
    child_turns = [e for e in starts if e.agent_id is not None]
    assert len(parent_turns) == 2 and len(child_turns) == 2
    spawner = parent_turns[0].turn_id
    assert child_turns[0].data["turn_state"]["parent_turn_id"] == spawner
    assert child_turns[1].parent_turn_id == child_turns[0].turn_id
    start = of_type(result.events, EventType.SUBAGENT_START)[0]
    assert start.data["parent_turn_id"] == spawner and start.data["parent_call_id"] == "p1"
    # The parent's own turn history holds only its own turns.
    assert [t.turn_id for t in parent.history] == [e.turn_id for e in parent_turns]


async def test_child_events_are_tagged_bracketed_and_in_seq_order_in_the_parent_stream_and_journal(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    child = mathematician([tool_call("add", {"a": 1, "b": 1}, id="c1"), "2"])
    parent = make_agent(delegation("1+1", "Two."), subagents={"math": child}, journal=path)

    streamed = [event async for event in parent.stream("go")]
    parent.close()

    seqs = [e.seq for e in streamed]
    assert seqs == list(range(1, len(streamed) + 1))
    assert [e.to_dict() for e in read_events(path)] == [e.to_dict() for e in streamed]
    assert streamed == parent.events

    inner = child_events(streamed)
    agent_id = inner[0].agent_id
    assert agent_id is not None and agent_id.startswith("math-")
    assert {e.agent_id for e in inner} == {agent_id}
    assert {e.run_id for e in inner} != {streamed[0].run_id}
    assert types(inner)[:2] == ["subagent_start", "run_start"] and types(inner)[-2:] == ["run_finish", "subagent_finish"]
    # Bracketed inside the parent's tool call: after its tool_start, before its tool_result.
    order = [(e.agent_id, e.type.value, e.data.get("call_id")) for e in streamed]
    assert order.index((None, "tool_start", "p1")) < order.index((agent_id, "subagent_start", None))
    assert order.index((agent_id, "subagent_finish", None)) < order.index((None, "tool_result", "p1"))
    start, finish = of_type(inner, EventType.SUBAGENT_START)[0], of_type(inner, EventType.SUBAGENT_FINISH)[0]
    assert start.data["agent_id"] == agent_id and start.data["name"] == "math" and start.data["parent_agent_id"] is None
    assert start.data["prompt"] == "1+1"
    assert finish.data["text"] == "2" and finish.data["reason"] == "end_turn" and finish.data["parent_call_id"] == "p1"


async def test_usage_and_cost_roll_up_into_the_parent() -> None:
    priced = "claude-sonnet-4-5"
    child = make_agent(ScriptedModel([tool_call("add", {"a": 1, "b": 2}, id="c1"), "3"], name=priced), [add], name="math")
    parent = make_agent(
        ScriptedModel([tool_call("task", {"agent": "math", "instructions": "1+2"}, id="p1"), "Three."], name=priced),
        subagents={"math": child},
    )
    result = await parent.run("go")

    completes = of_type(result.events, EventType.LLM_COMPLETE)
    own = [e for e in completes if e.agent_id is None]
    theirs = [e for e in completes if e.agent_id is not None]
    assert len(own) == 2 and len(theirs) == 2
    for key in ("input_tokens", "output_tokens"):
        assert getattr(result.usage, key) == sum(e.data["usage"][key] for e in completes)
    child_cost = sum(e.data["cost_usd"] for e in theirs)
    assert child_cost > 0
    assert result.cost_usd == pytest.approx(sum(e.data["cost_usd"] for e in completes))
    finish = of_type(result.events, EventType.SUBAGENT_FINISH)[0].data
    assert finish["cost_usd"] == pytest.approx(child_cost)
    assert finish["usage"]["input_tokens"] == sum(e.data["usage"]["input_tokens"] for e in theirs)
    # Turns and tool calls stay the parent's own; model calls include the child's.
    assert result.stats.turns == 2 and result.stats.tool_calls == 1 and result.stats.llm_calls == 4
    assert parent.stats.input_tokens == result.usage.input_tokens


writes: list[str] = []


@tool
def record(note: str) -> str:
    """Records a note (changes state, so it asks for approval)."""
    writes.append(note)
    return "recorded"


async def test_a_child_in_plan_mode_stays_read_only_inside_a_parent_that_would_ask() -> None:
    writes.clear()
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval.approve()

    child = make_agent(ScriptedModel([tool_call("record", {"note": "hello"}, id="c1"), "Noted."]), [record], name="scribe", permissions="plan")
    parent = make_agent(delegation("Note hello.", "Done.", agent="scribe"), subagents={"scribe": child}, permissions="default", approver=approver)

    result = await parent.run("go")

    # The child's stricter mode holds inside it: refused, nobody asked, nothing written.
    assert asked == [] and writes == []
    (decision,) = of_type(result.events, EventType.APPROVAL_DECISION)
    assert decision.agent_id is not None and decision.data["decision"] == "reject" and "plan" in decision.data["reason"]
    (refused,) = [e.data for e in of_type(result.events, EventType.TOOL_RESULT) if e.data["name"] == "record"]
    assert refused["is_error"] and "Refused in plan mode" in refused["content"]


async def test_a_child_in_bypass_mode_is_still_decided_by_the_parent_approver() -> None:
    writes.clear()
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval.approve()

    child = make_agent(ScriptedModel([tool_call("record", {"note": "hello"}, id="c1"), "Noted."]), [record], name="scribe", permissions="bypass")
    parent = make_agent(delegation("Note hello.", "Done.", agent="scribe"), subagents={"scribe": child}, permissions="default", approver=approver)

    result = await parent.run("go")

    assert [(r.tool, r.arguments) for r in asked] == [("record", {"note": "hello"})]
    assert writes == ["hello"]
    decisions = of_type(result.events, EventType.APPROVAL_DECISION)
    assert len(decisions) == 1 and decisions[0].agent_id is not None and decisions[0].data["decided_by"] == "callback"


async def test_a_childs_own_deny_rule_holds_inside_a_bypassed_parent() -> None:
    writes.clear()
    child = make_agent(ScriptedModel([tool_call("record", {"note": "hello"}, id="c1"), "Noted."]), [record], name="scribe",
                       permissions=Permissions(deny=["record"]))
    parent = make_agent(delegation("Note hello.", "Done.", agent="scribe"), subagents={"scribe": child}, permissions="bypass")

    result = await parent.run("go")

    assert writes == []
    (refused,) = [e.data for e in of_type(result.events, EventType.TOOL_RESULT) if e.data["name"] == "record"]
    assert refused["is_error"] and "deny 'record'" in refused["content"] and "sub-agent's own permissions" in refused["content"]


async def test_a_person_answers_a_child_approval_through_the_parent_broker() -> None:
    writes.clear()
    child = make_agent(ScriptedModel([tool_call("record", {"note": "x"}, id="c1"), "Refused, fine."]), [record], name="scribe")
    parent = make_agent(delegation("Note x.", "Understood.", agent="scribe"), subagents={"scribe": child}, permissions="default")
    broker = parent.approvals
    broker.interactive = True
    seen: list[str] = []

    def click(pending: Any) -> None:
        seen.append(pending.request.tool)
        broker.resolve(pending.call_id, Approval.reject("not now"))

    broker.subscribe(click)
    result = await parent.run("go")

    assert seen == ["record"] and writes == []
    child_result = [e for e in of_type(result.events, EventType.TOOL_RESULT) if e.agent_id is not None][0]
    assert child_result.data["is_error"] and "not now" in child_result.data["content"]
    assert broker.pending == []


async def test_cancelling_the_parent_cancels_the_child_and_both_record_it() -> None:
    child = mathematician([[text("thinking "), text("forever", delay=30)]])
    parent = make_agent(delegation("Take your time.", "never"), subagents={"math": child})
    events: list[AgentEvent] = []

    async def consume() -> None:
        async for event in parent.stream("go"):
            events.append(event)
            if event.agent_id is not None and event.type is EventType.TEXT_DELTA:
                parent.cancel("the user pressed stop")

    await asyncio.wait_for(consume(), 10)  # the child alone would take 30 s

    inner = child_events(events)
    assert types(inner)[-3:] == ["cancelled", "run_finish", "subagent_finish"]
    assert inner[-3].data["reason"] == "the user pressed stop"
    assert inner[-2].data["reason"] == "user_interrupt" and inner[-1].data["reason"] == "user_interrupt"
    assert types(events)[-2:] == ["cancelled", "run_finish"] and events[-1].agent_id is None
    assert events[-1].data["reason"] == "user_interrupt"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    # The parent's history stays valid: the delegation got a synthetic result.
    closing = parent.messages[-1].tool_results[0]
    assert closing.tool_use_id == "p1" and closing.is_error


async def test_cancelling_the_parent_while_a_child_waits_for_approval_drops_the_request() -> None:
    child = make_agent(ScriptedModel([tool_call("record", {"note": "x"}, id="c1"), "never"]), [record], name="scribe")
    parent = make_agent(delegation("Note x.", "never", agent="scribe"), subagents={"scribe": child}, permissions="default")
    parent.approvals.interactive = True
    parent.approvals.subscribe(lambda pending: parent.cancel("stop while asking"))

    result = await asyncio.wait_for(parent.run("go"), 10)

    assert result.termination_reason is TerminationReason.USER_INTERRUPT
    assert parent.approvals.pending == []
    finish = of_type(result.events, EventType.SUBAGENT_FINISH)[0]
    assert finish.data["reason"] == "user_interrupt"


async def test_concurrency_safe_sub_agents_run_side_by_side() -> None:
    both_running = asyncio.Event()
    running = 0

    async def respond(messages: list[Message], tools: list[ToolSpec]) -> str:
        nonlocal running
        running += 1
        if running == 2:
            both_running.set()
        await both_running.wait()  # each call only finishes once the other has started
        return f"done: {messages[0].text}"

    worker = make_agent(FunctionModel(respond), name="worker")
    parent_model = ScriptedModel(
        [
            [tool_call("task", {"agent": "worker", "instructions": "A"}, id="p1"), tool_call("task", {"agent": "worker", "instructions": "B"}, id="p2")],
            "Both done.",
        ]
    )
    parent = make_agent(parent_model)
    parent.add_subagent("worker", worker, "Does one thing.", concurrency_safe=True)

    result = await asyncio.wait_for(parent.run("go"), 10)

    assert sorted(r["content"] for r in result.tool_calls) == ["done: A", "done: B"]
    assert len(of_type(result.events, EventType.SUBAGENT_START)) == 2
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))


async def test_sub_agents_not_marked_concurrency_safe_run_one_at_a_time_in_order() -> None:
    overlap = Overlap()

    async def respond(messages: list[Message], tools: list[ToolSpec]) -> str:
        await overlap.visit()
        return messages[0].text

    parent = make_agent(
        ScriptedModel([[tool_call("worker", {"instructions": "A"}, id="p1"), tool_call("worker", {"instructions": "B"}, id="p2")], "ok"]),
        [make_agent(FunctionModel(respond), name="worker").as_tool()],
    )
    result = await parent.run("go")
    assert overlap.most == 1
    assert [e.data["prompt"] for e in of_type(result.events, EventType.SUBAGENT_START)] == ["A", "B"]


async def test_nested_sub_agents_reach_the_top_stream_with_their_parent_agent() -> None:
    leaf = mathematician([tool_call("add", {"a": 1, "b": 1}, id="g1"), "2"])
    middle = make_agent(ScriptedModel([tool_call("task", {"agent": "math", "instructions": "1+1"}, id="m1"), "It is 2."]), name="middle", subagents={"math": leaf})
    top = make_agent(delegation("Ask math.", "2, I am told.", agent="middle"), subagents={"middle": middle})

    result = await top.run("go")

    starts = {e.data["name"]: e for e in of_type(result.events, EventType.SUBAGENT_START)}
    assert starts["middle"].data["parent_agent_id"] is None
    assert starts["math"].data["parent_agent_id"] == starts["middle"].agent_id
    assert starts["math"].data["parent_call_id"] == "m1"
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))
    leaf_turn = next(e for e in of_type(result.events, EventType.ITERATION_START) if e.agent_id == starts["math"].agent_id)
    middle_turn = next(e for e in of_type(result.events, EventType.ITERATION_START) if e.agent_id == starts["middle"].agent_id)
    assert leaf_turn.parent_turn_id == middle_turn.turn_id
    # The leaf's events sit between the middle's tool_start and tool_result for m1.
    order = [(e.agent_id, e.type.value, e.data.get("call_id")) for e in result.events]
    middle_id, leaf_id = starts["middle"].agent_id, starts["math"].agent_id
    assert order.index((middle_id, "tool_start", "m1")) < order.index((leaf_id, "subagent_start", None)) < order.index((middle_id, "tool_result", "m1"))
    assert result.stats.llm_calls == 6


async def test_the_task_tool_lists_the_sub_agents_and_accepts_only_their_names() -> None:
    reviewer = make_agent(ScriptedModel([]), name="reviewer")
    parent = make_agent(
        ScriptedModel([tool_call("task", {"agent": "nobody", "instructions": "x"}, id="p1"), "ok"]),
        subagents={"math": mathematician([]), "reviewer": Subagent("reviewer", reviewer, "Reviews drafts.")},
    )
    spec = parent.tools.get("task").spec  # type: ignore[union-attr]
    assert spec.parameters["properties"]["agent"]["enum"] == ["math", "reviewer"]
    assert "- math: You do arithmetic." in spec.description and "- reviewer: Reviews drafts." in spec.description

    result = await parent.run("go")
    call = result.tool_calls[0]
    assert call["is_error"] and "Invalid arguments for task" in call["content"] and "math" in call["content"]
    assert of_type(result.events, EventType.SUBAGENT_START) == []


def test_naming_the_task_tool_without_sub_agents_says_how_to_add_them() -> None:
    with pytest.raises(UnknownTool, match=r"subagents=\{'researcher'"):
        make_agent(ScriptedModel([]), ["task"])


def test_an_agent_in_tools_becomes_its_sub_agent_tool_and_needs_a_name() -> None:
    parent = make_agent(ScriptedModel([]), [mathematician([])])
    assert parent.tools.names == ["math"]
    assert parent.tools.get("math").read_only  # type: ignore[union-attr]
    with pytest.raises(UserError, match="as_tool\\('researcher'"):
        make_agent(ScriptedModel([]), name=None).as_tool()


async def test_a_failed_sub_agent_becomes_an_error_result_the_parent_reads() -> None:
    child = mathematician([fail("auth")])
    parent = make_agent(delegation("1+1", "I could not get help."), subagents={"math": child})
    result = await parent.run("go")
    call = result.tool_calls[0]
    assert call["is_error"] and "Sub-agent 'math' failed" in call["content"] and "401" in call["content"]
    assert of_type(result.events, EventType.SUBAGENT_FINISH)[0].data["reason"] == "error"
    assert result.termination_reason is TerminationReason.END_TURN


async def test_one_sub_agent_serves_every_call_with_a_fresh_conversation() -> None:
    child_model = ScriptedModel(["first", "second"])
    child = make_agent(child_model, name="echo")
    parent = make_agent(
        ScriptedModel([tool_call("echo", {"instructions": "one"}, id="p1"), tool_call("echo", {"instructions": "two"}, id="p2"), "done"]),
        [child.as_tool()],
    )
    result = await parent.run("go")
    assert [r["content"] for r in result.tool_calls] == ["first", "second"]
    assert [len(r.messages) for r in child_model.requests] == [1, 1]
    ids = {e.agent_id for e in of_type(result.events, EventType.SUBAGENT_START)}
    assert len(ids) == 2  # each call is its own sub-agent run


async def test_frames_name_each_row_s_agent_and_its_parent(tmp_path: Path) -> None:
    from agent_kernel.journal._frames import events_df, tool_calls_df, turns_df, usage_df

    leaf = mathematician([tool_call("add", {"a": 1, "b": 1}, id="g1"), "2"])
    middle = make_agent(ScriptedModel([tool_call("task", {"agent": "math", "instructions": "1+1"}, id="m1"), "It is 2."]), name="middle", subagents={"math": leaf})
    journal = tmp_path / "crewless.jsonl"
    top = make_agent(delegation("Ask math.", "2, I am told.", agent="middle"), subagents={"middle": middle}, journal=journal)
    result = await top.run("go")
    top.close()
    starts = {e.data["name"]: e.agent_id for e in of_type(result.events, EventType.SUBAGENT_START)}
    expected = {None: None, starts["middle"]: None, starts["math"]: starts["middle"]}

    def pairs(frame: Any) -> set[tuple[Any, Any]]:
        return {(None if pd.isna(a) else a, None if pd.isna(p) else p) for a, p in zip(frame["agent_id"], frame["parent_agent_id"])}

    # From the live agent's events and from the journal file alike.
    for source in (top.events, journal):
        for frame in (events_df(source), tool_calls_df(source), turns_df(source), usage_df(source)):
            assert pairs(frame) <= set(expected.items())
        assert pairs(events_df(source)) == set(expected.items())
    calls = tool_calls_df(journal).set_index("call_id")
    assert calls.loc["g1", "parent_agent_id"] == starts["middle"] and calls.loc["g1", "agent_id"] == starts["math"]


async def test_calls_with_the_same_id_in_parent_and_child_stay_separate_rows() -> None:
    from agent_kernel.journal._frames import tool_calls_df

    # Offline models number their calls per model, so parent and child both make call_0_0.
    child = mathematician([tool_call("add", {"a": 1, "b": 1}), "2"])
    parent = make_agent(ScriptedModel([tool_call("task", {"agent": "math", "instructions": "1+1"}), "2."]), subagents={"math": child})
    await parent.run("go")
    calls = tool_calls_df(parent)
    assert sorted(calls["name"]) == ["add", "task"]
    assert list(calls["call_id"]) == ["call_0_0", "call_0_0"]
    assert calls["agent_id"].isna().sum() == 1
