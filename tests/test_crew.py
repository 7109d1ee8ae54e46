"""Crews: sequential, parallel and hierarchical modes, dependencies, one journal, one gate."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agent_kernel import AgentEvent, EventType, TerminationReason, tool
from agent_kernel.errors import UserError
from agent_kernel.guard._approvals import Approval, ApprovalRequest
from agent_kernel.journal import read_events
from agent_kernel.messages import Message
from agent_kernel.models._base import ToolSpec
from agent_kernel.models.scripted import FunctionModel, ScriptedModel, fail, text, tool_call
from agent_kernel.team._crew import Crew, CrewResult, Task

from .helpers import Overlap, make_agent, of_type, types


def echo(name: str, prefix: str = "") -> Any:
    """An agent that answers with its prompt's first line (prefixed), recording every prompt."""
    prompts: list[str] = []

    def respond(messages: list[Message], tools: list[ToolSpec]) -> str:
        prompts.append(messages[0].text)
        return prefix + messages[0].text.splitlines()[0]

    agent = make_agent(FunctionModel(respond), name=name)
    agent.prompts = prompts  # type: ignore[attr-defined]
    return agent


def scripted(name: str, responses: list[Any], **kwargs: Any) -> Any:
    return make_agent(ScriptedModel(responses), name=name, **kwargs)


def crew_of(agents: list[Any], tasks: list[Task], mode: str = "sequential", **kwargs: Any) -> Crew:
    kwargs.setdefault("journal", None)
    kwargs.setdefault("permissions", "bypass")
    return Crew(agents, tasks, mode, **kwargs)  # type: ignore[arg-type]


def spans(events: list[AgentEvent]) -> dict[str, tuple[int, int]]:
    """Task name -> (seq of its subagent_start, seq of its subagent_finish)."""
    start = {e.agent_id: e for e in of_type(events, EventType.SUBAGENT_START)}
    return {s.data["task"]: (s.seq, next(f.seq for f in of_type(events, EventType.SUBAGENT_FINISH) if f.agent_id == aid)) for aid, s in start.items() if "task" in s.data}


async def test_a_sequential_crew_runs_tasks_in_order_handing_outputs_forward(tmp_path: Path) -> None:
    researcher = scripted("researcher", ["Otters hold hands while sleeping."])
    writer = scripted("writer", ["Otters sleep holding hands, so they do not drift apart."])
    crew = crew_of(
        [researcher, writer],
        [
            Task("Find a fact about otters.", researcher, name="facts"),
            Task("Write one sentence from the facts.", writer, depends_on=["facts"], name="sentence", expected_output="one sentence"),
        ],
        journal=tmp_path / "crew.jsonl",
    )

    streamed = [event async for event in crew.stream("a children's book")]
    crew.close()
    result = CrewResult.from_events(streamed)

    assert result.termination_reason is TerminationReason.END_TURN
    assert result.text == "Otters sleep holding hands, so they do not drift apart."
    assert result["facts"].text == "Otters hold hands while sleeping." and result["facts"].status == "done"
    assert result["sentence"].agent == "writer"
    prompt = writer.model.requests[0].messages[0].text
    assert "a children's book" in prompt and "Expected output: one sentence" in prompt
    assert "## facts\nOtters hold hands while sleeping." in prompt
    # One after the other, one journal, one seq counter, everything tagged.
    order = spans(streamed)
    assert order["facts"][1] < order["sentence"][0]
    assert [e.seq for e in streamed] == list(range(1, len(streamed) + 1))
    assert [e.to_dict() for e in read_events(tmp_path / "crew.jsonl")] == [e.to_dict() for e in streamed]
    # Only the crew's own run_start and run_finish are untagged; they frame everything else.
    assert [(i, e.type.value) for i, e in enumerate(streamed) if e.agent_id is None] == [(0, "run_start"), (len(streamed) - 1, "run_finish")]
    assert streamed[0].data["tasks"][1] == {"name": "sentence", "agent": "writer", "depends_on": ["facts"], "description": "Write one sentence from the facts."}
    crew_turn = streamed[0].data["turn_state"]["turn_id"]
    assert {e.data["parent_turn_id"] for e in of_type(streamed, EventType.SUBAGENT_START)} == {crew_turn}


async def test_a_task_listed_before_its_dependency_waits_for_it() -> None:
    agent = echo("solo")
    later = Task("Use the base.", depends_on=["base"], name="use")
    crew = crew_of([agent], [later, Task("Lay the base.", name="base")])
    result = await crew.run()
    assert list(result.outputs) == ["base", "use"]
    assert later.name == "use" and later.depends_on == ["base"]  # the caller's tasks are left as they were
    assert agent.prompts[0] == "Lay the base."
    assert "## base\nLay the base." in agent.prompts[1]


async def test_a_parallel_crew_overlaps_independent_tasks_and_joins_them_for_a_dependent_one() -> None:
    both_running = asyncio.Event()
    running = 0

    async def gather(messages: list[Message], tools: list[ToolSpec]) -> str:
        nonlocal running
        running += 1
        if running == 2:
            both_running.set()
        await both_running.wait()  # finishes only if the other task runs at the same time
        return "found " + messages[0].text.split()[-1]

    a = make_agent(FunctionModel(gather), name="a")
    b = make_agent(FunctionModel(gather), name="b")
    writer = echo("writer")
    crew = crew_of(
        [a, b, writer],
        [Task("Look up apples", a, name="apples"), Task("Look up pears", b, name="pears"), Task("Compare them.", writer, depends_on=["apples", "pears"])],
        mode="parallel",
    )

    result = await asyncio.wait_for(crew.run(), 10)

    assert result["apples"].text == "found apples" and result["pears"].text == "found pears"
    order = spans(result.events)
    assert max(order["apples"][1], order["pears"][1]) < order["task_3"][0]
    assert "## apples\nfound apples" in writer.prompts[0] and "## pears\nfound pears" in writer.prompts[0]
    assert [e.seq for e in result.events] == list(range(1, len(result.events) + 1))


async def test_max_parallel_bounds_the_tasks_running_at_once() -> None:
    overlap = Overlap()

    async def work(messages: list[Message], tools: list[ToolSpec]) -> str:
        await overlap.visit()
        return "ok"

    agent = make_agent(FunctionModel(work), name="w")
    crew = crew_of([agent], [Task(f"job {i}") for i in range(4)], mode="parallel", max_parallel=2)
    result = await crew.run()
    assert overlap.most == 2 and [o.status for o in result.outputs.values()] == ["done"] * 4


async def test_a_hierarchical_manager_delegates_to_workers_and_answers_each_task() -> None:
    researcher = scripted("researcher", ["Paris.", "France."], system="Finds facts.")
    writer = scripted("writer", ["Paris is the capital of France."], system="Writes prose.")
    manager = scripted(
        "manager",
        [
            [tool_call("task", {"agent": "researcher", "instructions": "Capital of France?"}, id="m1"), tool_call("task", {"agent": "researcher", "instructions": "Country of Paris?"}, id="m2")],
            "Capital: Paris.",
            tool_call("task", {"agent": "writer", "instructions": "Write it up: Paris, France."}, id="m3"),
            "Paris is the capital of France.",
        ],
    )
    crew = crew_of(
        [researcher, writer],
        [Task("Find the capital of France.", researcher, name="find"), Task("Write a sentence about it.", name="write", depends_on=["find"])],
        mode="hierarchical",
        manager=manager,
    )

    result = await crew.run()

    assert result["find"].text == "Capital: Paris." and result["find"].agent == "manager"
    assert result.text == "Paris is the capital of France."
    first = manager.model.requests[0]
    task_spec = next(t for t in first.tools if t.name == "task")
    assert task_spec.parameters["properties"]["agent"]["enum"] == ["researcher", "writer"]
    assert "- researcher: Finds facts." in task_spec.description
    assert "Suggested member: researcher." in first.messages[0].text
    assert "## find\nCapital: Paris." in manager.model.requests[2].messages[0].text
    # Workers are the manager's sub-agents; the manager runs each task as the crew's.
    starts = of_type(result.events, EventType.SUBAGENT_START)
    managers = [s for s in starts if s.data["name"] == "manager"]
    workers = [s for s in starts if s.data["name"] != "manager"]
    assert [s.data["task"] for s in managers] == ["find", "write"]
    assert all(s.data["parent_agent_id"] is None for s in managers)
    assert {s.data["parent_agent_id"] for s in workers[:2]} == {managers[0].agent_id}
    assert workers[2].data["parent_agent_id"] == managers[1].agent_id and workers[2].data["parent_call_id"] == "m3"
    # Delegations of one manager turn ran side by side.
    finishes = {e.agent_id: e.seq for e in of_type(result.events, EventType.SUBAGENT_FINISH)}
    assert workers[1].seq < finishes[workers[0].agent_id]


async def test_a_failed_task_skips_its_dependents_but_not_the_others() -> None:
    broken = scripted("broken", [fail("auth")])
    fine = echo("fine")
    crew = crew_of(
        [broken, fine],
        [Task("Break.", broken, name="bad"), Task("Build on it.", fine, depends_on=["bad"], name="after"), Task("Unrelated.", fine, name="other")],
    )
    result = await crew.run()
    assert result.termination_reason is TerminationReason.ERROR
    assert "task 'bad' failed" in (result.error or "") and "401" in (result.error or "")
    assert [(n, o.status) for n, o in result.outputs.items()] == [("bad", "failed"), ("after", "skipped"), ("other", "done")]
    assert "bad did not succeed" in (result["after"].error or "")
    assert types(result.events)[-2:] == ["error", "run_finish"]


async def test_cancelling_a_crew_cancels_the_running_agent_and_the_tasks_after_it() -> None:
    slow = scripted("slow", [[text("working "), text("forever", delay=30)]])
    crew = crew_of([slow], [Task("Work.", name="first"), Task("Then this.", name="second")])
    events: list[AgentEvent] = []
    async for event in crew.stream():
        events.append(event)
        if event.type is EventType.TEXT_DELTA:
            assert crew.cancel("enough")
    result = CrewResult.from_events(events)
    assert result.termination_reason is TerminationReason.USER_INTERRUPT
    inner = [e for e in events if e.agent_id is not None]
    assert types(inner)[-3:] == ["cancelled", "run_finish", "subagent_finish"] and inner[-3].data["reason"] == "enough"
    assert types(events)[-2:] == ["cancelled", "run_finish"] and events[-2].data["reason"] == "enough"
    assert result["first"].status == "cancelled" and result["first"].agent == "slow"
    assert result["second"].status == "cancelled" and "stopped first" in (result["second"].error or "")
    assert not crew.running and crew.cancel() is False


async def test_every_agent_in_a_crew_asks_the_crew_approver() -> None:
    notes: list[str] = []

    @tool
    def note(text: str) -> str:
        """Writes a note."""
        notes.append(text)
        return "ok"

    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval.reject("read only today") if request.arguments["text"] == "b" else Approval.approve()

    a = make_agent(ScriptedModel([tool_call("note", {"text": "a"}, id="a1"), "a done"]), [note], name="a", permissions="bypass")
    b = make_agent(ScriptedModel([tool_call("note", {"text": "b"}, id="b1"), "b refused"]), [note], name="b", permissions="bypass")
    crew = Crew([a, b], [Task("Note a.", a), Task("Note b.", b)], permissions="default", approver=approver, journal=None)
    result = await crew.run()
    assert [r.arguments["text"] for r in asked] == ["a", "b"] and notes == ["a"]
    assert result.text == "b refused"


async def test_crew_usage_adds_up_every_agent() -> None:
    priced = "claude-sonnet-4-5"
    a = make_agent(ScriptedModel(["one"], name=priced), name="a")
    b = make_agent(ScriptedModel(["two"], name=priced), name="b")
    result = await crew_of([a, b], [Task("1", a), Task("2", b)], mode="parallel").run()
    completes = of_type(result.events, EventType.LLM_COMPLETE)
    assert result.usage.input_tokens == sum(e.data["usage"]["input_tokens"] for e in completes)
    assert result.cost_usd == pytest.approx(sum(e.data["cost_usd"] for e in completes))
    assert result.stats.turns == 2 and result.stats.llm_calls == 2
    assert sum(o.usage.output_tokens for o in result.outputs.values()) == result.usage.output_tokens
    assert [e["reason"] for e in result.events[-1].data["outputs"]] == ["end_turn", "end_turn"]


def test_run_sync_runs_a_crew_from_plain_code() -> None:
    agent = echo("solo", prefix="> ")
    result = crew_of([agent], [Task("hello")]).run_sync()
    assert result.text == "> hello"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda a, b: Crew([a, b], [Task("x", "nobody")]), "names agent 'nobody', which is not in the crew"),
        (lambda a, b: Crew([a, b], [Task("x", a, depends_on=["ghost"])]), "depends on 'ghost'"),
        (lambda a, b: Crew([a], [Task("x", a, depends_on=["y"], name="x"), Task("y", a, depends_on=["x"], name="y")]), "remove the cycle"),
        (lambda a, b: Crew([a, b], [Task("x")]), "has no agent"),
        (lambda a, b: Crew([a, b], [Task("x", a)], mode="hierarchical"), "needs a manager"),
        (lambda a, b: Crew([a, b], [Task("x", a)], mode="round_robin"), "must be one of sequential, parallel, hierarchical"),
        (lambda a, b: Crew([a, make_agent(ScriptedModel([]))], [Task("x", a)]), "needs a name"),
        (lambda a, b: Crew([a, b], [Task("x", scripted("stranger", []))]), "not in the crew"),
    ],
)
def test_a_malformed_crew_says_what_to_fix(build: Any, message: str) -> None:
    a, b = scripted("a", []), scripted("b", [])
    with pytest.raises(UserError, match=message):
        build(a, b)


async def test_dependencies_may_be_the_task_objects_themselves() -> None:
    agent = echo("solo")
    first = Task("Start here.")
    crew = crew_of([agent], [first, Task("Go on.", depends_on=[first])])
    result = await crew.run()
    assert list(result.outputs) == ["task_1", "task_2"] and first.name is None
    assert "## task_1\nStart here." in agent.prompts[1]
    with pytest.raises(UserError, match="depends on 'elsewhere'"):
        crew_of([agent], [Task("x", depends_on=[Task("y", name="elsewhere")])])


async def test_frames_of_a_crew_name_the_agent_of_every_row() -> None:
    from agent_kernel.journal._frames import events_df, tool_calls_df, turns_df

    researcher = scripted("researcher", [tool_call("look", {"topic": "otters"}, id="r1"), "Otters are mustelids."], tools=[look])
    manager = scripted("manager", [tool_call("task", {"agent": "researcher", "instructions": "Otters?"}, id="m1"), "Mustelids."])
    crew = crew_of([researcher], [Task("What are otters?", researcher, name="otters")], mode="hierarchical", manager=manager)
    result = await crew.run()
    start = {e.data["name"]: e for e in of_type(result.events, EventType.SUBAGENT_START)}
    manager_id, researcher_id = start["manager"].agent_id, start["researcher"].agent_id

    events = events_df(crew)
    assert set(events["agent_id"].dropna()) == {manager_id, researcher_id}
    assert events["agent_id"].isna().sum() == 2  # the crew's own run_start and run_finish
    links = events[events["type"] == "subagent_start"].set_index("agent_id")["data_parent_agent_id"]
    assert links[researcher_id] == manager_id and pd.isna(links[manager_id])
    turns = turns_df(crew)
    assert sorted(turns["agent_id"].value_counts().to_dict().items()) == sorted({manager_id: 2, researcher_id: 2}.items())
    calls = tool_calls_df(crew).set_index("call_id")
    assert calls.loc["m1", "agent_id"] == manager_id and calls.loc["r1", "agent_id"] == researcher_id
    for frame in (events, turns, calls):
        assert {"agent_id", "parent_agent_id"} <= set(frame.columns)


@tool(read_only=True)
def look(topic: str) -> str:
    """Looks a topic up."""
    return f"{topic}: mustelids"


async def test_a_route_not_taken_skips_its_dependents_and_the_crew_still_succeeds() -> None:
    triage, fixer = echo("triage", "urgent: "), echo("fixer", "fixed: ")
    crew = crew_of(
        [triage, fixer],
        [
            Task("Triage the report.", triage, name="triage"),
            Task("Escalate.", fixer, name="escalate", depends_on=["triage"], when=lambda o: "routine" in o["triage"].text),
            Task("Write up the escalation.", fixer, name="writeup", depends_on=["escalate"]),
            Task("Fix now.", fixer, name="fix", depends_on=["triage"], when=lambda o: o["triage"].text.startswith("urgent")),
        ],
    )
    result = await crew.run()
    assert result.termination_reason is TerminationReason.END_TURN
    assert [(n, o.status) for n, o in result.outputs.items()] == [("triage", "done"), ("escalate", "skipped"), ("writeup", "skipped"), ("fix", "done")]
    assert "condition did not hold" in (result["escalate"].error or "") and "routed the crew elsewhere" in (result["writeup"].error or "")
    assert result.text == "fixed: Fix now." and [p.splitlines()[0] for p in fixer.prompts] == ["Fix now."]  # type: ignore[attr-defined]


async def test_a_condition_that_raises_fails_its_task_with_the_reason() -> None:
    worker = echo("worker")
    crew = crew_of([worker], [Task("First.", worker, name="first"), Task("Second.", worker, name="second", when=lambda o: o["missing"].text == "x")])
    result = await crew.run()
    assert result.termination_reason is TerminationReason.ERROR
    assert result["second"].status == "failed" and "its condition raised KeyError" in (result["second"].error or "")


async def test_shared_state_starts_from_what_the_crew_was_given_and_refuses_unknown_keys() -> None:
    reader = scripted("reader", [[tool_call("read_state", {})], [tool_call("read_state", {"key": "nope"})], "Read."])
    crew = crew_of([reader], [Task("Read the state.", reader)], state={"budget": 3})
    result = await crew.run()
    reads = [e.data["content"] for e in of_type(result.events, EventType.TOOL_RESULT)]
    assert reads[0] == '{"budget": 3}' and "no key 'nope'. Keys: budget" in reads[1], reads
    assert result.events[0].data["state"] == {"budget": 3} and result.state == {"budget": 3}
