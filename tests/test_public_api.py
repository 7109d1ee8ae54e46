"""The public surface: __all__ is sorted, complete and importable, and the core imports no Jupyter."""

from __future__ import annotations

import subprocess
import sys

import agent_kernel


def test_all_is_sorted_and_every_name_exists() -> None:
    assert agent_kernel.__all__ == sorted(agent_kernel.__all__)
    for name in agent_kernel.__all__:
        assert getattr(agent_kernel, name) is not None


def test_public_names_are_exactly_what_all_lists() -> None:
    public = {n for n in vars(agent_kernel) if not n.startswith("_") and not isinstance(getattr(agent_kernel, n), type(sys))}
    public -= {"annotations", "Any"}
    assert public == set(agent_kernel.__all__)


def test_the_issue_example_imports_work() -> None:
    from agent_kernel import Agent, AgentEvent, EventType, RunResult, TurnState, tool  # noqa: F401


def test_importing_the_core_loads_no_jupyter_or_sdk() -> None:
    code = (
        "import sys, agent_kernel; from agent_kernel import Agent;"
        "bad = [m for m in ('IPython', 'ipykernel', 'ipywidgets', 'anywidget', 'anthropic', 'openai') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
