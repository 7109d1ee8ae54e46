"""Text that UTF-8 cannot encode never breaks a session: prompts, file names, resumed journals.

Each case goes through the real ``anthropic`` SDK to the strict fake Messages endpoint, where a
lone surrogate would fail to encode ("surrogates not allowed") and every later request with it.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent_kernel import Agent

from .fakes.server import FakeProvider
from .fakes.turns import turn


def test_a_prompt_with_a_lone_surrogate_is_sent_with_a_replacement_character(fake_provider: FakeProvider, tmp_path: Path) -> None:
    fake_provider.script(turn("Got it."), turn("Still fine."))
    agent = Agent(fake_provider.claude(), working_dir=tmp_path)
    assert agent.run_sync("half a pair: \ud83d here").text == "Got it."
    assert agent.run_sync("and the session goes on").text == "Still fine."
    assert fake_provider.bodies[0]["messages"][0]["content"][0]["text"] == "half a pair: \ufffd here"


def test_a_file_name_that_is_not_utf8_does_not_break_the_session(fake_provider: FakeProvider, tmp_path: Path) -> None:
    os.close(os.open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY))  # Latin-1 bytes
    fake_provider.script(turn(calls=[("c1", "list_files", {"path": "."})]), turn("One file."), turn("Next."))
    agent = Agent(fake_provider.claude(), tools=["list_files"], working_dir=tmp_path)
    assert agent.run_sync("What is here?").text == "One file."
    assert agent.run_sync("And now?").text == "Next."
    results = [b for b in fake_provider.bodies[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert "caf\ufffd.txt" in str(results[0]["content"]) and not fake_provider.rejected


def test_a_journal_already_holding_a_lone_surrogate_resumes(fake_provider: FakeProvider, tmp_path: Path) -> None:
    # A journal written before text was made encodable: its prompt holds an escaped lone surrogate.
    journal = tmp_path / "old.jsonl"
    first = Agent("offline", working_dir=tmp_path, journal=journal)
    first.run_sync("PROMPT-TO-BREAK")
    first.close()
    journal.write_text(journal.read_text().replace('"prompt":"PROMPT-TO-BREAK"', '"prompt":"broken \\udcff byte"'))
    fake_provider.script(turn("Resumed."))
    resumed = Agent.resume(journal, model=fake_provider.claude(), working_dir=tmp_path)
    assert resumed.run_sync("carry on").text == "Resumed."
    assert fake_provider.bodies[0]["messages"][0]["content"][0]["text"] == "broken \ufffd byte" and not fake_provider.rejected
