"""Cost of the grep tool's bounded matching, against a plain line-by-line search with Python's re.

grep matches with the ``regex`` module under a timeout, so a pattern that backtracks for ever
ends its call instead of holding the interpreter lock. A timeout costs about a microsecond a
call, so grep searches each whole file and checks alone only the lines where a match starts.

Goal: on patterns without lookarounds, at most 2x the plain search (which has no bound at all);
patterns with lookarounds or \\A / \\Z are searched line by line and are reported, not held to it.

Workload: five copies of the agent_kernel package (about 150,000 lines of Python), and patterns
that match many lines, few lines, none, and one with a lookbehind. Both sides walk and read the
same files; each figure is the fastest of five rounds.

Run: python benchmarks/grep_tool.py
"""

from __future__ import annotations

import functools
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import agent_kernel
from agent_kernel.tools._tool import ToolContext
from agent_kernel.tools.builtin import _search as search

GOAL = 2.0
ROUNDS = 5
PATTERNS = [  # pattern, what it is, held to the goal
    (r"def \w+\(", "many lines (every function)", True),
    ("import", "many lines (every import)", True),
    (r"journal.*error", "few lines", True),
    ("NoSuchIdentifierAnywhere", "no line", True),
    (r"(?<=def )run_sync", "a lookbehind (line by line)", False),
]


def tree() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="grep-bench-"))
    package = Path(agent_kernel.__file__).parent
    for i in range(5):
        shutil.copytree(package, folder / f"copy{i}", ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def plain_grep(folder: Path, pattern: str) -> int:
    """The unbounded way: walk, read, and search every line with re."""
    compiled, found = re.compile(pattern), 0
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            with open(path, encoding="utf-8", errors="replace") as f:
                found += sum(1 for line in f if compiled.search(line))
    return found


def fastest(work: Callable[[], object]) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    folder = tree()
    lines = sum(len(p.read_text(errors="replace").splitlines()) for p in folder.rglob("*.py"))
    context = ToolContext("call_1", "grep", working_dir=folder)
    print(f"{lines:,} lines in {sum(1 for _ in folder.rglob('*.py')):,} files")
    worst = 0.0
    for pattern, what, held in PATTERNS:
        tool = fastest(functools.partial(search.grep.function, context, pattern))
        plain = fastest(functools.partial(plain_grep, folder, pattern))
        ratio = tool / plain
        if held:
            worst = max(worst, ratio)
        goal = f"goal ≤ {GOAL}x" if held else "not held to the goal"
        print(f"{pattern!r} ({what}): grep tool {tool * 1e3:.0f} ms, plain re {plain * 1e3:.0f} ms: {ratio:.2f}x ({goal})")
    print(f"worst ratio on patterns without lookarounds: {worst:.2f}x (goal ≤ {GOAL}x)")
    shutil.rmtree(folder)


if __name__ == "__main__":
    main()
