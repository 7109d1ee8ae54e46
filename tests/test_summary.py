"""The static run summary (jupyter/summary.py): what survives nbconvert, GitHub and nbval."""

from __future__ import annotations

import re
from typing import Any

from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.jupyter._summary import RunSummary, markdown_to_html

T = EventType


def scripted_run(ts: float = 1_700_000_000.0, duration: float = 2.5) -> list[AgentEvent]:
    """The events of one run; ``ts`` and ``duration`` vary between otherwise equal runs."""
    seq = 0

    def ev(type: EventType, **data: Any) -> AgentEvent:
        nonlocal seq
        seq += 1
        return AgentEvent(seq, ts + seq, "s1", f"r_{ts}", f"t_{ts}", None, 0, type, data)

    return [
        ev(T.RUN_START, prompt="Tidy the notes", model="scripted", max_iterations=5),
        ev(T.ITERATION_START, turn_state={"turn_counter": 0, "max_iterations": 5}),
        ev(T.TEXT_DELTA, text="Reading first."),
        ev(T.TOOL_CALL_READY, call_id="c1", name="read_file", arguments={"path": "notes.md"}, index=0),
        ev(T.TOOL_START, call_id="c1", name="read_file"),
        ev(T.TOOL_RESULT, call_id="c1", name="read_file", content="# Notes", is_error=False,
           duration_s=duration / 10),
        ev(T.TOOL_CALL_READY, call_id="c2", name="bash", arguments={"command": "rm notes.md"}, index=1),
        ev(T.APPROVAL_REQUIRED, call_id="c2", tool="bash", arguments={"command": "rm notes.md"},
           key="bash(rm notes.md)", reason="bash asks"),
        ev(T.APPROVAL_DECISION, call_id="c2", decision="reject", decided_by="person",
           reason="keep the file"),
        ev(T.TOOL_RESULT, call_id="c2", name="bash", content="The user rejected this call",
           is_error=True, duration_s=None),
        ev(T.LLM_COMPLETE, usage={"input_tokens": 1200, "output_tokens": 80}, cost_usd=0.0,
           model="scripted"),
        ev(T.ITERATION_START, turn_state={"turn_counter": 1, "max_iterations": 5}),
        ev(T.TEXT_DELTA, text="The notes are *tidy* now."),
        ev(T.RUN_FINISH, reason="end_turn", text="The notes are *tidy* now.",
           stats={"turns": 2, "input_tokens": 2400, "output_tokens": 160, "cost_usd": 0.0,
                  "duration": duration}),
    ]


def test_plain_text_is_identical_for_runs_that_differ_only_in_timing_and_ids():
    first = RunSummary.from_events(scripted_run(ts=1_700_000_000.0, duration=2.5)).text
    second = RunSummary.from_events(scripted_run(ts=1_800_000_000.0, duration=97.0)).text
    assert first == second
    assert not re.search(r"\d+(\.\d+)? s\b|0x[0-9a-f]+|r_1", first)


def test_plain_text_has_the_answer_the_tool_calls_and_the_usage():
    text = RunSummary.from_events(scripted_run()).text
    assert text == (
        "Answer:\n"
        "The notes are *tidy* now.\n"
        "\n"
        "Tool calls (2):\n"
        '  1. read_file(path="notes.md") - done\n'
        '  2. bash(command="rm notes.md") - rejected: keep the file\n'
        "\n"
        "Usage: 2,400 tokens in · 160 out · $0.0000 · 2 turns · scripted · ended: end_turn"
    )


def test_markdown_and_html_add_the_timings():
    summary = RunSummary.from_events(scripted_run(duration=2.5))
    assert "| 1 | read_file | `path=\"notes.md\"` | done | 0.3 s |" in summary.markdown  # 0.25 s, rounded as the live view rounds
    assert "2.5 s" in summary.markdown
    assert "2.5 s" in summary.html
    assert "<em>tidy</em>" in summary.html


def test_the_mimebundle_offers_html_markdown_and_plain_text():
    bundle = RunSummary.from_events(scripted_run())._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/markdown", "text/plain"}


def test_model_output_cannot_put_script_or_live_links_into_the_html():
    hostile = ("<script>alert(1)</script>\n\n"
               'Look: <img src=x onerror="alert(2)"> [a](javascript:alert(3)) '
               "![i](https://tracker.example/pixel.png) [ok](https://example.com)\n\n"
               "<div onclick=\"alert(4)\">raw</div>")
    html = markdown_to_html(hostile)
    assert "<script" not in html and "<img" not in html and "<div" not in html
    assert "javascript:" not in html  # the link is dropped, its text kept
    assert re.findall(r'href="([^"]*)"', html) == ["https://tracker.example/pixel.png",
                                                  "https://example.com"]
    assert "&lt;script&gt;" in html


def test_a_tool_call_with_odd_characters_keeps_the_markdown_table_intact():
    events = scripted_run()
    events[6] = AgentEvent(7, 0.0, "s1", "r", "t", None, 0, T.TOOL_CALL_READY,
                           {"call_id": "c2", "name": "bash",
                            "arguments": {"command": "grep `x` a | wc -l"}, "index": 1})
    row = RunSummary.from_events(events).markdown.splitlines()
    bash_row = next(line for line in row if "| bash |" in line)
    assert bash_row.count(" | ") == 4  # the pipe inside the arguments is escaped
    assert "`` command=\"grep `x` a \\| wc -l\" ``" in bash_row


def test_a_run_without_an_answer_says_so():
    events = scripted_run()[:2] + [AgentEvent(3, 0.0, "s1", "r", "t", None, 0, T.RUN_FINISH,
                                              {"reason": "error", "text": "", "stats": {}})]
    summary = RunSummary.from_events(events)
    assert summary.text.startswith("Answer:\n(no answer)\n\nTool calls: none")
    assert summary.text.endswith("ended: error")


def test_long_arguments_are_shortened_to_one_line():
    events = scripted_run()
    events[3] = AgentEvent(4, 0.0, "s1", "r", "t", None, 0, T.TOOL_CALL_READY,
                           {"call_id": "c1", "name": "write_file",
                            "arguments": {"path": "a.md", "content": "line\n" * 100}, "index": 0})
    line = RunSummary.from_events(events).tool_calls[0]
    assert len(line.arguments) == 80 and line.arguments.endswith("…")
    assert "\n" not in line.arguments


def delegating_run(ts: float = 1_700_000_000.0, duration: float = 1.5) -> list[AgentEvent]:
    """A run whose two sub-agents work side by side; one of them starts a sub-agent of its own.

    Their ids differ between otherwise equal runs (as ``new_id`` makes them), like timings do.
    """
    seq = 0
    researcher, writer, checker = (f"{name}-{ts:.0f}" for name in ("researcher", "writer", "math"))

    def ev(type: EventType, agent: str | None = None, **data: Any) -> AgentEvent:
        nonlocal seq
        seq += 1
        return AgentEvent(seq, ts + seq, "s1", f"r_{ts}", f"t_{ts}", None, 0, type, data, agent)

    def link(agent: str, name: str, parent: str | None, call_id: str) -> dict[str, Any]:
        return {"agent_id": agent, "name": name, "parent_agent_id": parent, "parent_call_id": call_id}

    def finish(agent: str, name: str, parent: str | None, call_id: str, text: str,
               **extra: Any) -> AgentEvent:
        return ev(T.SUBAGENT_FINISH, agent, **link(agent, name, parent, call_id), text=text,
                  reason=extra.pop("reason", "end_turn"),
                  usage={"input_tokens": 500, "output_tokens": 20}, cost_usd=0.001, turns=2,
                  tool_calls=1, duration_s=duration, **extra)

    return [
        ev(T.RUN_START, prompt="Summarise the notes", model="scripted", max_iterations=5),
        ev(T.TOOL_CALL_READY, call_id="p1", name="task", arguments={"agent": "researcher"}, index=0),
        ev(T.TOOL_CALL_READY, call_id="p2", name="task", arguments={"agent": "writer"}, index=1),
        ev(T.SUBAGENT_START, researcher, **link(researcher, "researcher", None, "p1"), prompt="Find"),
        ev(T.SUBAGENT_START, writer, **link(writer, "writer", None, "p2"), prompt="Draft"),
        ev(T.TOOL_CALL_READY, writer, call_id="call_1_0", name="write_file",
           arguments={"path": "draft.md"}, index=0),
        ev(T.TOOL_CALL_READY, researcher, call_id="call_1_0", name="task",
           arguments={"agent": "math"}, index=0),
        ev(T.SUBAGENT_START, checker, **link(checker, "math", researcher, "call_1_0"), prompt="1+1"),
        ev(T.TOOL_CALL_READY, checker, call_id="call_1_0", name="add", arguments={"a": 1, "b": 1},
           index=0),
        ev(T.TOOL_RESULT, checker, call_id="call_1_0", name="add", content="2", is_error=False,
           duration_s=duration),
        finish(checker, "math", researcher, "call_1_0", "2"),
        ev(T.TOOL_RESULT, researcher, call_id="call_1_0", name="task", content="2",
           is_error=False, duration_s=duration),
        ev(T.TOOL_RESULT, writer, call_id="call_1_0", name="write_file", content="denied",
           is_error=True, duration_s=duration),
        finish(writer, "writer", None, "p2", "", reason="error", error="ModelError: overloaded"),
        finish(researcher, "researcher", None, "p1",
               "The notes cover three topics: planning, budget and hiring.\nDetails follow."),
        ev(T.TOOL_RESULT, call_id="p1", name="task", content="...", is_error=False, duration_s=duration),
        ev(T.TOOL_RESULT, call_id="p2", name="task", content="...", is_error=True, duration_s=duration),
        ev(T.RUN_FINISH, reason="end_turn", text="Three topics.",
           stats={"turns": 2, "input_tokens": 2000, "output_tokens": 90, "cost_usd": 0.004,
                  "duration": duration}),
    ]


def test_plain_text_lists_sub_agents_as_a_tree_with_result_previews_and_their_tool_calls():
    text = RunSummary.from_events(delegating_run()).text
    assert text == (
        "Answer:\n"
        "Three topics.\n"
        "\n"
        "Tool calls (2):\n"
        '  1. task(agent="researcher") - done\n'
        '  2. task(agent="writer") - error\n'
        "\n"
        "Sub-agents (3):\n"
        "  1. researcher - done: The notes cover three topics: planning, budget and hiring. …\n"
        '     - task(agent="math") - done\n'
        "    1.1. math - done: 2\n"
        "       - add(a=1, b=1) - done\n"
        "  2. writer - error: ModelError: overloaded\n"
        '     - write_file(path="draft.md") - error\n'
        "\n"
        "Usage: 2,000 tokens in · 90 out · $0.0040 · 2 turns · scripted · ended: end_turn"
    )


def test_sub_agents_in_plain_text_are_identical_for_runs_that_differ_in_ids_and_timing():
    first = RunSummary.from_events(delegating_run(ts=1_700_000_000.0, duration=1.5)).text
    second = RunSummary.from_events(delegating_run(ts=1_800_000_000.0, duration=44.0)).text
    assert first == second
    assert "1700000000" not in first


def test_markdown_and_html_tabulate_sub_agents_with_usage_and_timings():
    summary = RunSummary.from_events(delegating_run(duration=1.5))
    assert "| 1.1 | math | done | add | 2 | 500 in · 20 out · $0.0010 | 1.5 s |" in summary.markdown
    assert ("<td>writer</td><td>error</td><td>write_file</td><td>ModelError: overloaded</td>"
            in summary.html)
    assert summary.html.count("<tr><td>") == 2 + 3  # tool calls and sub-agents


def test_a_long_sub_agent_answer_is_shortened_to_one_line():
    events = delegating_run()
    long = "word " * 60
    events[14] = AgentEvent(15, 0.0, "s1", "r", "t", None, 0, T.SUBAGENT_FINISH,
                            {**events[14].data, "text": long}, events[14].agent_id)
    line = RunSummary.from_events(events).subagents[0]
    assert line.name == "researcher" and len(line.result) == 100 and line.result.endswith("…")


def test_an_unknown_cost_reads_as_a_dash_and_a_known_one_with_four_decimals():
    from agent_kernel.jupyter._summary import format_cost

    assert (format_cost(None), format_cost(0.0), format_cost(0.01234), format_cost(12.5)) == (
        "—", "$0.0000", "$0.0123", "$12.5000")
    events = scripted_run()
    events[-1] = AgentEvent(99, events[-1].ts, "s1", events[-1].run_id, "t", None, 0, T.RUN_FINISH,
                            {**events[-1].data, "stats": {**events[-1].data["stats"], "cost_usd": None}})
    assert "· — ·" in RunSummary.from_events(events).text


def test_durations_round_half_up_as_the_browser_does():
    from agent_kernel.jupyter._summary import one_decimal

    assert [one_decimal(x) for x in (0.25, 3.25, 0.05, 2.0)] == ["0.3", "3.3", "0.1", "2.0"]
