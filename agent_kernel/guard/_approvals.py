"""approvals — asking for a tool call: requests, decisions, the broker and headless policies.

When the permission rules say a call must be asked about, the answer comes from one of three
places: an ``approver`` callback, a person in the live view (through the ``ApprovalBroker``), or a
headless policy chosen with ``AGENT_KERNEL_APPROVAL`` for notebooks run without anyone watching.

A pending approval is an ``asyncio.Future`` keyed by agent and tool-call id (a sub-agent's calls
go through its parent's broker, and two agents' models may number their calls alike).
``ApprovalBroker.resolve`` may be called from any thread (widget callbacks can arrive on an
ipykernel subshell thread): it hands the decision to the future's loop with
``call_soon_threadsafe`` and touches no other call's future.

Policy syntax (``AGENT_KERNEL_APPROVAL`` or ``build_gate(policy=...)``)::

    auto_approve                      approve everything that asks
    auto_deny                         reject everything that asks
    scripted:RULE=DECISION,...        the first RULE that matches decides; DECISION is
                                      approve or deny; e.g. scripted:bash(git *)=approve,write_file=deny
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union

from agent_kernel.errors import UserError
from agent_kernel.guard import _shell as commands
from agent_kernel.guard._families import family_names, judged_families
from agent_kernel.guard._paths import PathKey
from agent_kernel.guard._urls import UrlKey

APPROVAL_ENV = "AGENT_KERNEL_APPROVAL"

_log = logging.getLogger(__name__)

Decision = Literal["approve", "approve_edited", "reject", "always_allow"]


class _AnyAgent:
    def __repr__(self) -> str:
        return "ANY_AGENT"


ANY_AGENT: Any = _AnyAgent()
"""The default ``agent_id`` of the broker's methods: whichever agent's call has the id (the oldest)."""


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What an approver is asked about.

    Attributes:
        call_id: the tool-call id.
        tool: the tool's name.
        arguments: the arguments the model sent.
        key: the call's canonical one-line form, e.g. ``bash(git status)``.
        rule: the rule that asked for approval, or None when the mode did.
        reason: why approval is needed, in words.
        agent_id: the sub-agent that made the call, or None for the top-level agent.
        full_key: the text rules match, in full (``key`` is shortened for display); None: read
            it from ``key``.
        shell: the tool runs shell commands, so rules about it are judged by the shell-aware
            matcher (``agent_kernel.guard._shell``).
        family: the tool's family (its ``category``): policy entries naming the family
            (``write_file=deny`` for any tool that changes files) bind it (``guard._families``).
    """

    call_id: str
    tool: str
    arguments: dict[str, Any]
    key: str
    rule: str | None
    reason: str
    agent_id: str | None = None
    full_key: str | None = None
    shell: bool = False
    family: str | None = None

    @property
    def match_key(self) -> str:
        """The text an approval rule is matched against: ``full_key``, else ``key`` without ``tool(…)``."""
        if self.full_key is not None:
            return self.full_key
        prefix = f"{self.tool}("
        if self.key.startswith(prefix) and self.key.endswith(")"):
            return self.key[len(prefix) : -1]
        return self.key


@dataclass(frozen=True, slots=True)
class Approval:
    """A decision on one tool call. Build one with ``approve``, ``reject`` or ``always``.

    Attributes:
        decision: ``approve``, ``approve_edited``, ``reject`` or ``always_allow``.
        arguments: the edited arguments (``approve_edited`` only).
        reason: why it was rejected; the model reads it.
        rule: for ``always_allow``, the rule to add (None: this exact call).

    Example:
        >>> Approval.approve({"command": "git status --short"}).decision
        'approve_edited'
    """

    decision: Decision
    arguments: dict[str, Any] | None = None
    reason: str | None = None
    rule: str | None = None

    @classmethod
    def approve(cls, arguments: dict[str, Any] | None = None) -> Approval:
        """Runs the call, with ``arguments`` instead of the model's when given."""
        if arguments is None:
            return cls("approve")
        return cls("approve_edited", arguments=dict(arguments))

    @classmethod
    def reject(cls, reason: str | None = None) -> Approval:
        """Refuses the call; the model sees ``reason`` as the tool's error result."""
        return cls("reject", reason=reason or None)

    @classmethod
    def always(cls, rule: str | None = None) -> Approval:
        """Runs the call and allows the same call (or ``rule``, e.g. ``"bash"``) for the session.

        Raises:
            UserError: ``rule`` is not a rule (refused now, not when the answer is applied).
        """
        if rule is not None and (not isinstance(rule, str) or _ENTRY.match(rule) is None):
            raise UserError(
                f"{rule!r} given to Approval.always is not a permission rule. Write a tool name (\"bash\") or a "
                "tool name with a glob for its key in parentheses (\"bash(git *)\")."
            )
        return cls("always_allow", rule=rule)

    @property
    def allowed(self) -> bool:
        """True unless rejected."""
        return self.decision != "reject"

    @classmethod
    def coerce(cls, value: Approval | bool | str) -> Approval:
        """An Approval from an Approval, a bool, or a word (approve/allow/yes, reject/deny/no, always).

        Raises:
            UserError: for anything else.
        """
        if isinstance(value, Approval):
            return value
        if value is True:
            return cls.approve()
        if value is False:
            return cls.reject()
        if isinstance(value, str):
            word = value.strip().lower()
            if word in ("approve", "approved", "allow", "yes", "y"):
                return cls.approve()
            if word in ("reject", "rejected", "deny", "denied", "no", "n"):
                return cls.reject()
            if word in ("always", "always_allow"):
                return cls.always()
        raise UserError(
            f"{value!r} is not an approval decision. Return True, False, Approval.approve(arguments=None), "
            "Approval.reject(reason) or Approval.always(rule=None) (or None from an approver to pass the question on)."
        )


Approver = Callable[[ApprovalRequest], Union[Approval, bool, None, Awaitable[Union[Approval, bool, None]]]]
"""An ``approver`` callback: sync or async; returns a decision, or None to pass the question on."""


@dataclass(eq=False)
class PendingApproval:
    """One approval waiting for a person.

    Attributes:
        request: what is being asked.
        future: resolves to the ``Approval``.
        started: ``time.monotonic()`` when it was asked.
        outcome: the decision once settled; None while pending or when cancelled.
    """

    request: ApprovalRequest
    future: asyncio.Future[Approval]
    loop: asyncio.AbstractEventLoop
    started: float = field(default_factory=time.monotonic)
    outcome: Approval | None = None

    @property
    def call_id(self) -> str:
        """The tool-call id this approval is for."""
        return self.request.call_id

    @property
    def agent_id(self) -> str | None:
        """The sub-agent that made the call, or None for the top-level agent."""
        return self.request.agent_id


Listener = Callable[[PendingApproval], None]


class ApprovalBroker:
    """Pending approvals keyed by agent and tool-call id; a UI lists them and resolves them by id.

    ``resolve``, ``cancel`` and ``forget`` take the call id and, to tell apart agents whose calls
    have equal ids, ``agent_id`` (None: the top-level agent); without it they act on the oldest
    pending approval with that call id.

    A UI that can show approval prompts sets ``interactive = True`` while it is attached; without
    that, the permission gate never waits for a person (it would wait forever).

    Example:
        >>> broker = ApprovalBroker()
        >>> broker.interactive = True
        >>> remove = broker.subscribe(lambda p: print("asked:", p.request.key))
        >>> # a button callback, on any thread:  broker.resolve(call_id, Approval.approve())
    """

    def __init__(self, *, interactive: bool = False) -> None:
        self.interactive = interactive
        self._pending: dict[tuple[str | None, str], PendingApproval] = {}
        self._on_pending: list[Listener] = []
        self._on_settled: list[Listener] = []

    @property
    def pending(self) -> list[PendingApproval]:
        """The approvals waiting now, oldest first (a snapshot)."""
        return list(self._pending.values())

    def subscribe(self, on_pending: Listener, on_settled: Listener | None = None) -> Callable[[], None]:
        """Calls ``on_pending(p)`` for each new request and ``on_settled(p)`` when one is decided
        or cancelled (``p.outcome`` is None then). Both run on the event loop's thread.

        Returns:
            A function that unsubscribes both.
        """
        self._on_pending.append(on_pending)
        if on_settled is not None:
            self._on_settled.append(on_settled)

        def unsubscribe() -> None:
            if on_pending in self._on_pending:
                self._on_pending.remove(on_pending)
            if on_settled is not None and on_settled in self._on_settled:
                self._on_settled.remove(on_settled)

        return unsubscribe

    def request(self, call_id: str, info: ApprovalRequest) -> asyncio.Future[Approval]:
        """Registers a pending approval for ``call_id`` (made by ``info.agent_id``) and returns the
        future to await.

        Must be called on the event loop that will await it.

        Raises:
            UserError: if that agent's ``call_id`` is already pending.
        """
        key = (info.agent_id, call_id)
        if key in self._pending:
            whose = f" of agent {info.agent_id!r}" if info.agent_id is not None else ""
            raise UserError(
                f"An approval for tool call {call_id!r}{whose} is already pending; an agent's call ids must be unique."
            )
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Approval] = loop.create_future()
        entry = PendingApproval(info, future, loop)
        self._pending[key] = entry
        future.add_done_callback(lambda _f: self._settled(entry))
        self._notify(self._on_pending, entry)
        return future

    def resolve(self, call_id: str, decision: Approval | bool | str, *, agent_id: Any = ANY_AGENT) -> bool:
        """Decides the pending approval for ``call_id`` (of ``agent_id``); safe from any thread.

        Returns:
            True if it was pending; False if unknown or already decided (a second click).
        """
        approval = Approval.coerce(decision)
        entry = self._take(call_id, agent_id)
        if entry is None:
            return False
        entry.outcome = approval
        try:
            entry.loop.call_soon_threadsafe(_settle, entry.future, approval)
        except RuntimeError:  # the loop has closed: nobody is waiting any more
            return False
        return True

    def cancel(self, call_id: str, *, agent_id: Any = ANY_AGENT) -> bool:
        """Drops the pending approval for ``call_id`` (of ``agent_id``), cancelling its waiter; safe
        from any thread."""
        entry = self._take(call_id, agent_id)
        if entry is None:
            return False
        try:
            entry.loop.call_soon_threadsafe(entry.future.cancel)
        except RuntimeError:
            return False
        return True

    def withdraw(self, call_id: str, *, agent_id: Any = ANY_AGENT) -> bool:
        """Takes back the question for ``call_id`` (its deadline passed), cancelling its waiter.

        Returns:
            True if it was still pending; False if someone answered first (then that answer
            stands and its waiter receives it).
        """
        entry = self._take(call_id, agent_id)
        if entry is None:
            return False
        entry.future.cancel()
        return True

    def forget(self, call_id: str, *, agent_id: Any = ANY_AGENT) -> None:
        """Removes ``call_id`` (of ``agent_id``); the gate calls this once it stops waiting,
        whatever the reason."""
        entry = self._take(call_id, agent_id)
        if entry is not None and not entry.future.done():
            entry.future.cancel()

    def _take(self, call_id: str, agent_id: Any) -> PendingApproval | None:
        """Removes and returns the pending approval for ``call_id`` of ``agent_id`` (ANY_AGENT: the
        oldest with that call id). dict.pop is atomic, so two threads taking one cannot both win."""
        if agent_id is ANY_AGENT:
            agent_id = next((agent for agent, call in list(self._pending) if call == call_id), None)
        return self._pending.pop((agent_id, call_id), None)

    def _settled(self, entry: PendingApproval) -> None:
        key = (entry.agent_id, entry.call_id)
        if self._pending.get(key) is entry:
            self._pending.pop(key, None)
        if entry.future.cancelled():
            entry.outcome = None
        self._notify(self._on_settled, entry)

    @staticmethod
    def _notify(listeners: list[Listener], entry: PendingApproval) -> None:
        for listener in list(listeners):
            try:
                listener(entry)
            except Exception:  # a broken UI must not break the run
                _log.exception("approval listener %r failed", listener)


def _settle(future: asyncio.Future[Approval], approval: Approval) -> None:
    if not future.done():
        future.set_result(approval)


# ---- headless policies ---------------------------------------------------------------------


class Policy(Protocol):
    """Decides approvals without a person. ``decide`` returns None when it has no answer."""

    name: str

    def decide(self, request: ApprovalRequest) -> Approval | None:
        """The decision for ``request``, or None to leave it undecided."""
        ...


class AutoApprove:
    """Approves every call that asks."""

    name = "auto_approve"

    def decide(self, request: ApprovalRequest) -> Approval | None:
        """Always approves."""
        return Approval.approve()

    def __repr__(self) -> str:
        return "auto_approve"


class AutoDeny:
    """Rejects every call that asks, telling the model no one can approve it."""

    name = "auto_deny"

    def decide(self, request: ApprovalRequest) -> Approval | None:
        """Always rejects."""
        return Approval.reject(f"the {APPROVAL_ENV}=auto_deny policy refuses calls that need approval")

    def __repr__(self) -> str:
        return "auto_deny"


auto_approve = AutoApprove()
auto_deny = AutoDeny()


class ScriptedPolicy:
    """Decides by the first matching entry; unmatched calls stay undecided.

    An entry's key is a tool name (``write_file``) or a rule (``bash(git *)``); its value is
    True/False, ``"approve"``/``"deny"`` or an ``Approval``. A rule matches as a permission rule
    does: for a shell tool, an approving entry must match every command of the line and never
    covers a substitution, a write or an escape hatch (``git -c``, ``find -exec`` …); a denying
    entry matches any command in any spelling (``\\rm``, ``/bin/rm``, ``sh -c 'rm …'``).

    Example:
        >>> policy = ScriptedPolicy({"bash(git *)": "approve", "write_file": "deny"})
    """

    name = "scripted"

    def __init__(self, entries: Mapping[str, Approval | bool | str] | Iterable[tuple[str, Approval | bool | str]]) -> None:
        items = entries.items() if isinstance(entries, Mapping) else entries
        self.entries: list[tuple[str, Approval]] = []
        self._rules: list[tuple[str, str | None]] = []
        for pattern, decision in items:
            pattern = pattern.strip()
            if not pattern:
                raise UserError("A scripted approval policy has an empty pattern; use a tool name or a rule like bash(git *).")
            m = _ENTRY.match(pattern)
            if m is None:
                raise UserError(
                    f"{pattern!r} in a scripted approval policy is not a rule. Write a tool name (write_file) "
                    "or a tool name with a glob in parentheses (bash(git *))."
                )
            approval = Approval.coerce(decision)
            if approval.decision == "reject" and approval.reason is None:
                approval = Approval.reject(f"the scripted approval policy denies {pattern}")
            self.entries.append((pattern, approval))
            self._rules.append((m.group(1), m.group(2)))

    def decide(self, request: ApprovalRequest) -> Approval | None:
        """The decision of the first entry matching ``request``, or None."""
        key = request.match_key
        for (tool, pattern), (_text, approval) in zip(self._rules, self.entries):
            by_family = False
            if not fnmatch.fnmatchcase(request.tool, tool):
                if not any(tool in family_names(f) for f in judged_families(request.family, refusing=not approval.allowed)):
                    continue
                by_family = True
            if pattern is None:
                return approval
            if by_family and not isinstance(key, PathKey):
                if not approval.allowed and request.family == "edit":
                    return approval  # a path entry on a write it cannot read as a path: fail closed
                continue
            if isinstance(key, PathKey):
                hit = key.matched_by(pattern)
            elif request.shell:
                # Approving entries must cover every command; denying ones hit on any command.
                hit = commands.matches(pattern, key, every=approval.allowed)
            elif isinstance(key, UrlKey):  # as a rule reads it: every spelling of a host is one key
                hit = key.matched_by(pattern, every=approval.allowed)
            else:
                hit = fnmatch.fnmatchcase(key, pattern)
            if hit:
                return approval
        return None

    def decide_exactly(self, tool: str) -> Approval | None:
        """The decision of the first entry that names ``tool`` itself, with no glob and no pattern.

        For requests that are not tool calls (an MCP server's sampling request): a glob written
        for a server's tools (``mcp__srv__*``) must not also approve them.
        """
        for (name, pattern), (_text, approval) in zip(self._rules, self.entries):
            if pattern is None and name == tool:
                return approval
        return None

    def __repr__(self) -> str:
        return "scripted:" + ",".join(f"{p}={'approve' if a.allowed else 'deny'}" for p, a in self.entries)


# A policy entry: a tool name (a glob) and an optional pattern in parentheses, as a permission rule.
_ENTRY = re.compile(r"^\s*([A-Za-z0-9_.*?\[\]-]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)

_POLICY_HELP = (
    "Use auto_approve, auto_deny, or scripted:RULE=DECISION,... where RULE is a tool name or a pattern "
    "like bash(git *) and DECISION is approve or deny, e.g. scripted:bash(git *)=approve,write_file=deny."
)


def _split_top_level(text: str, separator: str) -> list[str]:
    """Splits on ``separator`` outside parentheses, so patterns may contain it."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parse_policy(text: str, *, source: str = "policy") -> Policy:
    """Parses a policy string (see the module docstring).

    Raises:
        UserError: saying what is wrong and what the syntax is.
    """
    spec = text.strip()
    if spec in ("auto_approve", "approve"):
        return auto_approve
    if spec in ("auto_deny", "deny"):
        return auto_deny
    if not spec.startswith("scripted:"):
        raise UserError(f"{source}={text!r} is not an approval policy. {_POLICY_HELP}")
    entries: list[tuple[str, str]] = []
    for raw in _split_top_level(spec[len("scripted:") :], ","):
        entry = raw.strip()
        if not entry:
            continue
        pieces = _split_top_level(entry, "=")
        if len(pieces) < 2:
            raise UserError(f"{source}={text!r}: the entry {entry!r} has no '=DECISION'. {_POLICY_HELP}")
        pattern, decision = "=".join(pieces[:-1]).strip(), pieces[-1].strip().lower()
        if decision not in ("approve", "allow", "deny", "reject"):
            raise UserError(f"{source}={text!r}: {decision!r} in {entry!r} is not approve or deny. {_POLICY_HELP}")
        if not pattern:
            raise UserError(f"{source}={text!r}: the entry {entry!r} has no rule before '='. {_POLICY_HELP}")
        entries.append((pattern, decision))
    if not entries:
        raise UserError(f"{source}={text!r} has no entries. {_POLICY_HELP}")
    return ScriptedPolicy(entries)


def policy_from_env(environ: Mapping[str, str] | None = None) -> Policy | None:
    """The policy named by ``AGENT_KERNEL_APPROVAL``, or None when it is unset or empty."""
    env = os.environ if environ is None else environ
    value = env.get(APPROVAL_ENV, "").strip()
    return parse_policy(value, source=APPROVAL_ENV) if value else None
