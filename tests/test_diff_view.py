"""Two runs side by side as static HTML (journal/html_diff.py): a fork and its original."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_kernel import Agent, tool
from agent_kernel.errors import JournalError
from agent_kernel.journal import RunDiff, diff_runs, diff_view
from agent_kernel.models.scripted import ScriptedModel, tool_call

from .helpers import make_agent


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@tool(read_only=True)
def report(rows: int) -> str:
    """Writes a long report."""
    return "row\n" * rows


async def forked(tmp_path: Path) -> tuple[Agent, Agent]:
    """A three-turn run and a fork of it at turn 1 that calls other tools and answers otherwise."""
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), tool_call("add", {"a": 3, "b": 4}),
                           "1+2=3 and 3+4=7."])
    agent = make_agent(model, [add, report], journal=tmp_path / "original.jsonl")
    await agent.run("add some numbers")
    fork = agent.fork(at=1, model=ScriptedModel([tool_call("report", {"rows": 200}), "A <b>long</b> report."]),
                      journal=tmp_path / "fork.jsonl")
    await fork.continue_run()
    return agent, fork


async def test_a_fork_that_parts_at_turn_1_shows_both_sides_with_that_turn_marked(tmp_path: Path) -> None:
    agent, fork = await forked(tmp_path)

    view = diff_view(agent, fork, labels=("original", "fork"))

    assert isinstance(view, RunDiff) and view.first_divergence == 1
    page = view._repr_html_()
    assert ">original</th>" in page and ">fork</th>" in page
    assert [int(n) for n in re.findall(r'data-turn="(\d+)"', page)] == [0, 1, 2]
    first = re.findall(r'class="ak-diff-turn ak-diff-first" data-turn="(\d+)"', page)
    assert first == ["1"] and page.count("first divergence") == 1
    assert "The runs part at turn 1." in page
    # Tool calls with their arguments, on each side.
    assert 'add({&quot;a&quot;: 3, &quot;b&quot;: 4})' in page
    assert 'report({&quot;rows&quot;: 200})' in page
    # The report's 800-character result is cut to its first lines, and all of it is one click away.
    assert "(777 more characters: click for all)" in page and "<details" in page
    assert ("row\n" * 200) in page
    # Model output is text, never markup; and nothing is fetched or run.
    assert "A &lt;b&gt;long&lt;/b&gt; report." in page and "<b>long</b>" not in page
    for banned in ("<script", "<style", "<link", "http://", "https://"):
        assert banned not in page
    assert "var(--jp-" in page
    # Tokens, cost and duration on both sides.
    assert page.count(" tokens · — · ") == 6 and re.search(r"\d+\.\d s</div>", page)  # scripted: no price


async def test_the_view_keeps_the_dataframe_of_diff_runs_and_summarises_itself(tmp_path: Path) -> None:
    agent, fork = await forked(tmp_path)

    view = diff_view(tmp_path / "original.jsonl", tmp_path / "fork.jsonl", all_turns=False)

    expected = diff_runs(agent, fork)
    assert list(view.frame.index) == list(expected.index) == [1, 2]
    assert view.frame.attrs["first_divergence"] == 1
    assert repr(view) == "RunDiff(a vs b: part at turn 1, 2 turns shown)"
    assert 'data-turn="0"' not in view.to_html()


async def test_a_turn_only_one_side_took_says_so_and_runs_that_agree_say_that(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"])
    agent = make_agent(model, [add], journal=None)
    await agent.run("1+2?")
    longer = agent.fork(at=1, model=ScriptedModel([tool_call("add", {"a": 1, "b": 1}), "3, checked."]), journal=None)
    await longer.continue_run()
    same = agent.fork(at=1, model=ScriptedModel(["3"]), journal=None)
    await same.continue_run()

    page = diff_view(agent, longer).to_html()
    last = page[page.index('data-turn="2"'):]
    assert last.count("no such turn on this side") == 1 and "3, checked." in last
    agreeing = diff_view(agent, same)
    assert agreeing.first_divergence is None
    assert "The two runs agree turn for turn." in agreeing.to_html()
    assert "first divergence" not in agreeing.to_html()


def test_diff_runs_names_what_it_cannot_compare(tmp_path: Path) -> None:
    agent = make_agent(ScriptedModel(["Hi."]), journal=None)
    agent.run_sync("hello")
    for other in (42, None, [1, 2]):
        with pytest.raises(JournalError, match="diff_runs cannot read a session from"):
            diff_runs(agent, other)
    with pytest.raises(JournalError, match="is a folder; pass one journal file in it"):
        diff_runs(agent, tmp_path)
