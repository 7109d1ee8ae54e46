"""permissions — whether a tool call may run: modes, rules and the gate that asks.

The loop calls ``gate.authorize(request, emit)`` for every tool call before it runs. This module
owns everything behind that call; asking (callbacks, the broker, headless policies) lives in
``approvals``.

A call is decided in this order:

1. ``deny`` rules, then ``ask`` rules, then ``allow`` rules (including rules added by an
   always-allow answer this session); the first match decides.
2. Otherwise the mode: ``default`` runs read-only tools and asks about the rest; ``accept_edits``
   also runs file edits (tools with ``category="edit"``); ``plan`` refuses anything not read-only;
   ``bypass`` runs everything.
3. A call that must be asked about goes to the ``approver`` callback, then the headless policy
   (``AGENT_KERNEL_APPROVAL``), then a person in the live view; when none of them can answer, it
   is refused with a message saying how to set a policy, never left waiting. An approver that
   raises or returns something that is not a decision refuses the call too, and says so in a
   non-fatal ``error`` event (kind ``approver``) as well as in the refused call's result.

Rules are ``Tool`` or ``Tool(pattern)``; the pattern is a glob (``*`` matches anything, ``/``
included) on the call's key, e.g. the command for ``bash`` or the path for the file tools: so
``bash(git *)``, ``write_file(notebooks/*)``, ``web_fetch(docs.python.org)`` (the canonical URL,
``agent_kernel.guard._urls``: every spelling of a host is one key). For shell tools (``category="shell"``) a wildcard
pattern must match every command of a compound line (``git add . && git commit``), so
``bash(git *)`` does not allow ``git status; rm -rf ~``. One principle decides the rest: what the
shell reader (``agent_kernel.guard._shell``) cannot read exactly is treated as matching a deny or
ask rule and never as matching an allow rule. So a line with a computed word (``$X``, ``$(…)``),
a write (a redirection, ``git log --output``) or a known escape hatch (``git -c``, ``find -exec``)
is never allowed by a wildcard, and a deny rule holds through ``\\rm``, ``/bin/rm``, ``env -iu``,
``sudo``, ``sh -o errexit -c`` and every shape the reader cannot locate the program in.

The call judged is the call that runs: the loop hands the gate the validated arguments with
defaults filled in (``Tool.judged``), and unknown arguments are refused before it. Rules name
families (``guard._families``): ``write_file(...)`` binds every tool of category ``edit``,
``read_file(...)`` every reader. An approved write is bound to the file its card showed
(``Authorization.file``). A rule that cannot be read exactly is refused when it is given; one
put into a list later refuses (deny, ask) or allows nothing (allow). A sub-agent with its own
permissions is judged by a ``NestedGate``: the stricter of its own and its parent's verdicts.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import inspect
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, cast

from agent_kernel.errors import ApprovalPending, UserError, did_you_mean
from agent_kernel.events import payloads as p
from agent_kernel.events._event import Emit, EventType
from agent_kernel.guard import _shell as commands
from agent_kernel.guard._approvals import APPROVAL_ENV, Approval, ApprovalBroker, ApprovalRequest, Approver, Policy, parse_policy, policy_from_env
from agent_kernel.guard._families import family_names, judged_families
from agent_kernel.guard._paths import PathKey
from agent_kernel.guard._urls import UrlKey


class Tool(Protocol):
    """What the gate reads of a tool (``agent_kernel.tools.Tool`` is one): guard sits below tools."""

    name: str
    read_only: bool
    category: str | None
    permission_key: Callable[[dict[str, Any]], str] | None

    def key(self, arguments: dict[str, Any]) -> str:
        """The text a ``Tool(pattern)`` rule matches for this call."""
        ...


MODES = ("default", "accept_edits", "plan", "bypass")
Mode = Literal["default", "accept_edits", "plan", "bypass"]


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """One tool call awaiting authorization (``agent_id``: the sub-agent making it, None at the top)."""

    call_id: str
    tool: Tool
    arguments: dict[str, Any]
    agent_id: str | None = None
    working_dir: Any = None  # where a file tool's path is resolved (None: the current directory)


@dataclass(frozen=True, slots=True)
class Authorization:
    """The verdict on a tool call.

    Attributes:
        allowed: whether it runs.
        arguments: the arguments to run it with (a person may have edited them).
        message: when refused, the reason the model sees as the tool's error result.
        decided_by: ``rule``, ``mode``, ``callback``, ``policy``, ``person`` or ``timeout``.
        file: for an approved write, the file the card showed (path, device and inode, or absent).
    """

    allowed: bool
    arguments: dict[str, Any]
    message: str | None = None
    decided_by: str = "rule"
    #: The file an approval card showed (``guard._paths.FileIdentity``): the write must open that
    #: same file or none. None when no card showed a file.
    file: dict[str, Any] | None = None


class PermissionGate(Protocol):
    """Decides tool calls; emits ``approval_required`` / ``approval_decision`` through ``emit``."""

    async def authorize(self, request: ToolRequest, emit: Emit) -> Authorization:
        """Returns the verdict for ``request``, asking someone if the rules say so."""
        ...


# ---- rules ---------------------------------------------------------------------------------

_RULE = re.compile(r"^\s*([A-Za-z0-9_.*?\[\]-]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)
# Bracket escapes ([*], [?], [[]) stand for literal characters, not wildcards.
_ESCAPED = re.compile(r"\[[*?\[()]\]")


def _pattern_problem(pattern: str | None) -> str | None:
    """Why a rule's pattern has no one meaning, or None. A rule that could be read two ways is
    refused when it is given, never guessed at when a call is judged."""
    if pattern is None:
        return None
    if not pattern.strip():
        return "its parentheses are empty; write the tool name alone (\"bash\") for every call, or a glob inside them"
    depth = 0
    unescaped = _ESCAPED.sub("", pattern)
    for ch in unescaped:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            break
    if depth != 0:
        return ("its parentheses do not pair up, so where the pattern ends is unclear; write a literal parenthesis "
                "as [(] or [)]")
    if re.search(r"\[(?![^\]]*\])", unescaped):
        return "it has a '[' that no ']' closes; write a literal '[' as [[]"
    return None


def _escape(text: str) -> str:
    """``text`` as a glob pattern that matches only itself (parentheses too, when they do not pair up)."""
    escaped = re.sub(r"([*?\[])", r"[\1]", text)
    if _pattern_problem(escaped) is not None:
        escaped = re.sub(r"([()])", r"[\1]", escaped)
    return escaped


@dataclass(frozen=True, slots=True)
class Rule:
    """A parsed permission rule: a tool name (a glob) and an optional pattern for the call's key.

    Example:
        >>> Rule.parse("bash(git *)").matches("bash", "git status")
        True
    """

    text: str
    tool: str
    pattern: str | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        """Parses ``Tool`` or ``Tool(pattern)``.

        Raises:
            UserError: for anything else.
        """
        m = _RULE.match(text) if isinstance(text, str) else None
        if m is None:
            raise UserError(
                f"{text!r} is not a permission rule. Write a tool name (\"read_file\") or a tool name with a "
                "glob for its key in parentheses (\"bash(git *)\", \"write_file(notebooks/*)\")."
            )
        problem = _pattern_problem(m.group(2))
        if problem is not None:
            raise UserError(f"The permission rule {text!r} cannot be read exactly: {problem}.")
        return cls(text.strip(), m.group(1), m.group(2))

    @classmethod
    def exact(cls, tool: str, key: str) -> Rule:
        """A rule matching exactly this call of ``tool`` (glob characters in ``key`` escaped)."""
        return cls.parse(f"{tool}({_escape(key)})")

    def matches(self, tool: str, key: str, *, shell: bool = False, every: bool = True, family: str | None = None) -> bool:
        """Whether this rule names the call ``tool(key)``.

        For a shell tool the shell-aware matcher (``agent_kernel.guard._shell``) decides: deny and ask
        rules (``every=False``) match if any command of the line matches in any spelling; a wildcard
        allow rule (``every=True``) must match every command, with no substitution, write or escape
        hatch among them.

        ``family`` is the tool's ``category``: a rule naming its family (``write_file`` for an
        ``edit`` tool, see ``guard._families``) binds it too. A writer whose key is not a path is
        bound by the family's deny and ask rules (it cannot be shown not to match) and never by
        its allow rules; a reader whose key is not a path (``grep``'s is its pattern) withholds
        what the rules cover from its results instead.
        """
        if not fnmatch.fnmatchcase(tool, self.tool):
            if not any(self.tool in family_names(f) for f in judged_families(family, refusing=not every)):
                return False
            if self.pattern is not None and not isinstance(key, PathKey):
                return not every and family == "edit"  # a path rule on a write it cannot read as a path
        if self.pattern is None:
            return True
        if isinstance(key, PathKey):  # a file tool's canonical path: every spelling is one key
            return key.matched_by(self.pattern)
        if isinstance(key, UrlKey):  # a URL's canonical form: every spelling of a host is one key
            return key.matched_by(self.pattern, every=every)
        if not shell:
            return fnmatch.fnmatchcase(key, self.pattern)
        return commands.matches(self.pattern, key, every=every)

    def __str__(self) -> str:
        return self.text


def _unread(key: Any, shell: bool) -> str:
    """Why a command matched a rule although it may not name it: it cannot be read exactly."""
    found = commands.doubts(key) if shell and isinstance(key, str) else ()
    return f" (the command cannot be read exactly: {found[0]}; what cannot be read counts as matching)" if found else ""


# Shell lines longer than this are judged on a worker thread, so the event loop never waits on them.
_JUDGE_IN_THREAD = 64 * 1024


#: The built-in tools whose rules name files: a deny or ask rule for one of them makes a sandboxed
#: shell call ask (in ``default`` and ``accept_edits`` mode), since the sandbox cannot hold it.
FILE_RULE_TOOLS = ("read_file", "write_file", "edit_file", "grep", "glob", "list_files",
                   "read_notebook", "edit_notebook", "run_cell")


def _rule(text: str) -> Rule:
    """``Rule.parse`` (no shared cache: a parse a tool could edit would outlive the seal's check)."""
    return Rule.parse(text)


def _refusing(texts: list[str]) -> list[Rule]:
    """Deny or ask rules, parsed; one that cannot be read (put into the list after it was checked)
    matches every call, so it refuses or asks rather than being skipped."""
    rules = []
    for text in texts:
        try:
            rules.append(Rule.parse(text))
        except UserError:
            rules.append(Rule(str(text), "*", None))
    return rules


def _allowing(texts: list[str]) -> list[Rule]:
    """Allow rules, parsed; one that cannot be read allows nothing."""
    rules = []
    for text in texts:
        with contextlib.suppress(UserError):
            rules.append(Rule.parse(text))
    return rules


@dataclass
class Permissions:
    """What tool calls may run without asking.

    Attributes:
        mode: ``default``, ``accept_edits``, ``plan`` or ``bypass`` (see the module docstring).
        allow: rules for calls that run without asking.
        ask: rules for calls that always ask, even in a permissive mode.
        deny: rules for calls that never run.
        sandboxed: shell commands run inside an OS sandbox (``Agent(sandbox=True)``), so a shell
            call no deny or ask rule names runs without asking (except in ``plan`` mode), unless
            a deny or ask rule names a file tool (``FILE_RULE_TOOLS``): the sandbox cannot hold
            a file rule, so then the mode decides.

    Example:
        >>> p = Permissions(mode="accept_edits", allow=["bash(git status)"], deny=["bash(rm *)"])
    """

    mode: str = "default"
    allow: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    sandboxed: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UserError(
                f"{self.mode!r} is not a permission mode.{did_you_mean(str(self.mode), MODES)} "
                f"Modes: {', '.join(MODES)}."
            )
        for name in ("allow", "ask", "deny"):
            rules = getattr(self, name)
            if isinstance(rules, str):
                raise UserError(f"Permissions({name}=...) takes a list of rules; wrap it: {name}=[{rules!r}].")
            for r in rules:
                if not isinstance(r, (str, Rule)):
                    raise UserError(f"Permissions({name}=...) holds {r!r}, which is not a rule: write each rule as a string, "
                                    "a tool name (\"read_file\") or a tool name with a glob (\"bash(git *)\").")
            texts = [str(r) for r in rules]
            for text in texts:
                _rule(text)  # fail now, at construction, on a malformed rule
            setattr(self, name, texts)

    def copy(self) -> Permissions:
        """An independent copy (rules added to it do not reach this one)."""
        return Permissions(self.mode, list(self.allow), list(self.ask), list(self.deny), self.sandboxed)

    def add_allow(self, rule: str | Rule) -> None:
        """Adds an allow rule (an always-allow answer does this for the session)."""
        text = str(rule)
        _rule(text)
        if text not in self.allow:
            self.allow.append(text)

    def refuses(self, tool_name: str, key: str, *, asking: bool = False, family: str | None = None) -> str | None:
        """The deny rule (with ``asking``, also an ask rule) naming ``tool_name(key)``, or None.

        File tools call it with the canonical path they are about to open (a ``PathKey``) and
        their family, so a link re-pointed after the gate judged the call still meets the deny
        rules of every tool with that effect; the search tools call it with ``asking`` to withhold
        what ``read_file`` could not read unasked.
        """
        for rule in _refusing(self.deny + self.ask if asking else self.deny):
            if rule.matches(tool_name, key, every=False, family=family):
                return rule.text
        return None

    def set_mode(self, mode: str) -> None:
        """Switches the mode (for example from ``plan`` to ``accept_edits`` once a plan is agreed)."""
        if mode not in MODES:
            raise UserError(f"{mode!r} is not a permission mode.{did_you_mean(mode, MODES)} Modes: {', '.join(MODES)}.")
        self.mode = mode

    def evaluate(self, tool: Tool, arguments: dict[str, Any], working_dir: Any = None) -> Verdict:
        """Decides a call by rules, then by mode, without asking anyone.

        ``working_dir`` is where a file tool's path is resolved (None: the current directory).
        """
        key = call_key(tool, arguments, working_dir)
        shell = tool.category == "shell"
        family = tool.category
        for rule in _refusing(self.deny):
            if rule.matches(tool.name, key, shell=shell, every=False, family=family):
                return Verdict("deny", rule.text, f"the rule deny {rule.text!r} forbids it{_unread(key, shell)}", "rule")
        for rule in _refusing(self.ask):
            if rule.matches(tool.name, key, shell=shell, every=False, family=family):
                return Verdict("ask", rule.text, f"the rule ask {rule.text!r} asks for approval{_unread(key, shell)}", "rule")
        for rule in _allowing(self.allow):
            if rule.matches(tool.name, key, shell=shell, every=True, family=family):
                return Verdict("allow", rule.text, f"the rule allow {rule.text!r} allows it", "rule")
        if shell and self.allow:
            # ``git log | head`` is allowed by bash(git *) and bash(head *) together.
            rules = [r for r in _allowing(self.allow) if r.pattern is not None and fnmatch.fnmatchcase(tool.name, r.tool)]
            used = commands.covering([r.pattern for r in rules if r.pattern is not None], key)
            if used:
                texts = [r.text for r in rules if r.pattern in used]
                return Verdict("allow", texts[0], f"the rules allow {texts!r} together allow it", "rule")
        if shell and self.sandboxed and self.mode != "plan":
            guarding = self._file_rule()
            if guarding is None:
                # The sandbox, not the rules, contains what the command can reach (docs/security.md).
                return Verdict("allow", None, f"{tool.name} runs inside the sandbox", "mode")
            if self.mode != "bypass":
                # The sandbox keeps the working directory writable and readable: it cannot hold a
                # file rule, and which files a command touches cannot be read from it exactly.
                return Verdict("ask", None, f"{tool.name} runs inside the sandbox, but the sandbox cannot keep it from the "
                               f"files the rule {guarding!r} names, so {self.mode} mode asks", "mode")
        return self._mode_default(tool, arguments)

    def _file_rule(self) -> str | None:
        """A deny or ask rule naming a tool that reads or writes files, or None."""
        for rule in map(_rule, self.deny + self.ask):
            if any(fnmatch.fnmatchcase(name, rule.tool) for name in FILE_RULE_TOOLS):
                return rule.text
        return None

    def _mode_default(self, tool: Tool, arguments: dict[str, Any] | None = None) -> Verdict:
        # A tool may carry its own mode (an MCP server's ``permissions=``); plan mode still wins.
        own = getattr(tool, "permission_mode", None)
        mode = own if own is not None and self.mode != "plan" else self.mode
        if mode == "bypass":
            return Verdict("allow", None, "bypass mode runs every tool", "mode")
        if is_read_only(tool, arguments):
            return Verdict("allow", None, f"{tool.name} is read-only", "mode")
        what = _effect(tool)
        if mode == "plan":
            return Verdict("deny", None, f"{tool.name} {what}; plan mode runs only read-only tools", "mode")
        if mode == "accept_edits" and tool.category == "edit":
            return Verdict("allow", None, "accept_edits mode runs file edits", "mode")
        return Verdict("ask", None, f"{tool.name} {what}, and {mode} mode asks before it runs", "mode")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What rules and mode say about a call: ``allow``, ``ask`` or ``deny``, which rule, and why."""

    action: Literal["allow", "ask", "deny"]
    rule: str | None
    reason: str
    decided_by: Literal["rule", "mode"]


def is_read_only(tool: Tool, arguments: dict[str, Any] | None = None) -> bool:
    """Whether this call of ``tool`` only reads.

    A tool whose calls differ (the ``memory`` tool: recall reads, remember writes) has a
    ``read_only_for(arguments)`` method that decides per call; for any other, ``tool.read_only``.
    """
    judge = getattr(tool, "read_only_for", None)
    if judge is None or arguments is None:
        return bool(tool.read_only)
    try:
        return bool(judge(arguments))
    except Exception:  # arguments it cannot read: judged as a write, which asks
        return False


def call_key(tool: Tool, arguments: dict[str, Any], working_dir: Any = None) -> str:
    """The text rules match for this call (``Tool.key``), never failing on odd arguments.

    For a tool whose ``permission_key`` names a path argument (``tools.paths.path_key``) it is the
    canonical path in ``working_dir`` (a ``PathKey``), so every spelling of a file is one key.
    """
    canonical = getattr(tool.permission_key, "canonical", None)
    if canonical is not None:
        # An argument that is no path at all is judged by its text below.
        with contextlib.suppress(TypeError, ValueError, OSError):
            return canonical(arguments, working_dir)
    try:
        return str(tool.key(arguments))
    except Exception:  # a key function that cannot read these arguments: fall back to all of them
        return repr(sorted(arguments.items()))


def _describe(tool: Tool, arguments: dict[str, Any], working_dir: Any) -> str | None:
    """What the call would change, as its tool describes it for the card (``Tool.describe_call``).

    A description that fails is left out: the card still shows the exact arguments.
    """
    describe = getattr(tool, "describe_call", None)
    if describe is None:
        return None
    try:
        text = describe(arguments, working_dir)
    except Exception:
        return None
    return text if isinstance(text, str) and text else None


def _one_line(tool: str, key: str, limit: int = 300) -> str:
    flat = key.replace("\r", "").replace("\n", "\\n")
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return f"{tool}({flat})"


# ---- the gate ------------------------------------------------------------------------------


class RuleGate:
    """The standard ``PermissionGate``: rules and mode, then an approver, a policy or a person.

    Build it with ``build_gate``. Its ``permissions`` are its own copy, so always-allow rules last
    for this gate (one agent's session) and never reach another agent.

    Attributes:
        permissions: the mode and rules in force.
        approver: the callback asked first, or None.
        granted: the rules always-allow answers added, in order.
        policy: the headless policy, or None.
        broker: where a person answers (the live view resolves its futures).
        timeout: seconds a call waits for a decision before it is rejected (None: no limit).
    """

    def __init__(
        self,
        permissions: Permissions,
        approver: Approver | None = None,
        *,
        broker: ApprovalBroker | None = None,
        policy: Policy | None = None,
        timeout: float | None = None,
    ) -> None:
        self.permissions = permissions
        self.approver = approver
        self.policy = policy
        self.broker = broker if broker is not None else ApprovalBroker()
        self.timeout = check_approval_timeout(timeout)
        # Rules added by always-allow answers: the only change to the rules a run accepts
        # while it runs (``agent_kernel.guard._seal``).
        self.granted: list[str] = []

    def __repr__(self) -> str:
        return f"RuleGate(mode={self.permissions.mode!r}, policy={self.policy!r})"

    async def authorize(self, request: ToolRequest, emit: Emit) -> Authorization:
        """Returns the verdict for ``request``, asking someone if the rules say so."""
        tool, arguments = request.tool, request.arguments
        if tool.category == "shell" and sum(len(v) for v in arguments.values() if isinstance(v, str)) > _JUDGE_IN_THREAD:
            verdict = await asyncio.to_thread(self.permissions.evaluate, tool, arguments, request.working_dir)
        else:
            verdict = self.permissions.evaluate(tool, arguments, request.working_dir)
        return await self.conclude(request, verdict, emit)

    async def conclude(self, request: ToolRequest, verdict: Verdict, emit: Emit) -> Authorization:
        """Acts on ``verdict`` (from these rules, or stricter ones): runs, refuses, or asks."""
        tool, arguments = request.tool, request.arguments
        if verdict.action == "allow":
            if verdict.decided_by == "rule":
                emit(EventType.APPROVAL_DECISION, self._decision(request, "approve", "rule", verdict.reason, 0.0))
            return Authorization(True, arguments, decided_by=verdict.decided_by)
        if verdict.action == "deny":
            emit(EventType.APPROVAL_DECISION, self._decision(request, "reject", verdict.decided_by, verdict.reason, 0.0))
            return Authorization(False, arguments, _refusal(tool, self.permissions.mode, verdict), verdict.decided_by)
        return await self._ask(request, verdict, emit)

    async def _ask(self, request: ToolRequest, verdict: Verdict, emit: Emit, asked: int = 0) -> Authorization:
        tool, arguments = request.tool, request.arguments
        key = call_key(tool, arguments, request.working_dir)
        reason = verdict.reason
        shown = _file_shown(tool, arguments, request.working_dir)
        warning = getattr(tool, "approval_warning", None)
        if warning:  # what the call can do beyond its arguments (the python tool: anything)
            reason = f"{reason}. Note: {warning}"
        info = ApprovalRequest(
            request.call_id, tool.name, dict(arguments), _one_line(tool.name, key), verdict.rule, reason, request.agent_id,
            full_key=key, shell=tool.category == "shell", family=tool.category,
        )
        required = p.ApprovalRequired(call_id=info.call_id, tool=info.tool, arguments=info.arguments, key=info.key, rule=info.rule, reason=info.reason)
        # What a tool adds to its approval card (an MCP tool: its server and destructive hint),
        # never in place of what the call is: the call's own fields win.
        card = getattr(tool, "approval_info", None) or {}
        required = cast(p.ApprovalRequired, {**card, **required})
        preview = _describe(tool, arguments, request.working_dir)
        if preview is not None:
            required["preview"] = preview
        if self.policy is not None:
            required["policy"] = self.policy.name
        if shown is not None:
            required["file"] = dict(shown)
        timeout = self.timeout
        if timeout is not None:
            required["timeout_s"] = timeout
            required["expires_at"] = time.time() + timeout
        emit(EventType.APPROVAL_REQUIRED, required)
        started = time.monotonic()
        try:
            approval, decided_by = await self._answer(info, None if timeout is None else started + timeout)
        except _Expired:
            # Nobody answered in time: the call is refused, never run, and the model reads why.
            message = f"Nobody answered the approval for {info.key} within {timeout:g} s, so it was not run."
            emit(EventType.APPROVAL_DECISION, self._decision(request, "reject", "timeout", message, time.monotonic() - started))
            return Authorization(False, arguments, f"{message} Ask the user before trying it again.", "timeout")
        except _ApproverFailed as failed:
            # Fails closed, and loudly: the person sees an error notice, the model a refusal.
            wait_s = time.monotonic() - started
            emit(EventType.ERROR, failed.event_data(info))
            emit(EventType.APPROVAL_DECISION, self._decision(request, "reject", "callback", failed.message, wait_s))
            return Authorization(False, arguments, f"This call was refused because the approval callback failed: {failed.message}", "callback")
        wait_s = time.monotonic() - started
        if approval is None:
            message = _nobody_message(info, self.policy)
            emit(EventType.APPROVAL_DECISION, self._decision(request, "reject", "policy", message, wait_s))
            return Authorization(False, arguments, message, "policy")
        data = self._decision(request, approval.decision, decided_by, approval.reason, wait_s)
        if approval.decision == "reject":
            emit(EventType.APPROVAL_DECISION, data)
            who = "The approval policy" if decided_by == "policy" else "The user"
            message = f"{who} rejected this call: {approval.reason}" if approval.reason else f"{who} rejected this call."
            return Authorization(False, arguments, message, decided_by)
        run_with = dict(arguments)
        if approval.decision == "approve_edited" and approval.arguments is not None:
            run_with = dict(approval.arguments)
            data["arguments"] = run_with
            shown = _file_shown(tool, run_with, request.working_dir)  # approved as edited: the file it leads to now
        elif shown is not None and _file_shown(tool, arguments, request.working_dir) != shown:
            # The file changed while the card waited (a link re-pointed, a file replaced): what was
            # approved is not what would be written, so the question is asked again.
            message = f"the file changed while the approval waited ({shown.get('path')!r} is not the file it was)"
            emit(EventType.APPROVAL_DECISION, self._decision(request, "reject", decided_by, message, wait_s))
            if asked >= _ASK_AGAIN:
                return Authorization(False, arguments, f"Refused: {message}, again and again. Nothing was written; try later.", decided_by)
            again = Verdict("ask", verdict.rule, f"{verdict.reason}; asked again: {message}", verdict.decided_by)
            return await self._ask(request, again, emit, asked + 1)
        elif approval.decision == "always_allow":
            rule = Rule.parse(approval.rule) if approval.rule else Rule.exact(tool.name, key)
            self.permissions.add_allow(rule)
            self.granted.append(rule.text)
            data["rule_added"] = rule.text
        emit(EventType.APPROVAL_DECISION, data)
        return Authorization(True, run_with, decided_by=decided_by, file=None if shown is None else dict(shown))

    async def _answer(self, info: ApprovalRequest, deadline: float | None = None) -> tuple[Approval | None, str]:
        """Asks the approver, then the policy, then a person; (None, "") when nobody can answer.

        Raises:
            _Expired: ``deadline`` (``time.monotonic()``) passed before an answer.
        """
        if self.approver is not None:
            approver = self.approver
            try:
                answer = approver(info)
                if inspect.isawaitable(answer):
                    answer = await (answer if deadline is None else _until(answer, deadline))
            except _Expired:
                raise
            except Exception as exc:  # the callback's own bug: refuse the call, never run it
                raise _ApproverFailed(approver, f"raised {type(exc).__name__}: {exc}", None) from exc
            if answer is not None:
                try:
                    return Approval.coerce(answer), "callback"
                except UserError:
                    raise _ApproverFailed(approver, f"returned {_short_repr(answer)}, which is not a decision", answer) from None
        if self.policy is not None:
            decided = self.policy.decide(info)
            if decided is not None:
                return decided, "policy"
        if self.broker.interactive:
            future = self.broker.request(info.call_id, info)
            try:
                if deadline is not None:
                    # Wait without cancelling the answer's future: a click that lands as the
                    # deadline passes is either withdrawn (nobody answered) or kept, never lost.
                    await asyncio.wait({future}, timeout=max(0.0, deadline - time.monotonic()))
                    if not future.done() and self.broker.withdraw(info.call_id, agent_id=info.agent_id):
                        raise _Expired
                return await future, "person"
            finally:
                self.broker.forget(info.call_id, agent_id=info.agent_id)
        return None, ""

    @staticmethod
    def _decision(request: ToolRequest, decision: str, decided_by: str, reason: str | None, wait_s: float) -> p.ApprovalDecision:
        return p.ApprovalDecision(call_id=request.call_id, tool=request.tool.name, decision=decision, decided_by=decided_by, reason=reason, wait_s=wait_s)


#: How many times a write is asked about again when its file keeps changing under the card.
_ASK_AGAIN = 2


def _file_shown(tool: Tool, arguments: dict[str, Any], working_dir: Any) -> dict[str, Any] | None:
    """For a call that writes a file named by its path argument: which file that is now, else None."""
    identity = getattr(tool.permission_key, "identity", None)
    if identity is None or is_read_only(tool, arguments):
        return None
    try:
        return dict(identity(arguments, working_dir))
    except (TypeError, ValueError, OSError):
        return None


class _Expired(Exception):
    """The approval timeout passed before anyone answered."""


# Modes from the most to the least strict.
_STRICTNESS = {"plan": 0, "default": 1, "accept_edits": 2, "bypass": 3}
_ACTION = {"deny": 0, "ask": 1, "allow": 2}


class NestedGate:
    """A sub-agent's gate: its own mode and rules apply inside it, never looser than its parent's.

    Every call is judged by both: the parent's gate (its rules, mode and always-allow answers)
    and the sub-agent's own ``Permissions``; the stricter verdict wins (deny over ask over
    allow), and asking goes through the parent's approver, policy and live view. So a
    sub-agent built with ``permissions="plan"`` or ``deny=[...]`` keeps them inside a parent in
    ``bypass`` mode, and one built in ``bypass`` mode cannot loosen a parent in ``default``.

    Attributes:
        parent: the parent run's gate.
        own: the sub-agent's own mode and rules.
    """

    def __init__(self, parent: PermissionGate, own: Permissions) -> None:
        self.parent = parent
        self.own = own
        # What the run's seal and the file tools read: the parent's (an always-allow answer adds there).
        self.permissions = getattr(parent, "permissions", None)
        self.approver = getattr(parent, "approver", None)
        self.policy = getattr(parent, "policy", None)
        self.granted = getattr(parent, "granted", [])
        self.broker = getattr(parent, "broker", None)
        self.timeout = getattr(parent, "timeout", None)

    def __repr__(self) -> str:
        return f"NestedGate(own={self.own.mode!r}, parent={self.parent!r})"

    async def authorize(self, request: ToolRequest, emit: Emit) -> Authorization:
        """The stricter of the parent's and the sub-agent's verdicts, acted on by the parent's gate."""
        own = self.own.evaluate(request.tool, request.arguments, request.working_dir)
        rules = getattr(self.parent, "permissions", None)
        conclude = getattr(self.parent, "conclude", None)
        if not isinstance(rules, Permissions) or conclude is None:
            # A gate of the caller's own: it decides, but the sub-agent's refusals still hold.
            if own.action == "deny":
                emit(EventType.APPROVAL_DECISION, RuleGate._decision(request, "reject", own.decided_by, own.reason, 0.0))
                return Authorization(False, request.arguments, _refusal(request.tool, self.own.mode, own), own.decided_by)
            return await self.parent.authorize(request, emit)
        theirs = rules.evaluate(request.tool, request.arguments, request.working_dir)
        verdict = own if _ACTION[own.action] < _ACTION[theirs.action] else theirs
        if verdict is own and own.decided_by == "mode" and _STRICTNESS.get(self.own.mode, 1) >= _STRICTNESS.get(rules.mode, 1):
            verdict = theirs  # a mode no stricter than the parent's never decides (it would only repeat it)
        if verdict is own:
            verdict = Verdict(own.action, own.rule, f"{own.reason} (the sub-agent's own permissions)", own.decided_by)
            if verdict.action == "deny":  # refused in the sub-agent's terms (its mode, its rule)
                emit(EventType.APPROVAL_DECISION, RuleGate._decision(request, "reject", verdict.decided_by, verdict.reason, 0.0))
                return Authorization(False, request.arguments, _refusal(request.tool, self.own.mode, verdict), verdict.decided_by)
        return cast(Authorization, await conclude(request, verdict, emit))


async def _until(awaitable: Any, deadline: float) -> Any:
    """``awaitable``'s result, or ``_Expired`` once ``deadline`` (``time.monotonic()``) passes."""
    try:
        return await asyncio.wait_for(awaitable, max(0.0, deadline - time.monotonic()))
    except (TimeoutError, asyncio.TimeoutError):  # one class from Python 3.11, two before
        raise _Expired from None


class _ApproverFailed(Exception):
    """The ``approver`` callback raised, or returned something that is not a decision."""

    def __init__(self, approver: Any, what: str, returned: Any) -> None:
        self.approver = getattr(approver, "__qualname__", None) or type(approver).__qualname__
        self.returned = returned
        self.message = (
            f"the approver {self.approver} {what}. Return True, False, Approval.approve(), Approval.reject(reason), "
            "Approval.always() or None (to pass the question on), and handle errors inside the approver."
        )
        super().__init__(self.message)

    def event_data(self, info: ApprovalRequest) -> p.Error:
        """The ``error`` event's data: it names the call, the approver and what it gave back."""
        data = p.Error(
            message=f"The approval callback failed on {info.key}, so the call was refused: {self.message}",
            kind="approver",
            status_code=None,
            fatal=False,
            call_id=info.call_id,
            tool=info.tool,
            approver=self.approver,
        )
        if self.returned is not None:
            data["returned"] = _short_repr(self.returned)
        return data


def _short_repr(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _effect(tool: Tool) -> str:
    """What a tool that is not read-only does, as a verdict says it."""
    return {"edit": "changes files", "network": "reaches the network"}.get(tool.category or "", "is not read-only")


def _refusal(tool: Tool, mode: str, verdict: Verdict) -> str:
    if verdict.decided_by == "mode":
        what = _effect(tool)
        instead = ("Plan without it, or say in your plan what you would fetch and why." if tool.category == "network"
                   else "Describe the change in your plan instead of making it.")
        return f"Refused in {mode} mode: {tool.name} {what}; only read-only tools may run. {instead}"
    return f"Permission denied: {verdict.reason}. Do not retry this call; use another approach or ask the user."


def _nobody_message(info: ApprovalRequest, policy: Policy | None) -> str:
    lead = f"{info.key} needs approval ({info.reason}), but nobody can answer"
    if policy is not None:
        lead += f": the {policy.name} approval policy has no entry for it"
    text = (
        f"{lead}. No approver callback is set and no person is watching. Set {APPROVAL_ENV} to auto_approve, "
        "auto_deny or scripted:RULE=approve|deny,... (e.g. scripted:bash(git *)=approve,write_file=deny), "
        "pass approver=..., or allow it with a rule."
    )
    return str(ApprovalPending(text))


def build_gate(
    permissions: str | Permissions | PermissionGate | None,
    approver: Approver | None = None,
    *,
    broker: ApprovalBroker | None = None,
    policy: str | Policy | None = None,
    timeout: float | None = None,
) -> PermissionGate:
    """The gate an Agent uses, from ``Agent(permissions=..., approver=...)``.

    Args:
        permissions: a mode name, a ``Permissions``, a gate of your own, or None (``default``).
        approver: a callback (sync or async) taking an ``ApprovalRequest`` and returning True,
            False, an ``Approval``, or None to pass the question on.
        broker: where a live view answers approvals; a new one when None.
        policy: a headless policy or its text; None reads ``AGENT_KERNEL_APPROVAL``.
        timeout: seconds a call waits for a decision before it is rejected (None: no limit).

    Raises:
        UserError: an unknown mode, a malformed rule or policy, or a timeout that is not positive.

    Example:
        >>> gate = build_gate(Permissions(mode="accept_edits", allow=["bash(git *)"]))
    """
    if permissions is not None and not isinstance(permissions, (str, Permissions)):
        if callable(getattr(permissions, "authorize", None)):
            return permissions
        raise UserError(
            f"permissions={permissions!r} is not understood. Pass a mode ({', '.join(MODES)}), "
            "a Permissions(mode=..., allow=[...], ask=[...], deny=[...]) or an object with async authorize()."
        )
    if permissions is None:
        resolved = Permissions()
    elif isinstance(permissions, str):
        resolved = Permissions(mode=permissions)
    else:
        resolved = permissions.copy()
    if isinstance(policy, str):
        chosen: Policy | None = parse_policy(policy)
    elif policy is None:
        chosen = policy_from_env()
    else:
        chosen = policy
    return RuleGate(resolved, approver, broker=broker, policy=chosen, timeout=timeout)


def check_approval_timeout(timeout: float | None) -> float | None:
    """``timeout`` as seconds, or None; refuses anything that is not a positive number.

    Raises:
        UserError: ``timeout`` is zero, negative or not a number.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise UserError(f"approval_timeout must be a positive, finite number of seconds or None (got {timeout!r}).")
    return float(timeout)

