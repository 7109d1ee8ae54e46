"""Conformance scenarios for how a batch of tool calls and a run end (see ``conformance``).

Registered into the same matrix: each runs on the scripted model and on the real SDK adapters
over the strict fake endpoints. Imported by ``test_conformance`` for its side effect.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_kernel import ToolResult, tool
from agent_kernel.events._event import EventType

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
