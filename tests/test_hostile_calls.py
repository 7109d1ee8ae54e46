"""A model's tool calls are hostile input: whatever it sends, the session goes on and the record stays readable.

The conversation cases go through the real ``anthropic`` SDK to the strict fake Messages
endpoint, which refuses what the real API refuses (a repeated ``tool_use`` id; a lone surrogate
cannot even be encoded into the request).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_kernel import Agent
from agent_kernel.errors import ToolError
from agent_kernel.journal import events_df, tool_calls_df
from agent_kernel.models.scripted import ScriptedModel, tool_call
from agent_kernel.tools._tool import ToolContext
from agent_kernel.tools.builtin import _search as search
from agent_kernel.tools.builtin._files import write_file

from .fakes.server import FakeProvider
from .fakes.turns import turn


def test_a_tool_name_and_id_with_a_lone_surrogate_leave_the_session_and_its_journal_usable(fake_provider: FakeProvider, tmp_path: Path) -> None:
    fake_provider.script(turn(calls=[("toolu_\ud800", "read_file\udfff", {"path": "a\ud83d.txt"})]), turn("Sorry."), turn("Still here."))
    journal = tmp_path / "j.jsonl"
    agent = Agent(fake_provider.claude(), tools=["read_file"], journal=journal, working_dir=tmp_path)
    first = agent.run_sync("go")
    assert first.text == "Sorry." and first.termination_reason.value == "end_turn"
    assert agent.run_sync("and on").text == "Still here."
    (result,) = [e.data for e in first.events if e.type.value == "tool_result"]
    assert result["name"] == "read_file\ufffd" and result["is_error"] and result["content"].startswith("Unknown tool 'read_file\ufffd'")
    sent = fake_provider.bodies[1]["messages"][1]["content"][0]
    assert (sent["id"], sent["name"], sent["input"]) == ("toolu_\ufffd", "read_file\ufffd", {"path": "a\ufffd.txt"})
    frame = events_df(journal)
    assert "read_file\ufffd" in set(frame["name"].dropna())


def test_repeated_call_ids_are_made_unique_in_the_history_the_events_and_the_frames(fake_provider: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    fake_provider.script(
        turn(calls=[("call_0", "read_file", {"path": "a.txt"}), ("call_0", "read_file", {"path": "missing.txt"})]),
        turn(calls=[("call_0", "read_file", {"path": "a.txt"})]),  # a server that numbers calls per response
        turn("Done."),
    )
    journal = tmp_path / "j.jsonl"
    agent = Agent(fake_provider.claude(), tools=["read_file"], journal=journal, working_dir=tmp_path)
    assert agent.run_sync("go").text == "Done."  # the strict endpoint refuses a repeated tool_use id
    ids = [b["id"] for m in fake_provider.bodies[2]["messages"] if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"]
    assert ids == ["call_0", "call_0_2", "call_0_3"]
    answered = [b["tool_use_id"] for m in fake_provider.bodies[2]["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                for b in m["content"] if b["type"] == "tool_result"]
    assert answered == ids
    calls = tool_calls_df(journal)
    assert list(calls["call_id"]) == ids and list(calls["is_error"]) == [False, True, False]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["call_0", "call_0_2", "call_0_3", "call_1", "x", "x_2_2"]), max_size=6), max_size=6),
       st.sets(st.sampled_from(["call_0", "call_0_2", "call_1", "x_2"])))
def test_every_call_id_of_a_run_is_unique_and_an_unrepeated_id_is_kept(responses: list[list[str]], earlier: set[str]) -> None:
    from agent_kernel.models._response import ResponseBuilder

    taken, suffixes = set(earlier), {}  # shared by the run's responses, as the loop shares them
    given_ids: list[str] = []
    for ids in responses:
        builder = ResponseBuilder(taken, suffixes)
        for index, call_id in enumerate(ids):
            unique = builder.tool_start(index, call_id, "read_file")
            assert unique not in earlier and unique not in given_ids
            assert unique == call_id or re.fullmatch(re.escape(call_id) + r"_\d+", unique)
            if call_id not in earlier and call_id not in given_ids:
                assert unique == call_id
            given_ids.append(unique)
            builder.tool_use(unique, "read_file", {})
        builder.build()


def test_write_file_with_a_lone_surrogate_leaves_no_file_and_no_open_descriptor(tmp_path: Path) -> None:
    context = ToolContext("call_1", "write_file", working_dir=tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    for i in range(20):
        with pytest.raises(ToolError, match="lone surrogate"):
            write_file.function(f"new{i}.txt", "a\ud800b", context)
    assert len(os.listdir("/proc/self/fd")) == before and not list(tmp_path.iterdir())


def test_a_pattern_that_backtracks_for_ever_ends_the_grep_call_with_an_error_the_model_can_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.txt").write_text("a" * 60 + "!\n")
    monkeypatch.setattr(search, "MATCH_SECONDS", 0.2)  # the limit itself, not the time it takes, is what is checked
    model = ScriptedModel([[tool_call("grep", {"pattern": "(a|aa)+$"})], "done"])
    agent = Agent(model, tools=["grep"], permissions="plan", journal=None, working_dir=tmp_path)
    result = agent.run_sync("go")
    assert result.text == "done"
    (answer,) = [e.data for e in result.events if e.type.value == "tool_result"]
    assert answer["is_error"] and "took more than 0.2 s to match" in answer["content"] and "simpler pattern" in answer["content"]


def test_grep_still_finds_what_a_python_regular_expression_finds(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def alpha():\n    return 1\nclass Beta:\n    pass\n")
    out = search.grep.function(ToolContext("call_1", "grep", working_dir=tmp_path), r"^(?:def|class)\s+(?P<name>\w+)", ignore_case=False)
    assert out.splitlines() == ["m.py:1: def alpha():", "m.py:3: class Beta:"]
    assert "m.py:3" in search.grep.function(ToolContext("call_1", "grep", working_dir=tmp_path), "BETA", ignore_case=True)


PATTERNS = ["a", "ab", "^a", "b$", "^$", "", "a\\s*b", "\\bab\\b", "\\n", ".*", "(?s)b.", "a|^b", "(?<=a)b", "(?<!a)b", "\\Ab", "a\\Z",
            "b(?=\\n)", "b(?!a)", "[^a]+$", "(?i)A B"]


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="ab \n", max_size=40), pattern=st.sampled_from(PATTERNS))
def test_grep_finds_the_lines_that_match_alone_whatever_the_pattern_looks_at(text: str, pattern: str) -> None:
    # grep searches a whole file and checks only lines where a match starts; searching every
    # line alone (without its newline, as grep(1) does) with Python's re is the plain way, and
    # the two must agree on every line.
    lines = text.split("\n")[: text.count("\n") + (not text.endswith("\n"))] if text else []
    plain = [(n, line) for n, line in enumerate(lines, start=1) if re.search(pattern, line)]
    assert list(search._Matcher(pattern, 0, "the pattern").matching_lines(text)) == plain
