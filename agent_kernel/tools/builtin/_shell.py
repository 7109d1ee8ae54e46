"""tools.builtin.shell — the ``bash`` tool: one shell command in the working directory.

The command runs in a new session, with stdin closed, under a small supervisor (``reaper``, on
Linux) that is a child subreaper: every process the command starts stays its descendant, even
one that double-forks or calls ``setsid``. When the command ends, times out or the run is
cancelled, the supervisor stops all of them (SIGTERM, then SIGKILL), so nothing a call started
outlives it; a server meant to keep running belongs outside the agent. Elsewhere the command's
process group is killed instead.

With a sandbox (``Agent(sandbox=True)``, ``ToolContext.extras["sandbox"]``) the command runs
inside bubblewrap (``agent_kernel.guard._sandbox``): the working directory writable but for what
runs later outside (``.git``, ``.agent_kernel``, ``AGENTS.md``, ...), the rest read-only, no
network, no unix sockets, a clean environment, and limits on processes, memory and CPU time that
the supervisor applies. If the sandbox cannot run, or cannot give one of its protections, the
call fails and says which, never running with less. A write refused on a protected entry gets a
line saying why.
A call the gate allowed because commands are sandboxed (``Permissions.sandboxed``) always runs
in a sandbox, even from a sub-agent that has none of its own.

Output (stdout and stderr interleaved) is capped while it is read, so a runaway command cannot
exhaust memory; the middle is cut, keeping the start and the end.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

from agent_kernel.errors import ToolError
from agent_kernel.guard._sandbox import Launch, Sandbox, SandboxUnavailable, check, limit_note, protected_note, restored_note, sandbox_from
from agent_kernel.tools._tool import Tool, ToolContext
from agent_kernel.tools.builtin._limits import MAX_OUTPUT_CHARS
from agent_kernel.tools.builtin._workspace import working_dir

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 600
# Seconds between SIGTERM and SIGKILL for the process group.
KILL_GRACE = 1.0
# How long the supervisor may take to stop everything before its group is killed outright.
SUPERVISOR_GRACE = 10.0
_REAPER = Path(__file__).with_name("_reaper.py")


class _CappedOutput:
    """Keeps the first and last ``limit // 2`` bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        dropped = self.total - len(self.head) - len(self.tail)
        if dropped == 0 and len(self.tail) <= self.half:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        tail = bytes(self.tail[-self.half :])
        cut = self.total - len(self.head) - len(tail)
        return (
            f"{self.head.decode('utf-8', errors='replace')}\n"
            f"[… {cut:,} bytes of output cut from the middle ({self.total:,} in all).]\n"
            f"{tail.decode('utf-8', errors='replace')}"
        )


def _kill_group(process: asyncio.subprocess.Process, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _stop(process: asyncio.subprocess.Process, supervised: bool) -> None:
    """Terminates everything the command started: through the supervisor when there is one (it
    stops every descendant, however detached), then the process group, SIGTERM before SIGKILL."""
    if supervised:
        try:
            process.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            await asyncio.wait_for(process.wait(), SUPERVISOR_GRACE)
        except asyncio.TimeoutError:
            pass
    _kill_group(process, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), KILL_GRACE)
    except asyncio.TimeoutError:
        pass
    # Children may outlive the shell or ignore SIGTERM; SIGKILL the group regardless.
    _kill_group(process, signal.SIGKILL)
    await process.wait()


async def _bash(command: str, ctx: ToolContext, timeout: int = DEFAULT_TIMEOUT) -> str:
    """Runs a shell command in the working directory and returns its output (stdout and stderr).
    Commands run without a terminal and with no input; a non-zero exit status is an error.
    Processes left running in the background are stopped when the command ends.

    Args:
        command: the command line, run by bash.
        timeout: seconds before the command (and everything it started) is stopped; at most 600.
    """
    if not command.strip():
        raise ToolError("The command is empty.")
    if not 1 <= timeout <= MAX_TIMEOUT:
        raise ToolError(f"timeout must be between 1 and {MAX_TIMEOUT} seconds; got {timeout}.")
    shell = shutil.which("bash") or "/bin/sh"
    argv = [shell, "-c", command]
    cwd = working_dir(ctx)
    sandbox = sandbox_from(ctx.extras.get("sandbox")) if ctx is not None else None
    if sandbox is None and _gate_is_sandboxed(ctx):
        # The gate let this call run because commands are sandboxed (a sub-agent of a sandboxed
        # agent shares its gate): it must run sandboxed, with the default settings.
        sandbox = Sandbox()
    launch: Launch | None = None
    if sandbox is not None:
        try:
            launch = sandbox.launch(argv, cwd, bwrap=check(), keep=_journal_paths(ctx))
        except SandboxUnavailable as exc:
            raise ToolError(f"Not run: this agent runs commands only inside its sandbox, and {exc}") from None
    try:
        return await _run(argv, cwd, timeout, launch, sandbox)
    finally:
        if launch is not None:
            launch.close()


async def _run(argv: list[str], cwd: Path, timeout: int, launch: Launch | None, sandbox: Sandbox | None) -> str:
    """Runs ``argv`` (sandboxed when ``launch`` is given) under the supervisor; returns its output."""
    supervised = sys.platform.startswith("linux") and Path("/proc").is_dir() and bool(sys.executable)
    if launch is not None:
        if not supervised:
            raise ToolError("Not run: the sandbox needs Linux with /proc for its supervisor, which applies its limits.")
        argv = [sys.executable, "-I", "-S", str(_REAPER), *launch.supervisor_options, "--", *launch.argv]
    elif supervised:
        argv = [sys.executable, "-I", "-S", str(_REAPER), *argv]
    process = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
        # A sandboxed command starts from a clean environment: secrets stay outside.
        env=launch.env if launch is not None else None,
        pass_fds=launch.pass_fds if launch is not None else (),
    )
    output = _CappedOutput(MAX_OUTPUT_CHARS)

    async def pump() -> None:
        assert process.stdout is not None
        while chunk := await process.stdout.read(65536):
            output.feed(chunk)

    try:
        # The pipe closes when every process holding it exits: the supervisor holds it until it has
        # stopped whatever the command left running (without it, until background children exit).
        await asyncio.wait_for(pump(), timeout)
        code = await asyncio.wait_for(process.wait(), timeout)
    except asyncio.TimeoutError:
        await _stop(process, supervised)
        raise ToolError(
            f"The command timed out after {timeout} s and was stopped, with every process it started. "
            f"Output so far:\n{output.text() or '(none)'}"
        ) from None
    except BaseException:
        # Cancelled (or anything else): nothing the command started may outlive the call.
        await asyncio.shield(_stop(process, supervised))
        raise
    text = output.text()
    if supervised and code < 0:
        # The supervisor never dies of a signal by itself: something killed it outright. What is
        # left of the command's process group goes now; a process that left the group with setsid
        # is out of reach outside the sandbox (inside, the sandbox died with the supervisor).
        _kill_group(process, signal.SIGKILL)
        text += ("\n[the command's supervisor was killed; " + ("the sandbox and everything in it died with it.]" if launch is not None else
                 "a process the command detached from its group (setsid) may still be running.]"))
    if launch is not None:
        # Everything the command started has ended: put back any protected link it changed.
        note = restored_note(launch.restore_links())
        if note is not None:
            text = f"{text}\n{note}"
    if sandbox is not None:
        for note in (protected_note(text, sandbox, cwd), limit_note(text, code, sandbox)):
            if note is not None:
                text = f"{text}\n{note}"
    if code != 0:
        raise ToolError(f"{text}\n[exit code {code}]" if text else f"[exit code {code}]")
    return text if text else "(no output)"


def _journal_paths(ctx: ToolContext | None) -> list[Path]:
    """The files the run journals to: a command must not rewrite the record of what it did."""
    sinks = getattr(getattr(ctx, "run", None), "sinks", None) or []
    return [Path(sink.path) for sink in sinks if isinstance(getattr(sink, "path", None), (str, os.PathLike))]


def _gate_is_sandboxed(ctx: ToolContext | None) -> bool:
    """Whether the run's permission gate lets shell calls run because they are sandboxed."""
    gate = getattr(getattr(ctx, "run", None), "permissions", None)
    return bool(getattr(getattr(gate, "permissions", None), "sandboxed", False))


def _command_key(arguments: dict[str, Any]) -> str:
    return str(arguments.get("command", "")).strip()


bash = Tool(_bash, name="bash", category="shell", concurrency_safe=False, permission_key=_command_key)
