"""Secrets in the environment never reach the model, the journal or the view."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from agent_kernel import Agent
from agent_kernel.events._event import EventType
from agent_kernel.guard._approvals import Approval
from agent_kernel.guard._redaction import Redactor, looks_like_secret_name
from agent_kernel.models.scripted import ScriptedModel, tool_call

SECRET = "sk-test-0123456789abcdef"


@pytest.mark.parametrize(
    "name", ["OPENAI_API_KEY", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "client_secret", "HF_TOKEN"]
)
def test_credential_like_names_are_recognised(name: str) -> None:
    assert looks_like_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "TOKENIZERS_PARALLELISM", "KEYBOARD", "LANG"])
def test_ordinary_names_are_not(name: str) -> None:
    assert not looks_like_secret_name(name)


def test_from_environ_collects_only_credentials_of_eight_characters_or_more() -> None:
    r = Redactor.from_environ({"MY_API_KEY": SECRET, "SHORT_TOKEN": "abc", "EMPTY_SECRET": "", "HOME": "/home/someone"})
    assert r.names == ["MY_API_KEY"]
    assert r.redact(f"key={SECRET}; home=/home/someone") == "key=[REDACTED:MY_API_KEY]; home=/home/someone"


def test_an_empty_redactor_is_inactive_and_changes_nothing() -> None:
    r = Redactor.from_environ({"HOME": "/root"})
    assert not r.active
    data = {"a": ["b"]}
    assert r.redact("text") == "text" and r.redact_data(data) is data


def test_the_longest_secret_wins_when_one_contains_another() -> None:
    r = Redactor({"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-ijkl"})
    assert r.redact("abcdefgh-ijkl abcdefgh") == "[REDACTED:B_TOKEN] [REDACTED:A_TOKEN]"


def test_redact_data_walks_nested_structures_and_json_escaped_text() -> None:
    r = Redactor({"DB_PASSWORD": 'pa"ss\\word!'})
    data = {"args": {"cmd": ['echo pa"ss\\word!'], "n": 3}, 'pa"ss\\word!': (1, 'pa"ss\\word!')}
    assert r.redact_data(data) == {
        "args": {"cmd": ["echo [REDACTED:DB_PASSWORD]"], "n": 3},
        "[REDACTED:DB_PASSWORD]": (1, "[REDACTED:DB_PASSWORD]"),
    }
    assert "pa" not in r.redact(json.dumps({"v": 'pa"ss\\word!'}))


def _serialised(obj: Any) -> str:
    return json.dumps(obj, default=lambda o: asdict(o) if hasattr(o, "__dataclass_fields__") else repr(o))


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("bash", {"command": "env"}), ("python", {"code": "import os\ndict(os.environ)"})],
)
async def test_a_tool_printing_the_environment_leaks_no_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", SECRET)
    model = ScriptedModel([[tool_call(tool, arguments)], "done"])
    # The call goes through an approval, so approval events are checked too.
    agent = Agent(
        model,
        tools=[tool],
        journal=tmp_path / "journal.jsonl",
        context=None,
        working_dir=tmp_path,
        approver=lambda request: Approval.approve(),
    )
    result = await agent.run("show me the environment")
    [tool_result] = [e for e in result.events if e.type is EventType.TOOL_RESULT]
    assert "[REDACTED:MY_SERVICE_API_KEY]" in tool_result.data["content"]
    assert any(e.type is EventType.APPROVAL_REQUIRED for e in result.events)
    # Nowhere: not in any event, not in the journal on disk, not in what the model was sent.
    assert SECRET not in _serialised([e.to_dict() for e in result.events])
    assert SECRET not in (tmp_path / "journal.jsonl").read_text()
    assert SECRET not in _serialised([r.messages for r in model.requests[1:]])
