"""Memory steps in the run's view: what the agent was told, what it stored, its plan."""

from __future__ import annotations

from pathlib import Path

from agent_kernel import Agent
from agent_kernel.jupyter._transcript import Transcript
from agent_kernel.models.scripted import ScriptedModel, tool_call


def notices(events: list) -> dict[str, str]:
    transcript = Transcript()
    for event in events:
        transcript.apply(event)
    return {item.topic: item.message for item in transcript.items if item.kind == "notice"}


def test_the_view_says_what_memory_was_read_stored_planned_and_told(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Use metric units.\n")
    namespace: dict[str, object] = {}
    model = ScriptedModel([
        [tool_call("todo_write", {"todos": [{"content": "load data", "status": "completed"}, {"content": "plot", "status": "pending"}]}),
         tool_call("memory", {"action": "remember", "key": "units", "content": "metric"})],
        "Noted.",
        "Again.",
    ])
    agent = Agent(model, memory=True, journal=None, working_dir=tmp_path, namespace=namespace, approver=lambda request: True)
    first = notices(agent.run_sync("plan and remember").events)
    assert first["memory_loaded"] == "Read AGENTS.md into the system prompt"
    assert first["todo"] == "Plan (1/2 done): ✓ load data; ○ plot"
    assert first["memory"] == "Remembered 'units' (long-term memory: 1 held)"
    namespace["sales"] = [1, 2, 3]
    second = notices(agent.run_sync("and now?").events)
    assert second["reminder"] == "Told the agent: 1 variable changed"
    assert "[1, 2, 3]" not in second["reminder"]  # names and shapes only, never values
