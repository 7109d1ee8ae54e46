"""Steering a running agent: messages sent in mid-run, pause and resume at turn boundaries."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_kernel import Agent, AgentEvent, EventType, Hooks, TerminationReason, tool
from agent_kernel.journal import read_events
from agent_kernel.messages import TextBlock
from agent_kernel.models.scripted import ScriptedModel, tool_call

from .helpers import make_agent, of_type, types


def waiting_tool() -> tuple[asyncio.Event, asyncio.Event, object]:
    """A tool that says it started, then waits until the test lets it go."""
    started, go = asyncio.Event(), asyncio.Event()

    @tool(read_only=True)
    async def fetch() -> str:
        """Fetches the data."""
        started.set()
        await go.wait()
        return "the data"

    return started, go, fetch


async def test_a_steered_message_reaches_the_model_at_the_next_turn() -> None:
    started, go, fetch = waiting_tool()
    model = ScriptedModel([tool_call("fetch"), "Here is the data, in French."])
    agent = make_agent(model, [fetch])
    run = asyncio.create_task(agent.run("get the data"))
    await started.wait()
    assert await asyncio.to_thread(agent.steer, "Answer in French, please.")  # from another thread
    go.set()
    result = await run
    sent = model.requests[1].messages[-1]
    assert sent.role == "user" and sent.tool_results[0].content == "the data"
    assert sent.content[-1] == TextBlock("Answer in French, please.")
    steer = of_type(result.events, EventType.STEER)[0]
    assert steer.data == {"text": "Answer in French, please."}
    order = types(result.events)
    assert order.index("recursion") < order.index("steer") < len(order) - 1 - order[::-1].index("iteration_start")


async def test_a_message_steered_during_the_final_answer_is_answered_before_the_run_ends() -> None:
    model = ScriptedModel(["Done.", "Also done in French: Fini."])
    hooks = Hooks()
    agent = make_agent(model, hooks=hooks)
    steered: list[bool] = []
    hooks.on("after_llm_response", lambda ctx: steered or steered.append(agent.steer("And in French?")))
    result = await agent.run("finish")
    assert result.text == "Also done in French: Fini." and result.turns == 2
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "assistant"]
    assert agent.messages[2].text == "And in French?"


def test_steer_without_a_run_queues_nothing() -> None:
    agent = make_agent(ScriptedModel(["Hi."]))
    assert agent.steer("hello?") is False and agent.pause() is False and agent.resume_run() is False


async def collect(agent: Agent, prompt: str, seen: asyncio.Event, kind: EventType) -> list[AgentEvent]:
    """Streams a run, setting ``seen`` when an event of ``kind`` arrives."""
    events = []
    async for event in agent.stream(prompt):
        events.append(event)
        if event.type is kind:
            seen.set()
    return events


async def test_a_paused_run_holds_at_the_turn_boundary_until_resumed(tmp_path: Path) -> None:
    started, go, fetch = waiting_tool()
    model = ScriptedModel([tool_call("fetch"), "Resumed and answered."])
    agent = make_agent(model, [fetch], journal=tmp_path / "s.jsonl")
    paused = asyncio.Event()
    run = asyncio.create_task(collect(agent, "get it", paused, EventType.PAUSED))
    await started.wait()
    assert agent.pause()
    go.set()
    await paused.wait()
    # Held: the tool's turn ended, and no model call was made for the next one.
    assert agent.paused and len(model.requests) == 1
    agent.steer("While you were paused: keep it short.")
    assert agent.resume_run()
    events = await run
    order = types(events)
    assert order.index("recursion") < order.index("paused") < order.index("resumed") < order.index("steer")
    assert of_type(events, EventType.PAUSED)[0].data == {"steers": 0}
    assert model.requests[1].messages[-1].content[-1] == TextBlock("While you were paused: keep it short.")
    assert events[-1].data["reason"] == "end_turn"
    journaled = types(read_events(tmp_path / "s.jsonl"))
    assert {"paused", "resumed", "steer"} <= set(journaled)


async def test_a_paused_run_can_still_be_cancelled() -> None:
    started, go, fetch = waiting_tool()
    model = ScriptedModel([tool_call("fetch"), "never sent"])
    agent = make_agent(model, [fetch])
    paused = asyncio.Event()
    run = asyncio.create_task(collect(agent, "get it", paused, EventType.PAUSED))
    await started.wait()
    agent.pause()
    go.set()
    await paused.wait()
    agent.cancel("stop while paused")
    events = await run
    assert events[-1].data["reason"] == TerminationReason.USER_INTERRUPT.value
    assert "resumed" not in types(events) and len(model.requests) == 1
    assert of_type(events, EventType.CANCELLED)[0].data["reason"] == "stop while paused"


async def test_resume_rebuilds_the_steered_messages(tmp_path: Path) -> None:
    started, go, fetch = waiting_tool()
    path = tmp_path / "s.jsonl"
    agent = make_agent(ScriptedModel([tool_call("fetch"), "ok"]), [fetch], journal=path)
    run = asyncio.create_task(agent.run("get it"))
    await started.wait()
    agent.steer("one more thing")
    go.set()
    await run
    agent.close()
    resumed = Agent.resume(path, model=ScriptedModel([]), journal=None, context=None)
    assert resumed.messages == agent.messages
    assert resumed.messages[2].content[-1] == TextBlock("one more thing")
