"""TurnState, LoopState callbacks, CancelToken and LoopStats."""

from __future__ import annotations

import dataclasses

import pytest

from agent_kernel import LoopState, TurnState
from agent_kernel.models._base import Usage
from agent_kernel.runtime._state import LoopStateMachine, LoopStats


def test_turn_state_is_frozen() -> None:
    t = TurnState.initial()
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.turn_counter = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        t.metadata["x"] = 1  # type: ignore[index]


def test_next_turn_links_to_its_parent_and_copies_metadata() -> None:
    t0 = TurnState.initial(max_iterations=3, metadata={"task": "sum"})
    t1 = t0.next_turn()
    t2 = t1.next_turn(compacted=True)
    assert [t0.turn_counter, t1.turn_counter, t2.turn_counter] == [0, 1, 2]
    assert t1.parent_turn_id == t0.turn_id and t2.parent_turn_id == t1.turn_id
    assert len({t0.turn_id, t1.turn_id, t2.turn_id}) == 3
    assert t2.metadata["task"] == "sum" and t2.compacted and not t1.compacted
    assert t0.is_initial and not t1.is_initial


def test_with_metadata_returns_a_new_state_and_leaves_the_old_one() -> None:
    t0 = TurnState.initial()
    t1 = t0.with_metadata(note="x")
    assert dict(t0.metadata) == {} and t1.metadata["note"] == "x" and t1.turn_id == t0.turn_id


def test_is_final_at_max_iterations() -> None:
    t = TurnState.initial(max_iterations=2)
    assert not t.is_final and not t.next_turn().is_final and t.next_turn().next_turn().is_final


def test_to_dict_round_trips() -> None:
    t = TurnState.initial(max_iterations=7, metadata={"a": [1, 2]}).next_turn(compacted=True)
    assert TurnState.from_dict(t.to_dict()) == t


def test_max_iterations_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        TurnState.initial(max_iterations=0)


def test_state_machine_reports_each_change_once() -> None:
    sm = LoopStateMachine()
    seen: list[tuple[LoopState, LoopState]] = []
    sm.on_state_change(lambda old, new: seen.append((old, new)))
    sm.set(LoopState.CALLING_LLM)
    sm.set(LoopState.CALLING_LLM)
    sm.set(LoopState.COMPLETED)
    assert seen == [(LoopState.IDLE, LoopState.CALLING_LLM), (LoopState.CALLING_LLM, LoopState.COMPLETED)]


def test_unknown_cost_makes_the_total_unknown() -> None:
    s = LoopStats()
    s.add_usage(Usage(input_tokens=10, output_tokens=2), 0.5)
    assert s.cost_usd == 0.5
    s.add_usage(Usage(input_tokens=1), None)
    assert s.cost_usd is None and s.input_tokens == 11 and s.llm_calls == 2


def test_merging_stats_adds_totals_and_an_unknown_cost_makes_the_sum_unknown() -> None:
    session = LoopStats(turns=2, llm_calls=2, tool_calls=1, input_tokens=100, output_tokens=10, cost_usd=0.5)
    run = LoopStats(turns=1, llm_calls=3, tool_calls=4, input_tokens=7, output_tokens=3, cache_read_tokens=5, cost_usd=0.25, end=9.0)
    session.merge(run)
    assert (session.turns, session.llm_calls, session.tool_calls, session.input_tokens, session.output_tokens) == (3, 5, 5, 107, 13)
    assert (session.cache_read_tokens, session.cost_usd, session.end) == (5, 0.75, 9.0)
    session.merge(LoopStats(cost_usd=None))
    assert session.cost_usd is None


def test_a_sub_agents_usage_rolls_up_but_its_turns_and_tool_calls_stay_its_own() -> None:
    parent = LoopStats(turns=1, tool_calls=1, input_tokens=10, cost_usd=0.1)
    parent.merge(LoopStats(turns=5, tool_calls=7, llm_calls=5, input_tokens=50, cost_usd=0.2, end=3.0), counts=False)
    assert (parent.turns, parent.tool_calls, parent.llm_calls, parent.input_tokens, parent.end) == (1, 1, 5, 60, None)
    assert parent.cost_usd is not None and abs(parent.cost_usd - 0.3) < 1e-9
