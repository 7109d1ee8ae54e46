"""Containing commands: bash stops every process it started, and the bubblewrap sandbox holds.

Every sandbox test runs the real ``bwrap`` (the Makefile installs bubblewrap) on real commands; a
marker, a pid or a loopback server shows whether an escape worked.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_kernel import Agent
from agent_kernel.errors import ToolError, UserError
from agent_kernel.events._event import EventType
from agent_kernel.guard import _sandbox as sandbox_module
from agent_kernel.guard._permissions import Permissions
from agent_kernel.guard._sandbox import Sandbox, SandboxUnavailable, sandbox_from
from agent_kernel.models.scripted import ScriptedModel, tool_call
from agent_kernel.tools._tool import ToolContext
from agent_kernel.tools.builtin._shell import bash


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "notes.md").write_text("alpha\n")
    (tmp_path / "outside").mkdir()
    return root


async def run_bash(root: Path, command: str, timeout: int = 60, **extras: Any) -> str:
    return await bash.invoke(bash.validate({"command": command, "timeout": timeout}), ToolContext("c1", "bash", root, dict(extras)))


async def refused(root: Path, command: str, **extras: Any) -> str:
    with pytest.raises(ToolError) as info:
        await run_bash(root, command, **extras)
    return str(info.value)


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


def running_with(needle: str) -> list[int]:
    """Live processes whose command line contains ``needle``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if needle in cmdline and alive(int(entry)):
                found.append(int(entry))
    return found


async def appears(path: Path) -> None:
    """Waits for a file the command writes (the command's progress, not a clock)."""
    while not path.exists():
        await asyncio.sleep(0.01)


# A sleeper that leaves the shell's session and process group, then writes its pid.
DETACHED = "setsid sh -c 'echo $$ > s.tmp; mv s.tmp sleeper.pid; exec sleep 600' >/dev/null 2>&1 &"
DOUBLE_FORKED = "(nohup sh -c 'echo $$ > d.tmp; mv d.tmp forked.pid; exec sleep 600' >/dev/null 2>&1 &) ;"
WAIT_FOR_PIDS = "while [ ! -e sleeper.pid ] || [ ! -e forked.pid ]; do sleep 0.01; done"


# ---- bash stops its whole process tree -------------------------------------------------------


async def test_a_detached_or_double_forked_process_is_stopped_when_the_command_ends(work: Path) -> None:
    out = await run_bash(work, f"{DETACHED} {DOUBLE_FORKED} {WAIT_FOR_PIDS}; echo started")
    assert out.strip() == "started"
    for name in ("sleeper.pid", "forked.pid"):
        assert not alive(int((work / name).read_text())), f"{name} outlived the command"


async def test_a_detached_process_is_stopped_when_the_call_is_cancelled(work: Path) -> None:
    task = asyncio.create_task(run_bash(work, f"{DETACHED} {DOUBLE_FORKED} sleep 600"))
    await asyncio.wait_for(asyncio.gather(appears(work / "sleeper.pid"), appears(work / "forked.pid")), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for name in ("sleeper.pid", "forked.pid"):
        assert not alive(int((work / name).read_text())), f"{name} outlived the cancelled call"


async def test_a_detached_process_ignoring_sigterm_is_stopped_at_timeout(work: Path) -> None:
    command = "setsid sh -c 'trap \"\" TERM; echo $$ > t.tmp; mv t.tmp stubborn.pid; while :; do sleep 1; done' >/dev/null 2>&1 & sleep 600"
    message = await refused(work, command.replace("sleep 600", "while [ ! -e stubborn.pid ]; do sleep 0.01; done; sleep 600"), timeout=2)
    assert "timed out after 2 s" in message
    assert not alive(int((work / "stubborn.pid").read_text()))


async def test_the_exit_code_still_reaches_the_model(work: Path) -> None:
    assert (await refused(work, "echo oops; exit 7")).endswith("[exit code 7]")


# ---- the sandbox holds -------------------------------------------------------------------------


async def test_the_sandbox_lets_commands_write_the_working_directory_only(work: Path) -> None:
    out = await run_bash(work, "echo made > inside.txt; cat inside.txt", sandbox=Sandbox())
    assert out.strip() == "made"
    # A sibling under /tmp is not even there (the sandbox has its own /tmp)...
    message = await refused(work, f"echo x > {work.parent / 'outside' / 'f'}", sandbox=Sandbox())
    assert "No such file or directory" in message
    assert not (work.parent / "outside" / "f").exists()
    # ... and the rest of the file system is read-only.
    message = await refused(work, "echo x > /usr/agent_kernel_probe", sandbox=Sandbox())
    assert "Read-only file system" in message
    assert not Path("/usr/agent_kernel_probe").exists()


async def test_writes_to_home_and_system_folders_fail_in_the_sandbox(work: Path) -> None:
    target = Path.home() / f".agent_kernel_sandbox_probe_{os.getpid()}"
    message = await refused(work, f"touch {target}", sandbox=True)
    assert "Read-only file system" in message
    assert not target.exists()


async def test_a_symlink_out_of_the_working_directory_does_not_escape_the_sandbox(work: Path) -> None:
    (work / "link").symlink_to(work.parent / "outside")
    (work / "home").symlink_to(Path.home())
    assert "No such file or directory" in await refused(work, "echo x > link/f", sandbox=Sandbox())
    assert not (work.parent / "outside" / "f").exists()
    probe = f"agent_kernel_probe_{os.getpid()}"
    assert "Read-only file system" in await refused(work, f"echo x > home/{probe}", sandbox=Sandbox())
    assert not (Path.home() / probe).exists()


async def test_proc_1_root_does_not_escape_the_sandbox(work: Path) -> None:
    for target in (f"/proc/1/root{work.parent / 'outside' / 'f'}", "/proc/1/root/usr/agent_kernel_probe"):
        message = await refused(work, f"echo x > {target}", sandbox=Sandbox())
        assert "Read-only file system" in message or "No such file or directory" in message
    assert not (work.parent / "outside" / "f").exists() and not Path("/usr/agent_kernel_probe").exists()


async def test_the_sandbox_has_its_own_tmp(work: Path) -> None:
    name = f"agent_kernel_probe_{os.getpid()}"
    await run_bash(work, f"echo x > /tmp/{name}; test -s /tmp/{name}", sandbox=Sandbox())
    assert not Path(f"/tmp/{name}").exists()


async def test_hidden_credentials_read_as_empty_in_the_sandbox(work: Path) -> None:
    secrets = work.parent / "creds"
    secrets.mkdir()
    (secrets / "key").write_text("TOP-SECRET")
    out = await run_bash(work, f"ls -A {secrets}; cat {secrets}/key 2>&1 || true", sandbox=Sandbox(hidden=(str(secrets),)))
    assert "TOP-SECRET" not in out
    # Also when the working directory holds them (a notebook started in the home folder).
    inner = work / ".ssh"
    inner.mkdir()
    (inner / "id_ed25519").write_text("PRIVATE-KEY")
    (work / ".netrc").write_text("password NETRC-SECRET")
    out = await run_bash(work, "cat .ssh/id_ed25519 .netrc 2>&1 || true", sandbox=Sandbox(hidden=(str(inner), str(work / ".netrc"))))
    assert "PRIVATE-KEY" not in out and "NETRC-SECRET" not in out


@pytest.fixture
async def server() -> Any:
    """A loopback TCP server that counts connections."""
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    yield port, connections
    srv.close()
    await srv.wait_closed()


async def test_the_sandbox_cuts_the_network_even_loopback(work: Path, server: Any) -> None:
    port, connections = server
    probe = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
    message = await refused(work, probe, sandbox=Sandbox())
    assert "connected" not in message.replace("connect:", "")
    assert connections == []
    # The control: with the network shared, the same probe reaches the server.
    assert (await run_bash(work, probe, sandbox=Sandbox(network=True))).strip() == "connected"
    while not connections:
        await asyncio.sleep(0.01)


async def test_no_process_outlives_a_sandboxed_command(work: Path) -> None:
    marker = f"{600 + os.getpid() % 1000}.{int(time.time() * 1000) % 100000}"
    await run_bash(work, f"(setsid nohup sleep {marker} >/dev/null 2>&1 &); setsid sleep {marker} >/dev/null 2>&1 & echo ok",
                   sandbox=Sandbox())
    assert running_with(f"sleep {marker}") == []


async def test_no_process_outlives_a_cancelled_sandboxed_command(work: Path) -> None:
    marker = f"{700 + os.getpid() % 1000}.{int(time.time() * 1000) % 100000}"
    task = asyncio.create_task(run_bash(work, f"setsid sleep {marker} >/dev/null 2>&1 & touch started; sleep 600", sandbox=Sandbox()))
    await asyncio.wait_for(appears(work / "started"), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert running_with(f"sleep {marker}") == []


# ---- the agent, the rules and the missing-sandbox error ------------------------------------------


async def test_a_sandboxed_agent_runs_commands_without_asking_but_deny_rules_hold(work: Path) -> None:
    model = ScriptedModel([[tool_call("bash", {"command": "touch made.txt"})],
                           [tool_call("bash", {"command": "command rm notes.md"})], "done"])
    agent = Agent(model, tools=["bash"], journal=None, context=None, working_dir=work, sandbox=True,
                  permissions=Permissions(deny=["bash(rm *)"]))
    result = await agent.run("go")
    made, removed = [e.data for e in result.events if e.type is EventType.TOOL_RESULT]
    assert not made["is_error"] and (work / "made.txt").exists()
    assert removed["is_error"] and "bash(rm *)" in removed["content"]
    assert (work / "notes.md").exists()


async def test_a_sub_agent_of_a_sandboxed_agent_runs_its_commands_in_the_sandbox_too(work: Path) -> None:
    outside = work.parent / "outside" / "f"
    child = Agent(ScriptedModel([[tool_call("bash", {"command": f"touch {outside}; touch child.txt"})], "child done"]),
                  tools=["bash"], journal=None, context=None, name="helper")
    parent = Agent(ScriptedModel([[tool_call("task", {"agent": "helper", "instructions": "go"})], "done"]),
                   journal=None, context=None, working_dir=work, sandbox=True, subagents={"helper": child})
    result = await parent.run("go")
    results = [e.data for e in result.events if e.type is EventType.TOOL_RESULT and e.data.get("name") == "bash"]
    assert len(results) == 1 and "No such file or directory" in results[0]["content"]  # ran, sandboxed
    assert (work / "child.txt").exists() and not outside.exists()


def test_plan_mode_still_refuses_commands_in_the_sandbox() -> None:
    p = Permissions(mode="plan", sandboxed=True)
    assert p.evaluate(bash, {"command": "touch x"}).action == "deny"
    assert Permissions(sandboxed=True, ask=["bash(git push*)"]).evaluate(bash, {"command": "git push"}).action == "ask"


@pytest.fixture
def no_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    sandbox_module.check.cache_clear()
    yield
    sandbox_module.check.cache_clear()


def test_without_bubblewrap_a_sandboxed_agent_says_how_to_install_it(no_bwrap: None) -> None:
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        Agent(ScriptedModel(["x"]), journal=None, sandbox=True)


async def test_without_bubblewrap_a_sandboxed_command_is_not_run_at_all(work: Path, no_bwrap: None) -> None:
    message = await refused(work, "echo x > ran.txt", sandbox=True)
    assert "Not run" in message and "apt-get install bubblewrap" in message
    assert not (work / "ran.txt").exists()


async def test_when_namespaces_are_off_the_error_quotes_bubblewrap(work: Path, no_bwrap: None, tmp_path: Path) -> None:
    fake = tmp_path / "empty-bin" / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    message = await refused(work, "echo x > ran.txt", sandbox=True)
    assert "No permissions to create new namespace" in message and "user namespaces" in message
    assert not (work / "ran.txt").exists()


def test_per_host_network_lists_are_refused_with_what_is_possible() -> None:
    with pytest.raises(UserError, match="per-host"):
        sandbox_from({"network": ["127.0.0.1:8000"]})
    assert sandbox_from({"network": True}) == Sandbox(network=True)
    assert sandbox_from(False) is None


def test_the_sandbox_magic_option_turns_the_sandbox_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from agent_kernel.jupyter._extension import loaded_magics

    (tmp_path / "outside").mkdir(exist_ok=True)
    work = tmp_path / "nb"
    work.mkdir()
    monkeypatch.chdir(work)
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext agent_kernel")
    try:
        ip.user_ns["sb"] = ScriptedModel([[tool_call("bash", {"command": f"touch in.txt; touch {tmp_path / 'outside' / 'f'}"})], "done"])
        with capture_output():
            result = ip.run_cell("%%agent -m sb --tools bash --sandbox --quiet -o sandboxed\nGo")
        assert result.error_in_exec is None and result.error_before_exec is None
        magics = loaded_magics(ip)
        assert magics is not None and "sandbox" in magics.sessions.get().agent.tool_extras
        call = ip.user_ns["sandboxed"].tool_calls[0]
        assert "No such file or directory" in call["content"]  # ran without asking, inside the sandbox
        assert (work / "in.txt").exists() and not (tmp_path / "outside" / "f").exists()
    finally:
        ip.run_cell("%unload_ext agent_kernel")
        for name in ("sb", "sandboxed"):
            ip.user_ns.pop(name, None)
        ip.config.pop("AgentMagics", None)
