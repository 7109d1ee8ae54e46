"""Several journals of different shapes, written by real runs and by hand, for the SQL, Parquet and
OpenTelemetry tests: a hand-made run with an approval and a compaction, a real run that delegates
to a sub-agent and has a failing tool, and a run cut off while a tool was running.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_kernel import Agent, tool
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.journal import Journal
from agent_kernel.models.scripted import ScriptedModel, text, tool_call

from .journal_events import recorded_run, until


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"exploded: {reason}")


def write(path: Path, events: list[AgentEvent]) -> Path:
    with Journal(path) as journal:
        for e in events:
            journal.write(e)
    return path


def delegating_agent(path: Path | None, **kwargs: Any) -> Agent:
    """A parent that calls a failing tool, then delegates an addition to the sub-agent ``math``.

    Its journal is ``path`` (None: none), or with ``default_journal=True`` the default place under
    ``working_dir`` (``.agent_kernel/sessions/<id>.jsonl``).
    """
    if not kwargs.pop("default_journal", False):
        kwargs["journal"] = path
    child = Agent(
        ScriptedModel([tool_call("add", {"a": 2, "b": 3}, id="c1"), "2 + 3 = 5"]),
        tools=[add], system="You do arithmetic.", name="math", journal=None, context=None,
    )
    parent_model = ScriptedModel([
        [text("Trying."), tool_call("explode", {"reason": "test"}, id="p0")],
        [text("Delegating."), tool_call("task", {"agent": "math", "instructions": "Add 2 and 3."}, id="p1")],
        "The answer is 5.",
    ])
    return Agent(parent_model, tools=[explode], subagents={"math": child}, context=None,
                 permissions="bypass", name="lead", **kwargs)


async def delegating_run(path: Path) -> Path:
    agent = delegating_agent(path)
    result = await agent.run("What is 2 + 3?")
    agent.close()
    assert result.text == "The answer is 5."
    return path


async def fleet(folder: Path) -> list[Path]:
    """Writes the three journals into ``folder`` and returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    cut = [AgentEvent(e.seq, e.ts, "s_cut", "r_cut", e.turn_id, e.parent_turn_id, e.iteration, e.type, e.data)
           for e in until(recorded_run(), EventType.TOOL_RESULT)]
    return [
        write(folder / "recorded.jsonl", recorded_run()),
        await delegating_run(folder / "delegating.jsonl"),
        write(folder / "cut.jsonl", cut),
    ]
