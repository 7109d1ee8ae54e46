"""Tools that start while the model streams: one turn's time against its physical limit.

Five tool calls stream 0.3 s apart; the first tool takes 2 s, the others 0.1 s. The physical
limit is the latest (block end + duration) over the calls; a loop that starts tools only after
the stream ends cannot beat (stream end + longest tool). Goal: within 5% of the limit.

Run: python benchmarks/streaming_tools.py
"""

from __future__ import annotations

import asyncio

from agent_kernel import Agent, EventType, tool
from agent_kernel.models.scripted import ScriptedModel, tool_call

GAP = 0.3
DURATIONS = [2.0, 0.1, 0.1, 0.1, 0.1]


@tool(read_only=True)
async def work(seconds: float) -> str:
    """Works for `seconds`."""
    await asyncio.sleep(seconds)
    return f"worked {seconds} s"


async def main() -> None:
    # chunk=10_000 sends each call's arguments in one piece, GAP seconds after the previous block.
    calls = [tool_call("work", {"seconds": d}, chunk=10_000, delay=GAP) for d in DURATIONS]
    agent = Agent(ScriptedModel([calls, "done"]), tools=[work], journal=None, context=None, permissions="bypass")
    events = [e async for e in agent.stream("go")]
    llm_start = next(e for e in events if e.type is EventType.LLM_START)
    ready = [e for e in events if e.type is EventType.TOOL_CALL_READY]
    stream_end = next(e for e in events if e.type is EventType.LLM_COMPLETE).ts - llm_start.ts
    turn = next(e for e in events if e.type is EventType.RECURSION).ts - llm_start.ts
    limit = max(r.ts - llm_start.ts + d for r, d in zip(ready, DURATIONS))
    after_stream = stream_end + max(DURATIONS)
    print(f"turn time: {turn:.3f} s")
    print(f"physical limit (latest block end + its duration): {limit:.3f} s -> {turn / limit:.3f}x of the limit (goal ≤ 1.05x)")
    print(f"if tools started only after the stream ended: {after_stream:.3f} s ({after_stream / turn:.2f}x slower than ours)")


if __name__ == "__main__":
    asyncio.run(main())
