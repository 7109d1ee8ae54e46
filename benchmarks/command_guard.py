"""What judging and containing a command costs: the matcher per line, the bash tool per call.

Goals: reading a command line ≤ 1 ms (it runs once per tool call, never per token); the
supervisor that stops a command's whole process tree adds ≤ 50 ms per ``bash`` call; the
bubblewrap sandbox adds ≤ 100 ms. Each figure is the fastest of several rounds, so other work on
the machine does not inflate it.

Run: python benchmarks/command_guard.py
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent_kernel.guard import _shell as commands
from agent_kernel.tools._tool import ToolContext
from agent_kernel.tools.builtin._shell import _REAPER, bash

LINES = [
    "git status",
    "git add . && git commit -m 'fix: tidy; done' && git push origin main",
    "find . -name '*.py' -exec grep -l TODO {} \\; | xargs wc -l | sort -n | tail -3",
    "sudo -u root env X=1 timeout 5 bash -c 'for f in *; do echo \"$f\"; done' > out.txt",
]


def best(fn, rounds: int = 15, number: int = 1) -> float:
    """Seconds per call, the fastest of ``rounds``."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times)


async def bash_call(root: Path, **extras: object) -> None:
    await bash.invoke({"command": "true", "timeout": 60}, ToolContext("b", "bash", root, dict(extras)))


def main() -> None:
    parse_s = max(best(lambda line=line: commands._parse(line, 0), number=500) for line in LINES)
    print(f"matcher: {parse_s * 1e6:.0f} µs to read the slowest of {len(LINES)} lines "
          f"(goal ≤ 1 ms: {parse_s / 1e-3:.2f}x of the limit)")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        direct = best(lambda: subprocess.run(["bash", "-c", "true"], check=True), number=3)
        reaper = [sys.executable, "-I", "-S", str(_REAPER), "bash", "-c", "true"]
        supervised = best(lambda: subprocess.run(reaper, check=True), number=3)
        added = max(supervised - direct, 0.0)
        print(f"supervisor: bash alone {direct * 1e3:.1f} ms, under the supervisor {supervised * 1e3:.1f} ms: it adds "
              f"{added * 1e3:.1f} ms per call (goal ≤ 50 ms: {added / 0.050:.2f}x of the limit)")
        tool = best(lambda: asyncio.run(bash_call(root)), number=3)
        print(f"bash tool: {tool * 1e3:.1f} ms per call of `true`, end to end (event loop and pipes included)")
        if shutil.which("bwrap"):
            boxed = best(lambda: asyncio.run(bash_call(root, sandbox=True)), number=3)
            extra = max(boxed - tool, 0.0)
            print(f"sandbox: {boxed * 1e3:.1f} ms per call; bubblewrap adds {extra * 1e3:.1f} ms "
                  f"(goal ≤ 100 ms: {extra / 0.100:.2f}x of the limit)")
        else:
            print("sandbox: not measured (bwrap is not installed; apt-get install bubblewrap)")


if __name__ == "__main__":
    main()
