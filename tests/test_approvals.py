"""Asking about tool calls: approver callbacks, the broker, headless policies and their events."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from agent_kernel.errors import UserError
from agent_kernel.events._event import EventType
from agent_kernel.guard import _permissions as permissions
from agent_kernel.guard._approvals import Approval, ApprovalBroker, ApprovalRequest, PendingApproval, ScriptedPolicy, auto_approve, auto_deny, parse_policy, policy_from_env
from agent_kernel.guard._permissions import Permissions, ToolRequest, build_gate
from agent_kernel.tools.builtin._files import write_file
from agent_kernel.tools.builtin._shell import bash

from .payload_check import EmitRecorder


class Recorder(EmitRecorder):
    @property
    def decision(self) -> dict[str, Any]:
        [d] = self.of(EventType.APPROVAL_DECISION)
        return d


def git(command: str = "git status", call_id: str = "c1") -> ToolRequest:
    return ToolRequest(call_id, bash, {"command": command})


class PersonAt:
    """A UI stand-in: marks the broker interactive and signals each new pending approval."""

    def __init__(self, broker: ApprovalBroker) -> None:
        broker.interactive = True
        self.broker = broker
        self.asked: asyncio.Queue[PendingApproval] = asyncio.Queue()
        self.settled: list[PendingApproval] = []
        broker.subscribe(self.asked.put_nowait, self.settled.append)


# ---- the approver callback -----------------------------------------------------------------


async def test_the_approver_receives_tool_arguments_key_rule_and_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[ApprovalRequest] = []
    clock = [100.0]  # the gate's clock, so the decision's wait is known exactly
    monkeypatch.setattr(permissions, "time", SimpleNamespace(monotonic=lambda: clock[0]))

    def approver(request: ApprovalRequest) -> bool:
        seen.append(request)
        clock[0] += 2.5  # the person took 2.5 s to decide
        return True

    gate = build_gate(Permissions(ask=["bash(git *)"]), approver)
    emit = Recorder()
    auth = await gate.authorize(git(), emit)
    assert auth.allowed and auth.decided_by == "callback"
    [request] = seen
    assert (request.call_id, request.tool, request.arguments) == ("c1", "bash", {"command": "git status"})
    assert (request.key, request.rule) == ("bash(git status)", "bash(git *)")
    assert "bash(git *)" in request.reason
    [required] = emit.of(EventType.APPROVAL_REQUIRED)
    assert required == {
        "call_id": "c1",
        "tool": "bash",
        "arguments": {"command": "git status"},
        "key": "bash(git status)",
        "rule": "bash(git *)",
        "reason": request.reason,
    }
    assert emit.decision["decision"] == "approve" and emit.decision["decided_by"] == "callback"
    assert emit.decision["wait_s"] == 2.5


async def test_an_async_approver_works_like_a_sync_one() -> None:
    async def approver(request: ApprovalRequest) -> Approval:
        await asyncio.sleep(0)
        return Approval.approve()

    auth = await build_gate(None, approver).authorize(git(), Recorder())
    assert auth.allowed


async def test_approve_with_edited_arguments_runs_the_edited_call() -> None:
    gate = build_gate(None, lambda r: Approval.approve({"command": "git status --short"}))
    emit = Recorder()
    auth = await gate.authorize(git(), emit)
    assert auth.allowed and auth.arguments == {"command": "git status --short"}
    assert emit.decision["decision"] == "approve_edited"
    assert emit.decision["arguments"] == {"command": "git status --short"}


async def test_reject_gives_the_model_the_reason() -> None:
    gate = build_gate(None, lambda r: Approval.reject("use git diff instead"))
    emit = Recorder()
    auth = await gate.authorize(git(), emit)
    assert not auth.allowed
    assert auth.message == "The user rejected this call: use git diff instead"
    assert (emit.decision["decision"], emit.decision["reason"]) == ("reject", "use git diff instead")


async def test_false_rejects_without_a_reason() -> None:
    auth = await build_gate(None, lambda r: False).authorize(git(), Recorder())
    assert not auth.allowed and auth.message == "The user rejected this call."


async def test_always_allow_lasts_for_the_session_but_not_beyond() -> None:
    asked: list[str] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append(request.key)
        return Approval.always()

    shared = Permissions()
    gate = build_gate(shared, approver)
    emit = Recorder()
    assert (await gate.authorize(git(), emit)).allowed
    assert emit.decision["rule_added"] == "bash(git status)"
    assert (await gate.authorize(git(call_id="c2"), Recorder())).allowed
    assert asked == ["bash(git status)"]  # the second call was not asked about
    # A different command still asks.
    await gate.authorize(git("git push"), Recorder())
    assert asked == ["bash(git status)", "bash(git push)"]
    # Neither the caller's Permissions nor a new gate (a new Agent) inherits the rule.
    assert shared.allow == []
    fresh = build_gate(shared, approver)
    await fresh.authorize(git(), Recorder())
    assert asked[-1] == "bash(git status)" and len(asked) == 3


async def test_always_allow_of_a_command_with_glob_characters_allows_only_that_command() -> None:
    gate = build_gate(None, lambda r: Approval.always())
    await gate.authorize(git("ls *.py"), Recorder())
    p = gate.permissions  # type: ignore[attr-defined]
    assert p.evaluate(bash, {"command": "ls *.py"}).action == "allow"
    assert p.evaluate(bash, {"command": "ls secrets.txt"}).action == "ask"


async def test_always_allow_may_name_a_broader_rule() -> None:
    gate = build_gate(None, lambda r: Approval.always("bash(git *)"))
    emit = Recorder()
    await gate.authorize(git(), emit)
    assert emit.decision["rule_added"] == "bash(git *)"
    assert gate.permissions.evaluate(bash, {"command": "git log"}).action == "allow"  # type: ignore[attr-defined]


async def test_an_approver_returning_none_passes_the_question_to_the_policy() -> None:
    gate = build_gate(None, lambda r: None, policy="auto_deny")
    auth = await gate.authorize(git(), Recorder())
    assert not auth.allowed and auth.decided_by == "policy"


async def test_an_approver_returning_nonsense_refuses_the_call_and_says_how_to_fix_it() -> None:
    emit = Recorder()
    auth = await build_gate(None, lambda r: 42).authorize(git(), emit)  # type: ignore[arg-type,return-value]
    assert not auth.allowed and auth.decided_by == "callback"
    assert auth.message is not None and "returned 42, which is not a decision" in auth.message and "Approval.reject" in auth.message
    [error] = emit.of(EventType.ERROR)
    assert error["kind"] == "approver" and error["returned"] == "42" and error["fatal"] is False


# ---- a person, through the broker ----------------------------------------------------------


async def test_a_person_approves_from_another_thread() -> None:
    gate = build_gate(None)
    person = PersonAt(gate.broker)  # type: ignore[attr-defined]
    task = asyncio.create_task(gate.authorize(git(), emit := Recorder()))
    pending = await person.asked.get()
    assert [p.call_id for p in gate.broker.pending] == ["c1"]  # type: ignore[attr-defined]
    results: list[bool] = []
    clicker = threading.Thread(target=lambda: results.append(gate.broker.resolve(pending.call_id, "approve")))  # type: ignore[attr-defined]
    clicker.start()
    auth = await task
    clicker.join()
    assert results == [True] and auth.allowed and auth.decided_by == "person"
    assert emit.decision["decided_by"] == "person"
    assert gate.broker.pending == []  # type: ignore[attr-defined]
    assert [s.outcome for s in person.settled] == [Approval.approve()]


async def test_resolving_one_call_leaves_the_others_pending() -> None:
    gate = build_gate(None)
    person = PersonAt(gate.broker)  # type: ignore[attr-defined]
    first = asyncio.create_task(gate.authorize(git(call_id="a"), Recorder()))
    second = asyncio.create_task(gate.authorize(git("git log", call_id="b"), Recorder()))
    await person.asked.get()
    await person.asked.get()
    assert gate.broker.resolve("b", Approval.reject("not now"))  # type: ignore[attr-defined]
    auth_b = await second
    assert not auth_b.allowed and auth_b.message == "The user rejected this call: not now"
    assert not first.done()
    assert [p.call_id for p in gate.broker.pending] == ["a"]  # type: ignore[attr-defined]
    assert not gate.broker.resolve("b", True)  # type: ignore[attr-defined]  # a second click does nothing
    gate.broker.resolve("a", True)  # type: ignore[attr-defined]
    assert (await first).allowed


async def test_two_agents_calls_with_one_id_are_asked_and_answered_apart() -> None:
    # A sub-agent asks through its parent's broker, and offline models number calls alike.
    gate = build_gate(None)
    person = PersonAt(gate.broker)  # type: ignore[attr-defined]
    parent = asyncio.create_task(gate.authorize(git(), Recorder()))
    child = asyncio.create_task(gate.authorize(ToolRequest("c1", bash, {"command": "git log"}, agent_id="a_child"), Recorder()))
    asked = [await person.asked.get(), await person.asked.get()]
    assert [(p.agent_id, p.call_id, p.request.key) for p in asked] == [
        (None, "c1", "bash(git status)"),
        ("a_child", "c1", "bash(git log)"),
    ]
    assert gate.broker.resolve("c1", Approval.reject("not that"), agent_id="a_child")  # type: ignore[attr-defined]
    assert not (await child).allowed and not parent.done()
    assert not gate.broker.resolve("c1", True, agent_id="a_child")  # type: ignore[attr-defined]  # answered already
    assert gate.broker.resolve("c1", True)  # type: ignore[attr-defined]  # no agent named: the oldest with that id
    assert (await parent).allowed and gate.broker.pending == []  # type: ignore[attr-defined]


async def test_cancelling_the_run_while_an_approval_is_pending_cleans_up() -> None:
    gate = build_gate(None)
    person = PersonAt(gate.broker)  # type: ignore[attr-defined]
    task = asyncio.create_task(gate.authorize(git(), emit := Recorder()))
    pending = await person.asked.get()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert gate.broker.pending == []  # type: ignore[attr-defined]
    assert pending.future.cancelled()
    assert [s.outcome for s in person.settled] == [None]
    assert not gate.broker.resolve("c1", True)  # type: ignore[attr-defined]  # a late click is harmless
    assert emit.of(EventType.APPROVAL_DECISION) == []


async def test_a_broken_ui_listener_does_not_break_the_run(caplog: pytest.LogCaptureFixture) -> None:
    gate = build_gate(None)
    broker = gate.broker  # type: ignore[attr-defined]
    broker.interactive = True

    def broken(p: PendingApproval) -> None:
        broker.resolve(p.call_id, True)
        raise RuntimeError("widget gone")

    broker.subscribe(broken)
    assert (await gate.authorize(git(), Recorder())).allowed
    assert "widget gone" in caplog.text


async def test_unsubscribe_stops_notifications() -> None:
    broker = ApprovalBroker(interactive=True)
    seen: list[str] = []
    unsubscribe = broker.subscribe(lambda p: seen.append(p.call_id))
    unsubscribe()
    future = broker.request("x", ApprovalRequest("x", "bash", {}, "bash()", None, "r"))
    broker.resolve("x", True)
    assert (await future).allowed and seen == []


async def test_a_duplicate_pending_call_id_is_refused() -> None:
    broker = ApprovalBroker()
    info = ApprovalRequest("x", "bash", {}, "bash()", None, "r")
    broker.request("x", info)
    with pytest.raises(UserError, match="already pending"):
        broker.request("x", info)
    broker.forget("x")


# ---- nobody to ask, and headless policies --------------------------------------------------


async def test_with_nobody_to_ask_the_call_is_refused_at_once_naming_the_policy_variable() -> None:
    emit = Recorder()
    auth = await build_gate(None).authorize(git(), emit)
    assert not auth.allowed and auth.decided_by == "policy"
    assert auth.message is not None and "AGENT_KERNEL_APPROVAL" in auth.message and "bash(git status)" in auth.message
    assert emit.decision["decision"] == "reject"


async def test_auto_approve_policy() -> None:
    emit = Recorder()
    auth = await build_gate(None, policy=auto_approve).authorize(git(), emit)
    assert auth.allowed and auth.decided_by == "policy"
    assert emit.of(EventType.APPROVAL_REQUIRED)[0]["policy"] == "auto_approve"
    assert emit.decision["decided_by"] == "policy"


async def test_auto_deny_policy_tells_the_model_why() -> None:
    auth = await build_gate(None, policy=auto_deny).authorize(git(), Recorder())
    assert not auth.allowed and auth.message is not None
    assert auth.message.startswith("The approval policy rejected this call:") and "auto_deny" in auth.message


async def test_scripted_policy_decides_by_first_match_and_refuses_the_rest() -> None:
    gate = build_gate(None, policy="scripted:bash(git *)=approve,write_file=deny")
    assert (await gate.authorize(git("git log"), Recorder())).allowed
    denied = await gate.authorize(ToolRequest("w", write_file, {"path": "a", "content": ""}), Recorder())
    assert not denied.allowed and "write_file" in (denied.message or "")
    unmatched = await gate.authorize(git("make"), Recorder())
    assert not unmatched.allowed
    assert "scripted approval policy has no entry" in (unmatched.message or "")


async def test_the_policy_is_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_KERNEL_APPROVAL", "auto_approve")
    assert (await build_gate(None).authorize(git(), Recorder())).allowed
    monkeypatch.setenv("AGENT_KERNEL_APPROVAL", "scripted:bash=deny")
    assert not (await build_gate(None).authorize(git(), Recorder())).allowed


async def test_a_policy_answers_before_a_person_is_waited_for() -> None:
    gate = build_gate(None, policy="auto_approve")
    gate.broker.interactive = True  # type: ignore[attr-defined]
    auth = await gate.authorize(git(), Recorder())
    assert auth.decided_by == "policy"


def test_scripted_policy_syntax_allows_commas_and_equals_inside_patterns() -> None:
    policy = parse_policy("scripted: bash(git log --format=%h,%s)=approve , bash(FOO=1 make *)=deny")
    assert isinstance(policy, ScriptedPolicy)
    assert [(p, a.allowed) for p, a in policy.entries] == [("bash(git log --format=%h,%s)", True), ("bash(FOO=1 make *)", False)]


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("yes please", "is not an approval policy"),
        ("scripted:bash", "has no '=DECISION'"),
        ("scripted:bash=maybe", "'maybe'"),
        ("scripted:=approve", "has no rule"),
        ("scripted:", "has no entries"),
    ],
)
def test_a_malformed_policy_says_what_is_wrong_and_shows_the_syntax(
    monkeypatch: pytest.MonkeyPatch, text: str, complaint: str
) -> None:
    monkeypatch.setenv("AGENT_KERNEL_APPROVAL", text)
    with pytest.raises(UserError) as info:
        policy_from_env()
    assert complaint in str(info.value)
    assert "AGENT_KERNEL_APPROVAL" in str(info.value) and "scripted:bash(git *)=approve" in str(info.value)


def test_approval_words_and_bools_coerce() -> None:
    assert Approval.coerce(True) == Approval.approve()
    assert Approval.coerce("deny") == Approval.reject()
    assert Approval.coerce("always") == Approval.always()
    assert Approval.approve({"a": 1}).decision == "approve_edited"


# ---- through the Agent ---------------------------------------------------------------------


def _agent(tmp_path: Any, model: Any, tools: list[str], **kwargs: Any) -> Any:
    from agent_kernel import Agent

    return Agent(model, tools=tools, journal=None, context=None, working_dir=tmp_path, **kwargs)


async def test_plan_mode_refusal_reaches_the_model_as_the_tool_result(tmp_path: Any) -> None:
    from agent_kernel.models.scripted import ScriptedModel, tool_call

    model = ScriptedModel([[tool_call("write_file", {"path": "a.txt", "content": "x"})], "ok"])
    result = await _agent(tmp_path, model, ["write_file"], permissions="plan").run("write it")
    [tool_result] = [e for e in result.events if e.type is EventType.TOOL_RESULT]
    assert tool_result.data["is_error"] and tool_result.data["content"].startswith("Refused in plan mode: write_file changes files")
    assert not (tmp_path / "a.txt").exists()
    assert "Refused in plan mode" in repr(model.requests[1].messages[-1])


async def test_a_headless_run_without_a_policy_refuses_instead_of_waiting(tmp_path: Any) -> None:
    from agent_kernel.models.scripted import ScriptedModel, tool_call

    model = ScriptedModel([[tool_call("bash", {"command": "echo hi"})], "ok"])
    result = await _agent(tmp_path, model, ["bash"]).run("go")
    [tool_result] = [e for e in result.events if e.type is EventType.TOOL_RESULT]
    assert tool_result.data["is_error"] and "AGENT_KERNEL_APPROVAL" in tool_result.data["content"]
    assert result.text == "ok"


async def test_a_person_approves_a_running_agents_call_from_another_thread(tmp_path: Any) -> None:
    from agent_kernel.models.scripted import ScriptedModel, tool_call

    model = ScriptedModel([[tool_call("bash", {"command": "echo approved-and-ran"})], "done"])
    agent = _agent(tmp_path, model, ["bash"])
    broker: ApprovalBroker = agent.permissions.broker
    broker.interactive = True
    broker.subscribe(lambda p: threading.Thread(target=broker.resolve, args=(p.call_id, "approve")).start())
    result = await agent.run("go")
    kinds = [e.type for e in result.events]
    assert kinds.index(EventType.APPROVAL_REQUIRED) < kinds.index(EventType.APPROVAL_DECISION) < kinds.index(EventType.TOOL_START)
    [tool_result] = [e for e in result.events if e.type is EventType.TOOL_RESULT]
    assert tool_result.data["content"].strip() == "approved-and-ran"


async def test_cancelling_an_agent_while_it_waits_for_approval_ends_the_run_and_clears_the_prompt(tmp_path: Any) -> None:
    from agent_kernel.models.scripted import ScriptedModel, tool_call
    from agent_kernel.runtime._state import TerminationReason

    model = ScriptedModel([[tool_call("bash", {"command": "echo never"})], "done"])
    agent = _agent(tmp_path, model, ["bash"])
    broker: ApprovalBroker = agent.permissions.broker
    broker.interactive = True
    broker.subscribe(lambda p: agent.cancel("stop button"))
    result = await agent.run("go")
    assert result.termination_reason is TerminationReason.USER_INTERRUPT
    assert broker.pending == []
    assert not any(e.type is EventType.TOOL_START for e in result.events)


# -- a broken approver ------------------------------------------------------------------------


def _broken_approvers() -> list[Any]:
    def raises(request: ApprovalRequest) -> Any:
        raise RuntimeError("database is down")

    async def raises_async(request: ApprovalRequest) -> Any:
        raise ValueError("no such user")

    def says_maybe(request: ApprovalRequest) -> Any:
        return "maybe"

    return [raises, raises_async, says_maybe]


@pytest.mark.parametrize("approver", _broken_approvers(), ids=lambda a: a.__name__)
async def test_a_broken_approver_refuses_the_call_and_both_the_person_and_the_model_see_why(tmp_path: Any, approver: Any) -> None:
    from agent_kernel.jupyter._items import Notice
    from agent_kernel.jupyter._transcript import Transcript
    from agent_kernel.models.scripted import ScriptedModel, tool_call
    from agent_kernel.runtime._state import TerminationReason

    marker = tmp_path / "ran"
    model = ScriptedModel([[tool_call("bash", {"command": f"touch {marker}"}, id="c1")], "understood"])
    result = await _agent(tmp_path, model, ["bash"], approver=approver).run("go")

    assert not marker.exists()
    # The run goes on: the model reads the refusal and answers.
    assert result.termination_reason is TerminationReason.END_TURN and result.text == "understood"
    [tool_result] = [e for e in result.events if e.type is EventType.TOOL_RESULT]
    assert tool_result.data["is_error"] and tool_result.data["call_id"] == "c1"
    assert "approval callback failed" in tool_result.data["content"] and approver.__name__ in tool_result.data["content"]
    assert "c1" in str(model.requests[-1].messages[-1].to_dict())
    # The error names the approver and what went wrong, and says the run was not ended by it.
    [error] = [e for e in result.events if e.type is EventType.ERROR]
    assert error.data["kind"] == "approver" and error.data["fatal"] is False
    assert error.data["approver"].endswith(approver.__name__) and error.data["call_id"] == "c1"
    if approver.__name__ == "says_maybe":
        assert error.data["returned"] == "'maybe'" and "not a decision" in error.data["message"]
    else:
        assert "raised" in error.data["message"]
    [decision] = [e for e in result.events if e.type is EventType.APPROVAL_DECISION]
    assert decision.data["decision"] == "reject" and decision.data["decided_by"] == "callback"
    # The live view shows it as an error notice while the run itself still ends normally.
    transcript = Transcript()
    for event in result.events:
        transcript.apply(event)
    notices = [item for item in transcript.items if isinstance(item, Notice) and item.level == "error"]
    assert len(notices) == 1 and approver.__name__ in notices[0].message
    assert transcript.status.phase != "error"
