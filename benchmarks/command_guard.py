"""What judging and containing a command costs: the matcher per line, the bash tool per call.

Goals: reading an ordinary command line ≤ 1 ms; a 400 KB command line judged by the rules
(deny, ask and allow, as ``Permissions.evaluate`` does) in ≤ 50 ms, whatever its shape (before the
reader was rewritten: 2.5 s on the event loop); judging runs once per tool call, never per
streamed token, and a line over 64 KB is judged on a worker thread so the event loop keeps
ticking; the supervisor that stops a command's whole process tree adds ≤ 50 ms per ``bash``
call; the bubblewrap sandbox adds ≤ 100 ms. Each figure is the fastest of several rounds, so
other work on the machine does not inflate it.

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

from agent_kernel import Agent
from agent_kernel.guard import _shell as commands
from agent_kernel.guard._permissions import Permissions
from agent_kernel.models.scripted import ScriptedModel, tool_call
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


HUGE = 400_000
# 400 KB lines of the shapes a model sends: many commands, a file written through a here-document,
# one long quoted argument, many substitutions, one long word.
HUGE_LINES = {
    "20,000 commands": " && ".join(f"git add 'file{i}.py'" for i in range(20_000))[:HUGE],
    "a here-document": ("cat > big.py <<'EOF'\n" + "\n".join(f"x{i} = \"it's {i}\"  # rm -rf / $(no)" for i in range(10_000)))[:HUGE] + "\nEOF",
    "one quoted argument": "python3 -c '" + "print(1); " * (HUGE // 10) + "'",
    "substitutions": ("echo \"" + "a $x `b` $(c) " * (HUGE // 14))[:HUGE] + "\"",
    "one word": "echo " + "a" * HUGE,
}
RULES = Permissions(mode="default", allow=["bash(git *)", "bash(cat *)", "bash(echo *)"], ask=["bash(curl *)"], deny=["bash(rm *)"])


def judge(line: str) -> str:
    commands.clear_cache()  # judge it afresh each round, as a new line would be
    return RULES.evaluate(bash, {"command": line}).action


async def streamed_call(command: str, deltas: int) -> tuple[int, int, float]:
    """A real run whose model streams one bash call in ``deltas`` argument deltas: (matcher
    reads, rule evaluations, longest event-loop stall in s) while it is judged."""
    reads, evaluations = 0, 0
    parse, evaluate = commands._parse, Permissions.evaluate

    def counting_parse(line: str, depth: int, budget: object) -> commands.CommandLine:
        nonlocal reads
        reads += depth == 0
        return parse(line, depth, budget)  # type: ignore[arg-type]

    def counting_evaluate(self: Permissions, *args: object, **kwargs: object) -> object:
        nonlocal evaluations
        evaluations += 1
        return evaluate(self, *args, **kwargs)  # type: ignore[arg-type]

    stall, running = 0.0, True

    async def ticker() -> None:
        nonlocal stall
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            stall, last = max(stall, now - last), now

    commands._parse, Permissions.evaluate = counting_parse, counting_evaluate  # type: ignore[assignment,method-assign]
    commands.clear_cache()
    try:
        chunk = max(1, len(command) // deltas)
        # A model over HTTP hands the event loop back between deltas; the smallest delay does the same.
        model = ScriptedModel([[tool_call("bash", {"command": command}, chunk=chunk, delay=1e-6)], "done"])
        agent = Agent(model, tools=["bash"], journal=None, context=None, permissions=Permissions(mode="plan", deny=["bash(rm *)"]))
        tick = asyncio.create_task(ticker())
        await agent.run("go")
        running = False
        await tick
    finally:
        commands._parse, Permissions.evaluate = parse, evaluate  # type: ignore[method-assign]
    return reads, evaluations, stall


def main() -> None:
    parse_s = max(best(lambda line=line: commands._parse(line, 0, commands._Budget()), number=500) for line in LINES)
    print(f"matcher: {parse_s * 1e6:.0f} µs to read the slowest of {len(LINES)} lines "
          f"(goal ≤ 1 ms: {parse_s / 1e-3:.2f}x of the limit)")
    worst = 0.0
    for shape, line in HUGE_LINES.items():
        took = best(lambda line=line: judge(line), rounds=7)
        worst = max(worst, took)
        print(f"  {len(line) / 1000:.0f} KB, {shape}: judged in {took * 1e3:.1f} ms ({judge(line)})")
    print(f"400 KB line: judged in {worst * 1e3:.1f} ms at worst (goal ≤ 50 ms: {worst / 0.050:.2f}x of the limit)")
    line = HUGE_LINES["20,000 commands"]
    asyncio.run(streamed_call("git status", deltas=1))  # first-run costs (imports, the price table) are not judging
    rounds = [asyncio.run(streamed_call(line, deltas=4_000)) for _ in range(5)]
    reads, evaluations = max(r[0] for r in rounds), max(r[1] for r in rounds)
    stall = min(r[2] for r in rounds)  # the fastest round, as for every figure here
    print(f"per-token path: a {len(line) / 1000:.0f} KB bash call streamed in 4,000 deltas was read {reads}x and "
          f"judged {evaluations}x (goal: once per call, 0 per delta); the event loop's longest stall while it was "
          f"judged: {stall * 1e3:.1f} ms (goal ≤ 50 ms: {stall / 0.050:.2f}x of the limit)")
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
