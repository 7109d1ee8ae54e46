"""The tt loop: recursion, tools while streaming, limits, hooks, errors, cancellation."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_kernel import EventType, HookPoint, Hooks, LoopState, StopRun, TerminationReason, ToolContext, ToolResult, TurnState, tool
from agent_kernel.errors import ToolError, UserError
from agent_kernel.messages import Message, TextBlock, ToolResultBlock
from agent_kernel.models._base import MessageEnd, ModelRequest, StreamEvent, TextDelta, ToolCallEnd, ToolCallStart
from agent_kernel.models.scripted import ScriptedModel, text, tool_call
from agent_kernel.models.scripted import fail as fail_part
from agent_kernel.runtime._loop import FINAL_TURN_INSTRUCTION, LoopConfig, tt
from agent_kernel.runtime._state import ExecutionContext

from .helpers import make_agent, of_type, types


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


async def test_base_case_answers_in_one_turn() -> None:
    agent = make_agent(ScriptedModel(["Hello there."]))
    result = await agent.run("hi")
    assert result.text == "Hello there."
    assert result.termination_reason is TerminationReason.END_TURN
    assert types(result.events) == [
        "run_start", "state_change", "iteration_start", "state_change", "state_change", "llm_start", "state_change",
        "text_delta", "text_delta", "llm_complete", "run_finish",
    ]  # fmt: skip
    assert result.turns == 1


async def test_recursion_runs_the_tool_and_sends_its_result_back() -> None:
    model = ScriptedModel([[text("Looking."), tool_call("add", {"a": 2, "b": 3})], "The sum is 5."])
    agent = make_agent(model, [add])
    result = await agent.run("what is 2+3?")
    assert result.text == "The sum is 5." and result.turns == 2
    second = model.requests[1].messages
    assert second[-1].tool_results == [ToolResultBlock("call_0_1", "5", False)]
    recursion = of_type(result.events, EventType.RECURSION)[0]
    assert recursion.data["tool_results"][0]["content"] == "5"
    # Each turn's events carry that turn's id; the second turn's parent is the first.
    starts = of_type(result.events, EventType.ITERATION_START)
    assert starts[1].parent_turn_id == starts[0].turn_id
    assert recursion.data["next_turn_id"] == starts[1].turn_id


async def test_seq_is_monotonic_across_runs_of_one_session() -> None:
    agent = make_agent(ScriptedModel(["one", "two"]))
    a = await agent.run("1")
    b = await agent.run("2")
    seqs = [e.seq for e in a.events + b.events]
    assert seqs == list(range(1, len(seqs) + 1))
    assert a.run_id != b.run_id and a.session_id == b.session_id


async def test_successive_runs_continue_one_conversation() -> None:
    model = ScriptedModel(["first answer", "second answer"])
    agent = make_agent(model)
    await agent.run("first")
    await agent.run("second")
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "user"]
    assert model.requests[1].messages[1].text == "first answer"
    assert len(agent.history) == 2 and agent.history[0].turn_counter == 0


async def test_max_iterations_ends_with_a_tools_disabled_answer() -> None:
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 1}), tool_call("add", {"a": 2, "b": 2}), "Out of turns: 2 and 4 so far."])
    agent = make_agent(model, [add], max_iterations=2)
    result = await agent.run("keep adding")
    assert result.termination_reason is TerminationReason.MAX_TURNS
    assert result.text == "Out of turns: 2 and 4 so far."
    final = model.requests[-1]
    assert final.options["tool_choice"] == "none"
    assert final.messages[-1].content[-1] == TextBlock(FINAL_TURN_INSTRUCTION)
    assert types(result.events)[-2:] == ["max_iterations_reached", "run_finish"]
    assert len(model.requests) == 3
    # The instruction is only in the request: the history stays the conversation itself.
    assert all(FINAL_TURN_INSTRUCTION not in m.text for m in agent.messages)


async def test_tool_calls_in_the_final_answer_are_not_run() -> None:
    ran: list[int] = []

    @tool
    def record(n: int) -> str:
        """Records n."""
        ran.append(n)
        return "ok"

    model = ScriptedModel([tool_call("record", {"n": 1}), tool_call("record", {"n": 2})])
    agent = make_agent(model, [record], max_iterations=1)
    result = await agent.run("go")
    assert ran == [1] and result.termination_reason is TerminationReason.MAX_TURNS
    # The call is answered (not run), so the next request's history stays valid.
    closing = agent.messages[-1]
    assert closing.role == "user" and closing.tool_results[0].is_error
    assert "tools are disabled" in closing.tool_results[0].content
    assert of_type(result.events, EventType.TOOL_RESULT)[-1].data["synthetic"] is True


async def test_a_hook_stopping_mid_turn_stops_the_running_tools_first() -> None:
    cleaned = asyncio.Event()
    started = asyncio.Event()

    @tool(read_only=True)
    async def forever() -> str:
        """Never returns."""
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            cleaned.set()
        return "never"

    hooks = Hooks()

    @hooks.on("after_llm_response")
    async def stop(ctx: object) -> None:
        await started.wait()  # the tool is running while the hook decides
        raise StopRun("enough")

    agent = make_agent(ScriptedModel([tool_call("forever", id="f1")]), [forever], hooks=hooks)
    result = await asyncio.wait_for(agent.run("go"), 10)
    assert result.termination_reason is TerminationReason.STOP_REASON
    assert cleaned.is_set()  # the tool's own cleanup ran before the run ended
    assert agent.messages[-1].tool_results[0].tool_use_id == "f1"
    assert types(result.events)[-2:] == ["tool_result", "run_finish"]


async def test_safe_tools_run_in_parallel() -> None:
    barrier = asyncio.Barrier(3)

    @tool(read_only=True)
    async def meet(name: str) -> str:
        """Waits until all three calls are running at once."""
        await asyncio.wait_for(barrier.wait(), 5)
        return name

    model = ScriptedModel([[tool_call("meet", {"name": n}) for n in "abc"], "met"])
    result = await make_agent(model, [meet]).run("meet")
    # The barrier only opens if all three calls were in flight together.
    assert sorted(r["content"] for r in result.tool_calls) == ["a", "b", "c"]
    assert not any(r["is_error"] for r in result.tool_calls)


async def test_unsafe_tools_never_overlap_and_keep_order() -> None:
    active = 0
    overlaps = 0
    order: list[int] = []

    @tool
    async def write(n: int) -> str:
        """Writes (unsafe)."""
        nonlocal active, overlaps
        active += 1
        overlaps += active > 1
        await asyncio.sleep(0.01)
        order.append(n)
        active -= 1
        return str(n)

    model = ScriptedModel([[tool_call("write", {"n": i}) for i in range(4)], "done"])
    await make_agent(model, [write]).run("write")
    assert overlaps == 0 and order == [0, 1, 2, 3]


async def test_results_come_back_in_declared_order() -> None:
    @tool(read_only=True)
    async def wait(seconds: float) -> str:
        """Sleeps."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    model = ScriptedModel([[tool_call("wait", {"seconds": 0.05}), tool_call("wait", {"seconds": 0.0})], "done"])
    result = await make_agent(model, [wait]).run("go")
    finished = [r["content"] for r in result.tool_calls]
    assert finished == ["slept 0.0", "slept 0.05"]  # the short one finishes first...
    sent = model.requests[1].messages[-1].tool_results
    assert [b.content for b in sent] == ["slept 0.05", "slept 0.0"]  # ...but the model sees its own order


async def test_tools_start_while_the_model_is_still_streaming() -> None:
    tool_ran = asyncio.Event()

    @tool(read_only=True)
    async def probe() -> str:
        """Lets the model finish its response."""
        tool_ran.set()
        return "early"

    class WaitsForTheTool:
        """Streams a tool call, then goes on only once that tool has run."""

        name, provider, context_window = "waits", "test", 10_000

        async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
            if request.messages[-1].tool_results:
                yield TextDelta("done")
                yield MessageEnd("end_turn")
                return
            yield ToolCallStart(0, "p1", "probe")
            yield ToolCallEnd(0, "p1", "probe", "{}")
            await asyncio.wait_for(tool_ran.wait(), 5)  # times out if tools wait for the stream
            yield TextDelta("still talking")
            yield MessageEnd("tool_use")

    result = await make_agent(WaitsForTheTool(), [probe]).run("go")
    order = types(result.events)
    assert order.index("tool_result") < order.index("llm_complete") and result.text == "done"


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (tool_call("nope", {}), "Unknown tool 'nope'. Available tools: add"),
        (tool_call("add", '{"a": 1, "b":'), "not valid JSON"),
        (tool_call("add", {"a": "one", "b": 2}), "Invalid arguments for add: a:"),
        (tool_call("add", {"a": 1}), "b: Field required"),
    ],
)
async def test_bad_tool_calls_become_error_results_and_the_run_continues(call: object, expected: str) -> None:
    model = ScriptedModel([call, "recovered"])
    result = await make_agent(model, [add]).run("go")
    assert result.text == "recovered" and result.termination_reason is TerminationReason.END_TURN
    sent = model.requests[1].messages[-1].tool_results[0]
    assert sent.is_error and expected in sent.content


async def test_unparsable_arguments_are_kept_raw() -> None:
    model = ScriptedModel([tool_call("add", "{oops"), "ok"])
    result = await make_agent(model, [add]).run("go")
    ready = of_type(result.events, EventType.TOOL_CALL_READY)[0]
    assert ready.data["arguments"] == {"_raw": "{oops"} and "parse_error" in ready.data
    assert agent_history_tool_input(model) == {"_raw": "{oops"}


def agent_history_tool_input(model: ScriptedModel) -> dict:
    return model.requests[1].messages[1].tool_uses[0].input


async def test_a_tool_that_raises_or_times_out_becomes_an_error_result() -> None:
    @tool
    def broken() -> str:
        """Raises."""
        raise RuntimeError("disk on fire")

    @tool
    def refuses() -> str:
        """Raises ToolError."""
        raise ToolError("no such file: a.txt")

    @tool(timeout=0.05)
    async def slow() -> str:
        """Sleeps too long."""
        await asyncio.sleep(10)
        return "never"

    model = ScriptedModel([[tool_call("broken"), tool_call("refuses"), tool_call("slow")], "ok"])
    result = await make_agent(model, [broken, refuses, slow]).run("go")
    assert result.text == "ok"
    contents = [b.content for b in model.requests[1].messages[-1].tool_results]
    assert contents == ["broken raised RuntimeError: disk on fire", "no such file: a.txt", "slow timed out after 0.05 s."]


async def test_a_tool_can_end_the_run_with_a_final_message() -> None:
    @tool
    def finish(answer: str, ctx: ToolContext) -> str:
        """Ends the task."""
        ctx.stop(f"Final: {answer}")

    model = ScriptedModel([tool_call("finish", {"answer": "42"}), "never used"])
    result = await make_agent(model, [finish]).run("go")
    assert result.termination_reason is TerminationReason.TOOL_STOP and result.text == "Final: 42"
    assert len(model.requests) == 1
    # The history stays valid: the stopping call has its result.
    assert agent_messages_end_with_results(result)


def agent_messages_end_with_results(result: object) -> bool:
    return any(e.type is EventType.TOOL_RESULT for e in result.events)  # type: ignore[attr-defined]


async def test_tool_progress_is_streamed() -> None:
    @tool
    async def long(ctx: ToolContext) -> str:
        """Reports progress."""
        ctx.progress("step 1 of 2", 0.5)
        return "done"

    result = await make_agent(ScriptedModel([tool_call("long"), "ok"]), [long]).run("go")
    progress = of_type(result.events, EventType.TOOL_PROGRESS)
    assert [(p.data["message"], p.data["fraction"]) for p in progress] == [("step 1 of 2", 0.5)]


async def test_progress_from_a_sync_tool_streams_while_it_runs() -> None:
    import threading

    proceed = threading.Event()

    @tool
    def slow(ctx: ToolContext) -> str:
        """Reports progress from a worker thread, then waits to be let go."""
        time.sleep(0.2)  # report once the loop is surely idle, waiting for this tool
        ctx.progress("halfway", 0.5)
        return "let go while running" if proceed.wait(5) else "progress was not seen while running"

    agent = make_agent(ScriptedModel([tool_call("slow"), "ok"]), [slow])
    seen: list[str] = []
    async for event in agent.stream("go"):
        seen.append(event.type.value)
        if event.type is EventType.TOOL_PROGRESS:
            proceed.set()  # only reachable if progress arrived while the tool was still running
    assert seen.index("tool_progress") < seen.index("tool_result")
    assert agent.messages[-2].tool_results[0].content == "let go while running"


async def test_hooks_run_in_lifecycle_order() -> None:
    hooks = Hooks()
    seen: list[str] = []
    for point in HookPoint:
        hooks.on(point, lambda ctx: seen.append(ctx.point.value))
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"])
    await make_agent(model, [add], hooks=hooks).run("go")
    assert seen == [
        "before_iteration_start", "before_context_assembly", "after_context_assembly", "before_llm_call",
        "after_llm_response", "before_tool_execution", "after_tool_execution", "before_recursion",
        "after_iteration_end",
        "before_iteration_start", "before_context_assembly", "after_context_assembly", "before_llm_call",
        "after_llm_response", "after_iteration_end",
    ]  # fmt: skip


async def test_a_hook_can_stop_the_run() -> None:
    hooks = Hooks()

    @hooks.on("before_llm_call")
    async def budget(ctx: object) -> None:
        raise StopRun("budget exhausted")

    model = ScriptedModel(["never"])
    result = await make_agent(model, hooks=hooks).run("go")
    assert result.termination_reason is TerminationReason.STOP_REASON and model.requests == []
    assert result.events[-1].data["stop"] == "budget exhausted"


async def test_a_tool_hook_can_stop_the_run_after_answering_the_call() -> None:
    hooks = Hooks()

    @hooks.on("before_tool_execution")
    def guard(ctx: object) -> None:
        raise StopRun("no tools today", final_message="Stopped before running add.")

    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "never"])
    agent = make_agent(model, [add], hooks=hooks)
    result = await agent.run("go")
    assert result.termination_reason is TerminationReason.TOOL_STOP
    assert result.text == "Stopped before running add."
    assert agent.messages[-1].tool_results[0].content == "no tools today"


async def test_state_changes_follow_the_phases() -> None:
    agent = make_agent(ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"]), [add])
    seen: list[str] = []
    original = agent._new_context

    def tracking() -> object:
        ctx = original()
        ctx.state.on_state_change(lambda old, new: seen.append(new.value))
        return ctx

    agent._new_context = tracking  # type: ignore[method-assign]
    await agent.run("go")
    assert seen == [
        "receiving_input", "checking_context", "calling_llm", "processing_response", "executing_tools",
        "checking_context", "calling_llm", "processing_response", "completed",
    ]  # fmt: skip
    assert LoopState.COMPLETED.value == seen[-1]


async def test_an_unexpected_error_ends_with_error_not_a_traceback() -> None:
    hooks = Hooks()
    hooks.on("after_llm_response", lambda ctx: 1 / 0)
    result = await make_agent(ScriptedModel(["hi"]), hooks=hooks).run("go")
    assert result.termination_reason is TerminationReason.ERROR
    assert types(result.events)[-2:] == ["error", "run_finish"]
    assert "ZeroDivisionError" in result.events[-2].data["message"]


async def test_running_out_of_script_is_a_clear_error() -> None:
    result = await make_agent(ScriptedModel([])).run("go")
    assert result.termination_reason is TerminationReason.ERROR
    assert "add more responses" in result.error


# -- cancellation -----------------------------------------------------------------------------


async def test_cancel_before_the_first_call_makes_no_model_request() -> None:
    model = ScriptedModel(["never"])
    agent = make_agent(model)
    hooks = Hooks()
    hooks.on("before_iteration_start", lambda ctx: agent.cancel("changed my mind"))
    agent.hooks = hooks
    result = await agent.run("go")
    assert result.termination_reason is TerminationReason.USER_INTERRUPT and model.requests == []
    assert of_type(result.events, EventType.CANCELLED)[0].data["reason"] == "changed my mind"


async def test_cancel_mid_stream_interrupts_a_silent_model_at_once() -> None:
    model = ScriptedModel([[text("partial "), text("never arrives", delay=30)]])
    agent = make_agent(model)
    events = []

    async def consume() -> None:
        async for event in agent.stream("go"):
            events.append(event)
            if event.type is EventType.TEXT_DELTA:
                asyncio.get_running_loop().call_soon(agent.cancel)

    await asyncio.wait_for(consume(), 10)  # the model alone would take 30 s
    assert types(events)[-2:] == ["cancelled", "run_finish"]
    assert events[-1].data["reason"] == "user_interrupt"
    # The partial answer is kept in the history.
    assert agent.messages[-1].text == "partial "


async def test_cancel_mid_tool_closes_every_dangling_tool_use() -> None:
    started = asyncio.Event()

    @tool(read_only=True)
    async def forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.sleep(60)
        return "never"

    quick_done = asyncio.Event()

    @tool(read_only=True)
    async def quick() -> str:
        """Returns at once."""
        quick_done.set()
        return "2"

    model = ScriptedModel([[tool_call("forever"), tool_call("forever"), tool_call("quick")], "next run"])
    agent = make_agent(model, [forever, quick])

    async def cancel_when_started() -> None:
        await started.wait()
        await quick_done.wait()
        await asyncio.sleep(0)  # let the quick call's task record its result
        agent.cancel("stop")

    canceller = asyncio.create_task(cancel_when_started())
    result = await asyncio.wait_for(agent.run("go"), 10)
    await canceller
    assert result.termination_reason is TerminationReason.USER_INTERRUPT
    closing = agent.messages[-1]
    assert closing.role == "user" and len(closing.tool_results) == 3
    by_id = {b.tool_use_id: b for b in closing.tool_results}
    assert by_id["call_0_0"].is_error and "user interrupted" in by_id["call_0_0"].content
    assert by_id["call_0_2"].content == "2" and not by_id["call_0_2"].is_error
    # The next run sends a valid history: the new prompt joins the tool results' message.
    after = await agent.run("continue")
    assert after.text == "next run"
    assert model.requests[-1].messages[-1].content[-1] == TextBlock("continue")


async def test_cancel_from_another_thread() -> None:
    model = ScriptedModel([[text("a"), text("b", delay=30)]])
    agent = make_agent(model)
    loop_started = threading.Event()

    def other_thread() -> None:
        loop_started.wait(5)
        time.sleep(0.05)
        agent.cancel("from a thread")

    threading.Thread(target=other_thread).start()
    events = []
    async for event in agent.stream("go"):
        events.append(event)
        loop_started.set()
    assert events[-1].data["reason"] == "user_interrupt"


async def test_closing_the_stream_early_records_the_stop() -> None:
    agent = make_agent(ScriptedModel([[text("a"), text("b", delay=30)]]))
    stream = agent.stream("go")
    async for event in stream:
        if event.type is EventType.TEXT_DELTA:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert [e.type.value for e in agent.events][-2:] == ["cancelled", "run_finish"]
    assert not agent.running


async def test_closing_the_stream_at_run_start_still_records_the_end() -> None:
    agent = make_agent(ScriptedModel(["never"]))
    stream = agent.stream("go")
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert types(agent.events) == ["run_start", "cancelled", "run_finish"]
    assert agent.events[-1].data["reason"] == "user_interrupt"


async def test_a_second_run_while_one_is_running_is_refused() -> None:
    from agent_kernel import UserError

    agent = make_agent(ScriptedModel([[text("a", delay=0.05)], "b"]))
    first = asyncio.create_task(agent.run("1"))
    while not agent.running:
        await asyncio.sleep(0)
    with pytest.raises(UserError, match="already running"):
        await agent.run("2")
    await first


# -- run_sync ---------------------------------------------------------------------------------


def test_run_sync_outside_a_running_loop() -> None:
    assert make_agent(ScriptedModel(["sync"])).run_sync("go").text == "sync"


async def test_run_sync_inside_a_running_loop() -> None:
    # As in a notebook cell: a loop is running in this thread, and nothing nests it.
    result = make_agent(ScriptedModel(["still works"])).run_sync("go")
    assert result.text == "still works"


def test_turn_states_of_a_run_form_a_parent_chain() -> None:
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 1}), tool_call("add", {"a": 2, "b": 2}), "done"])
    agent = make_agent(model, [add])
    agent.run_sync("go")
    chain: list[TurnState] = agent.history
    assert [t.turn_counter for t in chain] == [0, 1, 2]
    assert all(chain[i + 1].parent_turn_id == chain[i].turn_id for i in range(2))


async def test_a_stream_closed_mid_tool_journals_the_closing_results(tmp_path: Path) -> None:
    from agent_kernel.journal import read_events, rebuild

    @tool(read_only=True)
    async def forever() -> str:
        """Never returns."""
        await asyncio.sleep(60)
        return "never"

    journal = tmp_path / "s.jsonl"
    agent = make_agent(ScriptedModel([tool_call("forever", id="f1")]), [forever], journal=journal)
    stream = agent.stream("go")
    async for event in stream:
        if event.type is EventType.TOOL_START:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    agent.close()
    events = read_events(journal)
    closing = [e for e in events if e.type is EventType.TOOL_RESULT]
    assert [(e.data["call_id"], e.data["synthetic"]) for e in closing] == [("f1", True)]
    assert [e.type.value for e in events][-2:] == ["cancelled", "run_finish"]
    # What the journal rebuilds is exactly the history the agent holds.
    assert rebuild(events).messages == agent.messages


async def test_tt_runs_from_its_public_arguments_alone() -> None:
    ctx = ExecutionContext(session_id="s1", config=LoopConfig(model=ScriptedModel(["Hello back."])))
    events = [e async for e in tt([Message.user("Hello")], TurnState.initial(), ctx)]
    assert events[-1].type is EventType.RUN_FINISH and events[-1].data["text"] == "Hello back."
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # an emitter was made for it


def test_tt_without_a_loop_config_says_how_to_give_one() -> None:
    with pytest.raises(UserError, match=r"config=LoopConfig\(model=\.\.\.\)"):
        tt([], TurnState.initial(), ExecutionContext(session_id="s1"))


async def test_without_a_turn_limit_the_run_goes_on_until_the_model_answers() -> None:
    model = ScriptedModel([tool_call("add", {"a": i, "b": 1}) for i in range(25)] + ["Done counting."])
    result = await make_agent(model, [add], max_iterations=None).run("count")
    assert result.termination_reason is TerminationReason.END_TURN and result.turns == 26
    assert not of_type(result.events, EventType.MAX_ITERATIONS_REACHED)
    assert result.events[0].data["max_iterations"] is None


def test_a_turn_limit_is_a_whole_number_or_none() -> None:
    with pytest.raises(UserError, match="or None for no limit"):
        make_agent(ScriptedModel([]), max_iterations=0)


async def test_after_iteration_end_fires_when_a_hook_or_an_error_ends_the_run() -> None:
    for ending, hook_point, script in (
        ("stop", "before_llm_call", ["never"]),
        ("error", None, [[text("partial "), fail_part("bad_request")]]),
    ):
        hooks = Hooks()
        ended: list[int] = []
        hooks.on("after_iteration_end", lambda ctx, ended=ended: ended.append(ctx.turn_state.turn_counter))
        if hook_point is not None:
            hooks.on(hook_point, lambda ctx: (_ for _ in ()).throw(StopRun("enough")))
        result = await make_agent(ScriptedModel(script), hooks=hooks).run("go")
        expected = TerminationReason.STOP_REASON if ending == "stop" else TerminationReason.ERROR
        assert result.termination_reason is expected and ended == [0], (ending, ended)


async def test_a_hook_stopping_at_after_iteration_end_does_not_call_it_twice() -> None:
    hooks = Hooks()
    ended: list[int] = []

    @hooks.on("after_iteration_end")
    def stop_after_first(ctx: object) -> None:
        ended.append(1)
        raise StopRun("one turn is enough")

    result = await make_agent(ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"]), [add], hooks=hooks).run("go")
    assert result.termination_reason is TerminationReason.STOP_REASON and ended == [1]


async def test_a_tool_that_cancels_on_error_stops_its_unstarted_siblings() -> None:
    ran: list[str] = []

    @tool(on_error="cancel")
    def deploy(target: str) -> str:
        """Deploys."""
        raise ToolError(f"{target} is down")

    @tool
    def notify(who: str) -> str:
        """Notifies someone."""
        ran.append(who)
        return "sent"

    model = ScriptedModel([[tool_call("deploy", {"target": "prod"}), tool_call("notify", {"who": "ops"})], "Deploy failed."])
    result = await make_agent(model, [deploy, notify], permissions="bypass").run("ship")
    assert ran == [] and result.text == "Deploy failed."
    assert "not started: a sibling tool call failed (deploy)" in result.tool_calls[1]["content"]
    assert result.stats.errors == 2  # the failure and the call it cancelled


def test_on_error_settings_say_what_they_take() -> None:
    with pytest.raises(ValueError, match="'continue', 'cancel'"):
        tool(on_error="stop")(lambda: None)
    with pytest.raises(UserError, match="on_tool_error"):
        make_agent(ScriptedModel([]), on_tool_error="abort")


async def test_the_error_counter_counts_failed_model_attempts_and_failed_calls() -> None:
    model = ScriptedModel([[fail_part("server")], [tool_call("nope", {})], "ok"])
    result = await make_agent(model, retry_base_delay=0.0).run("go")
    assert result.text == "ok" and result.stats.errors == 2  # one retried attempt, one unknown tool


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(["ok", "fail", "halt"]), min_size=1, max_size=7), cancel_on_error=st.booleans())
def test_no_call_after_a_stop_or_a_cancelling_failure_ever_starts(kinds: list[str], cancel_on_error: bool) -> None:
    ran: list[int] = []

    @tool
    def step(i: int, kind: str) -> ToolResult:
        """One step of a plan (a side effect: runs alone, in order)."""
        ran.append(i)
        if kind == "fail":
            raise ToolError(f"step {i} failed")
        return ToolResult(f"step {i}", stop=kind == "halt", final_message="Halted." if kind == "halt" else None)

    calls = [tool_call("step", {"i": i, "kind": k}) for i, k in enumerate(kinds)]
    agent = make_agent(ScriptedModel([calls, "Finished."]), [step], permissions="bypass", on_tool_error="cancel" if cancel_on_error else "continue")
    result = agent.run_sync("go")
    closing = {"halt", "fail"} if cancel_on_error else {"halt"}
    last = next((i for i, k in enumerate(kinds) if k in closing), len(kinds) - 1)
    assert ran == list(range(last + 1))  # every call up to the one that closed the batch, none after
    contents = [c["content"] for c in result.tool_calls]
    assert len(contents) == len(kinds) and all("not started" in c for c in contents[last + 1 :])
    halted = "halt" in kinds[: last + 1]
    assert result.termination_reason is (TerminationReason.TOOL_STOP if halted else TerminationReason.END_TURN)
    assert result.text == ("Halted." if halted else "Finished.")
