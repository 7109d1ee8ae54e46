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

What may change during a run: rules the gate adds itself for an always-allow answer (recorded
in the gate's ``granted`` list) and secrets the redactor learns (it only ever learns more).
Change the mode or rules between runs, not during one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RunSeal"]


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
        return changed

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
