"""Loop overhead with an instant scripted model: µs per streamed text event, ms per tool turn.

Goals (issue: foundation): ≤ 10 µs per text event; ≤ 0.5 ms per tool turn; the 500-turn cost per
turn ≤ 1.2× the 50-turn cost. When pydantic-ai and openai-agents are installed (the ``bench``
extra) the same workloads run through them with their own instant test models, for comparison.

Each figure is the fastest of several rounds, so other work on the machine does not inflate it.

Run: python benchmarks/loop_overhead.py
"""

from __future__ import annotations

import asyncio
import gc
import time

from agent_kernel import Agent, tool
from agent_kernel.models.scripted import ScriptedModel, text, tool_call

TEXT_EVENTS = 50_000


@tool(read_only=True)
def echo(x: int) -> int:
    """Returns x."""
    return x


async def _ping(x: int) -> int:
    return x


# An async tool keeps thread hand-offs out of the loop's own cost.
ping = tool(read_only=True)(_ping)
ping.name = "ping"


def _agent(model: ScriptedModel, tools: list = ()) -> Agent:
    return Agent(model, tools=tools, journal=None, context=None, max_iterations=10_000, stall_timeout=None)


async def text_events() -> float:
    model = ScriptedModel([[text("x" * TEXT_EVENTS, chunk=1)]])
    agent = _agent(model)
    gc.collect()
    t0 = time.perf_counter()
    n = 0
    async for _event in agent.stream("go"):
        n += 1
    elapsed = time.perf_counter() - t0
    return elapsed / TEXT_EVENTS * 1e6


async def tool_turns(turns: int) -> float:
    script = [[tool_call("ping", {"x": i})] for i in range(turns)] + ["done"]
    agent = _agent(ScriptedModel(script), [ping])
    gc.collect()
    t0 = time.perf_counter()
    result = await agent.run("go")
    elapsed = time.perf_counter() - t0
    assert result.turns == turns + 1, result
    return elapsed / turns * 1e3


def peers_text() -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        from pydantic_ai import Agent as PAgent
        from pydantic_ai.models.function import FunctionModel

        async def stream_fn(messages, info):  # type: ignore[no-untyped-def]
            for _ in range(TEXT_EVENTS):
                yield "x"

        pa = PAgent(FunctionModel(stream_function=stream_fn))

        async def run_pa() -> float:
            t0 = time.perf_counter()
            async with pa.run_stream("go") as r:
                async for _ in r.stream_text(delta=True, debounce_by=None):
                    pass
            return (time.perf_counter() - t0) / TEXT_EVENTS * 1e6

        out["pydantic-ai"] = asyncio.run(run_pa())
    except ImportError:
        pass
    return out


def peers_tools(turns: int) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        from pydantic_ai import Agent as PAgent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel

        state = {"n": 0}

        def fn(messages, info):  # type: ignore[no-untyped-def]
            state["n"] += 1
            if state["n"] <= turns:
                return ModelResponse(parts=[ToolCallPart("ping", {"x": state["n"]})])
            return ModelResponse(parts=[TextPart("done")])

        pa = PAgent(FunctionModel(fn))

        @pa.tool_plain
        async def ping(x: int) -> int:
            return x

        from pydantic_ai.usage import UsageLimits

        t0 = time.perf_counter()
        pa.run_sync("go", usage_limits=UsageLimits(request_limit=turns + 5))
        out["pydantic-ai"] = (time.perf_counter() - t0) / turns * 1e3
    except ImportError:
        pass
    try:
        out.update(_openai_agents_tools(turns))
    except ImportError:
        pass
    return out


def _openai_agents_tools(turns: int) -> dict[str, float]:
    from agents import Agent as OAgent
    from agents import ModelSettings, Runner, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model as OModel
    from agents.usage import Usage as OUsage
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    class Scripted(OModel):
        def __init__(self) -> None:
            self.n = 0

        async def get_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            self.n += 1
            if self.n <= turns:
                item = ResponseFunctionToolCall(arguments='{"x": 1}', call_id=f"c{self.n}", name="ping", type="function_call", id=f"f{self.n}")
            else:
                item = ResponseOutputMessage(
                    id="m", role="assistant", status="completed", type="message",
                    content=[ResponseOutputText(text="done", type="output_text", annotations=[])],
                )
            return ModelResponse(output=[item], usage=OUsage(), response_id=None)

        def stream_response(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            raise RuntimeError("this benchmark runs openai-agents without streaming")

    @function_tool
    async def ping(x: int) -> int:
        return x

    set_tracing_disabled(True)  # tracing would try to export over the network
    agent = OAgent(name="bench", model=Scripted(), tools=[ping], model_settings=ModelSettings())
    t0 = time.perf_counter()
    Runner.run_sync(agent, "go", max_turns=turns + 5)
    return {"openai-agents": (time.perf_counter() - t0) / turns * 1e3}


def main() -> None:
    # The fastest of several rounds: a loaded machine only ever adds time (as timeit does).
    per_event = min(asyncio.run(text_events()) for _ in range(3))
    print(f"text events: {per_event:.2f} µs per event over {TEXT_EVENTS:,} deltas (goal ≤ 10 µs: {per_event / 10:.2f}x of the limit)")
    for name, us in peers_text().items():
        print(f"  {name}: {us:.2f} µs per event on the same workload (ours is {per_event / us:.2f}x)")
    t50 = min(asyncio.run(tool_turns(50)) for _ in range(15))
    t500 = min(asyncio.run(tool_turns(500)) for _ in range(5))
    print(f"tool turns: {t50:.3f} ms per turn at 50 turns, {t500:.3f} ms at 500 (goal ≤ 0.5 ms: {t500 / 0.5:.2f}x of the limit)")
    print(f"flatness: 500-turn cost per turn is {t500 / t50:.2f}x the 50-turn cost (goal ≤ 1.2x)")
    for turns, ours in ((50, t50), (500, t500)):
        for name, ms in peers_tools(turns).items():
            print(f"  {name}: {ms:.3f} ms per tool turn at {turns} turns (ours is {ours / ms:.2f}x)")


if __name__ == "__main__":
    main()
