"""The OpenAI adapter and the loop against a real OpenAI-compatible server: llama.cpp.

A ``llama-cpp-python`` server on loopback serves SmolLM2-135M-Instruct (see ``llama_server``), and
``Agent(OpenAIModel(..., base_url=...))`` talks to it through the real ``openai`` SDK over real
HTTP: the server's own request validation, chat template, grammar-constrained tool calls and SSE
framing are what the adapter meets. The model is tiny, so the tests assert behaviour (events,
termination reasons, costs), never what it says; ``max_tokens`` keeps every answer short.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_kernel import Agent, EventType, RunResult, TerminationReason, tool
from agent_kernel.events._event import AgentEvent
from agent_kernel.journal import read_events
from agent_kernel.models import OpenAIModel
from agent_kernel.models._pricing import price

from .llama_server import N_CTX, LlamaServer, llama_server

__all__ = ["llama_server"]  # the fixture, imported so pytest finds it here

# Greedy decoding and a fixed seed: the same answer on every run, as far as llama.cpp allows.
DETERMINISTIC: dict[str, Any] = {"temperature": 0.0, "openai": {"seed": 7}}
# Answers end at the first sentence: a reply cut off by max_tokens would be continued (up to
# three more calls), which only makes the suite slower.
ONE_SENTENCE: dict[str, Any] = {"stop": [".", "\n"]}
# A model id in the price table: the server answers under whatever name the request gives.
PRICED_NAME = "gpt-4.1-mini"


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def model_for(server: LlamaServer, name: str | None = None, **kwargs: Any) -> OpenAIModel:
    return OpenAIModel(name or server.model, base_url=server.base_url, context_window=N_CTX, **kwargs)


def agent_for(
    server: LlamaServer, tmp_path: Path, *, max_tokens: int = 32, short: bool = True, model: OpenAIModel | None = None, **kwargs: Any
) -> Agent:
    options = {**DETERMINISTIC, **(ONE_SENTENCE if short else {}), "max_tokens": max_tokens, **kwargs.pop("model_options", {})}
    return Agent(model or model_for(server), journal=tmp_path / "run.jsonl", working_dir=tmp_path, model_options=options, **kwargs)


def of_type(events: list[AgentEvent], kind: EventType) -> list[AgentEvent]:
    return [e for e in events if e.type is kind]


def agent_cost_is_unknown(result: RunResult) -> bool:
    """The run's stats say the cost is unknown, as the journal's run_finish records it."""
    finish = of_type(result.events, EventType.RUN_FINISH)[-1]
    return finish.data["stats"]["cost_usd"] is None


def assert_answered(result: RunResult) -> None:
    """The run ended normally with a non-empty answer (a tiny model may run out of tokens)."""
    assert result.error is None, result.error
    assert result.termination_reason in (TerminationReason.END_TURN, TerminationReason.STOP_REASON), result
    assert result.text.strip(), result


async def test_text_streams_from_llama_cpp_in_many_deltas(llama_server: LlamaServer, tmp_path: Path) -> None:
    agent = agent_for(llama_server, tmp_path, short=False)
    events = [e async for e in agent.stream("Say hello to the reader in one short sentence.")]
    result = RunResult.from_events(events)

    assert_answered(result)
    deltas = of_type(events, EventType.TEXT_DELTA)
    assert len(deltas) >= 3  # streamed token by token, not delivered whole
    complete = of_type(events, EventType.LLM_COMPLETE)
    # Every delta is part of the answer the loop recorded, in order.
    assert "".join(e.data["text"] for e in deltas) == "".join(
        block["text"] for e in complete for block in e.data["message"]["content"] if block["type"] == "text"
    )
    assert all(e.data["model"] == llama_server.model for e in complete)
    # The journal holds the same run: the same answer, to the character, and the same ending.
    journaled = read_events(tmp_path / "run.jsonl")
    assert "".join(e.data["text"] for e in of_type(journaled, EventType.TEXT_DELTA)) == result.text
    assert journaled[-1].type is EventType.RUN_FINISH and journaled[-1].data["reason"] == result.termination_reason.value


def test_run_sync_works_three_times_on_one_agent(llama_server: LlamaServer, tmp_path: Path) -> None:
    # Each run_sync runs on a fresh event loop: a client kept from the last would fail here.
    agent = agent_for(llama_server, tmp_path, max_tokens=16)
    results = [agent.run_sync(f"Name a colour. Attempt {n}.") for n in range(3)]

    for result in results:
        assert_answered(result)
    assert len({r.run_id for r in results}) == 3
    # The conversation carries on across the runs: three prompts, three answers (and any continuations).
    assert sum(1 for m in agent.messages if m.role == "user" and m.text.startswith("Name a colour")) == 3


async def test_cancelling_on_the_first_delta_ends_the_run_and_the_next_run_works(llama_server: LlamaServer, tmp_path: Path) -> None:
    agent = agent_for(llama_server, tmp_path, max_tokens=48)
    events: list[AgentEvent] = []
    async for event in agent.stream("Write a long story about a lighthouse keeper."):
        events.append(event)
        if event.type is EventType.TEXT_DELTA and len(of_type(events, EventType.TEXT_DELTA)) == 1:
            assert agent.cancel("stopped on the first word")
    cancelled = RunResult.from_events(events)

    assert cancelled.termination_reason is TerminationReason.USER_INTERRUPT
    assert [e.data["reason"] for e in of_type(events, EventType.CANCELLED)] == ["stopped on the first word"]
    assert not of_type(events, EventType.LLM_COMPLETE)  # the stream was left, not read to the end
    assert not agent.running
    journaled = read_events(tmp_path / "run.jsonl")
    assert journaled[-1].type is EventType.RUN_FINISH and journaled[-1].data["reason"] == "user_interrupt"

    # The server dropped the abandoned stream and the history is still valid for the next call.
    after = await agent.run("Now just say OK.")
    assert_answered(after)


async def test_the_final_call_with_tools_disabled_is_accepted_and_answers(llama_server: LlamaServer, tmp_path: Path) -> None:
    # llama.cpp honours a named tool_choice with a JSON-schema grammar, so even this tiny model
    # calls `add` on the first turn; max_iterations=1 then makes the second call the final one,
    # sent with tool_choice "none" (which replaces the named choice).
    agent = agent_for(
        llama_server,
        tmp_path,
        max_tokens=48,
        tools=[add],
        max_iterations=1,
        permissions="bypass",
        # No newline stop here: the grammar lets the arguments' JSON hold newlines.
        model_options={"tool_choice": {"name": "add"}, "stop": ["."]},
    )
    result = await agent.run("What is 2 plus 3? Use the add tool.")

    assert result.error is None, result.error
    assert result.termination_reason is TerminationReason.MAX_TURNS
    assert result.text.strip()
    enabled = [e.data["tools_enabled"] for e in of_type(result.events, EventType.LLM_START)]
    assert enabled[0] is True and enabled[-1] is False
    calls = of_type(result.events, EventType.TOOL_CALL_READY)
    assert len(calls) == 1 and calls[0].data["name"] == "add" and "parse_error" not in calls[0].data
    arguments = calls[0].data["arguments"]
    [outcome] = result.tool_calls
    assert outcome["is_error"] is False and outcome["content"] == str(arguments["a"] + arguments["b"])
    assert len(of_type(result.events, EventType.MAX_ITERATIONS_REACHED)) == 1
    # The final call asked for no tools, and the server made none.
    final = of_type(result.events, EventType.LLM_COMPLETE)[-1]
    assert not [b for b in final.data["message"]["content"] if b["type"] == "tool_use"]


async def test_an_unpriced_local_model_has_an_unknown_cost_not_a_zero_one(llama_server: LlamaServer, tmp_path: Path) -> None:
    assert price(llama_server.model) is None  # the server's id is a file path: no price
    result = await agent_for(llama_server, tmp_path, max_tokens=16).run("Say hi.")

    assert_answered(result)
    costs = [e.data["cost_usd"] for e in of_type(result.events, EventType.LLM_COMPLETE)]
    assert costs and all(c is None for c in costs)
    assert result.cost_usd is None and agent_cost_is_unknown(result)


async def test_a_stream_without_usage_has_an_unknown_cost_even_for_a_priced_model(llama_server: LlamaServer, tmp_path: Path) -> None:
    # llama.cpp's server ignores stream_options.include_usage and streams no usage at all; it
    # answers under the name the request gives, here one the price table knows. Zero tokens at
    # a known price would claim the call was free: the cost must be unknown instead.
    assert price(PRICED_NAME) is not None
    result = await agent_for(llama_server, tmp_path, max_tokens=16, model=model_for(llama_server, PRICED_NAME)).run("Say hi.")

    assert_answered(result)
    complete = of_type(result.events, EventType.LLM_COMPLETE)
    assert complete and all(e.data["model"] == PRICED_NAME for e in complete)
    assert all(e.data["cost_usd"] is None for e in complete)
    assert result.cost_usd is None and agent_cost_is_unknown(result)
