"""jupyter — the notebook surfaces: the live view, its static transcript, the magics and the runner.

This is the only package that imports IPython, ipykernel or widgets, and it does so lazily:
``import agent_kernel`` never pulls them in, and ``agent_kernel.jupyter.AgentView`` imports
anywidget only when first used.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["AgentMagics", "AgentView", "RunHandle", "RunSummary", "run_cell", "start_run"]

_LAZY = {"AgentMagics": "._magics", "AgentView": "._view", "RunHandle": "._runner", "RunSummary": "._summary",
         "run_cell": "._runner", "start_run": "._runner"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
