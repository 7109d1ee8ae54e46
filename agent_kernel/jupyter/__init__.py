"""jupyter — the notebook surfaces: the live view, the static summary (and, later, the magics).

This is the only package that imports IPython, ipykernel or widgets, and it does so lazily:
``import agent_kernel`` never pulls them in, and ``agent_kernel.jupyter.AgentView`` imports
anywidget only when first used.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["AgentView", "RunSummary"]

_LAZY = {"AgentView": ".view", "RunSummary": ".summary"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
