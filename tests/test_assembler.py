"""ContextAssembler: components placed by priority within a budget, and the event that reports it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_kernel.context import Component, ContextAssembler, ContextManager, Priority
from agent_kernel.context._compaction import with_summary
from agent_kernel.events._event import EventType
from agent_kernel.events._turn import TurnState
from agent_kernel.messages import Message, SummaryBlock, TextBlock
from agent_kernel.models._base import ModelRequest
from agent_kernel.models.scripted import ScriptedModel


def sized(name: str, tokens: int, priority: int, truncatable: bool = False, keep: str = "head") -> Component:
    # 4 characters a token with the default count, so the content has exactly `tokens` tokens.
    return Component(name, (name[0] * 4) * tokens, priority, truncatable, keep=keep)  # type: ignore[arg-type]


def statuses(assembly) -> dict[str, tuple[str, int]]:  # type: ignore[no-untyped-def]
    return {p.name: (p.status, p.tokens) for p in assembly.components}


def test_priorities_have_the_documented_values() -> None:
    assert [int(p) for p in Priority] == [100, 90, 70, 50, 30]


def test_everything_fits_so_everything_is_included() -> None:
    out = ContextAssembler().assemble([sized(p.name.lower(), 10, p) for p in Priority], budget=50)
    assert {s for s, _ in statuses(out).values()} == {"included"}
    assert out.total_tokens == 50


def test_lower_priorities_give_way_first() -> None:
    components = [sized(p.name.lower(), 100, p) for p in reversed(Priority)]  # given lowest first
    out = ContextAssembler().assemble(components, budget=300)
    assert statuses(out) == {
        "optional": ("excluded", 0),
        "low": ("excluded", 0),
        "medium": ("included", 100),
        "high": ("included", 100),
        "critical": ("included", 100),
    }
    # The result keeps the order the components were given in.
    assert [p.name for p in out.components] == ["optional", "low", "medium", "high", "critical"]


def test_a_component_that_does_not_fit_whole_is_excluded_whole_and_smaller_ones_still_fit() -> None:
    out = ContextAssembler().assemble(
        [sized("system", 50, Priority.CRITICAL), sized("pinned", 80, Priority.HIGH), sized("notes", 30, Priority.LOW)],
        budget=100,
    )
    assert statuses(out) == {"system": ("included", 50), "pinned": ("excluded", 0), "notes": ("included", 30)}
    assert out["pinned"].requested_tokens == 80
    assert out["pinned"].content == ""


def test_a_truncatable_component_is_cut_to_the_room_left() -> None:
    out = ContextAssembler().assemble(
        [sized("system", 40, Priority.CRITICAL), sized("document", 200, Priority.MEDIUM, truncatable=True)], budget=100
    )
    doc = out["document"]
    assert (doc.status, doc.tokens, doc.requested_tokens) == ("truncated", 60, 200)
    assert doc.content.startswith("dddd") and doc.content.endswith("[... truncated to fit the context budget]")
    assert len(doc.content) <= 60 * 4
    assert out.total_tokens == 100


def test_a_truncated_log_keeps_its_newest_end() -> None:
    log = Component("log", "old line\n" * 50 + "newest line", Priority.LOW, truncatable=True, keep="tail")
    out = ContextAssembler().assemble([log], budget=20)
    assert out["log"].status == "truncated"
    assert out["log"].content.endswith("newest line")
    assert out["log"].content.startswith("[... truncated")


def test_a_truncatable_component_is_excluded_when_only_a_sliver_would_fit() -> None:
    out = ContextAssembler(min_truncated_tokens=16).assemble(
        [sized("system", 90, Priority.CRITICAL), sized("scratch", 50, Priority.OPTIONAL, truncatable=True)], budget=100
    )
    assert statuses(out)["scratch"] == ("excluded", 0)


def test_equal_priorities_are_served_in_the_order_given() -> None:
    out = ContextAssembler().assemble([sized("first", 60, Priority.MEDIUM), sized("second", 60, Priority.MEDIUM)], budget=100)
    assert statuses(out) == {"first": ("included", 60), "second": ("excluded", 0)}


def test_a_component_may_state_its_size_instead_of_carrying_text() -> None:
    out = ContextAssembler().assemble([Component("history", priority=Priority.HIGH, truncatable=True, tokens=500)], budget=200)
    assert (out["history"].status, out["history"].tokens) == ("truncated", 200)


def test_the_event_record_lists_each_component_without_its_text() -> None:
    out = ContextAssembler().assemble([sized("system", 10, Priority.CRITICAL), sized("notes", 30, Priority.LOW, True)], budget=30)
    assert out.to_dict() == {
        "budget": 30,
        "total_tokens": 30,
        "components": [
            {"name": "system", "priority": 100, "truncatable": False, "status": "included", "tokens": 10, "requested_tokens": 10},
            {"name": "notes", "priority": 50, "truncatable": True, "status": "truncated", "tokens": 20, "requested_tokens": 30},
        ],
    }
    assert out.text().startswith("s" * 40 + "\n\n" + "nnnn")


async def test_every_model_call_reports_system_tools_and_history() -> None:
    manager = ContextManager()
    model = ScriptedModel([], context_window=10_000)
    history = [Message.user("What is in the repository?")]
    events: list[tuple[EventType, dict]] = []
    request = ModelRequest(tuple(history), system="You are careful.")
    prepared = await manager.prepare(history, TurnState.initial(), request, model, lambda t, d: events.append((t, d)))
    assert prepared.request is request
    [(kind, data)] = events
    assert kind is EventType.CONTEXT_ASSEMBLED
    assert [c["name"] for c in data["components"]] == ["system", "tools", "history"]
    assert all(c["status"] == "included" for c in data["components"])
    assert data["total_tokens"] == manager.estimate(request, model)
    assert (data["window"], data["threshold"], data["messages_hidden"]) == (10_000, 8_000, 0)


async def test_without_auto_compaction_an_oversized_history_is_trimmed_only_in_the_request() -> None:
    manager = ContextManager(auto_compact=False, micro_compact=False)
    model = ScriptedModel([], context_window=1_000)
    history: list[Message] = []
    for i in range(10):
        history.append(Message.user(f"question {i} " + "q" * 600))
        history.append(Message("assistant", (TextBlock(f"answer {i}"),)))
    history.append(Message.user("and finally?"))
    events: list[tuple[EventType, dict]] = []
    request = ModelRequest(tuple(history))
    prepared = await manager.prepare(history, TurnState.initial(), request, model, lambda t, d: events.append((t, d)))

    assert prepared.history is None and not prepared.compacted
    assert len(history) == 21  # the stored conversation is untouched
    sent = prepared.request.messages
    assert manager.estimate(prepared.request, model) <= 1_000
    assert sent[-1] is history[-1]
    assert isinstance(sent[0].content[0], SummaryBlock) and "do not fit the context window" in sent[0].content[0].text
    [data] = [d for t, d in events if t is EventType.CONTEXT_ASSEMBLED]
    assert data["fits"] and data["total_tokens"] == manager.estimate(prepared.request, model) <= 1_000  # what is sent
    history_record = data["components"][2]
    assert history_record["status"] == "truncated"
    hidden = data["messages_hidden"]
    assert hidden > 0
    assert list(sent) == with_summary(SummaryBlock(sent[0].content[0].text, hidden), history[hidden:])


@settings(max_examples=60, deadline=None)
@given(
    system=st.integers(0, 12_000),
    pinned=st.lists(st.tuples(st.integers(0, 8_000), st.sampled_from(list(Priority)), st.booleans()), max_size=3),
    sizes=st.lists(st.integers(0, 9_000), min_size=1, max_size=8),
    window=st.integers(300, 5_000),
    auto=st.booleans(),
)
def test_a_request_is_sent_only_when_what_is_sent_fits_and_the_event_says_what_is_sent(
    system: int, pinned: list[tuple[int, Priority, bool]], sizes: list[int], window: int, auto: bool
) -> None:
    import asyncio

    from agent_kernel.errors import ContextOverflow

    manager = ContextManager(auto_compact=auto, calibrate=False, retry_delays=())
    for i, (size, priority, truncatable) in enumerate(pinned):
        manager.add(f"doc{i}", "p" * size, priority=priority, truncatable=truncatable)
    history: list[Message] = []
    for i, size in enumerate(sizes):
        history.append(Message.user(f"q{i} " + "q" * size))
        if i < len(sizes) - 1:
            history.append(Message("assistant", (TextBlock("a" * (size // 3)),)))
    model = ScriptedModel(["A summary."] * 3, context_window=window)
    events: list[tuple[EventType, dict]] = []
    request = ModelRequest(tuple(history), system="s" * system or None)
    try:
        prepared = asyncio.run(manager.prepare(list(history), TurnState.initial(), request, model, lambda t, d: events.append((t, d))))
    except ContextOverflow as refused:
        # Refused: the last assembly says it does not fit, and the message names the largest part.
        assembled = [d for t, d in events if t is EventType.CONTEXT_ASSEMBLED][-1]
        assert not assembled["fits"] and assembled["total_tokens"] > window
        assert refused.parts and refused.parts[0][0] in str(refused)
        return
    assembled = [d for t, d in events if t is EventType.CONTEXT_ASSEMBLED][-1]
    sent = manager.estimate(prepared.request, model)
    assert assembled["fits"] and sent <= window
    assert assembled["total_tokens"] == sent  # the figures are those of what is sent
    assert prepared.request.messages[-1].text.endswith(history[-1].text[-20:])  # the newest message is always sent


def test_agent_context_says_what_to_do_when_it_cannot_take_text() -> None:
    import pytest

    from agent_kernel import Agent
    from agent_kernel.errors import UserError

    off = Agent(ScriptedModel([]), journal=None, context=None)
    with pytest.raises(UserError, match=r"context=None.*context=ContextManager"):
        off.context.add("docs", "text")
    on = Agent(ScriptedModel([]), journal=None)
    on.context.add("docs", "text")
    with pytest.raises(UserError, match="No context named 'doc' was added; added: 'docs'"):
        on.context.remove("doc")
    with pytest.raises(UserError, match="takes the text as a str"):
        on.context.add("n", 42)  # type: ignore[arg-type]
    on.context.remove("docs")
    assert on.context.items == {}
