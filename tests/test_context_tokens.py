"""Token accounting: per-provider estimates that add up, calibrated by reported usage."""

from __future__ import annotations

import pytest

from agent_kernel.context import ContextManager, TokenCounter
from agent_kernel.context._tokens import reported_input_tokens
from agent_kernel.errors import UserError
from agent_kernel.events._event import EventType
from agent_kernel.events._turn import TurnState
from agent_kernel.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from agent_kernel.models._base import ModelRequest, ToolSpec, Usage
from agent_kernel.models.scripted import ScriptedModel


def test_each_provider_starts_from_its_own_characters_per_token() -> None:
    assert TokenCounter("anthropic").text("a" * 350) == 100
    assert TokenCounter("openai").text("a" * 400) == 100
    assert TokenCounter("some-local-server").text("a" * 400) == 100
    assert TokenCounter("openai", chars_per_token=2.0).text("a" * 400) == 200


def test_a_nonsense_ratio_is_refused_with_a_hint() -> None:
    with pytest.raises(ValueError, match="4.0 suits most English text"):
        TokenCounter("openai", chars_per_token=0)


def test_a_request_estimate_is_the_sum_of_its_parts() -> None:
    counter = TokenCounter("anthropic")
    messages = (
        Message.user("Summarise the report in /data/report.txt"),
        Message("assistant", (ToolUseBlock("c1", "read_file", {"path": "/data/report.txt"}),)),
        Message("user", (ToolResultBlock("c1", "quarterly numbers " * 200),)),
    )
    tools = (ToolSpec("read_file", "Reads a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),)
    request = ModelRequest(messages, "You are careful.", tools)
    total = counter.request(request)
    assert total == counter.system("You are careful.") + counter.tools(tools) + counter.messages(messages)
    # Estimated one by one, each message rounds up on its own.
    assert 0 <= sum(counter.message(m) for m in messages) - counter.messages(messages) < len(messages)
    # The tool result dominates: about 3,600 characters at 3.5 a token.
    assert 1_000 < total < 1_200


def test_calibration_moves_estimates_to_what_the_provider_reported() -> None:
    counter = TokenCounter("openai")
    request = ModelRequest((Message.user("word " * 2_000),))
    raw = counter.raw_request(request)
    before = counter.request(request)
    counter.calibrate(raw, int(raw * 1.5))
    assert counter.request(request) == pytest.approx(before * 1.5, rel=0.01)
    # Later observations are smoothed rather than taken whole.
    counter.calibrate(raw, int(raw * 0.5))
    assert counter.scale == pytest.approx(1.0, abs=0.01)


def test_calibration_ignores_tiny_requests_and_missing_usage() -> None:
    counter = TokenCounter("openai")
    counter.calibrate(10.0, 500)
    counter.calibrate(5_000.0, 0)
    assert counter.scale == 1.0
    assert counter.observations == 0


def test_cached_input_tokens_count_as_input() -> None:
    assert reported_input_tokens(Usage(input_tokens=100, cache_read_tokens=900, cache_write_tokens=50)) == 1_050


async def test_reported_usage_decides_when_the_history_is_too_large() -> None:
    # The heuristic thinks this history is well under the threshold; the provider says it is
    # three times larger, so the next call compacts.
    manager = ContextManager(micro_compact=False, keep_messages=2, retry_delays=())
    model = ScriptedModel(["## Task overview\nkept short"], context_window=3_000)
    history = [
        Message.user("q" * 1_000),
        Message("assistant", (TextBlock("noted"),)),
        Message.user("r" * 1_000),
        Message("assistant", (TextBlock("noted"),)),
        Message.user("s" * 2_000),
    ]
    request = ModelRequest(tuple(history))
    events: list[tuple[EventType, dict]] = []

    first = await manager.prepare(history, TurnState.initial(), request, model, lambda t, d: events.append((t, d)))
    assert not first.compacted
    manager.record_usage(first.request, Usage(input_tokens=3 * manager.estimate(request, model)))
    assert manager.estimate(request, model) > manager.threshold_tokens(model)

    second = await manager.prepare(history, TurnState.initial(), request, model, lambda t, d: events.append((t, d)))
    assert second.compacted
    assert [t for t, _ in events].count(EventType.COMPACTION_COMPLETE) == 1


def test_reserve_tokens_sets_the_threshold_below_the_window() -> None:
    model = ScriptedModel([], context_window=10_000)
    assert ContextManager().threshold_tokens(model) == 8_000
    assert ContextManager(reserve_tokens=1_500).threshold_tokens(model) == 8_500
    with pytest.raises(UserError, match="use a smaller reserve"):
        ContextManager(reserve_tokens=10_000).threshold_tokens(model)


def test_bad_settings_say_what_to_use_instead() -> None:
    with pytest.raises(UserError, match="threshold=0.8"):
        ContextManager(threshold=80)
    with pytest.raises(UserError, match="keep_messages must be at least 1"):
        ContextManager(keep_messages=0)


async def test_calibration_compares_usage_with_the_request_actually_sent() -> None:
    # Old tool results are cleared in what is sent: the provider's count is compared with that.
    manager = ContextManager(micro_keep=1, micro_threshold_tokens=100)
    model = ScriptedModel([], context_window=100_000)
    history = [Message.user("go")]
    for i in range(4):
        history.append(Message("assistant", (ToolUseBlock(f"c{i}", "read", {"n": i}),)))
        history.append(Message("user", (ToolResultBlock(f"c{i}", "z" * 4_000),)))
    prepared = await manager.prepare(history, TurnState.initial(), ModelRequest(tuple(history)), model, lambda t, d: None)
    assert prepared.request.messages != tuple(history)
    counter = manager.counter(model)
    raw_sent = counter.raw_request(prepared.request)
    manager.record_usage(prepared.request, Usage(input_tokens=int(raw_sent * 2)))
    assert counter.scale == pytest.approx(2.0, rel=0.01)
