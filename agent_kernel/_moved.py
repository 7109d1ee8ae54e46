"""Import paths that moved when the package was laid out in parts, kept for one release.

``import agent_kernel.commands`` (or any path below) still works: it warns with a
``DeprecationWarning`` naming the new path and gives the module at that path. A meta path
finder, rather than a stub file per old path, keeps the package's folders showing only its parts.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import CodeType, ModuleType
from typing import Any

#: Old path (below ``agent_kernel.``) -> where it lives now.
MOVED: dict[str, str] = {
    "agent_checks": "agent._settings",
    "agent_parts": "agent._parts",
    "approvals": "guard",
    "blocking": "_util.blocking",
    "commands": "guard._shell",
    "context.assembler": "context._assembler",
    "context.compaction": "context._compaction",
    "context.manager": "context._manager",
    "context.micro": "context._micro",
    "context.session_config": "context._session_config",
    "context.tokens": "context._tokens",
    "context_policy": "context._policy",
    "continuation": "agent._continuation",
    "crew": "team",
    "emitter": "runtime",
    "hatches": "guard._hatches",
    "hooks": "runtime",
    "install": "jupyter.install",
    "journal.chunk_columns": "journal._fast.chunk_columns",
    "journal.columns": "journal._fast.columns",
    "journal.data_pieces": "journal._fast.data_pieces",
    "journal.diff": "journal._diff",
    "journal.event_frame": "journal._event_frame",
    "journal.event_log": "journal._event_log",
    "journal.export": "journal._export",
    "journal.format": "journal._format",
    "journal.frames": "journal._frames",
    "journal.html_diff": "journal._html_diff",
    "journal.html_timeline": "journal._html_timeline",
    "journal.journal": "journal._writer",
    "journal.line_scan": "journal._fast.line_scan",
    "journal.otel": "journal._otel",
    "journal.reader": "journal._reader",
    "journal.replay": "journal._replay",
    "journal.resume": "journal._resume",
    "journal.sources": "journal._sources",
    "journal.sql": "journal._sql",
    "journal.svg_timeline": "journal._svg_timeline",
    "jupyter.controls": "jupyter._controls",
    "jupyter.extension": "jupyter._extension",
    "jupyter.interpolation": "jupyter._interpolation",
    "jupyter.items": "jupyter._items",
    "jupyter.kernel": "jupyter._kernel",
    "jupyter.magics": "jupyter._magics",
    "jupyter.protocol": "jupyter._protocol",
    "jupyter.resume_session": "jupyter._resume_session",
    "jupyter.runner": "jupyter._runner",
    "jupyter.sessions": "jupyter._sessions",
    "jupyter.static_view": "jupyter._static_view",
    "jupyter.summary": "jupyter._summary",
    "jupyter.transcript": "jupyter._transcript",
    "jupyter.view": "jupyter._view",
    "loop": "runtime",
    "loop_config": "runtime._config",
    "mcp.attach": "mcp._attach",
    "mcp.connection": "mcp._connection",
    "mcp.content": "mcp._content",
    "mcp.hub": "mcp._hub",
    "mcp.runtime": "mcp._runtime",
    "mcp.sampling": "mcp._sampling",
    "mcp.server": "mcp._server",
    "mcp.tools": "mcp._tools",
    "memory.agent_memory": "agent",
    "memory.namespace": "memory._namespace",
    "memory.reminders": "memory._reminders",
    "memory.session": "memory._session",
    "memory.startup": "memory._startup",
    "memory.store": "memory._store",
    "memory.summaries": "memory._summaries",
    "memory.tags": "memory._tags",
    "models.base": "models",
    "models.catalog": "models._catalog",
    "models.keys": "models._keys",
    "models.offline": "models._offline",
    "models.openai_responses": "models._openai_responses",
    "models.options": "models._options",
    "models.pricing": "models._pricing",
    "models.registry": "models",
    "models.sdk_errors": "models._sdk_errors",
    "models.transport": "models._transport",
    "payloads": "events.payloads",
    "permissions": "guard",
    "redaction": "guard",
    "result": "agent",
    "sandbox": "guard",
    "sealing": "guard._seal",
    "state": "runtime",
    "streaming": "runtime._streaming",
    "subagents": "team",
    "text": "_util.text",
    "tools.builtin.files": "tools.builtin._files",
    "tools.builtin.limits": "tools.builtin._limits",
    "tools.builtin.memory": "tools.builtin._memory",
    "tools.builtin.python": "tools.builtin._python",
    "tools.builtin.reaper": "tools.builtin._reaper",
    "tools.builtin.search": "tools.builtin._search",
    "tools.builtin.shell": "tools.builtin._shell",
    "tools.builtin.todo": "tools.builtin._todo",
    "tools.builtin.workspace": "tools.builtin._workspace",
    "tools.executor": "runtime._executor",
    "tools.invoke": "runtime._invoke",
    "tools.output": "tools._output",
    "tools.paths": "guard._paths",
    "tools.registry": "tools",
    "tools.threads": "tools._threads",
    "tools.tool": "tools",
}

_PREFIX = "agent_kernel."


class _MovedLoader(importlib.abc.Loader):
    """Gives the module at the new path for an import of the old one, with a warning."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def _warn(self) -> None:
        warnings.warn(
            f"{self.old} moved to {self.new}; import it from there (the old path goes in the next release)",
            DeprecationWarning,
            stacklevel=4,
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        self._warn()
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        # The module is the new one, already executed; the import system only files it under the
        # old name too, and then binds it on the old parent package under the old leaf name. Where
        # that name is the package's own (``agent_kernel.journal.sql`` the function, not the old
        # module), the package keeps it: see ``_KeepsItsNames``.
        parent = sys.modules.get(self.old.rpartition(".")[0])
        if parent is not None and type(parent) is ModuleType:
            parent.__class__ = _KeepsItsNames


    def get_code(self, fullname: str) -> CodeType | None:
        # ``python -m agent_kernel.install``: runpy runs the new module's code as __main__.
        self._warn()
        spec = importlib.util.find_spec(self.new)
        loader: Any = spec.loader if spec is not None else None
        return loader.get_code(self.new) if loader is not None else None


class _KeepsItsNames(ModuleType):
    """A package that does not let an old import path rebind one of its public names.

    Importing ``agent_kernel.journal.sql`` (the module's old path) would otherwise replace the
    ``sql`` function on ``agent_kernel.journal`` with the module now at ``journal._sql``.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and name in getattr(self, "__all__", ()) and value.__name__ != f"{self.__name__}.{name}":
            return
        super().__setattr__(name, value)


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_PREFIX):
            return None
        new = MOVED.get(fullname[len(_PREFIX):])
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedLoader(fullname, _PREFIX + new))


def install() -> None:
    """Puts the finder on ``sys.meta_path`` once (``agent_kernel/__init__`` calls it)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
