"""Cancelling a run while a synchronous tool blocks: the run ends, and says what it left running."""

from __future__ import annotations

import asyncio
import threading

from agent_kernel import EventType, TerminationReason, tool
from agent_kernel.models.scripted import ScriptedModel, tool_call

from .helpers import make_agent, of_type

# A safety net only: if cancel did not return, the blocked tool is let go so the test fails
# instead of hanging the suite. The assertions never depend on it.
_SAFETY_S = 60


def _blocking_tool() -> tuple[object, threading.Event, threading.Event, threading.Event]:
    started, release, exited = threading.Event(), threading.Event(), threading.Event()

    @tool(read_only=True)
    def wait_for_release() -> str:
        """Blocks until the test releases it."""
        started.set()
        try:
            release.wait(_SAFETY_S)
            return "released"
        finally:
            exited.set()

    return wait_for_release, started, release, exited


async def test_run_sync_returns_after_cancel_while_a_sync_tool_still_blocks() -> None:
    blocking, started, release, exited = _blocking_tool()
    agent = make_agent(ScriptedModel([[tool_call("wait_for_release", id="c1")], "never read"]), [blocking])

    def cancel_once_started() -> None:
        started.wait(_SAFETY_S)
        agent.cancel("stop pressed")

    threading.Thread(target=cancel_once_started, daemon=True).start()
    # run_sync from a thread with no event loop, as a script calls it (asyncio.run on its own loop).
    result = await asyncio.to_thread(agent.run_sync, "go")
    try:
        assert not release.is_set(), "run_sync waited for the blocked tool instead of returning on cancel"
        assert result.termination_reason is TerminationReason.USER_INTERRUPT
        cancelled = of_type(agent.events, EventType.CANCELLED)[-1]
        assert cancelled.data["reason"] == "stop pressed"
        assert cancelled.data["still_running"] == [{"call_id": "c1", "name": "wait_for_release"}]
        # The history stays valid: the abandoned call has a synthetic result.
        assert agent.messages[-1].tool_results[0].is_error
    finally:
        release.set()
    assert exited.wait(_SAFETY_S), "the released tool thread did not exit"


async def test_an_awaited_run_ends_on_cancel_and_the_late_result_is_dropped() -> None:
    blocking, started, release, exited = _blocking_tool()
    agent = make_agent(ScriptedModel([[tool_call("wait_for_release", id="c1")], "next answer"]), [blocking])

    async def cancel_once_started() -> None:
        await asyncio.to_thread(started.wait, _SAFETY_S)
        agent.cancel("enough")

    canceller = asyncio.create_task(cancel_once_started())
    result = await agent.run("go")
    await canceller
    try:
        assert not release.is_set()
        assert result.termination_reason is TerminationReason.USER_INTERRUPT
        assert of_type(agent.events, EventType.CANCELLED)[-1].data["still_running"][0]["call_id"] == "c1"
    finally:
        release.set()
    assert await asyncio.to_thread(exited.wait, _SAFETY_S)
    # The thread's late result reaches nothing: the next run goes on from the synthetic result.
    after = await agent.run("carry on")
    assert after.text == "next answer"
    answered = [b for m in agent.messages for b in m.tool_results if b.tool_use_id == "c1"]
    assert len(answered) == 1 and answered[0].is_error and "released" not in answered[0].content


async def test_a_cancel_after_sync_tools_finished_reports_nothing_still_running() -> None:
    @tool(read_only=True)
    def quick() -> str:
        """Returns at once."""
        return "ok"

    never = asyncio.Event()

    @tool(read_only=True)
    async def waits() -> str:
        """Waits on the loop (cancellable)."""
        await never.wait()
        return "never"

    agent = make_agent(ScriptedModel([[tool_call("quick", id="q"), tool_call("waits", id="w")]]), [quick, waits])
    tool_results: list[str] = []
    async for event in agent.stream("go"):
        if event.type is EventType.TOOL_RESULT:
            tool_results.append(event.data["call_id"])
            if event.data["call_id"] == "q":
                agent.cancel("done waiting")
    cancelled = of_type(agent.events, EventType.CANCELLED)[-1]
    assert "q" in tool_results
    assert "still_running" not in cancelled.data


async def test_a_sync_tool_calling_sys_exit_fails_its_call_not_the_run() -> None:
    @tool(read_only=True)
    def quits() -> str:
        """Calls sys.exit, as a command-line helper might."""
        raise SystemExit(2)

    agent = make_agent(ScriptedModel([[tool_call("quits", id="x")], "carried on"]), [quits])
    result = await agent.run("go")
    [tool_result] = of_type(result.events, EventType.TOOL_RESULT)
    assert tool_result.data["is_error"] and "SystemExit" in tool_result.data["content"]
    assert result.text == "carried on"
