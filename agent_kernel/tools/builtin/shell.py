"""tools.builtin.shell — the ``bash`` tool: one shell command in the working directory.

The command runs in a new session (its own process group), with stdin closed. On timeout, or
when the run is cancelled, the whole group is killed, so a ``sleep 600 &`` left behind by the
command dies with it. Output (stdout and stderr interleaved) is capped while it is read, so a
runaway command cannot exhaust memory; the middle is cut, keeping the start and the end.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from typing import Any

from ...errors import ToolError
from ..tool import Tool, ToolContext
from .limits import MAX_OUTPUT_CHARS
from .workspace import working_dir

__all__ = ["DEFAULT_TIMEOUT", "MAX_TIMEOUT", "bash"]

DEFAULT_TIMEOUT = 120
MAX_TIMEOUT = 600
# Seconds between SIGTERM and SIGKILL for the process group.
KILL_GRACE = 1.0


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


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Terminates the command's whole process group: SIGTERM, then SIGKILL after a grace period."""
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

    Args:
        command: the command line, run by bash.
        timeout: seconds before the command (and everything it started) is stopped; at most 600.
    """
    if not command.strip():
        raise ToolError("The command is empty.")
    if not 1 <= timeout <= MAX_TIMEOUT:
        raise ToolError(f"timeout must be between 1 and {MAX_TIMEOUT} seconds; got {timeout}.")
    shell = shutil.which("bash") or "/bin/sh"
    process = await asyncio.create_subprocess_exec(
        shell,
        "-c",
        command,
        cwd=working_dir(ctx),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    output = _CappedOutput(MAX_OUTPUT_CHARS)

    async def pump() -> None:
        assert process.stdout is not None
        while chunk := await process.stdout.read(65536):
            output.feed(chunk)

    try:
        # The pipe closes when every process holding it exits, so this also waits for background
        # children that keep the output open.
        await asyncio.wait_for(pump(), timeout)
        code = await asyncio.wait_for(process.wait(), timeout)
    except asyncio.TimeoutError:
        await _stop(process)
        raise ToolError(
            f"The command timed out after {timeout} s and was stopped, with every process it started. "
            f"Output so far:\n{output.text() or '(none)'}"
        ) from None
    except BaseException:
        # Cancelled (or anything else): nothing the command started may outlive the call.
        await asyncio.shield(_stop(process))
        raise
    text = output.text()
    if code != 0:
        raise ToolError(f"{text}\n[exit code {code}]" if text else f"[exit code {code}]")
    return text if text else "(no output)"


def _command_key(arguments: dict[str, Any]) -> str:
    return str(arguments.get("command", "")).strip()


bash = Tool(_bash, name="bash", category="shell", concurrency_safe=False, permission_key=_command_key)
