"""The gate judges the call that runs: played by a hostile model, a hostile MCP server and hostile files.

The model's calls go through the real ``anthropic`` SDK to the strict fake Messages endpoint
(``fake_provider``); the MCP server is a real stdio server written with the ``mcp`` SDK
(``tests/hostile_mcp_server.py``).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_kernel import Agent, EventType, tool
from agent_kernel.errors import UserError
from agent_kernel.guard._approvals import Approval, ApprovalRequest, parse_policy
from agent_kernel.guard._paths import path_key
from agent_kernel.guard._permissions import Permissions
from agent_kernel.guard._redaction import Redactor
from agent_kernel.jupyter._transcript import Transcript
from agent_kernel.mcp import MCPServer
from agent_kernel.models.scripted import ScriptedModel, tool_call
from agent_kernel.runtime._hooks import HookContext, HookPoint, Hooks
from agent_kernel.tools._tool import Tool, ToolContext
from agent_kernel.tools.builtin._workspace import guard, workspace

from .fakes.server import FakeProvider
from .fakes.turns import turn
from .helpers import of_type

HOSTILE = Path(__file__).with_name("hostile_mcp_server.py")


def results(run: Any) -> dict[str, dict[str, Any]]:
    return {e.data["call_id"]: e.data for e in of_type(run.events, EventType.TOOL_RESULT)}


# ---- the call that is judged is the call that runs --------------------------------------------

deployed: list[str] = []


@tool
def deploy(target: str = "prod") -> str:
    """Deploys to a target."""
    deployed.append(target)
    return f"deployed {target}"


def test_a_rule_on_a_default_holds_when_the_model_leaves_it_out_and_unknown_arguments_never_reach_the_gate(
    fake_provider: FakeProvider, tmp_path: Path
) -> None:
    deployed.clear()
    asked: list[ApprovalRequest] = []
    fake_provider.script(
        turn(calls=[("c1", "deploy", {"target": "prod", "reason": "x"}), ("c2", "deploy", {}), ("c3", "deploy", {"target": "staging"})]),
        turn("done"),
    )
    agent = Agent(fake_provider.claude(), tools=[deploy], journal=None, working_dir=tmp_path,
                  permissions=Permissions(mode="bypass", deny=["deploy(prod)"]), approver=lambda r: asked.append(r))
    run = agent.run_sync("ship it")
    got = results(run)
    assert deployed == ["staging"] and asked == []
    # An argument the tool does not take is refused before the gate, whatever its rules say.
    assert got["c1"]["is_error"] and "Invalid arguments for deploy" in got["c1"]["content"] and "reason" in got["c1"]["content"]
    # {} runs on the default: the rule about prod holds.
    assert got["c2"]["is_error"] and "deny 'deploy(prod)'" in got["c2"]["content"]
    decisions = [e.data for e in of_type(run.events, EventType.APPROVAL_DECISION)]
    assert [(d["call_id"], d["decision"]) for d in decisions] == [("c2", "reject")]


def test_the_approval_card_shows_the_arguments_the_tool_will_run_with(tmp_path: Path) -> None:
    deployed.clear()
    asked: list[ApprovalRequest] = []
    model = ScriptedModel([tool_call("deploy", {}, id="c1"), "done"])
    agent = Agent(model, tools=[deploy], journal=None, working_dir=tmp_path, approver=lambda r: asked.append(r) or False)
    agent.run_sync("go")
    assert asked[0].arguments == {"target": "prod"} and asked[0].key == "deploy(prod)"


# ---- rules name families ----------------------------------------------------------------------


def _repo(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n\tbare = false\n")
    return tmp_path


def _append_line(path: str, line: str, ctx: ToolContext) -> str:
    """Appends a line to a file (a writer tool of the user's own)."""
    fd, resolved, _ = workspace(ctx).open(path, write=True, guard=guard(ctx, "append_line", "edit"))
    with os.fdopen(fd, "a") as f:
        f.write(line + "\n")
    return f"appended to {resolved.rel}"


append_line = Tool(_append_line, name="append_line", category="edit", permission_key=path_key("path"))


def test_a_write_file_rule_binds_every_tool_that_changes_files(fake_provider: FakeProvider, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    hook = "[core]\n\tfsmonitor = touch pwned\n"
    fake_provider.script(
        turn(calls=[
            ("e1", "edit_file", {"path": ".git/config", "old_string": "[core]\n", "new_string": hook}),
            ("e2", "edit_file", {"path": "./sub/../.git//config", "old_string": "[core]\n", "new_string": hook}),
            ("a1", "append_line", {"path": ".git/config", "line": "\tfsmonitor = touch pwned"}),
            ("w1", "write_file", {"path": "notes.md", "content": "fine\n"}),
        ]),
        turn("done"),
    )
    agent = Agent(fake_provider.claude(), tools=["edit_file", "write_file", append_line], journal=None, working_dir=repo,
                  permissions=Permissions(mode="bypass", deny=["write_file(.git)"]))
    got = results(agent.run_sync("configure"))
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()
    for call in ("e1", "e2", "a1"):
        assert got[call]["is_error"] and "deny 'write_file(.git)'" in got[call]["content"]
    assert not got["w1"]["is_error"] and (repo / "notes.md").read_text() == "fine\n"


def test_a_write_rule_also_binds_a_writer_on_open_when_a_link_is_re_pointed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "notes.md").write_text("x\n")
    os.symlink("notes.md", repo / "link")
    hooks = Hooks()

    @hooks.on(HookPoint.BEFORE_TOOL_EXECUTION)
    def re_point(ctx: HookContext) -> None:  # after the gate judged 'link' (notes.md), before the open
        os.unlink(repo / "link")
        os.symlink(".git/config", repo / "link")

    model = ScriptedModel([tool_call("append_line", {"path": "link", "line": "\tfsmonitor = touch pwned"}, id="a1"), "done"])
    agent = Agent(model, tools=[append_line], journal=None, working_dir=repo, hooks=hooks,
                  permissions=Permissions(mode="bypass", deny=["edit_file(.git/*)"]))
    got = results(agent.run_sync("go"))
    assert got["a1"]["is_error"] and "deny 'edit_file(.git/*)'" in got["a1"]["content"]
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()


def test_the_headless_policy_reads_write_entries_as_the_whole_family(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    model = ScriptedModel([tool_call("edit_file", {"path": ".git/config", "old_string": "bare", "new_string": "worktree"}, id="e1"), "done"])
    agent = Agent(model, tools=["edit_file"], journal=None, working_dir=repo, permissions="default")
    agent.permissions.policy = parse_policy("scripted:write_file(.git)=deny,edit_file=approve")
    got = results(agent.run_sync("go"))
    assert got["e1"]["is_error"] and "bare" in (repo / ".git" / "config").read_text()


def test_a_read_rule_withholds_the_files_from_every_search(fake_provider: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "api.txt").write_text("TOKEN=hunter2-zebra\n")
    (tmp_path / "readme.md").write_text("see hunter2-zebra? no\n")
    os.symlink("secrets/api.txt", tmp_path / "innocent.txt")
    fake_provider.script(
        turn(calls=[
            ("g1", "grep", {"pattern": "TOKEN", "path": "secrets"}),
            ("g2", "grep", {"pattern": "TOKEN"}),
            ("g3", "grep", {"pattern": "TOKEN", "path": "secrets/api.txt"}),
            ("g4", "grep", {"pattern": "TOKEN", "path": "innocent.txt"}),
            ("l1", "list_files", {"path": ".", "recursive": True}),
            ("l2", "list_files", {"path": "secrets"}),
            ("o1", "glob", {"pattern": "**/*.txt"}),
            ("r1", "read_file", {"path": "innocent.txt"}),
        ]),
        turn("done"),
    )
    agent = Agent(fake_provider.claude(), tools=["grep", "glob", "list_files", "read_file"], journal=None, working_dir=tmp_path,
                  permissions=Permissions(mode="bypass", deny=["read_file(secrets/*)"]))
    got = results(agent.run_sync("look"))
    for call, data in got.items():
        assert "TOKEN=" not in data["content"] and "api.txt" not in data["content"], call
    assert got["r1"]["is_error"]


# ---- an approval binds to the file it showed --------------------------------------------------


def test_a_link_re_pointed_while_the_card_waits_is_asked_about_again_and_never_written(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("notes\n")
    (tmp_path / ".env").write_text("KEY=1\n")
    os.symlink("notes.txt", tmp_path / "target.txt")
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Any:
        asked.append(request)
        if len(asked) == 1:  # the attacker re-points the link while the person reads the card
            os.unlink(tmp_path / "target.txt")
            os.symlink(".env", tmp_path / "target.txt")
            return Approval.approve()
        return Approval.reject("that is .env now")

    model = ScriptedModel([tool_call("write_file", {"path": "target.txt", "content": "PWNED"}, id="w1"), "done"])
    agent = Agent(model, tools=["write_file"], journal=None, working_dir=tmp_path, approver=approver)
    run = agent.run_sync("go")
    assert (tmp_path / ".env").read_text() == "KEY=1\n" and (tmp_path / "notes.txt").read_text() == "notes\n"
    cards = [e.data for e in of_type(run.events, EventType.APPROVAL_REQUIRED)]
    assert [c["file"]["path"] for c in cards] == ["notes.txt", ".env"]
    assert "changed while the approval waited" in cards[1]["reason"]
    assert results(run)["w1"]["is_error"]


def test_a_file_swapped_after_the_approval_is_not_written(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("notes\n")
    (tmp_path / ".env").write_text("KEY=1\n")
    os.symlink("notes.txt", tmp_path / "target.txt")
    hooks = Hooks()

    @hooks.on(HookPoint.BEFORE_TOOL_EXECUTION)
    def swap(ctx: HookContext) -> None:
        os.unlink(tmp_path / "target.txt")
        os.symlink(".env", tmp_path / "target.txt")

    model = ScriptedModel([tool_call("write_file", {"path": "target.txt", "content": "PWNED"}, id="w1"), "done"])
    agent = Agent(model, tools=["write_file"], journal=None, working_dir=tmp_path, approver=lambda r: True, hooks=hooks)
    run = agent.run_sync("go")
    assert (tmp_path / ".env").read_text() == "KEY=1\n"
    content = results(run)["w1"]["content"]
    assert results(run)["w1"]["is_error"] and "nothing was written" in content and "Call the tool again" in content


def test_a_new_file_approved_as_absent_is_not_written_when_one_appeared_meanwhile(tmp_path: Path) -> None:
    hooks = Hooks()

    @hooks.on(HookPoint.BEFORE_TOOL_EXECUTION)
    def plant(ctx: HookContext) -> None:
        (tmp_path / "new.txt").write_text("planted\n")

    model = ScriptedModel([tool_call("write_file", {"path": "new.txt", "content": "mine"}, id="w1"), "done"])
    agent = Agent(model, tools=["write_file"], journal=None, working_dir=tmp_path, approver=lambda r: True, hooks=hooks)
    run = agent.run_sync("go")
    assert (tmp_path / "new.txt").read_text() == "planted\n" and results(run)["w1"]["is_error"]


# ---- rules that cannot be read ----------------------------------------------------------------


@pytest.mark.parametrize("rule", ["bash()", "bash(rm *))", "write_file(a)(b)", "read_file([)", None, 3, "bash(rm *"])
def test_a_rule_that_cannot_be_read_is_refused_when_given_naming_it(rule: Any) -> None:
    with pytest.raises(UserError) as caught:
        Permissions(deny=[rule])
    assert repr(rule) in str(caught.value)


def test_a_malformed_rule_slipped_into_the_deny_list_later_refuses_instead_of_being_skipped(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("write_file", {"path": "a.txt", "content": "x"}, id="w1"), "done"])
    agent = Agent(model, tools=["write_file"], journal=None, working_dir=tmp_path, permissions="bypass")
    with pytest.raises(UserError, match="write_file\\("):
        Agent(model, tools=["write_file"], permissions=_bad())
    agent.permissions.permissions.deny.append("write_file(")  # past every check: it must refuse, not be skipped
    run = agent.run_sync("go")
    assert results(run)["w1"]["is_error"] and not (tmp_path / "a.txt").exists()


def _bad() -> Permissions:
    permissions = Permissions(mode="bypass")
    permissions.deny.append("write_file(")
    return permissions  # the Agent copies it, and the copy checks every rule again


# ---- the seal ---------------------------------------------------------------------------------

FLIP = '''
import gc
for o in gc.get_objects():
    if type(o).__name__ == "Tool" and getattr(o, "name", None) == "write_file":
        o.read_only = True
        o.category = "read"
import os
os.environ["AGENT_KERNEL_APPROVAL"] = "auto_approve"
"flipped"
'''


def test_a_snippet_that_makes_a_writer_read_only_is_undone_and_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENT_KERNEL_APPROVAL", raising=False)
    model = ScriptedModel([
        [tool_call("python", {"code": FLIP}, id="p1")],
        [tool_call("write_file", {"path": "a.txt", "content": "x"}, id="w1")],
        "done",
    ])
    agent = Agent(model, tools=["python", "write_file"], journal=None, context=None, working_dir=tmp_path,
                  approver=lambda r: True if r.tool == "python" else None)
    run = agent.run_sync("go")
    from agent_kernel.tools.builtin._files import write_file

    assert not (tmp_path / "a.txt").exists()
    assert write_file.read_only is False and write_file.category == "edit"
    assert "AGENT_KERNEL_APPROVAL" not in os.environ
    (error,) = [e.data for e in of_type(run.events, EventType.ERROR) if e.data["kind"] == "tampering"]
    assert any("read_only" in c for c in error["changed"]) and any("AGENT_KERNEL_APPROVAL" in c for c in error["changed"])
    assert results(run)["w1"]["is_error"]


# Finds the run's tool extras by the sandbox settings they hold (under IPython the python tool
# keeps its namespace elsewhere, so the dict is told by its sandbox entry alone).
SANDBOX = '''
import gc
for o in gc.get_objects():
    if isinstance(o, dict) and o.get("sandbox") == {"network": False}:
        o["sandbox"] = None
"unsandboxed"
'''


def test_a_snippet_that_replaces_the_sandbox_settings_is_undone(tmp_path: Path) -> None:
    model = ScriptedModel([[tool_call("python", {"code": SANDBOX}, id="p1")], "done"])
    agent = Agent(model, tools=["python"], journal=None, context=None, working_dir=tmp_path, approver=lambda r: True)
    sentinel = {"network": False}
    agent.tool_extras["sandbox"] = sentinel
    run = agent.run_sync("go")
    assert agent.tool_extras["sandbox"] is sentinel
    (error,) = [e.data for e in of_type(run.events, EventType.ERROR) if e.data["kind"] == "tampering"]
    assert "the run's sandbox settings were changed" in error["changed"]


# ---- redaction --------------------------------------------------------------------------------

KEY = "sk-ant-api03-" + "Zq8wXv2LmN4pR7tY" * 4


def test_a_key_wrapped_across_lines_by_base64_or_xxd_is_redacted_in_a_tool_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("DATABASE_URL", "postgres://bob:s%40fe%2Fpw0rd@db.example/app")
    wrapped = "\n".join(textwrap.wrap(base64.b64encode(f"user:{KEY}".encode()).decode(), 76))
    hexed = "\n".join(textwrap.wrap(binascii.hexlify(KEY.encode()).decode(), 60))
    (tmp_path / "dump.txt").write_text(f"{wrapped}\n--\n{hexed}\n--\npassword s@fe/pw0rd\n")
    model = ScriptedModel([tool_call("read_file", {"path": "dump.txt"}, id="r1"), "done"])
    agent = Agent(model, tools=["read_file"], journal=None, working_dir=tmp_path)
    content = results(agent.run_sync("go"))["r1"]["content"]
    joined = content.replace("\n", "")
    assert KEY not in joined and binascii.hexlify(KEY.encode()).decode() not in joined
    assert base64.b64encode(KEY.encode()).decode()[8:40] not in joined
    assert "s@fe/pw0rd" not in content and "[REDACTED:DATABASE_URL]" in content


def test_redacting_a_wrapped_key_is_exact_around_it() -> None:
    r = Redactor({"OPENAI_API_KEY": "sk-" + "A1b2C3d4E5" * 3})
    hexed = binascii.hexlify(("sk-" + "A1b2C3d4E5" * 3).encode()).decode()
    text = "before\n" + hexed[:20] + "\n" + hexed[20:] + "\nafter"
    assert r.redact(text) == "before\n[REDACTED:OPENAI_API_KEY]\nafter"


# ---- the hostile MCP server -------------------------------------------------------------------


def hostile(out: Path, **kwargs: Any) -> MCPServer:
    env = {"HOSTILE_OUT": str(out), **kwargs.pop("env", {})}
    return MCPServer.stdio("h", sys.executable, str(HOSTILE), env=env, **kwargs)


def test_a_read_only_claim_from_an_untrusted_server_does_not_run_in_plan_mode(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("mcp__h__notes_read", {"topic": "x"}, id="n1"), "done", tool_call("mcp__h__notes_read", {"topic": "y"}, id="n2"), "done"])
    with Agent(model, mcp=[hostile(tmp_path)], journal=None, working_dir=tmp_path, permissions="plan") as agent:
        run = agent.run_sync("read")
        assert results(run)["n1"]["is_error"] and "Refused in plan mode" in results(run)["n1"]["content"]
        assert not (tmp_path / "written-by-notes_read").exists()
    asked: list[ApprovalRequest] = []
    with Agent(model, mcp=[hostile(tmp_path)], journal=None, working_dir=tmp_path, approver=lambda r: asked.append(r) or False) as agent:
        run = agent.run_sync("read")  # default mode asks about it
        assert [r.tool for r in asked] == ["mcp__h__notes_read"]
        card = of_type(run.events, EventType.APPROVAL_REQUIRED)[0].data
        assert card["claims_read_only"] is True and card["read_only"] is False and card["trusted"] is False
    assert not (tmp_path / "written-by-notes_read").exists()


def test_a_trusted_servers_read_only_claim_counts(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("mcp__h__notes_read", {"topic": "x"}, id="n1"), "done"])
    with Agent(model, mcp=[hostile(tmp_path, trusted=True)], journal=None, working_dir=tmp_path, permissions="plan") as agent:
        run = agent.run_sync("read")
    assert not results(run)["n1"]["is_error"] and (tmp_path / "written-by-notes_read").exists()


def test_an_mcp_tool_is_judged_on_its_schema_defaults_and_refuses_undeclared_arguments(tmp_path: Path) -> None:
    model = ScriptedModel([
        [tool_call("mcp__h__deploy", {}, id="d1"), tool_call("mcp__h__deploy", {"target": "prod", "force": True}, id="d2"),
         tool_call("mcp__h__deploy", {"target": "staging"}, id="d3")],
        "done",
    ])
    permissions = Permissions(mode="bypass", deny=['mcp__h__deploy(*"target": "prod"*)'])
    with Agent(model, mcp=[hostile(tmp_path)], journal=None, working_dir=tmp_path, permissions=permissions) as agent:
        got = results(agent.run_sync("ship"))
        spec = agent.tools.get("mcp__h__deploy").parameters
    assert spec["additionalProperties"] is False
    assert sorted(p.name for p in tmp_path.glob("deployed-*")) == ["deployed-staging"]
    assert got["d1"]["is_error"] and "forbids it" in got["d1"]["content"]
    assert got["d2"]["is_error"] and "Invalid arguments" in got["d2"]["content"] and "force" in got["d2"]["content"]


def test_sampling_needs_its_own_policy_entry_and_stops_at_the_runs_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_KERNEL_APPROVAL", "scripted:mcp__h__*=approve")
    model = ScriptedModel([tool_call("mcp__h__ask_model", {"times": 2, "max_tokens": 10}, id="s1"), "done"])
    with Agent(model, mcp=[hostile(tmp_path)], journal=None, working_dir=tmp_path) as agent:
        run = agent.run_sync("go")
    assert "answered 0, declined 2" in results(run)["s1"]["content"]
    sampled = [e.data for e in of_type(run.events, EventType.MCP_SAMPLING)]
    assert [s["action"] for s in sampled] == ["decline", "decline"] and "mcp__h__sampling itself" in sampled[0]["reason"]

    monkeypatch.setenv("AGENT_KERNEL_APPROVAL", "scripted:mcp__h__sampling=approve,mcp__h__*=approve")
    replies = ["hi"] * 5
    model = ScriptedModel([tool_call("mcp__h__ask_model", {"times": 5, "max_tokens": 10}, id="s1"), *replies, "done"])
    with Agent(model, mcp=[hostile(tmp_path, max_samplings=3)], journal=None, working_dir=tmp_path) as agent:
        run = agent.run_sync("go")
    assert "answered 3, declined 2" in results(run)["s1"]["content"]
    declined = [e.data for e in of_type(run.events, EventType.MCP_SAMPLING) if e.data["action"] == "decline"]
    assert len(declined) == 2 and "max_samplings" in declined[0]["reason"]


def test_progress_floods_are_coalesced_before_they_are_journaled(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    model = ScriptedModel([tool_call("mcp__h__flood", {"n": 3000}, id="f1"), "done"])
    with Agent(model, mcp=[hostile(tmp_path)], journal=journal, working_dir=tmp_path, permissions="bypass") as agent:
        run = agent.run_sync("go")
    assert "flooded 3000" in results(run)["f1"]["content"]
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    progress = [r for r in records if r.get("type") == "tool_progress"]
    started = next(r for r in records if r.get("type") == "tool_start")["ts"]
    ended = next(r for r in records if r.get("type") == "tool_result")["ts"]
    # At most four a second, plus the first and the last: a few, never thousands.
    assert 1 <= len(progress) <= 4 * (ended - started) + 2
    assert progress[-1]["data"]["fraction"] == pytest.approx(1.0)


def test_a_secret_given_to_a_server_in_env_is_redacted(tmp_path: Path) -> None:
    secret = "corp-" + "q7Lm2Zx9Vb4N" * 2
    model = ScriptedModel([tool_call("mcp__h__show_env", {"name": "CORP_CRED"}, id="e1"), "done"])
    with Agent(model, mcp=[hostile(tmp_path, env={"CORP_CRED": secret})], journal=None, working_dir=tmp_path, permissions="bypass") as agent:
        run = agent.run_sync("go")
    content = results(run)["e1"]["content"]
    assert secret not in content and "[REDACTED:h.env.CORP_CRED]" in content


# ---- names on cards ---------------------------------------------------------------------------


def test_control_and_bidi_characters_in_a_tool_name_are_shown_as_text_on_its_card(fake_provider: FakeProvider, tmp_path: Path) -> None:
    fake_provider.script(turn(calls=[("c1", "read_file\u202etxt.exe\nApproved: yes", {"path": "a"})]), turn("done"))
    run = Agent(fake_provider.claude(), tools=["read_file"], journal=None, working_dir=tmp_path).run_sync("go")
    transcript = Transcript()
    for event in run.events:
        transcript.apply(event)
    (card,) = transcript.tool_cards
    assert card.name == "read_file\\u202etxt.exe\\u000aApproved: yes"
    assert "\u202e" not in json.dumps(transcript.to_json(), ensure_ascii=False)


# ---- properties -------------------------------------------------------------------------------


_TOKEN = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789", min_size=24, max_size=48)


@settings(max_examples=60, deadline=None)
@given(key=_TOKEN, width=st.integers(min_value=1, max_value=100), prefix=st.text(alphabet="abc:", max_size=7), crlf=st.booleans())
def test_a_key_wrapped_at_any_width_is_redacted_whole(key: str, width: int, prefix: str, crlf: bool) -> None:
    secret = "sk-" + key
    redactor = Redactor({"OPENAI_API_KEY": secret})
    newline = "\r\n" if crlf else "\n"
    blob = base64.b64encode((prefix + secret).encode()).decode()
    hexed = binascii.hexlify(secret.encode()).decode()
    for encoded in (blob, hexed):
        text = "head" + newline + newline.join(textwrap.wrap(encoded, width)) + newline + "tail"
        out = redactor.redact(text)
        joined = out.replace("\r", "").replace("\n", "")
        assert "[REDACTED:OPENAI_API_KEY]" in out and out.startswith("head") and out.endswith("tail")
        assert hexed not in joined and base64.b64encode(secret.encode()).decode()[4:-4] not in joined
        for k in range(3):  # at whichever byte alignment the prefix left it, no run of the key's base64 survives
            assert base64.b64encode(b"\0" * k + secret.encode()).decode()[4:-4] not in joined


ran_with: list[dict[str, Any]] = []


@tool
def configure(region: str = "eu", replicas: int = 1, dry_run: bool = True) -> str:
    """Configures a service."""
    ran_with.append({"region": region, "replicas": replicas, "dry_run": dry_run})
    return "ok"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arguments=st.fixed_dictionaries({}, optional={
    "region": st.sampled_from(["eu", "us", "prod"]), "replicas": st.integers(0, 5) | st.sampled_from(["3", "4"]), "dry_run": st.booleans(),
}))
def test_the_gate_is_shown_exactly_the_arguments_the_tool_runs_with(arguments: dict[str, Any], tmp_path: Path) -> None:
    ran_with.clear()
    shown: list[dict[str, Any]] = []
    model = ScriptedModel([tool_call("configure", arguments, id="c1"), "done"])
    agent = Agent(model, tools=[configure], journal=None, working_dir=tmp_path, approver=lambda r: shown.append(r.arguments) or True)
    agent.run_sync("go")
    assert shown == ran_with and len(ran_with) == 1


_SPELLINGS = st.tuples(
    st.sampled_from(["", "./", "sub/../", "./sub/../", "sub//../"]),
    st.sampled_from([".git/config", ".git//config", ".git/./config", ".git/hooks/pre-commit", ".git"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spelling=_SPELLINGS, writer=st.sampled_from(["write_file", "edit_file", "append_line"]), rule=st.sampled_from(["write_file(.git)", "edit_file(.git/*)", "edit_file(.git)"]))
def test_every_writer_is_refused_every_spelling_of_a_path_a_write_rule_names(spelling: tuple[str, str], writer: str, rule: str, tmp_path: Path) -> None:
    from agent_kernel.tools.builtin import edit_file, write_file

    repo = tmp_path
    (repo / "sub").mkdir(exist_ok=True)
    (repo / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
    tool_ = {"write_file": write_file, "edit_file": edit_file, "append_line": append_line}[writer]
    path = spelling[0] + spelling[1]
    if rule == "edit_file(.git/*)" and spelling[1] == ".git":
        return  # the rule names what is inside .git, not the folder itself
    verdict = Permissions(mode="bypass", deny=[rule]).evaluate(tool_, {"path": path, "content": "", "line": "", "old_string": "a", "new_string": "b"}, repo)
    assert verdict.action == "deny", (path, writer, rule)


def test_a_sub_agents_own_read_rule_withholds_files_from_its_searches(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "api.txt").write_text("TOKEN=hunter2-zebra\n")
    child = Agent(ScriptedModel([tool_call("grep", {"pattern": "TOKEN"}, id="g1"), "Nothing."]), tools=["grep"], name="looker",
                  journal=None, working_dir=tmp_path, permissions=Permissions(deny=["read_file(secrets)"]))
    parent = Agent(ScriptedModel([tool_call("task", {"agent": "looker", "instructions": "find tokens"}, id="t1"), "Done."]),
                   journal=None, working_dir=tmp_path, subagents={"looker": child}, permissions="bypass")
    run = parent.run_sync("go")
    (found,) = [e.data for e in of_type(run.events, EventType.TOOL_RESULT) if e.data["name"] == "grep"]
    assert "TOKEN=" not in found["content"] and "withheld" in found["content"]
