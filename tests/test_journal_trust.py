"""A resumed session keeps its sandbox and rules, and only a journal this install signed is resumed unasked.

The journals are written by real agents; the forged ones are what something able to write the
workspace could drop in ``.agent_kernel/sessions/``. Sandboxed commands run in the real ``bwrap``.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_kernel import Agent
from agent_kernel.errors import UserError
from agent_kernel.events._event import EventType
from agent_kernel.guard._permissions import Permissions
from agent_kernel.guard._sandbox import Sandbox
from agent_kernel.guard._signing import SIGNATURE_FIELD, key_path
from agent_kernel.journal import read_header
from agent_kernel.models.scripted import ScriptedModel, tool_call


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This user's configuration folder, where the journal key is made on first use."""
    folder = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    return folder


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    return root


async def sandboxed_session(work: Path) -> Path:
    """A session run once with a sandbox and rules; returns its journal."""
    agent = Agent(ScriptedModel(["ok"]), tools=["bash"], context=None, working_dir=work,
                  sandbox=Sandbox(max_processes=100, env=("PIP_*",)),
                  permissions=Permissions(mode="default", deny=["bash(rm *)"], ask=["bash(git push*)"]))
    await agent.run("hello")
    path = Path(agent.journal.path)
    agent.close()
    return path


def rewrite_header(path: Path, change: dict[str, object], *, drop: tuple[str, ...] = ()) -> None:
    lines = path.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header.update(change)
    for name in drop:
        header.pop(name, None)
    path.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))


async def test_a_resumed_session_keeps_its_sandbox_and_rules_and_commands_stay_inside(work: Path, tmp_path: Path) -> None:
    path = await sandboxed_session(work)
    outside = tmp_path / "outside" / "escaped"
    model = ScriptedModel([[tool_call("bash", {"command": f"touch made.txt; touch {outside}"})],
                           [tool_call("bash", {"command": "rm made.txt"})], "done"])
    agent = Agent.resume(path, model=model, tools=["bash"], context=None, working_dir=work)
    assert agent.tool_extras["sandbox"] == Sandbox(max_processes=100, env=("PIP_*",))
    assert agent.mode == "default" and agent.permissions.permissions.deny == ["bash(rm *)"]
    assert agent.permissions.permissions.ask == ["bash(git push*)"] and agent.permissions.permissions.sandboxed
    result = await agent.run("go on")
    touched, removed = [e.data for e in result.events if e.type is EventType.TOOL_RESULT]
    assert "No such file or directory" in touched["content"]  # ran without asking, inside the sandbox
    assert (work / "made.txt").exists() and not outside.exists()
    assert removed["is_error"] and "bash(rm *)" in removed["content"]
    agent.close()


async def test_a_sandboxed_command_cannot_rewrite_the_journal_of_its_run_wherever_it_is(work: Path) -> None:
    journal = work / "logs" / "run.jsonl"
    model = ScriptedModel([[tool_call("bash", {"command": "truncate -s 0 logs/run.jsonl; echo FORGED$((40 + 2)) >> logs/run.jsonl"})], "done"])
    agent = Agent(model, tools=["bash"], context=None, working_dir=work, journal=journal, sandbox=True)
    result = await agent.run("go")
    call = next(e.data for e in result.events if e.type is EventType.TOOL_RESULT)
    assert call["is_error"] and "Read-only file system" in call["content"]
    agent.close()
    assert "FORGED42" not in journal.read_text() and journal.read_text().count("\n") > 5


async def test_settings_passed_to_resume_replace_the_recorded_ones(work: Path) -> None:
    path = await sandboxed_session(work)
    agent = Agent.resume(path, model=ScriptedModel(["x"]), context=None, working_dir=work, sandbox=Sandbox(network=True),
                         permissions="plan")
    assert agent.tool_extras["sandbox"] == Sandbox(network=True) and agent.mode == "plan"
    agent.close()


async def test_a_forged_journal_is_not_resumed_unless_the_person_trusts_it(work: Path) -> None:
    path = await sandboxed_session(work)
    forged = path.with_name("s_forged.jsonl")
    forged.write_text(path.read_text())
    rewrite_header(forged, {}, drop=(SIGNATURE_FIELD,))
    with pytest.raises(UserError) as info:
        Agent.resume(forged, model=ScriptedModel(["x"]), context=None, working_dir=work)
    message = str(info.value)
    assert "is not signed" in message and f"Agent.resume({str(forged)!r}, trust=True)" in message
    agent = Agent.resume(forged, trust=True, model=ScriptedModel(["x"]), context=None, working_dir=work)
    assert Path(agent.journal.path) == forged
    agent.close()


@pytest.mark.parametrize("change", [
    {"settings": {}},  # the sandbox and rules dropped
    {"settings": {"permissions": {"mode": "bypass", "allow": [], "ask": [], "deny": []}}},
    {"session_id": "s_other"},
])
async def test_a_signed_header_that_was_changed_is_refused(work: Path, change: dict[str, object]) -> None:
    path = await sandboxed_session(work)
    rewrite_header(path, change)
    with pytest.raises(UserError, match="signature does not match"):
        Agent.resume(path, model=ScriptedModel(["x"]), context=None, working_dir=work)


async def test_a_journal_signed_with_another_key_is_refused(work: Path, config_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = await sandboxed_session(work)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home.parent / "another-user"))
    other = Agent(ScriptedModel(["x"]), context=None, working_dir=work)
    await other.run("make my key")  # this user's key now exists, and is not the one that signed
    other.close()
    with pytest.raises(UserError, match="signature does not match"):
        Agent.resume(path, model=ScriptedModel(["x"]), context=None, working_dir=work)


async def test_the_key_is_private_outside_the_workspace_and_hidden_from_commands(work: Path, config_home: Path) -> None:
    await sandboxed_session(work)
    key = key_path()
    assert key == config_home / "agent_kernel" / "journal.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert SIGNATURE_FIELD in (read_header(next((work / ".agent_kernel" / "sessions").glob("*.jsonl"))) or {})
    # Even with the configuration folder inside the workspace, a sandboxed command cannot read it.
    from agent_kernel.tools._tool import ToolContext
    from agent_kernel.tools.builtin._shell import bash

    out = await bash.invoke(bash.validate({"command": f"cat {key} 2>&1; ls -A {key.parent}; echo end"}),
                            ToolContext("c1", "bash", config_home.parent, {"sandbox": Sandbox()}))
    assert key.read_text().strip() not in out and out.strip().endswith("end")


async def test_a_key_others_can_read_is_refused_with_the_fix(work: Path) -> None:
    path = await sandboxed_session(work)
    os.chmod(key_path(), 0o644)
    with pytest.raises(UserError, match=f"chmod 600 {key_path()}"):
        Agent.resume(path, model=ScriptedModel(["x"]), context=None, working_dir=work)


# ---- %agent resume -------------------------------------------------------------------------------


@pytest.fixture
def notebook(work: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.chdir(work)
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext agent_kernel")
    names = set(ip.user_ns)
    yield ip
    ip.run_cell("%unload_ext agent_kernel")
    for name in set(ip.user_ns) - names:
        del ip.user_ns[name]
    ip.config.pop("AgentMagics", None)


def run_cell(ip: object, code: str) -> tuple[object, str]:
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        result = ip.run_cell(code)  # type: ignore[attr-defined]
    return result, captured.stdout + captured.stderr


def test_agent_resume_keeps_the_sandbox_and_refuses_a_forged_journal_unless_trusted(notebook: object, work: Path, tmp_path: Path) -> None:
    from agent_kernel.jupyter._extension import loaded_magics

    ip = notebook
    ip.user_ns["sb"] = ScriptedModel(["ok"])  # type: ignore[attr-defined]
    result, out = run_cell(ip, "%%agent -m sb --tools bash --sandbox --quiet\nHello")
    assert result.error_in_exec is None, out  # type: ignore[attr-defined]
    magics = loaded_magics(ip)
    assert magics is not None
    session = magics.sessions.get().agent
    path = Path(session.journal.path)
    session.close()
    magics.sessions.put(magics.sessions.current, Agent(ScriptedModel(["x"]), context=None, journal=None))  # a fresh session
    result, out = run_cell(ip, f"%agent resume {path.stem}")
    assert result.error_in_exec is None, out  # type: ignore[attr-defined]
    assert isinstance(magics.sessions.get().agent.tool_extras.get("sandbox"), Sandbox)
    magics.sessions.get().agent.close()
    # A copy without this install's signature is refused, naming the magic's own opt-in.
    forged = path.with_name("s_dropped.jsonl")
    forged.write_text(path.read_text())
    rewrite_header(forged, {}, drop=(SIGNATURE_FIELD,))
    result, out = run_cell(ip, "%agent resume s_dropped")
    error = result.error_in_exec  # type: ignore[attr-defined]
    assert error is not None and "%agent resume --trust s_dropped" in str(error) and "Agent.resume(" not in str(error)
    result, out = run_cell(ip, "%agent resume --trust s_dropped")
    assert result.error_in_exec is None, out  # type: ignore[attr-defined]
    assert Path(magics.sessions.get().agent.journal.path) == forged
    magics.sessions.get().agent.close()
