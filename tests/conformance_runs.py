"""Conformance scenarios for how a batch of tool calls and a run end (see ``conformance``).

Registered into the same matrix: each runs on the scripted model and on the real SDK adapters
over the strict fake endpoints. Imported by ``test_conformance`` for its side effect.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agent_kernel import ToolResult, tool
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.models._base import MessageEnd, TextDelta, Usage

from .conformance import NOT_APPLICABLE, Harness, agent, collect, finish, journaled, of, scenario, write_note_tool
from .fakes.server import Fail
from .fakes.turns import turn

NOT_APPLICABLE[("cache_hits_are_flagged", "scripted")] = "no provider cache"


@tool
def finish_task(summary: str) -> ToolResult:
    """Ends the task with a summary."""
    return ToolResult("finished", stop=True, final_message=f"Done: {summary}")


@scenario
async def tool_result_stop_closes_its_batch(h: Harness, tmp: Path) -> None:
    log: list[str] = []
    calls = [("c1", "finish_task", {"summary": "all tidy"}), ("c2", "write_note", {"path": "after.md"})]
    h.script(turn("Finishing.", calls=calls), turn("never asked"))
    a = agent(h, tmp, [finish_task, write_note_tool(log)], permissions="bypass")
    events = await collect(a, "go")
    assert log == []  # the write after the stop never started
    assert (finish(events)["reason"], finish(events)["text"], finish(events)["tool"]) == ("tool_stop", "Done: all tidy", "finish_task")
    results = {e.data["call_id"]: e.data for e in of(events, EventType.TOOL_RESULT)}
    assert results["c1"]["content"] == "finished" and not results["c1"]["is_error"]
    assert results["c2"]["is_error"] and "not started: the run was ended by finish_task" in results["c2"]["content"]
    assert not of(events, EventType.TOOL_START)[1:]  # only the stopping call started
    assert len(h.requests()) == 1
    assert {e.data["call_id"] for e in of(journaled(a), EventType.TOOL_RESULT)} == {"c1", "c2"}  # both answered in the journal


@scenario
async def failed_call_cancels_unstarted_siblings(h: Harness, tmp: Path) -> None:
    @tool
    def migrate(step: int) -> str:
        """Runs a migration step."""
        raise RuntimeError(f"step {step} failed: table locked")

    calls = [("c1", "migrate", {"step": 1}), ("c2", "write_note", {"path": "a.md"}), ("c3", "write_note", {"path": "b.md"})]
    log: list[str] = []
    h.script(turn(calls=calls), turn("Stopped after the failure."))
    events = await collect(agent(h, tmp, [migrate, write_note_tool(log)], permissions="bypass", on_tool_error="cancel"), "go")
    assert log == []
    contents = [e.data["content"] for e in of(events, EventType.TOOL_RESULT)]
    assert "table locked" in contents[0]
    assert all("not started: a sibling tool call failed (migrate)" in c for c in contents[1:]), contents
    assert finish(events)["text"] == "Stopped after the failure." and not h.rejected
    # The default: a failed call's siblings still run.
    h.script(turn(calls=[(f"d{i}", n, a) for i, (_, n, a) in enumerate(calls)]), turn("Carried on."))
    events = await collect(agent(h, tmp, [migrate, write_note_tool(log)], permissions="bypass"), "go")
    assert log == ["a.md", "b.md"] and finish(events)["text"] == "Carried on."


@scenario
async def max_turns_keeps_the_work_when_the_final_answer_fails(h: Harness, tmp: Path) -> None:
    calls = [("c1", "write_file", {"path": "report.md", "content": "# Findings\n"}), ("c2", "add", {"a": 40, "b": 2})]
    h.script(turn("Writing.", calls=calls), Fail(400, "invalid request: the final answer was refused"))
    from .conformance import add

    a = agent(h, tmp, ["write_file", add], permissions="bypass", max_iterations=1)
    result = await a.run("write the report")
    assert result.termination_reason.value == "max_turns"
    assert "final answer was refused" in (result.error or "")
    assert "limit of 1 turns" in result.text and "report.md" in result.text and "add: 42" in result.text, result.text
    assert (tmp / "report.md").read_text() == "# Findings\n"
    errors = of(list(result.events), EventType.ERROR)
    assert len(errors) == 1 and errors[0].data["fatal"] is False
    assert of(list(result.events), EventType.MAX_ITERATIONS_REACHED)


@scenario
async def rate_limit_falls_back_once_retries_are_spent(h: Harness, tmp: Path) -> None:
    h.script(Fail(429, "slow down"), Fail(429, "slow down"), turn("From the fallback."))
    a = agent(h, tmp, fallback_model=h.model("fallback-model"), max_retries=1)
    events = await collect(a, "go")
    assert len(of(events, EventType.RETRY)) == 1  # the retries come first
    fallbacks = of(events, EventType.MODEL_FALLBACK)
    assert [(e.data["to_model"], e.data["kind"]) for e in fallbacks] == [("fallback-model", "rate_limit")]
    assert finish(events)["text"] == "From the fallback." and finish(events)["stats"]["errors"] == 2


@scenario
async def unknown_tool_holds_back_no_safe_call(h: Harness, tmp: Path) -> None:
    both_running = asyncio.Barrier(2)

    @tool(read_only=True)
    async def lookup(key: str) -> str:
        """Looks a key up (safe to run beside others)."""
        try:
            await asyncio.wait_for(both_running.wait(), 10)  # passes only if both run at once
        except asyncio.TimeoutError:
            return "ran alone"
        return key.upper()

    calls = [("c1", "lookup", {"key": "a"}), ("c2", "no_such_tool", {}), ("c3", "lookup", {"key": "b"})]
    h.script(turn(calls=calls), turn("Done."))
    events = await collect(agent(h, tmp, [lookup]), "go")
    results = {e.data["call_id"]: e.data["content"] for e in of(events, EventType.TOOL_RESULT)}
    assert (results["c1"], results["c3"]) == ("A", "B"), results
    assert "Unknown tool 'no_such_tool'" in results["c2"]
    assert finish(events)["text"] == "Done." and not h.rejected


@scenario
async def cache_hits_are_flagged(h: Harness, tmp: Path) -> None:
    h.script(turn("First.", usage={"input_tokens": 40, "output_tokens": 3}), turn("Second.", usage={"input_tokens": 40, "output_tokens": 3, "cache_read_tokens": 32}))
    a = agent(h, tmp)
    first, second = await collect(a, "one"), await collect(a, "two")
    assert of(first, EventType.LLM_COMPLETE)[0].data["cache_hit"] is False
    complete = of(second, EventType.LLM_COMPLETE)[0].data
    assert complete["cache_hit"] is True and complete["usage"]["cache_read_tokens"] == 32
    assert finish(second)["stats"]["cache_read_tokens"] == 32


@scenario
async def hook_stop_closes_its_batch(h: Harness, tmp: Path) -> None:
    from agent_kernel import Hooks, StopRun

    hooks = Hooks()

    @hooks.on("before_tool_execution")
    def guard(ctx: Any) -> None:
        if ctx.data["call"].arguments.get("path") == "secrets.md":
            raise StopRun("a note about secrets", final_message="Stopped: that note is not allowed.")

    log: list[str] = []
    calls = [("c1", "write_note", {"path": "a.md"}), ("c2", "write_note", {"path": "secrets.md"}), ("c3", "write_note", {"path": "b.md"})]
    h.script(turn(calls=calls), turn("never asked"))
    events = await collect(agent(h, tmp, [write_note_tool(log)], permissions="bypass", hooks=hooks), "go")
    assert log == ["a.md"]  # the call before the stop ran; the one after never started
    assert (finish(events)["reason"], finish(events)["text"]) == ("tool_stop", "Stopped: that note is not allowed.")
    results = {e.data["call_id"]: e.data["content"] for e in of(events, EventType.TOOL_RESULT)}
    assert "not started: the run was ended by write_note" in results["c3"] and len(h.requests()) == 1


class _GatedModel:
    """A summariser that answers only once ``gate`` is set (so a test can hold it mid-call)."""

    provider = "scripted"

    def __init__(self, name: str, answer: str) -> None:
        self.name, self.answer, self.gate, self.calls = name, answer, asyncio.Event(), 0

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        self.calls += 1
        await asyncio.wait_for(self.gate.wait(), 30)  # a generous bound: a broken run fails instead of hanging
        yield TextDelta(self.answer)
        yield MessageEnd("end_turn", Usage(1_000, 100), self.name)


@scenario
async def session_memory_updates_beside_the_next_turn(h: Harness, tmp: Path) -> None:
    from agent_kernel.context import ContextManager
    from agent_kernel.memory import SessionMemoryConfig

    from .conformance import add

    summariser = _GatedModel("summariser", "## Goal\nAdd numbers.")
    manager = ContextManager(compaction_model=summariser, session_memory=SessionMemoryConfig(summary=True, update_tokens=1), calibrate=False)
    h.script(turn(calls=[("c1", "add", {"a": 1, "b": 2})]), turn("It is 3."))
    a = agent(h, tmp, [add], context=manager)

    def release(event: AgentEvent) -> None:
        if event.type is EventType.LLM_COMPLETE and event.data["message"]["content"][0].get("text") == "It is 3.":
            summariser.gate.set()  # the update may finish only after the next turn's answer

    events = await collect(a, "Add 1 and 2.", release)
    assert summariser.calls == 1 and finish(events)["text"] == "It is 3."
    [update] = of(events, EventType.SESSION_MEMORY_UPDATE)
    answered = [e for e in of(events, EventType.LLM_COMPLETE)][-1]
    assert update.data["background"] is True and update.seq > answered.seq  # the turn did not wait for it
    stats = finish(events)["stats"]
    assert stats["llm_calls"] == 3 and stats["input_tokens"] >= 1_000 and stats["output_tokens"] >= 100  # charged as a model call
    assert update.data["usage"]["input_tokens"] == 1_000


@scenario
async def background_subagent_reports_at_a_later_turn(h: Harness, tmp: Path) -> None:
    from agent_kernel import Agent
    from agent_kernel.models.scripted import ScriptedModel, text, tool_call

    release = asyncio.Event()

    @tool(read_only=True)
    async def dig(topic: str) -> str:
        """Researches a topic slowly."""
        await asyncio.wait_for(release.wait(), 30)
        return f"{topic}: they hold hands while sleeping"

    researcher = Agent(ScriptedModel([tool_call("dig", {"topic": "otters"}), [text("Otters hold hands while they sleep.")]]),
                       tools=[dig], name="researcher", journal=None, working_dir=tmp)
    h.script(
        turn("Asking the researcher.", calls=[("c1", "researcher", {"instructions": "Find one fact about otters."})]),
        turn("The researcher is on it."),
        turn("Fact: otters hold hands while they sleep."),
    )
    a = agent(h, tmp, [researcher.as_tool(description="Finds facts.", background=True)])

    def on(event: AgentEvent) -> None:
        if event.type is EventType.LLM_COMPLETE and event.agent_id is None and event.data["message"]["content"][0].get("text") == "The researcher is on it.":
            release.set()  # the sub-agent finishes only after the parent's next turn answered

    events = await collect(a, "Tell me about otters.", on)
    [call_result] = [e for e in of(events, EventType.TOOL_RESULT) if e.agent_id is None]
    assert "in the background" in call_result.data["content"]  # the call returned at once
    starts, finishes = of(events, EventType.SUBAGENT_START), of(events, EventType.SUBAGENT_FINISH)
    parent_second = [e for e in of(events, EventType.LLM_COMPLETE) if e.agent_id is None][1]
    assert len(starts) == 1 and len(finishes) == 1 and parent_second.seq < finishes[0].seq  # the parent went on meanwhile
    [report] = of(events, EventType.SUBAGENT_REPORT)
    assert report.data["agent_id"] == starts[0].data["agent_id"] and "hold hands while they sleep" in report.data["text"]
    assert (finish(events)["reason"], finish(events)["text"]) == ("end_turn", "Fact: otters hold hands while they sleep.")
    third = h.requests()[2]  # the report reached the model as a message
    assert "hold hands while they sleep" in json.dumps(third if isinstance(third, dict) else [m.to_dict() for m in third.messages])
    from agent_kernel.journal import rebuild

    assert rebuild(journaled(a)).messages == a.messages  # the journal holds the report as the model read it


@scenario
async def background_subagent_is_cancelled_when_the_run_stops_otherwise(h: Harness, tmp: Path) -> None:
    from agent_kernel import Agent, Hooks
    from agent_kernel.models.scripted import ScriptedModel, tool_call

    digging = asyncio.Event()

    @tool(read_only=True)
    async def dig(topic: str) -> str:
        """Researches forever."""
        digging.set()
        await asyncio.Event().wait()
        return "never"

    hooks = Hooks()

    @hooks.on("before_llm_call")
    async def once_it_digs(ctx: Any) -> None:
        if ctx.turn_state.turn_counter == 1 and ctx.context.agent_id is None:
            await asyncio.wait_for(digging.wait(), 30)  # the final answer comes while the sub-agent works

    researcher = Agent(ScriptedModel([tool_call("dig", {"topic": "otters"})]), tools=[dig], name="researcher", journal=None, working_dir=tmp)
    h.script(turn(calls=[("c1", "researcher", {"instructions": "Dig."})]), turn("Out of turns."))
    events = await collect(agent(h, tmp, [researcher.as_tool(background=True)], max_iterations=1, hooks=hooks), "go")
    [started] = of(events, EventType.SUBAGENT_START)
    assert finish(events)["reason"] == "max_turns" and finish(events)["background_cancelled"] == [started.data["agent_id"]]
    [ended] = of(events, EventType.SUBAGENT_FINISH)
    assert ended.data["reason"] == "user_interrupt" and ended.seq < of(events, EventType.RUN_FINISH)[-1].seq


@scenario
async def plan_mode_is_visible(h: Harness, tmp: Path) -> None:
    log: list[str] = []
    h.script(turn(calls=[("c1", "write_note", {"path": "plan.md"})]), turn("Here is the plan instead."))
    a = agent(h, tmp, [write_note_tool(log)], permissions="plan")
    events = await collect(a, "go")
    assert log == [] and [e.data["active"] for e in of(events, EventType.PLAN_MODE)] == [True]
    [refusal] = of(events, EventType.APPROVAL_DECISION)
    assert (refusal.data["decision"], refusal.data["decided_by"]) == ("reject", "mode")
    a.mode = "accept_edits"  # leaving plan mode shows too
    h.script(turn("Done."))
    again = await collect(a, "now do it")
    assert not of(again, EventType.PLAN_MODE)  # a run that never was in plan mode says nothing
    h.script(turn(calls=[("c2", "write_note", {"path": "x.md"})]), turn("Written."))
    a.mode = "plan"

    def leave(event: AgentEvent) -> None:
        if event.type is EventType.APPROVAL_DECISION:
            a.mode = "accept_edits"

    third = await collect(a, "again", leave)
    assert [e.data["active"] for e in of(third, EventType.PLAN_MODE)] == [True, False]


@scenario
async def crew_routes_on_an_outcome_and_shares_state(h: Harness, tmp: Path) -> None:
    from agent_kernel import Crew, Task

    reviewer = agent(h, tmp, name="reviewer")
    shipper = agent(h, tmp, name="shipper")
    fixer = agent(h, tmp, name="fixer")
    h.script(
        turn("Recording the verdict.", calls=[("c1", "write_state", {"key": "verdict", "value": '"approve"'})]),
        turn("Approved."),
        turn("Reading the verdict.", calls=[("c2", "read_state", {"key": "verdict"})]),
        turn("Shipped the approved change."),
    )
    crew = Crew(
        [reviewer, shipper, fixer],
        [
            Task("Review the change and record verdict approve or reject with write_state.", reviewer, name="review"),
            Task("Ship it.", shipper, name="ship", depends_on=["review"], when=lambda o: o.state.get("verdict") == "approve"),
            Task("Fix it.", fixer, name="fix", depends_on=["review"], when=lambda o: o.state.get("verdict") == "reject"),
        ],
        state={},
        journal=tmp / "crew.jsonl",
        working_dir=tmp,
    )
    result = await crew.run()
    assert result.termination_reason.value == "end_turn" and result.text == "Shipped the approved change."
    assert [result[t].status for t in ("review", "ship", "fix")] == ["done", "done", "skipped"]
    assert crew.state == {"verdict": "approve"} and result.state == {"verdict": "approve"}
    events = list(result.events)
    [write] = of(events, EventType.CREW_STATE)
    assert write.data["key"] == "verdict" and write.data["value"] == "approve" and write.data["task"] == "review" and write.agent_id
    assert [(e.data["task"], e.data["runs"]) for e in of(events, EventType.TASK_CONDITION)] == [("ship", True), ("fix", False)]
    read = [e for e in of(events, EventType.TOOL_RESULT) if e.data["name"] == "read_state"]
    assert read[0].data["content"] == '"approve"'
    crew.close()
    from agent_kernel.journal import read_events

    assert of(read_events(tmp / "crew.jsonl"), EventType.CREW_STATE)  # journaled
