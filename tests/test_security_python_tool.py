"""The python tool, played by a hostile model: honest about its power, unable to unlock the run."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from agent_kernel import Agent, EventType, TerminationReason
from agent_kernel.guard._approvals import ApprovalRequest
from agent_kernel.models.scripted import ScriptedModel, tool_call
from agent_kernel.tools.builtin._python import python

from .helpers import of_type

_SAFETY_S = 60  # lets a stuck thread go if an assertion failed first; never asserted on

BYPASS = '''
import gc
for o in gc.get_objects():
    if type(o).__name__ == "Permissions":
        o.mode = "bypass"
        o.allow.append("bash")
"switched"
'''


def _approve_python_only(request: ApprovalRequest) -> Any:
    """Approves python calls; passes everything else on (nobody else answers: refused)."""
    return True if request.tool == "python" else None


def _agent(tmp_path: Any, model: ScriptedModel, **kwargs: Any) -> Agent:
    kwargs.setdefault("permissions", "default")
    return Agent(model, tools=["python", "bash"], journal=None, context=None, working_dir=tmp_path, **kwargs)


def _tampering(events: list[Any]) -> list[Any]:
    return [e for e in of_type(events, EventType.ERROR) if e.data["kind"] == "tampering"]


async def test_a_snippet_that_opens_the_gate_is_undone_and_the_next_bash_still_asks(tmp_path: Any) -> None:
    marker = tmp_path / "pwned"
    model = ScriptedModel([
        [tool_call("python", {"code": BYPASS}, id="p1")],
        [tool_call("bash", {"command": f"touch {marker}"}, id="b1")],
        "done",
    ])
    agent = _agent(tmp_path, model, approver=_approve_python_only)
    result = await agent.run("go")

    assert not marker.exists()
    assert agent.mode == "default" and agent.permissions.permissions.allow == []
    [error] = _tampering(result.events)
    assert error.data["call_id"] == "p1" and error.data["fatal"] is False
    assert any("mode" in c for c in error.data["changed"]) and any("allow" in c for c in error.data["changed"])
    results = {e.data["call_id"]: e.data for e in of_type(result.events, EventType.TOOL_RESULT)}
    assert results["p1"]["is_error"] and "restored" in results["p1"]["content"]
    assert results["b1"]["is_error"] and "needs approval" in results["b1"]["content"]
    # The run goes on to its answer: tampering refuses calls, it does not end the run.
    assert result.termination_reason is TerminationReason.END_TURN


async def test_a_background_thread_opening_the_gate_later_is_caught_before_the_next_call(tmp_path: Any) -> None:
    marker = tmp_path / "pwned"
    go, switched = threading.Event(), threading.Event()
    namespace: dict[str, Any] = {"__builtins__": __builtins__, "go": go, "switched": switched}
    delayed = '''
import gc, threading
def later():
    go.wait(60)
    for o in gc.get_objects():
        if type(o).__name__ == "RuleGate":
            o.approver = lambda request: True
    switched.set()
threading.Thread(target=later, daemon=True).start()
'''
    release = "go.set(); switched.wait(60); 'released'"
    model = ScriptedModel([
        [tool_call("python", {"code": delayed}, id="p1")],
        [tool_call("python", {"code": release}, id="p2")],
        [tool_call("bash", {"command": f"touch {marker}"}, id="b1")],
        "done",
    ])
    agent = _agent(tmp_path, model, approver=_approve_python_only)
    agent.tool_extras["namespace"] = namespace
    result = await agent.run("go")

    assert not marker.exists()
    assert agent.permissions.approver is _approve_python_only
    [error] = _tampering(result.events)
    assert any("approver" in c for c in error.data["changed"])
    assert not any(e.data["name"] == "bash" for e in of_type(result.events, EventType.TOOL_START))


async def test_a_snippet_cannot_turn_redaction_off(tmp_path: Any, monkeypatch: Any) -> None:
    secret = "sk-proj-Zq8XvB7nR4tW8yC1dK2m"
    monkeypatch.setenv("SERVICE_API_KEY", secret)
    blind = '''
import gc, os
for o in gc.get_objects():
    if type(o).__name__ == "Redactor":
        o._known.clear()
        o._watch = None
        o._table = type(o._table)({})
    if type(o).__name__ == "Emitter":
        o._redact = None
print(os.environ["SERVICE_API_KEY"])
'''
    model = ScriptedModel([
        [tool_call("python", {"code": blind}, id="p1")],
        [tool_call("bash", {"command": "echo $SERVICE_API_KEY"}, id="b1")],
        "done",
    ])
    agent = _agent(tmp_path, model, permissions="bypass")
    result = await agent.run("go")

    assert _tampering(result.events)
    for event in result.events:
        assert secret not in json.dumps(event.data)
    for request in model.requests:
        assert secret not in json.dumps([m.to_dict() for m in request.messages])
    assert "[REDACTED:SERVICE_API_KEY]" in of_type(result.events, EventType.TOOL_RESULT)[-1].data["content"]


async def test_cancel_interrupts_a_runaway_snippet_and_the_next_python_call_runs(tmp_path: Any) -> None:
    interrupted = threading.Event()
    namespace: dict[str, Any] = {"__builtins__": __builtins__, "interrupted": interrupted}
    spin = "try:\n    while True:\n        pass\nexcept KeyboardInterrupt:\n    interrupted.set()\n    raise"
    model = ScriptedModel([[tool_call("python", {"code": spin}, id="p1")], [tool_call("python", {"code": "40 + 2"}, id="p2")], "done"])
    agent = _agent(tmp_path, model, permissions="bypass")
    agent.tool_extras["namespace"] = namespace
    async for event in agent.stream("spin"):
        if event.type is EventType.TOOL_START:
            agent.cancel("runaway")
    assert of_type(agent.events, EventType.CANCELLED)[-1].data["reason"] == "runaway"
    # The snippet itself was stopped, as Ctrl-C stops a cell.
    assert await asyncio.to_thread(interrupted.wait, _SAFETY_S)

    after = await agent.run("again")
    [result] = [e for e in after.events if e.type is EventType.TOOL_RESULT]
    assert result.data["content"] == "42"


async def test_a_snippet_stuck_in_a_blocking_call_is_reported_and_does_not_block_the_next_one(tmp_path: Any) -> None:
    gate = threading.Event()
    namespace: dict[str, Any] = {"__builtins__": __builtins__, "gate": gate}
    model = ScriptedModel([
        [tool_call("python", {"code": f"gate.wait({_SAFETY_S})\n'late'"}, id="stuck")],
        [tool_call("python", {"code": "print('still works')"}, id="next")],
        "done",
    ])
    agent = _agent(tmp_path, model, permissions="bypass")
    agent.tool_extras["namespace"] = namespace
    try:
        async for event in agent.stream("block"):
            if event.type is EventType.TOOL_START:
                agent.cancel("stuck")
        cancelled = of_type(agent.events, EventType.CANCELLED)[-1]
        assert cancelled.data["still_running"] == [{"call_id": "stuck", "name": "python"}]

        after = await agent.run("next")
        [result] = [e for e in after.events if e.type is EventType.TOOL_RESULT]
        assert result.data["content"] == "still works" and not result.data["is_error"]
    finally:
        gate.set()


async def test_the_python_tool_says_it_can_do_anything_the_notebook_can(tmp_path: Any) -> None:
    assert "anything the notebook can" in python.description
    model = ScriptedModel([[tool_call("python", {"code": "1"}, id="p1")], "done"])
    seen: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        seen.append(request)
        return False

    result = await _agent(tmp_path, model, approver=approver).run("go")
    [required] = of_type(result.events, EventType.APPROVAL_REQUIRED)
    assert "anything the notebook can" in required.data["reason"]
    assert "anything the notebook can" in seen[0].reason
