"""MCP tool-call overhead: ms per call to mcp-server-time's get_current_time over stdio.

Three figures, each the fastest of several rounds:

- raw: the official ``mcp`` client calling the tool in a loop (the floor);
- agent: an ``Agent`` whose scripted model asks for the same calls (one turn, run one at a time),
  so each call goes through the loop, validation and permissions to the connection, which lives
  on the caller's loop (``asyncio.run(main())`` here, the kernel's loop in a notebook);
- local: the same agent calling a local ``@tool`` that does the same work (zoneinfo), to show what
  the MCP round trip itself costs.

Goal: agent ≤ 1.2× raw (the agent adds at most a fifth to what the MCP client costs).

Run: python benchmarks/mcp_overhead.py
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import json
import sys
import time
from zoneinfo import ZoneInfo

from agent_kernel import Agent, tool
from agent_kernel.mcp import MCPServer
from agent_kernel.models.scripted import ScriptedModel, tool_call

CALLS = 100
ROUNDS = 7
GOAL = 1.2
ARGS = {"timezone": "UTC"}
COMMAND = (sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC")


@tool(read_only=True)
async def get_current_time(timezone: str) -> str:
    """The current time in ``timezone`` (what mcp-server-time answers)."""
    now = datetime.datetime.now(ZoneInfo(timezone))
    return json.dumps({"timezone": timezone, "datetime": now.isoformat(timespec="seconds"), "day_of_week": now.strftime("%A"), "is_dst": bool(now.dst())}, indent=2)


async def raw_round(session: object) -> float:
    """ms per call through the bare SDK client, one round."""
    gc.collect()
    t0 = time.perf_counter()
    for _ in range(CALLS):
        await session.call_tool("get_current_time", ARGS)  # type: ignore[attr-defined]
    return (time.perf_counter() - t0) / CALLS * 1e3


def _script(name: str) -> list:
    # One turn asking for every call; max_parallel_tools=1 runs them one after another like the raw loop.
    return [[tool_call(name, ARGS, id=f"c{i}") for i in range(CALLS)], "done"]


async def agent_round(name: str, agent: Agent) -> float:
    """ms per call through the agent, one round, the loop's fixed cost of a run subtracted."""
    agent.model = ScriptedModel([[], "done"])  # the same run with no calls
    t0 = time.perf_counter()
    await agent.run("warm")
    fixed = time.perf_counter() - t0
    agent.model = ScriptedModel(_script(name))
    agent.messages.clear()
    gc.collect()
    t0 = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - t0
    assert len(result.tool_calls) == CALLS and not any(c["is_error"] for c in result.tool_calls), result.error or result.tool_calls[:1]
    agent.messages.clear()
    return (elapsed - fixed) / CALLS * 1e3


def _agent(**kwargs: object) -> Agent:
    return Agent(ScriptedModel(["warm"]), journal=None, context=None, stall_timeout=None, max_parallel_tools=1, permissions="bypass", **kwargs)  # type: ignore[arg-type]


async def main() -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=COMMAND[0], args=list(COMMAND[1:]))
    local_agent = _agent(tools=[get_current_time])
    raw, via_agent, local = [], [], []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.call_tool("get_current_time", ARGS)  # warm-up
        async with _agent(mcp=[MCPServer.stdio("time", *COMMAND)]) as agent:
            await agent.run("connect")  # starts the server and lists its tools
            agent.messages.clear()
            # Rounds alternate, so a busy moment on the machine hits both sides alike.
            for _ in range(ROUNDS):
                raw.append(await raw_round(session))
                via_agent.append(await agent_round("mcp__time__get_current_time", agent))
                local.append(await agent_round("get_current_time", local_agent))
    r, a, lo = min(raw), min(via_agent), min(local)
    print(f"raw mcp client:          {r:8.3f} ms per call")
    print(f"agent -> MCP stdio:      {a:8.3f} ms per call  ({a / r:.2f}x raw; goal <= {GOAL}x)")
    print(f"agent -> local @tool:    {lo:8.3f} ms per call  (MCP costs {a / lo:.1f}x a local tool)")
    print(f"agent overhead over raw: {a - r:8.3f} ms per call")
    print(f"ratio to goal: {a / r / GOAL:.2f} ({'within' if a / r <= GOAL else 'over'} the {GOAL}x goal)")


if __name__ == "__main__":
    asyncio.run(main())
