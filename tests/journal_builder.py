"""Long journals for tests and benchmarks, made quickly: a real session, then one of its stretches copied.

``long_journal`` runs a real agent (journal on, context management on): it writes a todo list and
reads ``a.txt`` and ``b.txt``, then runs two "bulk" stretches, each a run with a large answer
followed by a compaction. The second stretch starts and ends in the same state (a compacted
conversation), so its journal lines are copied after it, with fresh seqs and run and turn ids,
until the journal reaches the size asked for. The result is a journal ``Agent.resume`` reads as
one long session whose conversation stays small (each stretch ends compacted) and whose todo
list and file reads lie at its very start.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent_kernel import Agent
from agent_kernel._util.blocking import run_blocking
from agent_kernel.context import SECTIONS, ContextManager
from agent_kernel.models.scripted import FunctionModel, text, tool_call
from agent_kernel.tools.builtin._todo import todo_write

__all__ = ["PLAN", "SUMMARY", "long_journal", "summarising_model"]

PLAN = [{"content": "Read the inputs", "status": "completed"}, {"content": "Write the report", "status": "in_progress"}]
SUMMARY = "\n".join(f"## {s}\nRead a.txt and b.txt; writing the report." for s in SECTIONS)
_ID = re.compile(rb'"([rt])_([0-9a-f]{12})"')
_SEQ = re.compile(rb'^\{"seq":(\d+),')


def summarising_model(bulk_chars: int = 100_000) -> FunctionModel:
    """Plans, reads a.txt and b.txt, then answers every prompt with ``bulk_chars`` characters;
    answers a compaction request with an eight-section summary."""
    state = {"step": 0}
    bulk = "All is well. " * (bulk_chars // 13)

    def respond(messages: Any, tools: Any) -> Any:
        if not tools and "<conversation>" in messages[0].text:
            return SUMMARY
        state["step"] += 1
        step = state["step"]
        if step == 1:
            return [text("First the plan."), tool_call("todo_write", {"todos": PLAN})]
        if step == 2:
            return [tool_call("read_file", {"path": "a.txt"})]
        if step == 3:
            return [tool_call("read_file", {"path": "b.txt"})]
        if step == 4:
            return "Both read."
        return [text(bulk, chunk=len(bulk))]

    return FunctionModel(respond, name="bulk", context_window=200_000)


def long_journal(folder: Path, size: int, bulk_chars: int = 100_000) -> Path:
    """A journal of at least ``size`` bytes in ``folder`` (see the module docstring); ``a.txt``
    and ``b.txt`` are written there too."""
    (folder / "a.txt").write_text("alpha v1\n")
    (folder / "b.txt").write_text("bravo v1\n")
    path = folder / "long.jsonl"
    manager = ContextManager(keep_messages=2, retry_delays=(), calibrate=False)
    agent = Agent(summarising_model(bulk_chars), tools=["read_file", todo_write], context=manager, working_dir=folder, journal=path)
    agent.run_sync("Read both files.")
    agent.run_sync("Write a long answer.")
    _compact(agent)
    agent.journal.flush()
    start = path.stat().st_size
    agent.run_sync("Write a long answer.")
    _compact(agent)
    agent.close()
    with path.open("rb") as f:
        f.seek(start)
        block = f.read().splitlines(keepends=True)
    first_seq = int(_SEQ.match(block[0]).group(1))  # type: ignore[union-attr]
    last_seq = int(_SEQ.match(block[-1]).group(1))  # type: ignore[union-attr]
    step = last_seq - first_seq + 1
    total = path.stat().st_size
    copy = 0
    with path.open("ab") as out:
        while total < size:
            copy += 1
            tag = f"{copy:06x}".encode()
            shift = copy * step

            def fresh_id(match: re.Match[bytes]) -> bytes:
                return b'"' + match.group(1) + b"_" + tag + match.group(2)[6:] + b'"'

            for line in block:
                line = _ID.sub(fresh_id, line)
                seq = int(_SEQ.match(line).group(1))  # type: ignore[union-attr]
                line = b'{"seq":%d,' % (seq + shift) + line[_SEQ.match(line).end():]  # type: ignore[union-attr]
                out.write(line)
                total += len(line)
    return path


def _compact(agent: Agent) -> None:
    run_blocking(agent.compact)  # as run_sync does: from a test's event loop too
