"""Approvals that survive a dead process: resume, continue the interrupted turn, time out."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent_kernel import Agent, AgentEvent, EventType, TerminationReason, tool
from agent_kernel.errors import UserError
from agent_kernel.guard._approvals import Approval
from agent_kernel.journal import read_events
from agent_kernel.journal._resume import INTERRUPTED_RESULT, rebuild
from agent_kernel.models.scripted import ScriptedModel, Text, tool_call
from agent_kernel.tools._tool import ToolContext

from .helpers import make_agent, of_type

RAN: list[str] = []


@tool
def deploy(target: str) -> str:
    """Deploys to a target (not read-only, so default mode asks first)."""
    RAN.append(target)
    return f"deployed {target}"


@tool(read_only=True)
def look(what: str) -> str:
    """Looks at something (read-only: runs without asking)."""
    RAN.append(f"look {what}")
    return f"{what} looks fine"


@pytest.fixture(autouse=True)
def _fresh_log() -> None:
    RAN.clear()


async def died_waiting(tmp_path: Path, replies: list[object], tools: list[object] | None = None, **kwargs: object) -> Path:
    """Runs until a call waits for a person (or ``until`` holds), then keeps a copy of the journal
    as a process killed at that moment would have left it; returns the copy's path."""
    until = kwargs.pop("until", None)
    agent = make_agent(ScriptedModel(replies), tools or [deploy], journal=tmp_path / "live.jsonl", permissions="default", **kwargs)
    return await dies_during(agent, agent.run("deploy to staging"), until, tmp_path / "dead.jsonl")


async def dies_during(agent: Agent, run: Any, until: Any, copy: Path) -> Path:
    """Runs ``run`` (a coroutine of ``agent``) until a call waits for a person (or ``until(agent)``
    holds), copies the journal to ``copy`` as a process killed then would have left it, and stops
    the run; returns ``copy``."""
    agent.approvals.interactive = True  # a person would answer in the live view
    task = asyncio.create_task(run)
    while not (until(agent) if callable(until) else agent.approvals.pending):
        await asyncio.sleep(0.01)
    assert agent.journal is not None
    agent.journal.flush()
    shutil.copy(agent.journal.path, copy)
    agent.cancel()
    await task
    agent.close()
    return copy


async def test_a_resumed_agent_lists_the_approval_that_was_pending_when_the_process_died(tmp_path: Path) -> None:
    dead = await died_waiting(tmp_path, [tool_call("deploy", {"target": "staging"}, id="call_1"), "unused"])
    agent = Agent.resume(dead, model=ScriptedModel([]), tools=[deploy])
    [pending] = agent.pending_approvals
    assert (pending.call_id, pending.tool, pending.arguments) == ("call_1", "deploy", {"target": "staging"})
    assert pending.key == "deploy(staging)" and "asks before it runs" in pending.reason
    # The conversation ends with the model's call, held open for continue_run.
    assert agent.messages[-1].role == "assistant" and agent.messages[-1].tool_uses[0].id == "call_1"


async def test_continue_run_asks_again_runs_the_tool_once_and_does_not_repeat_the_model_call(tmp_path: Path) -> None:
    dead = await died_waiting(tmp_path, [tool_call("deploy", {"target": "staging"}, id="call_1"), "unused"])
    asked: list[str] = []
    model = ScriptedModel(["Deployed to staging."])
    agent = Agent.resume(dead, model=model, tools=[deploy], approver=lambda request: asked.append(request.call_id) or True)
    result = await agent.continue_run()
    assert asked == ["call_1"] and RAN == ["staging"]
    assert result.text == "Deployed to staging." and result.termination_reason is TerminationReason.END_TURN
    assert len(model.requests) == 1  # only the answer after the tool: the call that asked was not repeated
    # The model read the tool's real result, right after its own call.
    sent = model.requests[0].messages
    assert sent[-2].tool_uses[0].id == "call_1" and sent[-1].tool_results[0].content == "deployed staging"
    assert agent.pending_approvals == []


async def test_the_continued_run_is_journaled_so_the_session_resumes_to_the_same_conversation(tmp_path: Path) -> None:
    dead = await died_waiting(tmp_path, [tool_call("deploy", {"target": "staging"}, id="call_1"), "unused"])
    agent = Agent.resume(dead, model=ScriptedModel(["Deployed.", "Nothing else."]), tools=[deploy], approver=lambda r: True)
    await agent.continue_run()
    await agent.run("anything else?")
    agent.close()
    events = read_events(dead)
    [start] = [e for e in of_type(events, EventType.RUN_START) if e.data.get("continues")]
    assert start.data["continues"]["call_ids"] == ["call_1"] and start.data["prompt"] is None
    assert rebuild(events).messages == agent.messages
    again = Agent.resume(dead, model=ScriptedModel([]))
    assert again.messages == agent.messages and again.pending_approvals == []
    # One turn, not two: the continued run went on in the turn it was interrupted in.
    assert [t.turn_counter for t in again.history].count(0) == 2  # the first run's turn 0 and the second run's


async def test_a_rejection_after_resume_reaches_the_model_and_the_tool_never_runs(tmp_path: Path) -> None:
    dead = await died_waiting(tmp_path, [tool_call("deploy", {"target": "prod"}, id="call_1"), "unused"])
    model = ScriptedModel(["Understood, not deploying."])
    agent = Agent.resume(dead, model=model, tools=[deploy], approver=lambda r: Approval.reject("not on a Friday"))
    result = await agent.continue_run()
    assert RAN == [] and result.text == "Understood, not deploying."
    rejection = model.requests[0].messages[-1].tool_results[0]
    assert rejection.is_error and "not on a Friday" in rejection.content


async def test_a_call_that_had_started_is_answered_as_interrupted_and_not_run_again(tmp_path: Path) -> None:
    # look (read-only) ran to its result; deploy waited for approval; a second deploy had not started.
    replies = [
        tool_call("look", {"what": "logs"}, id="c_look"),
        tool_call("deploy", {"target": "a"}, id="c_a"),
        "unused",
    ]
    dead = await died_waiting(tmp_path, replies, [look, deploy])
    RAN.clear()
    model = ScriptedModel(["Done."])
    agent = Agent.resume(dead, model=model, tools=[look, deploy], approver=lambda r: True)
    await agent.continue_run()
    assert RAN == ["a"]  # only the call that waited ran; look's turn had finished before
    assert [b.content for b in model.requests[0].messages[-1].tool_results] == ["deployed a"]


async def test_a_started_call_without_a_result_gets_the_interrupted_error_and_the_rest_run(tmp_path: Path) -> None:
    # The process died while an approved call ran; the call after it had not started.
    gate = asyncio.Event()

    @tool(name="slow_deploy")
    async def slow_deploy(target: str) -> str:
        """Deploys slowly."""
        RAN.append(f"slow {target}")
        await gate.wait()
        return "never"

    def started(agent: Agent) -> bool:
        return any(e.type is EventType.TOOL_START for e in agent.events)

    replies = [[tool_call("slow_deploy", {"target": "x"}, id="c_slow"), tool_call("deploy", {"target": "b"}, id="c_b")], "unused"]
    dead = await died_waiting(tmp_path, replies, [slow_deploy, deploy], until=started, approver=lambda r: True)
    RAN.clear()
    model = ScriptedModel(["Partly done."])
    agent = Agent.resume(dead, model=model, tools=[slow_deploy, deploy], approver=lambda r: True)
    assert agent.pending_approvals == []  # nothing waited for a person, but the turn is open
    result = await agent.continue_run()
    assert RAN == ["b"]  # the call that had started is not run again
    results = {b.tool_use_id: b for b in model.requests[0].messages[-1].tool_results}
    assert results["c_slow"].content == INTERRUPTED_RESULT and results["c_slow"].is_error
    assert results["c_b"].content == "deployed b"
    synthetic = [e for e in result.events if e.type is EventType.TOOL_RESULT and e.data.get("synthetic")]
    assert [e.data["call_id"] for e in synthetic] == ["c_slow"]


async def test_a_new_prompt_after_resume_closes_the_interrupted_calls_instead(tmp_path: Path) -> None:
    dead = await died_waiting(tmp_path, [tool_call("deploy", {"target": "staging"}, id="call_1"), "unused"])
    model = ScriptedModel(["Fine, something else."])
    agent = Agent.resume(dead, model=model, tools=[deploy])
    await agent.run("never mind, do something else")
    assert RAN == []
    first = model.requests[0].messages[-1]
    assert first.tool_results[0].content == INTERRUPTED_RESULT and first.text.endswith("do something else")
    agent.close()
    assert rebuild(read_events(dead)).messages == agent.messages
    with pytest.raises(UserError, match="nothing to continue"):
        await agent.continue_run()


async def test_an_approval_nobody_answers_in_time_is_rejected_with_a_reason(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("deploy", {"target": "prod"}), "I did not deploy."])
    agent = make_agent(model, [deploy], approval_timeout=0.05, permissions="default")
    agent.approvals.interactive = True  # a person is asked, and never answers
    result = await agent.run("deploy")
    assert RAN == [] and result.text == "I did not deploy."
    [required] = of_type(result.events, EventType.APPROVAL_REQUIRED)
    assert required.data["timeout_s"] == 0.05 and required.data["expires_at"] > required.ts
    [decision] = of_type(result.events, EventType.APPROVAL_DECISION)
    assert (decision.data["decision"], decision.data["decided_by"]) == ("reject", "timeout")
    assert "within 0.05 s" in model.requests[1].messages[-1].tool_results[0].content
    assert agent.approvals.pending == []  # the card's question is withdrawn


def test_an_approval_timeout_must_be_a_positive_number() -> None:
    with pytest.raises(UserError, match="approval_timeout must be a positive, finite number"):
        make_agent(ScriptedModel([]), approval_timeout=0)
    with pytest.raises(UserError, match="approval_timeout must be a positive, finite number"):
        make_agent(ScriptedModel([]), approval_timeout=float("inf"))  # the journal could not hold it as JSON
    agent = make_agent(ScriptedModel([]))
    agent.approval_timeout = 30
    assert agent.approval_timeout == 30.0
    agent.approval_timeout = None
    assert agent.approval_timeout is None


def kill_while_an_approval_waits(base_url: str, journal: Path, *args: str) -> None:
    """Runs ``tests.durable_child`` until its journal records an ``approval_required``, then SIGKILLs it."""
    child = subprocess.Popen([sys.executable, "-m", "tests.durable_child", base_url, str(journal), *args], cwd=Path(__file__).parents[1])
    try:
        deadline = time.monotonic() + 120
        while not (journal.exists() and '"approval_required"' in journal.read_text(encoding="utf-8")):
            assert child.poll() is None, "the child process ended before asking for approval"
            assert time.monotonic() < deadline, "the child never asked for approval"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()


def test_a_process_killed_while_an_approval_waits_is_resumed_approved_and_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from .durable_child import claude
    from .durable_child import deploy as deploy_for_real
    from .fakes.server import FakeProvider
    from .fakes.turns import turn

    log = tmp_path / "deploys.log"
    journal = tmp_path / "session.jsonl"
    monkeypatch.setenv("DEPLOY_LOG", str(log))
    with FakeProvider() as server:
        server.script(turn(calls=[("toolu_1", "deploy", {"target": "staging"})]), turn("Deployed to staging."))
        kill_while_an_approval_waits(server.url, journal)
        assert not log.exists()  # nothing ran before the kill

        agent = Agent.resume(journal, model=claude(server.url), tools=[deploy_for_real], approver=lambda request: True)
        assert [p.call_id for p in agent.pending_approvals] == ["toolu_1"]
        result = agent.continue_run_sync()
        agent.close()
        assert result.text == "Deployed to staging." and result.termination_reason is TerminationReason.END_TURN
        assert log.read_text(encoding="utf-8") == "staging\n"  # the tool ran exactly once
        assert len(server.requests) == 2 and server.rejected == []  # the call that asked was not repeated
        answer = server.bodies[1]["messages"][-1]["content"][0]
        assert (answer["type"], answer["tool_use_id"], answer["content"]) == ("tool_result", "toolu_1", "deployed staging")


def test_a_process_killed_while_a_sub_agents_approval_waits_is_resumed_and_the_sub_agent_finishes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from .durable_child import claude, deployer
    from .fakes.server import FakeProvider
    from .fakes.turns import turn

    log = tmp_path / "deploys.log"
    journal = tmp_path / "session.jsonl"
    monkeypatch.setenv("DEPLOY_LOG", str(log))
    with FakeProvider() as server:
        server.script(
            turn(calls=[("toolu_lead", "deployer", {"instructions": "Deploy to staging."})]),  # the lead delegates
            turn(calls=[("toolu_sub", "deploy", {"target": "staging"})]),  # the deployer asks to deploy
            turn("Deployed staging."),  # the deployer, after its tool
            turn("The deployer deployed staging."),  # the lead, after its sub-agent
        )
        kill_while_an_approval_waits(server.url, journal, "--subagent")
        assert not log.exists() and len(server.requests) == 2

        agent = Agent.resume(journal, model=claude(server.url), tools=[deployer(server.url).as_tool()], approver=lambda request: True)
        assert [(p.call_id, p.tool) for p in agent.pending_approvals] == [("toolu_sub", "deploy")]
        result = agent.continue_run_sync()
        agent.close()
        assert result.text == "The deployer deployed staging." and result.termination_reason is TerminationReason.END_TURN
        assert log.read_text(encoding="utf-8") == "staging\n"  # the tool ran exactly once
        assert len(server.requests) == 4 and server.rejected == []  # no model call was repeated
        sub_answer = server.bodies[2]["messages"]  # the deployer's conversation, continued
        assert sub_answer[0]["content"] in ("Deploy to staging.", [{"type": "text", "text": "Deploy to staging."}])
        assert sub_answer[-1]["content"][0]["tool_use_id"] == "toolu_sub" and sub_answer[-1]["content"][0]["content"] == "deployed staging"
        lead_answer = server.bodies[3]["messages"][-1]["content"][0]
        assert (lead_answer["tool_use_id"], lead_answer["content"]) == ("toolu_lead", "Deployed staging.")


async def test_compacting_a_session_with_an_open_turn_says_how_to_finish_it_first(tmp_path: Path) -> None:
    dead = await died_waiting(tmp_path, [tool_call("deploy", {"target": "staging"}, id="call_1"), "unused"])
    agent = Agent.resume(dead, model=ScriptedModel([]), tools=[deploy])
    with pytest.raises(UserError, match="continue_run"):
        await agent.compact()
    assert agent.interrupted is not None  # nothing was lost: the turn can still be finished


async def test_arguments_that_were_not_json_are_refused_again_after_resume_never_run(tmp_path: Path) -> None:
    replies = [[tool_call("deploy", {"target": "prod"}, id="c1"), tool_call("deploy", '{"target": tru', id="c2")], "unused"]
    dead = await died_waiting(tmp_path, replies)
    model = ScriptedModel(["Only prod."])
    agent = Agent.resume(dead, model=model, tools=[deploy], approver=lambda r: True)
    await agent.continue_run()
    assert RAN == ["prod"]
    refused = model.requests[0].messages[-1].tool_results[1]
    assert refused.is_error and "not valid JSON" in refused.content


async def test_a_call_with_effects_is_journaled_as_started_before_its_body_runs(tmp_path: Path) -> None:
    dead = tmp_path / "dead.jsonl"

    @tool(name="deploy")
    async def deploy_and_die(target: str) -> str:
        """Deploys, and the process dies inside the call (the journal is copied at that moment)."""
        RAN.append(target)
        shutil.copy(tmp_path / "live.jsonl", dead)  # no await before: the loop had no chance to drain
        return "deployed"

    agent = make_agent(ScriptedModel([tool_call("deploy", {"target": "prod"}, id="c1"), "Done."]), [deploy_and_die],
                       journal=tmp_path / "live.jsonl", permissions="default", approver=lambda r: True)
    await agent.run("deploy")
    types_at_death = [e.type for e in read_events(dead)]
    assert EventType.APPROVAL_DECISION in types_at_death and types_at_death[-1] is EventType.TOOL_START
    resumed = Agent.resume(dead, model=ScriptedModel(["It may have deployed."]), tools=[deploy_and_die], approver=lambda r: True)
    await resumed.continue_run()
    assert RAN == ["prod"]  # answered as interrupted, not run a second time


async def test_a_continued_run_stopped_at_its_start_closes_the_turn_as_the_journal_does(tmp_path: Path) -> None:
    import contextlib

    dead = await died_waiting(tmp_path, [tool_call("deploy", {"target": "staging"}, id="call_1"), "unused"])
    agent = Agent.resume(dead, model=ScriptedModel(["Carrying on."]), tools=[deploy])
    async with contextlib.aclosing(agent.stream(None)) as stream:
        async for _ in stream:
            break  # Stop pressed at once
    assert agent.interrupted is None and RAN == []
    await agent.run("carry on")
    agent.close()
    assert rebuild(read_events(dead)).messages == agent.messages


async def test_an_answer_that_lands_as_the_deadline_passes_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_kernel.guard._approvals import ApprovalBroker

    withdraw = ApprovalBroker.withdraw

    def answered_first(broker: ApprovalBroker, call_id: str, **kwargs: object) -> bool:
        broker.resolve(call_id, True)  # the click arrives just before the deadline takes the question back
        return withdraw(broker, call_id, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ApprovalBroker, "withdraw", answered_first)
    agent = make_agent(ScriptedModel([tool_call("deploy", {"target": "prod"}), "Deployed."]), [deploy], approval_timeout=0.01, permissions="default")
    agent.approvals.interactive = True
    result = await agent.run("deploy")
    assert RAN == ["prod"]
    [decision] = of_type(result.events, EventType.APPROVAL_DECISION)
    assert (decision.data["decision"], decision.data["decided_by"]) == ("approve", "person")


# ---- a sub-agent's approval ------------------------------------------------------------------


def deployer(model: ScriptedModel) -> Agent:
    """A sub-agent that deploys: its deploy calls go through the lead's permission gate."""
    return Agent(model, tools=[deploy], name="deployer", system="You deploy.", journal=None, context=None)


async def died_in_a_sub_agent(tmp_path: Path) -> Path:
    """The lead delegates to the deployer, whose deploy call waits for a person when the process dies."""
    worker = deployer(ScriptedModel([tool_call("deploy", {"target": "staging"}, id="sub_1"), "unused"]))
    return await died_waiting(tmp_path, [tool_call("deployer", {"instructions": "Deploy to staging."}, id="lead_1"), "unused"], [worker.as_tool()])


async def test_a_sub_agents_pending_approval_survives_and_the_sub_agent_finishes_its_own_turn(tmp_path: Path) -> None:
    dead = await died_in_a_sub_agent(tmp_path)
    asked: list[str] = []
    worker_model, lead_model = ScriptedModel(["Deployed staging."]), ScriptedModel(["The deployer deployed staging."])
    agent = Agent.resume(dead, model=lead_model, tools=[deployer(worker_model).as_tool()], approver=lambda r: asked.append(r.call_id) or True)
    assert [(p.call_id, p.tool) for p in agent.pending_approvals] == [("sub_1", "deploy")]
    result = await agent.continue_run()
    assert asked == ["sub_1"] and RAN == ["staging"]
    assert result.text == "The deployer deployed staging." and result.termination_reason is TerminationReason.END_TURN
    # Neither model call that asked for a tool is repeated: each model is asked once, after it.
    assert len(worker_model.requests) == 1 and len(lead_model.requests) == 1
    worker_sent = worker_model.requests[0].messages
    assert worker_sent[0].text == "Deploy to staging." and worker_sent[-2].tool_uses[0].id == "sub_1"
    assert worker_sent[-1].tool_results[0].content == "deployed staging"
    assert lead_model.requests[0].messages[-1].tool_results[0].content == "Deployed staging."
    agent.close()
    events = read_events(dead)
    starts = of_type(events, EventType.SUBAGENT_START)
    assert len({e.data["agent_id"] for e in starts}) == 1 and starts[-1].data.get("continues") is True  # one sub-agent, picked up
    assert [e.data["reason"] for e in of_type(events, EventType.SUBAGENT_FINISH)] == ["end_turn"]
    again = Agent.resume(dead, model=ScriptedModel([]), tools=[deployer(ScriptedModel([])).as_tool()])
    assert again.messages == agent.messages and again.interrupted is None and again.pending_approvals == []


async def test_a_sub_agents_call_rejected_after_resume_is_read_by_the_sub_agent_and_never_runs(tmp_path: Path) -> None:
    dead = await died_in_a_sub_agent(tmp_path)
    worker_model, lead_model = ScriptedModel(["Not deploying, as told."]), ScriptedModel(["It did not deploy."])
    agent = Agent.resume(dead, model=lead_model, tools=[deployer(worker_model).as_tool()], approver=lambda r: Approval.reject("freeze"))
    result = await agent.continue_run()
    assert RAN == [] and result.text == "It did not deploy."
    rejection = worker_model.requests[0].messages[-1].tool_results[0]
    assert rejection.is_error and "freeze" in rejection.content
    assert lead_model.requests[0].messages[-1].tool_results[0].content == "Not deploying, as told."


async def test_a_new_prompt_after_resume_closes_the_sub_agents_call_as_interrupted(tmp_path: Path) -> None:
    dead = await died_in_a_sub_agent(tmp_path)
    lead_model = ScriptedModel(["Starting over."])
    agent = Agent.resume(dead, model=lead_model, tools=[deployer(ScriptedModel([])).as_tool()])
    await agent.run("Never mind.")
    closed = lead_model.requests[0].messages[-1].tool_results[0]
    assert (closed.tool_use_id, closed.content, closed.is_error) == ("lead_1", INTERRUPTED_RESULT, True) and RAN == []


async def test_a_sub_agent_left_behind_by_an_earlier_crash_is_never_picked_up_by_a_later_call_of_the_same_id(tmp_path: Path) -> None:
    # Call ids repeat (an OpenAI-compatible server that sends none gets call_0, call_1, ... per response).
    first = deployer(ScriptedModel([tool_call("deploy", {"target": "staging"}, id="sub_1"), "unused"]))
    dead = await died_waiting(tmp_path, [tool_call("deployer", {"instructions": "Deploy to staging."}, id="call_0"), "unused"], [first.as_tool()])
    # Resumed with a new prompt, which closes that call; the lead delegates again under the same
    # id, and the process dies while the new deployer's model still streams.
    streaming = deployer(ScriptedModel([[Text("Checking prod... " * 50, chunk=5, delay=0.05)]]))
    lead = ScriptedModel([tool_call("deployer", {"instructions": "Only check prod."}, id="call_0"), "unused"])
    agent = Agent.resume(dead, model=lead, tools=[streaming.as_tool()], permissions="default")
    streams = lambda a: any(e.type is EventType.TEXT_DELTA and e.agent_id for e in a.events)  # noqa: E731
    dead_again = await dies_during(agent, agent.run("Never mind staging; have prod checked."), streams, tmp_path / "dead-again.jsonl")
    RAN.clear()
    checker = ScriptedModel(["Prod looks fine."])
    again = Agent.resume(dead_again, model=ScriptedModel(["Prod is fine."]), tools=[deployer(checker).as_tool()], approver=lambda r: True)
    assert again.pending_approvals == []  # the staging deploy the person called off is not asked again
    result = await again.continue_run()
    assert RAN == [] and result.text == "Prod is fine."
    # The deployer that goes on is the one of the new call, with its task, asked again.
    assert [m.text for m in checker.requests[0].messages] == ["Only check prod."]


async def test_a_call_that_started_two_sub_agents_is_answered_interrupted_and_runs_neither_again(tmp_path: Path) -> None:
    from agent_kernel.team._subagents import run_subagent

    workers = {name: deployer(ScriptedModel([tool_call("deploy", {"target": name}, id=f"{name}_1"), "unused"])) for name in ("a", "b")}

    @tool(read_only=True)
    async def fan_out(ctx: ToolContext) -> str:
        """Deploys to a and b at once, through two sub-agents."""
        results = await asyncio.gather(*(run_subagent(w, f"deploy {n}", _run_of(ctx), name=f"w{n}", call_id=ctx.call_id) for n, w in workers.items()))
        return ", ".join(r.text for r in results)

    dead = await died_waiting(tmp_path, [tool_call("fan_out", {}, id="call_f"), "unused"], [fan_out], until=lambda a: len(a.approvals.pending) == 2)
    RAN.clear()
    agent = Agent.resume(dead, model=ScriptedModel(["It was cut off."]), tools=[fan_out], approver=lambda r: True)
    assert agent.pending_approvals == []  # neither can be told apart from the other under one call
    await agent.continue_run()
    assert RAN == []


async def test_a_damaged_sub_agent_record_costs_only_its_continuation(tmp_path: Path) -> None:
    dead = await died_in_a_sub_agent(tmp_path)
    lines = dead.read_text(encoding="utf-8").splitlines(keepends=True)
    damaged = [line.replace('"turn_counter"', '"turn_countr"') if '"agent_id":"deployer-' in line and '"type":"iteration_start"' in line else line for line in lines]
    assert damaged != lines
    dead.write_text("".join(damaged), encoding="utf-8")
    lead = ScriptedModel(["It was cut off."])
    agent = Agent.resume(dead, model=lead, tools=[deployer(ScriptedModel([])).as_tool()], approver=lambda r: True)
    assert agent.pending_approvals == []
    await agent.continue_run()
    assert RAN == [] and lead.requests[0].messages[-1].tool_results[0].content == INTERRUPTED_RESULT


async def test_a_sub_agent_whose_tool_is_not_given_again_is_not_listed_and_its_call_is_answered_interrupted(tmp_path: Path) -> None:
    dead = await died_in_a_sub_agent(tmp_path)
    lead = ScriptedModel(["It was cut off."])
    agent = Agent.resume(dead, model=lead, approver=lambda r: True)  # as a kernel that has not defined it yet
    assert agent.pending_approvals == []
    await agent.continue_run()
    assert RAN == [] and lead.requests[0].messages[-1].tool_results[0].content == INTERRUPTED_RESULT


def _run_of(ctx: ToolContext) -> Any:
    assert ctx.run is not None
    return ctx.run


async def test_a_sub_agent_of_a_sub_agent_finishes_its_turn_and_each_level_is_asked_once_more(tmp_path: Path) -> None:
    def level(name: str, model: ScriptedModel, tools: list[Any]) -> Agent:
        return Agent(model, tools=tools, name=name, journal=None, context=None)

    inner = level("inner", ScriptedModel([tool_call("deploy", {"target": "staging"}, id="in_1"), "unused"]), [deploy])
    middle = level("middle", ScriptedModel([tool_call("inner", {"instructions": "Deploy staging."}, id="mid_1"), "unused"]), [inner.as_tool()])
    dead = await died_waiting(tmp_path, [tool_call("middle", {"instructions": "Have staging deployed."}, id="lead_1"), "unused"], [middle.as_tool()])
    models = {name: ScriptedModel([f"{name} done"]) for name in ("inner", "middle", "lead")}
    again_middle = level("middle", models["middle"], [level("inner", models["inner"], [deploy]).as_tool()])
    agent = Agent.resume(dead, model=models["lead"], tools=[again_middle.as_tool()], approver=lambda r: True)
    assert [p.call_id for p in agent.pending_approvals] == ["in_1"]
    result = await agent.continue_run()
    assert RAN == ["staging"] and result.text == "lead done"
    assert [len(m.requests) for m in models.values()] == [1, 1, 1]  # every level asked once, after its call
    assert models["middle"].requests[0].messages[-1].tool_results[0].content == "inner done"


async def test_a_sub_agent_whose_model_was_answering_when_the_process_died_is_asked_again_and_finishes(tmp_path: Path) -> None:
    # The deployer looked at the logs (its tool ran and its turn was recorded), then died while its
    # model streamed the next answer.
    first = Agent(ScriptedModel([tool_call("look", {"what": "logs"}, id="look_1"), [Text("The logs say " * 40, chunk=5, delay=0.05)]]),
                  tools=[look], name="deployer", journal=None, context=None)
    lead = [tool_call("deployer", {"instructions": "Check the logs."}, id="lead_1"), "unused"]
    streaming = lambda a: any(e.type is EventType.TEXT_DELTA and e.agent_id for e in a.events)  # noqa: E731
    dead = await died_waiting(tmp_path, lead, [first.as_tool()], until=streaming)
    assert RAN == ["look logs"]
    worker_model, lead_model = ScriptedModel(["The logs are clean."]), ScriptedModel(["All clear."])
    again = Agent(worker_model, tools=[look], name="deployer", journal=None, context=None)
    agent = Agent.resume(dead, model=lead_model, tools=[again.as_tool()])
    assert agent.interrupted is not None and agent.pending_approvals == []
    result = await agent.continue_run()
    assert result.text == "All clear." and RAN == ["look logs"]  # its tool is not run again
    sent = worker_model.requests[0].messages  # its conversation as recorded: the answer in flight never completed
    assert [m.role for m in sent] == ["user", "assistant", "user"] and sent[-1].tool_results[0].content == "logs looks fine"
    assert lead_model.requests[0].messages[-1].tool_results[0].content == "The logs are clean."
    agent.close()
    assert Agent.resume(dead, model=ScriptedModel([])).messages == agent.messages


async def test_a_sub_agent_past_its_first_turn_survives_a_second_crash_during_its_continuation(tmp_path: Path) -> None:
    def looker_deployer(model: ScriptedModel) -> Agent:
        return Agent(model, tools=[look, deploy], name="deployer", journal=None, context=None)

    first = looker_deployer(ScriptedModel([tool_call("look", {"what": "logs"}, id="look_1"), tool_call("deploy", {"target": "staging"}, id="dep_1"), "unused"]))
    dead = await died_waiting(tmp_path, [tool_call("deployer", {"instructions": "Deploy."}, id="lead_1"), "unused"], [first.as_tool()])
    # The second process continues, and dies while the same approval waits again.
    second = Agent.resume(dead, model=ScriptedModel(["unused"]), tools=[looker_deployer(ScriptedModel(["unused"])).as_tool()], permissions="default")
    dead_again = await dies_during(second, second.continue_run(), None, tmp_path / "dead-again.jsonl")
    RAN.clear()
    worker_model, lead_model = ScriptedModel(["Deployed."]), ScriptedModel(["Done."])
    third = Agent.resume(dead_again, model=lead_model, tools=[looker_deployer(worker_model).as_tool()], approver=lambda r: True)
    assert [p.call_id for p in third.pending_approvals] == ["dep_1"]
    await third.continue_run()
    assert RAN == ["staging"] and len(worker_model.requests) == 1
    assert lead_model.requests[0].messages[-1].tool_results[0].content == "Deployed."


async def test_a_sub_agent_going_on_from_an_answer_cut_at_max_tokens_is_not_continued_so_no_half_answer_reaches_the_lead(tmp_path: Path) -> None:
    from agent_kernel.models.scripted import stop

    first = Agent(ScriptedModel([[Text("PART ONE. "), stop("max_tokens")], [Text("more " * 80, chunk=5, delay=0.05)]]), name="writer", journal=None, context=None)
    going_on = lambda a: any(e.type is EventType.CONTINUATION for e in a.events) and any(  # noqa: E731
        e.type is EventType.TEXT_DELTA and e.agent_id and "more" in e.data["text"] for e in a.events)
    dead = await died_waiting(tmp_path, [tool_call("writer", {"instructions": "Write."}, id="lead_1"), "unused"], [first.as_tool()], until=going_on)
    writer_model, lead_model = ScriptedModel(["PART TWO."]), ScriptedModel(["It was cut off."])
    agent = Agent.resume(dead, model=lead_model, tools=[Agent(writer_model, name="writer", journal=None, context=None).as_tool()])
    await agent.continue_run()
    assert writer_model.requests == []  # the first part said is not in its conversation: asking again would lose it
    assert lead_model.requests[0].messages[-1].tool_results[0].content == INTERRUPTED_RESULT


async def test_a_sub_agent_whose_run_had_ended_is_not_run_again(tmp_path: Path) -> None:
    from agent_kernel.models.scripted import fail

    checker = Agent(ScriptedModel([tool_call("look", {"what": "logs"}, id="look_1"), [fail("auth", "bad key")]]),
                    tools=[look], name="checker", journal=None, context=None)
    live = make_agent(ScriptedModel([tool_call("checker", {"instructions": "Check."}, id="lead_1"), "unused"]), [checker.as_tool()], journal=tmp_path / "live.jsonl")
    await live.run("go")
    live.close()
    # The process died after the sub-agent recorded its run's end, before its subagent_finish.
    lines = (tmp_path / "live.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    end = next(i for i, line in enumerate(lines) if '"type":"run_finish"' in line and '"agent_id":"checker-' in line)
    dead = tmp_path / "dead.jsonl"
    dead.write_text("".join(lines[: end + 1]), encoding="utf-8")
    again_model, lead_model = ScriptedModel(["asked again"]), ScriptedModel(["It stopped."])
    agent = Agent.resume(dead, model=lead_model, tools=[Agent(again_model, tools=[look], name="checker", journal=None, context=None).as_tool()])
    await agent.continue_run()
    assert again_model.requests == [] and lead_model.requests[0].messages[-1].tool_results[0].content == INTERRUPTED_RESULT


def test_the_view_strikes_out_what_a_sub_agent_was_writing_when_its_process_died() -> None:
    from agent_kernel.jupyter._items import TextBlock
    from agent_kernel.jupyter._transcript import Transcript

    def event(seq: int, kind: EventType, data: dict[str, Any], agent: str | None = "w-1") -> AgentEvent:
        return AgentEvent(seq=seq, ts=float(seq), session_id="s", run_id="r", turn_id="t", parent_turn_id=None, agent_id=agent, type=kind, data=data, iteration=0)

    start = {"agent_id": "w-1", "name": "writer", "parent_agent_id": None, "parent_call_id": "c1", "parent_turn_id": "t", "prompt": "Write.", "model": "m"}
    view = Transcript()
    for e in [event(1, EventType.SUBAGENT_START, start), event(2, EventType.TEXT_DELTA, {"text": "The l"}),  # the process dies here
              event(3, EventType.SUBAGENT_START, {**start, "continues": True}), event(4, EventType.TEXT_DELTA, {"text": "Logs clean."})]:
        view.apply(e)
    blocks = [(b.text, b.discarded) for b in view.items if isinstance(b, TextBlock)]
    assert blocks == [("The l", True), ("Logs clean.", False)]


async def test_a_sub_agent_whose_stop_was_recorded_as_its_kernel_went_down_still_goes_on(tmp_path: Path) -> None:
    # A kernel restart first stops the cell's run: the sub-agent records its stop (a synthetic
    # result for the waiting call, cancelled, run_finish), and the process is gone before its lead
    # records anything. The lead's call is still open, so the sub-agent died at work.
    dead = await died_in_a_sub_agent(tmp_path)
    kept = dead.read_text(encoding="utf-8").splitlines(keepends=True)
    later = (tmp_path / "live.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[len(kept):]
    stop = [line for line in later if '"agent_id":"deployer-' in line and any(f'"type":"{t}"' in line for t in ("tool_result", "cancelled", "run_finish"))]
    assert len(stop) == 3 and '"synthetic":true' in stop[0] and '"user_interrupt"' in stop[2]
    dead.write_text("".join(kept + stop), encoding="utf-8")
    worker_model, lead_model = ScriptedModel(["Deployed staging."]), ScriptedModel(["Done."])
    agent = Agent.resume(dead, model=lead_model, tools=[deployer(worker_model).as_tool()], approver=lambda r: True)
    assert [p.call_id for p in agent.pending_approvals] == ["sub_1"]
    await agent.continue_run()
    assert RAN == ["staging"] and lead_model.requests[0].messages[-1].tool_results[0].content == "Deployed staging."
    assert worker_model.requests[0].messages[-1].tool_results[0].content == "deployed staging"  # not the stop's result
    agent.close()
    again = Agent.resume(dead, model=ScriptedModel([]), tools=[deployer(ScriptedModel([])).as_tool()])
    assert again.messages == agent.messages and again.interrupted is None


# ---- a stop as the process goes down -----------------------------------------------------


async def stopped_waiting(tmp_path: Path, replies: list[object], tools: list[object] | None = None, *,
                          keep_calls_open: bool, until: Any = None, **kwargs: Any) -> tuple[Agent, Path]:
    """Runs until a call waits for a person (or ``until`` holds), then stops the run as a kernel
    shutting down does (``keep_calls_open``) or as a person does; returns the stopped agent and
    its journal."""
    agent = make_agent(ScriptedModel(replies), tools or [deploy], journal=tmp_path / "stopped.jsonl", permissions="default", **kwargs)
    agent.approvals.interactive = True
    task = asyncio.create_task(agent.run("deploy to staging"))
    while not (until(agent) if callable(until) else agent.approvals.pending):
        await asyncio.sleep(0.01)
    agent.cancel("the kernel shut down", keep_calls_open=keep_calls_open)
    await task
    agent.close()
    assert agent.journal is not None
    return agent, Path(agent.journal.path)


async def test_a_stop_as_the_kernel_shuts_down_keeps_the_waiting_approval_for_a_resumed_agent(tmp_path: Path) -> None:
    live, path = await stopped_waiting(tmp_path, [tool_call("deploy", {"target": "staging"}, id="call_1"), "unused"], keep_calls_open=True)
    [cancelled] = of_type(read_events(path), EventType.CANCELLED)
    assert cancelled.data["keeps_calls_open"] is True
    answer = ScriptedModel(["Deployed."])
    agent = Agent.resume(path, model=answer, tools=[deploy], approver=lambda r: True)
    assert [p.call_id for p in agent.pending_approvals] == ["call_1"]
    result = await agent.continue_run()
    assert RAN == ["staging"] and result.text == "Deployed."
    assert answer.requests[0].messages[-1].tool_results[0].content == "deployed staging"  # not the stop's answer


async def test_a_stop_by_a_person_answers_the_waiting_approval_for_good(tmp_path: Path) -> None:
    live, path = await stopped_waiting(tmp_path, [tool_call("deploy", {"target": "staging"}, id="call_1"), "unused"], keep_calls_open=False)
    assert "keeps_calls_open" not in of_type(read_events(path), EventType.CANCELLED)[0].data
    agent = Agent.resume(path, model=ScriptedModel([]), tools=[deploy])
    assert agent.pending_approvals == [] and agent.interrupted is None
    assert agent.messages == live.messages  # the stop's answers, as the live agent had them


async def test_a_new_prompt_after_a_kept_stop_answers_the_calls_as_the_live_agent_did(tmp_path: Path) -> None:
    live, path = await stopped_waiting(tmp_path, [tool_call("deploy", {"target": "staging"}, id="call_1"), "unused"], keep_calls_open=True)
    after = ScriptedModel(["Not deploying."])
    agent = Agent.resume(path, model=after, tools=[deploy])
    await agent.run("Never mind.")
    assert RAN == []
    # The history the model reads is the live agent's, then the new prompt joined to the stop's answer.
    sent = after.requests[0].messages
    assert list(sent[:-1]) == live.messages[:-1]
    assert sent[-1].tool_results == live.messages[-1].tool_results and sent[-1].text.endswith("Never mind.")


async def test_a_stop_cut_short_by_the_process_dying_does_not_answer_the_waiting_approval(tmp_path: Path) -> None:
    # The stop's first record (the call's synthetic result) reached the journal; nothing after it.
    _, path = await stopped_waiting(tmp_path, [tool_call("deploy", {"target": "staging"}, id="call_1"), "unused"], keep_calls_open=False)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = next(n for n, line in enumerate(lines) if '"synthetic":true' in line) + 1
    path.write_text("".join(lines[:cut]), encoding="utf-8")
    agent = Agent.resume(path, model=ScriptedModel(["Deployed."]), tools=[deploy], approver=lambda r: True)
    assert [p.call_id for p in agent.pending_approvals] == ["call_1"]
    await agent.continue_run()
    assert RAN == ["staging"]


async def test_a_sub_agents_approval_survives_a_stop_as_the_kernel_shuts_down(tmp_path: Path) -> None:
    worker = deployer(ScriptedModel([tool_call("deploy", {"target": "staging"}, id="sub_1"), "unused"]))
    _, path = await stopped_waiting(tmp_path, [tool_call("deployer", {"instructions": "Deploy to staging."}, id="lead_1"), "unused"],
                                    [worker.as_tool()], keep_calls_open=True)
    events = read_events(path)
    assert [e.data.get("keeps_calls_open") for e in of_type(events, EventType.CANCELLED)] == [True, True]  # the sub-agent's, then the lead's
    worker_model, lead_model = ScriptedModel(["Deployed staging."]), ScriptedModel(["The deployer deployed staging."])
    agent = Agent.resume(path, model=lead_model, tools=[deployer(worker_model).as_tool()], approver=lambda r: True)
    assert [(p.call_id, p.tool) for p in agent.pending_approvals] == [("sub_1", "deploy")]
    result = await agent.continue_run()
    assert RAN == ["staging"] and result.text == "The deployer deployed staging."
    assert len(worker_model.requests) == 1 and len(lead_model.requests) == 1


async def test_a_call_rejected_in_a_continued_run_stays_rejected_after_a_second_stop(tmp_path: Path) -> None:
    calls = [tool_call("look", {"what": "logs"}, id="c_look"), tool_call("deploy", {"target": "a"}, id="c_a"),
             tool_call("deploy", {"target": "b"}, id="c_b")]
    _, path = await stopped_waiting(tmp_path, [calls, "unused"], [look, deploy], keep_calls_open=True)
    RAN.clear()
    # The next process rejects c_a, then goes down too while c_b waits.
    second = Agent.resume(path, model=ScriptedModel(["unused"]), tools=[look, deploy], permissions="default")
    second.approvals.interactive = True
    task = asyncio.create_task(second.continue_run())
    while [p.call_id for p in second.approvals.pending] != ["c_a"]:
        await asyncio.sleep(0.01)
    second.approvals.resolve("c_a", Approval.reject("not a"))
    while [p.call_id for p in second.approvals.pending] != ["c_b"]:
        await asyncio.sleep(0.01)
    second.cancel("the kernel shut down", keep_calls_open=True)
    await task
    second.close()

    answer = ScriptedModel(["Deployed b only."])
    third = Agent.resume(path, model=answer, tools=[look, deploy], approver=lambda r: True)
    assert [p.call_id for p in third.pending_approvals] == ["c_b"]  # the latest answer for c_a wins
    await third.continue_run()
    assert RAN == ["b"]
    results = {b.tool_use_id: b.content for b in answer.requests[0].messages[-1].tool_results}
    assert results["c_a"] == "The user rejected this call: not a" and results["c_b"] == "deployed b"


async def test_a_stop_that_keeps_calls_open_mid_answer_leaves_nothing_of_that_answer_to_run(tmp_path: Path) -> None:
    # The deploy call is whole, but the model still streams: the loop holds the call until the
    # answer completes, so a process dying here never ran it, and resuming must not either.
    streaming = [tool_call("deploy", {"target": "prod"}, id="c1"), Text("and then I will also " * 40, chunk=4, delay=0.02)]
    _, path = await stopped_waiting(tmp_path, [streaming, "unused"], keep_calls_open=True,
                                    until=lambda a: any(e.type is EventType.TEXT_DELTA for e in a.events))
    agent = Agent.resume(path, model=ScriptedModel([]), tools=[deploy], approver=lambda r: True)
    assert agent.interrupted is None and agent.messages[-1].role == "user"  # as after a crash there
    assert RAN == []


async def test_a_stop_during_a_retry_wait_forgets_the_failed_attempts_answer(tmp_path: Path) -> None:
    from agent_kernel.models.scripted import fail

    failing = [tool_call("deploy", {"target": "prod"}, id="c1"), fail("server")]
    agent = make_agent(ScriptedModel([failing, "unused"]), [deploy], journal=tmp_path / "retry.jsonl", retry_base_delay=30.0)
    task = asyncio.create_task(agent.run("deploy to prod"))
    while not any(e.type is EventType.RETRY for e in agent.events):
        await asyncio.sleep(0.01)
    agent.cancel("the kernel shut down", keep_calls_open=True)
    await task
    agent.close()
    assert rebuild(read_events(tmp_path / "retry.jsonl")).messages == agent.messages  # the prompt alone
    resumed = Agent.resume(tmp_path / "retry.jsonl", model=ScriptedModel([]), tools=[deploy])
    assert resumed.interrupted is None and RAN == []


async def test_a_failure_while_stopping_does_not_undo_keeping_the_calls_open(tmp_path: Path) -> None:
    from agent_kernel.runtime._state import LoopState

    def sink_down(old: Any, new: Any) -> None:
        if new is LoopState.COMPLETED:
            raise RuntimeError("metrics sink down")

    _, path = await stopped_waiting(tmp_path, [tool_call("deploy", {"target": "a"}, id="c_a"), "unused"],
                                    keep_calls_open=True, on_state_change=sink_down)
    assert [e.type for e in read_events(path)][-3:] == [EventType.CANCELLED, EventType.ERROR, EventType.RUN_FINISH]
    agent = Agent.resume(path, model=ScriptedModel([]), tools=[deploy])
    assert [p.call_id for p in agent.pending_approvals] == ["c_a"]
