"""Hooks that act: replacing a request, deciding a tool call, adding context; state callbacks."""

from __future__ import annotations

from typing import Any

from agent_kernel import EventType, HookPoint, Hooks, LoopState, TerminationReason, tool
from agent_kernel.messages import Message
from agent_kernel.models._base import ModelRequest
from agent_kernel.models.scripted import ScriptedModel, tool_call
from agent_kernel.runtime._hooks import HOOK_CONTEXT_TAG, Decision, HookContext

from .helpers import make_agent, of_type

ran: list[str] = []


@tool
def delete_everything(path: str) -> str:
    """Deletes every file under a path."""
    ran.append(path)
    return f"deleted {path}"


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


async def test_a_rejecting_hook_stops_the_call_and_the_model_reads_why() -> None:
    ran.clear()
    hooks = Hooks()

    @hooks.on(HookPoint.BEFORE_TOOL_EXECUTION)
    def guard(ctx: HookContext) -> Decision | None:
        if ctx.data["call"].name == "delete_everything":
            return Decision.reject("deleting is not allowed in this notebook")
        return None

    model = ScriptedModel([tool_call("delete_everything", {"path": "/"}), "I could not delete it."])
    result = await make_agent(model, [delete_everything], hooks=hooks).run("clean up")
    assert ran == []
    answer = model.requests[1].messages[-1].tool_results[0]
    assert answer.is_error and "deleting is not allowed in this notebook" in answer.content
    decision = of_type(result.events, EventType.APPROVAL_DECISION)[0].data
    assert (decision["decision"], decision["decided_by"]) == ("reject", "hook")
    assert result.termination_reason is TerminationReason.END_TURN


async def test_an_approving_hook_lets_the_call_run() -> None:
    hooks = Hooks()
    hooks.on("before_tool_execution", lambda ctx: Decision.approve("sums are harmless"))
    model = ScriptedModel([tool_call("add", {"a": 2, "b": 3}), "5"])
    await make_agent(model, [add], hooks=hooks).run("2+3?")
    assert model.requests[1].messages[-1].tool_results[0].content == "5"


async def test_before_llm_call_can_replace_the_messages_sent() -> None:
    hooks = Hooks()
    hooks.on("before_llm_call", lambda ctx: [Message.user("Say only: replaced.")])
    model = ScriptedModel(["replaced."])
    agent = make_agent(model, hooks=hooks)
    result = await agent.run("the original question")
    assert [m.text for m in model.requests[0].messages] == ["Say only: replaced."]
    assert agent.messages[0].text == "the original question"  # the conversation is left as it was
    assert of_type(result.events, EventType.LLM_START)[0].data["request_replaced"] is True


async def test_before_llm_call_can_replace_the_whole_request() -> None:
    hooks = Hooks()

    def cheaper(ctx: HookContext) -> ModelRequest:
        request: ModelRequest = ctx.data["request"]
        return ModelRequest(request.messages, "Answer in one word.", request.tools, {"max_tokens": 5})

    hooks.on("before_llm_call", cheaper)
    model = ScriptedModel(["Yes."])
    await make_agent(model, hooks=hooks, system="Be thorough.").run("ok?")
    assert model.requests[0].system == "Answer in one word." and model.requests[0].options == {"max_tokens": 5}


async def test_after_context_assembly_adds_marked_context_to_the_request_only() -> None:
    hooks = Hooks()
    hooks.on("after_context_assembly", lambda ctx: "The user's timezone is UTC+2.")
    model = ScriptedModel(["Noted."])
    agent = make_agent(model, hooks=hooks)
    result = await agent.run("what time is it?")
    sent = model.requests[0].messages[-1].text
    assert "what time is it?" in sent
    assert f"<{HOOK_CONTEXT_TAG}>\nThe user's timezone is UTC+2.\n</{HOOK_CONTEXT_TAG}>" in sent
    assert agent.messages[0].text == "what time is it?"
    assert of_type(result.events, EventType.LLM_START)[0].data["hook_context"] == ["The user's timezone is UTC+2."]


async def test_a_hook_returning_the_wrong_kind_of_value_ends_the_run_with_a_hook_error() -> None:
    hooks = Hooks()
    hooks.on("before_tool_execution", lambda ctx: "yes please")
    result = await make_agent(ScriptedModel([tool_call("add", {"a": 1, "b": 1}), "2"]), [add], hooks=hooks).run("1+1")
    assert result.termination_reason is TerminationReason.ERROR
    error = of_type(result.events, EventType.ERROR)[0].data
    assert error["kind"] == "hook" and "returns None or a Decision" in error["message"]


async def test_after_iteration_end_fires_on_every_turn_the_final_one_included() -> None:
    hooks = Hooks()
    ended: list[int] = []
    hooks.on("after_iteration_end", lambda ctx: ended.append(ctx.turn_state.turn_counter))
    await make_agent(ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"]), [add], hooks=hooks).run("go")
    assert ended == [0, 1]


def test_a_hook_that_raises_ends_the_run_with_an_error_and_never_escapes_run_sync() -> None:
    for point in ("before_llm_call", "after_llm_response", "before_tool_execution", "after_tool_execution", "after_iteration_end"):
        hooks = Hooks()

        def broken(ctx: HookContext) -> None:
            raise ValueError("the hook is broken")

        hooks.on(point, broken)
        agent = make_agent(ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"]), [add], hooks=hooks)
        result = agent.run_sync("go")
        assert result.termination_reason is TerminationReason.ERROR, point
        error = of_type(result.events, EventType.ERROR)[0].data
        assert error["kind"] == "hook" and "the hook is broken" in error["message"], point
        assert of_type(result.events, EventType.RUN_FINISH)[-1].data["reason"] == "error"
        assert not agent.running


def test_on_state_change_sees_every_phase_of_a_run() -> None:
    seen: list[tuple[str, str]] = []
    agent = make_agent(ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"]), [add], on_state_change=lambda old, new: seen.append((old.value, new.value)))
    agent.run_sync("go")
    phases = [new for _, new in seen]
    assert phases[:2] == ["receiving_input", "checking_context"] and phases[-1] == "completed"
    assert {"calling_llm", "processing_response", "executing_tools"} <= set(phases)
    # Each change is journaled too, in the same order (the end is the run_finish itself).
    journaled = [(e.data["old"], e.data["new"]) for e in agent.events if e.type is EventType.STATE_CHANGE]
    assert journaled == seen[:-1] and seen[0][0] == "idle"


def test_a_state_callback_that_raises_ends_the_run_with_a_hook_error() -> None:
    def fussy(old: LoopState, new: LoopState) -> None:
        if new is LoopState.EXECUTING_TOOLS:
            raise RuntimeError("no tools while I watch")

    agent = make_agent(ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"]), [add], on_state_change=fussy)
    result = agent.run_sync("go")
    assert result.termination_reason is TerminationReason.ERROR
    error: dict[str, Any] = of_type(result.events, EventType.ERROR)[0].data
    assert error["kind"] == "hook" and "no tools while I watch" in error["message"]
    # The history stays valid: the call the run stopped at has an answer.
    assert agent.messages[-1].tool_results


def test_a_state_callback_that_raises_as_the_run_completes_still_ends_it_with_an_error() -> None:
    def fussy(old: LoopState, new: LoopState) -> None:
        if new is LoopState.COMPLETED:
            raise RuntimeError("not done yet")

    result = make_agent(ScriptedModel(["Hi."]), on_state_change=fussy).run_sync("go")
    assert result.termination_reason is TerminationReason.ERROR
    assert of_type(result.events, EventType.ERROR)[0].data["kind"] == "hook"
