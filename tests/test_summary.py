"""The static run summary (jupyter/summary.py): what survives nbconvert, GitHub and nbval."""

from __future__ import annotations

import re
from typing import Any

from agent_kernel.events import AgentEvent, EventType
from agent_kernel.jupyter.summary import RunSummary, markdown_to_html

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
    assert "| 1 | read_file | `path=\"notes.md\"` | done | 0.2 s |" in summary.markdown
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
