"""sealing — the run's permission settings and redactor, as they were when the run started.

A tool runs in the same process as the loop, and the ``python`` tool runs the model's code
there: one snippet can reach any object (``gc.get_objects()``), switch the permission mode to
``bypass``, add an allow rule, swap the approver or turn redaction off, and the next call would
then run unasked. Nothing in one process can make that impossible; what the loop can do is not
believe it. ``RunSeal`` records the gate's effective settings (mode, rules, sandbox flag,
approver, policy) and the redactor's state when the run starts; before each tool call is judged,
and after each call ends, it compares, and when they differ it puts the sealed settings back
and says what changed, so the invoker refuses the call and journals an ``error`` (kind
``tampering``).

The seal also holds what the gate reads of each tool (``read_only``, ``concurrency_safe``, its
category, schema, permission key, own mode and approval card), the run's sandbox settings
(``tool_extras["sandbox"]``) and the approval policy named by ``AGENT_KERNEL_APPROVAL`` as it was
when the run started (a snippet that sets it, so that agents built later would approve what
they should ask about, finds it put back). The gate is handed ``view(tool)``, a frozen copy of the tool's
metadata taken at the start of the run, so a flag flipped from another thread between the check
and the judgement is not believed either. Rules are parsed afresh on each call (no shared parse
a snippet could edit).

What may change during a run: rules the gate adds itself for an always-allow answer (recorded
in the gate's ``granted`` list) and secrets the redactor learns (it only ever learns more).
Change the mode or rules between runs, not during one.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The environment variable naming the headless approval policy (``guard._approvals.APPROVAL_ENV``).
_APPROVAL_ENV = "AGENT_KERNEL_APPROVAL"
#: The tool attributes the gate and the executor read, sealed per tool.
_TOOL_FIELDS = ("name", "read_only", "concurrency_safe", "category", "permission_key", "permission_mode", "parameters", "timeout")
#: Methods an instance attribute must not shadow (``tool.key = lambda a: "ls"``).
_TOOL_METHODS = ("key", "judged", "validate", "invoke", "read_only_for", "_args_model", "_checker")
_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class SealedTool:
    """What the permission gate reads of a tool, copied when the run started (see the module docstring)."""

    tool: Any
    name: str
    read_only: bool
    concurrency_safe: bool
    category: str | None
    permission_key: Any
    permission_mode: str | None
    approval_info: Any
    approval_warning: str | None
    read_only_for: Callable[[dict[str, Any]], bool] | None
    _key: Callable[[dict[str, Any]], str]

    def key(self, arguments: dict[str, Any]) -> str:
        """The text a ``Tool(pattern)`` rule matches for this call (the tool's own ``key``)."""
        return self._key(arguments)

    def describe_call(self, arguments: dict[str, Any], working_dir: Any = None) -> str | None:
        """What the call would change, for its approval card (the tool's own ``describe_call``):
        shown to the person, never read by a rule, so it comes from the tool itself."""
        describe = getattr(self.tool, "describe_call", None)
        return describe(arguments, working_dir) if describe is not None else None


class _ToolSeal:
    """One tool's sealed attributes, and the frozen view the gate reads."""

    def __init__(self, tool: Any) -> None:
        self.tool = tool
        self.values = {name: _copy(getattr(tool, name, _MISSING)) for name in _TOOL_FIELDS}
        own = vars(tool) if hasattr(tool, "__dict__") else {}
        self.methods = {name: own.get(name, _MISSING) for name in _TOOL_METHODS}
        info = getattr(tool, "approval_info", None)
        self.view = SealedTool(
            tool, str(tool.name), bool(getattr(tool, "read_only", False)), bool(getattr(tool, "concurrency_safe", False)),
            getattr(tool, "category", None), getattr(tool, "permission_key", None), getattr(tool, "permission_mode", None),
            copy.deepcopy(info) if isinstance(info, dict) else None, getattr(tool, "approval_warning", None),
            getattr(tool, "read_only_for", None), tool.key,
        )

    def check(self) -> list[str]:
        changed: list[str] = []
        tool = self.tool
        for name, value in self.values.items():
            current = getattr(tool, name, _MISSING)
            if current is value or (name == "parameters" and current == value and value is not _MISSING):
                continue
            if name in ("read_only", "concurrency_safe", "category", "permission_mode", "timeout", "name") and current == value:
                continue
            changed.append(f"the tool {self.view.name!r} had its {name} changed")
            if value is _MISSING:
                with _suppress():
                    delattr(tool, name)
            else:
                with _suppress():
                    setattr(tool, name, _copy(value) if name == "parameters" else value)
        own = vars(tool) if hasattr(tool, "__dict__") else {}
        for name, value in self.methods.items():
            if own.get(name, _MISSING) is not value:
                changed.append(f"the tool {self.view.name!r} had its {name.lstrip('_')} replaced")
                with _suppress():
                    if value is _MISSING:
                        delattr(tool, name)
                    else:
                        setattr(tool, name, value)
        return changed


def _copy(value: Any) -> Any:
    return copy.deepcopy(value) if isinstance(value, (dict, list)) else value


def _suppress() -> contextlib.suppress:
    """Restoring what a snippet changed may fail (a read-only property): the change is still reported."""
    return contextlib.suppress(AttributeError, TypeError)


@dataclass(frozen=True)
class _GateSettings:
    """A gate's effective settings, as immutable values (and the identities of its parts)."""

    permissions: Any
    mode: str
    allow: tuple[str, ...]
    ask: tuple[str, ...]
    deny: tuple[str, ...]
    sandboxed: bool
    approver: Any
    policy: Any
    granted: int  # how many always-allow rules the gate had added when sealed

    @classmethod
    def of(cls, gate: Any) -> _GateSettings | None:
        p = getattr(gate, "permissions", None)
        if p is None or not hasattr(p, "mode"):
            return None  # a custom gate: only its identity is sealed
        return cls(
            p, str(p.mode), tuple(p.allow), tuple(p.ask), tuple(p.deny), bool(p.sandboxed),
            getattr(gate, "approver", None), getattr(gate, "policy", None), len(getattr(gate, "granted", ())),
        )


@dataclass(frozen=True)
class _RedactorState:
    watch: Any
    known: tuple[tuple[str, str], ...]
    table: Any

    @classmethod
    def of(cls, redactor: Any) -> _RedactorState | None:
        # The Redactor's own fields: what it watches, what it knows, the table it redacts with.
        if redactor is None or not hasattr(redactor, "_known"):
            return None
        return cls(redactor._watch, tuple(redactor._known.items()), redactor._table)


class RunSeal:
    """The run's gate and redactor, sealed at the start of the run.

    Args:
        ctx: the run's ``ExecutionContext`` (its ``permissions`` gate and ``redactor``).
        emitter: the run's emitter (its redaction function is sealed too).
    """

    def __init__(self, ctx: Any, emitter: Any) -> None:
        self._ctx = ctx
        self._emitter = emitter
        self._gate = ctx.permissions
        self._settings = _GateSettings.of(self._gate)
        self._redactor = ctx.redactor
        self._redactor_state = _RedactorState.of(self._redactor)
        self._redact = getattr(emitter, "_redact", None)
        registry = getattr(getattr(ctx, "config", None), "tools", None)
        self._registry = registry
        self._tools: dict[int, _ToolSeal] = {}
        # A server's tools are listed again when it reconnects; every other tool stays the one sealed.
        self._named: dict[str, Any] = {}
        #: A re-listed tool of a name sealed at the start is never judged looser than it was then.
        self._flags: dict[str, tuple[bool, bool]] = {}
        for tool in list(registry) if registry is not None else ():
            if hasattr(tool, "name") and callable(getattr(tool, "key", None)):
                sealed = self._tools[id(tool)] = _ToolSeal(tool)
                self._flags[sealed.view.name] = (sealed.view.read_only, sealed.view.concurrency_safe)
                if getattr(tool, "category", None) != "mcp":
                    self._named[str(tool.name)] = tool
        extras = getattr(ctx, "tool_extras", None)
        self._extras = extras if isinstance(extras, dict) else None
        self._sandbox = copy.deepcopy(extras.get("sandbox", _MISSING)) if isinstance(extras, dict) else _MISSING
        self._sandbox_object = extras.get("sandbox", _MISSING) if isinstance(extras, dict) else _MISSING
        self._policy_env = os.environ.get(_APPROVAL_ENV)

    def view(self, tool: Any) -> Any:
        """The frozen copy of ``tool`` the gate judges from (sealed now if it joined the run late)."""
        sealed = self._tools.get(id(tool))
        if sealed is None or sealed.tool is not tool:
            if not hasattr(tool, "name") or not callable(getattr(tool, "key", None)):
                return tool  # not a tool this seal can copy: the gate reads it as it is
            sealed = self._tools[id(tool)] = _ToolSeal(tool)
            before = self._flags.get(sealed.view.name)
            if before is not None:  # listed again mid-run (a reconnect): no looser than when the run started
                sealed.view = dataclasses.replace(sealed.view, read_only=sealed.view.read_only and before[0],
                                                  concurrency_safe=sealed.view.concurrency_safe and before[1])
        return sealed.view

    def check(self) -> list[str]:
        """What changed since the run started, in words, after putting it back ([] if nothing)."""
        changed: list[str] = []
        ctx = self._ctx
        if ctx.permissions is not self._gate:
            changed.append("the run's permission gate was replaced")
            ctx.permissions = self._gate
        if ctx.redactor is not self._redactor:
            changed.append("the run's redactor was replaced")
            ctx.redactor = self._redactor
        if getattr(self._emitter, "_redact", None) is not self._redact:
            changed.append("the event redaction was replaced")
            self._emitter._redact = self._redact
        changed += self._check_gate()
        changed += self._check_redactor()
        for sealed in list(self._tools.values()):
            changed += sealed.check()
        changed += self._check_registry()
        changed += self._check_sandbox()
        if os.environ.get(_APPROVAL_ENV) != self._policy_env:
            changed.append(f"{_APPROVAL_ENV} was changed")
            if self._policy_env is None:
                os.environ.pop(_APPROVAL_ENV, None)
            else:
                os.environ[_APPROVAL_ENV] = self._policy_env
        return changed

    def _check_registry(self) -> list[str]:
        registry = self._registry
        if registry is None or not self._named:
            return []
        changed: list[str] = []
        for name, tool in self._named.items():
            if registry.get(name) is not tool:
                changed.append(f"the tool {name!r} was replaced or removed")
                with _suppress():
                    registry.remove(name)
                    registry.add(tool)
        return changed

    def _check_sandbox(self) -> list[str]:
        extras = self._extras
        if extras is None:
            return []
        current = extras.get("sandbox", _MISSING)
        if current is self._sandbox_object and (current is _MISSING or current == self._sandbox):
            return []
        if self._sandbox_object is _MISSING:
            extras.pop("sandbox", None)
        else:
            extras["sandbox"] = self._sandbox_object if self._sandbox_object == self._sandbox else copy.deepcopy(self._sandbox)
            self._sandbox_object = extras["sandbox"]
        return ["the run's sandbox settings were changed"]

    def _check_gate(self) -> list[str]:
        sealed, gate = self._settings, self._gate
        if sealed is None:
            return []
        changed: list[str] = []
        if getattr(gate, "permissions", None) is not sealed.permissions:
            changed.append("the gate's permissions were replaced")
            gate.permissions = sealed.permissions
        p = sealed.permissions
        if p.mode != sealed.mode:
            changed.append(f"the mode was set to {p.mode!r} (sealed: {sealed.mode!r})")
            p.mode = sealed.mode
        # Rules the gate added for an always-allow answer since the seal are the only allowed change.
        granted = list(getattr(gate, "granted", ())[sealed.granted:])
        expected_allow = list(sealed.allow) + [r for r in granted if r not in sealed.allow]
        for name, expected in (("allow", expected_allow), ("ask", list(sealed.ask)), ("deny", list(sealed.deny))):
            current = getattr(p, name)
            if not isinstance(current, list) or list(current) != expected:
                changed.append(f"the {name} rules were changed")
                setattr(p, name, list(expected))
        if p.sandboxed != sealed.sandboxed:
            changed.append("the sandbox flag was changed")
            p.sandboxed = sealed.sandboxed
        for name in ("approver", "policy"):
            if getattr(gate, name, None) is not getattr(sealed, name):
                changed.append(f"the gate's {name} was replaced")
                setattr(gate, name, getattr(sealed, name))
        return changed

    def _check_redactor(self) -> list[str]:
        sealed, r = self._redactor_state, self._redactor
        if sealed is None:
            return []
        changed: list[str] = []
        if r._watch is not sealed.watch:
            changed.append("the redactor stopped watching the environment")
            r._watch = sealed.watch
            r._seen_env = None  # re-read the environment at the next redaction
        known = dict(r._known) if isinstance(r._known, dict) else {}
        missing = [secret for secret, name in sealed.known if known.get(secret) != name]
        if missing or not isinstance(r._known, dict):
            changed.append(f"{len(missing)} secret(s) were removed from the redactor")
            r._known = {**known, **dict(sealed.known)}
        table = r._table
        labels = getattr(table, "labels", None)
        if table is not sealed.table and (not isinstance(labels, dict) or any(s not in labels for s, _ in sealed.known)):
            changed.append("the redactor's table was replaced")
            r._table = sealed.table
        if missing and r._table is sealed.table and len(r._known) > len(sealed.known):
            r._table = type(sealed.table)(r._known)  # rebuilt with what it learned since
        return changed
