"""MCP servers as tools: real servers (time, git, everything) driven through Agent and a scripted model."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from agent_kernel import Agent, EventType
from agent_kernel.errors import UserError
from agent_kernel.guard._approvals import Approval, ApprovalRequest
from agent_kernel.guard._permissions import Permissions
from agent_kernel.mcp import MCPServer
from agent_kernel.models.scripted import ScriptedModel, tool_call

from .helpers import of_type
from .mcp_servers import (
    EVERYTHING,
    everything_http,
    everything_missing,
    everything_stdio,
    free_port,
    git_server,
    make_repository,
    server_processes,
    time_server,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def everything() -> None:
    """server-everything must be installed (make test does it: make mcp-servers)."""
    missing = everything_missing()
    if missing:
        pytest.fail(missing)


def agent_with(servers: list[MCPServer], *responses: Any, **kwargs: Any) -> Agent:
    kwargs.setdefault("journal", None)
    kwargs.setdefault("context", None)
    return Agent(ScriptedModel(list(responses)), mcp=servers, **kwargs)


def result_of(run: Any, name: str) -> dict[str, Any]:
    return next(r for r in run.tool_calls if r["name"] == name)


# ---- tools, names and schemas ---------------------------------------------------------------


def test_a_time_server_tool_answers_through_the_agent() -> None:
    with agent_with([time_server()], [tool_call("mcp__time__get_current_time", {"timezone": "UTC"})], "done") as agent:
        run = agent.run_sync("What time is it?")
        result = result_of(run, "mcp__time__get_current_time")
        assert not result["is_error"]
        assert json.loads(result["content"])["timezone"] == "UTC"
        start = of_type(run.events, EventType.RUN_START)[0]
        assert {"mcp__time__get_current_time", "mcp__time__convert_time"} <= set(start.data["tools"])
        connect = of_type(run.events, EventType.MCP_CONNECT)[0]
        assert connect.data["server"] == "time" and connect.data["server_name"] == "mcp-time"
        listed = of_type(run.events, EventType.MCP_TOOLS_LISTED)[0]
        assert listed.data["tools"] == ["mcp__time__get_current_time", "mcp__time__convert_time"]
        assert "mcp__time__convert_time" in agent.tools.names
        # The server's own JSON schema is what the model is offered.
        assert agent.tools.get("mcp__time__get_current_time").spec.parameters["required"] == ["timezone"]


def test_every_mcp_step_is_journaled(tmp_path: Path) -> None:
    journal = tmp_path / "s.jsonl"
    with agent_with([time_server()], [tool_call("mcp__time__get_current_time", {"timezone": "UTC"})], "done", journal=journal) as agent:
        agent.run_sync("time?")
    from agent_kernel.journal import read_events

    kinds = [e.type.value for e in read_events(journal)]
    assert kinds.index("mcp_connect") < kinds.index("mcp_tools_listed") < kinds.index("tool_start") < kinds.index("tool_result")


def test_arguments_that_break_the_servers_schema_are_refused_before_the_call() -> None:
    with agent_with([time_server()], [tool_call("mcp__time__get_current_time", {"zone": 3})], "done") as agent:
        run = agent.run_sync("time?")
        result = result_of(run, "mcp__time__get_current_time")
        assert result["is_error"] and "timezone" in result["content"]
        assert not of_type(run.events, EventType.TOOL_START)


def test_annotations_set_read_only_concurrency_safe_and_the_destructive_hint(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    with agent_with([git_server(repo)], "nothing to do") as agent:
        agent.run_sync("hi")
        status, commit, reset = (agent.tools.get(f"mcp__git__{n}") for n in ("git_status", "git_commit", "git_reset"))
        assert status.read_only and status.concurrency_safe
        assert not commit.read_only and not commit.concurrency_safe
        assert reset.approval_info["destructive"] is True and commit.approval_info["destructive"] is False


def test_an_untrusted_servers_read_only_claim_is_not_believed(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    with agent_with([git_server(repo, trusted=False)], "nothing to do") as agent:
        agent.run_sync("hi")
        status, commit = (agent.tools.get(f"mcp__git__{n}") for n in ("git_status", "git_commit"))
        assert not status.read_only and not status.concurrency_safe
        assert status.approval_info["claims_read_only"] is True and status.approval_info["trusted"] is False
        # Its "not destructive" claim is not believed either.
        assert commit.approval_info["destructive"] is True


def test_a_local_tool_and_a_server_tool_of_the_same_name_both_stay_callable() -> None:
    def get_current_time(timezone: str) -> str:
        """The local clock."""
        return f"local {timezone}"

    responses = [[tool_call("get_current_time", {"timezone": "UTC"}), tool_call("mcp__time__get_current_time", {"timezone": "UTC"})], "done"]
    with agent_with([time_server()], *responses, tools=[get_current_time], permissions="bypass") as agent:
        run = agent.run_sync("time?")
        assert result_of(run, "get_current_time")["content"] == "local UTC"
        assert '"timezone": "UTC"' in result_of(run, "mcp__time__get_current_time")["content"]


def test_two_servers_with_the_same_name_are_refused() -> None:
    with pytest.raises(UserError, match="Two MCP servers are named 'time'.*Rename one"):
        Agent("offline", mcp=[time_server(), time_server()], journal=None)


def test_a_server_name_that_cannot_be_part_of_a_tool_name_is_refused() -> None:
    with pytest.raises(UserError, match="not a valid MCP server name"):
        MCPServer.stdio("my server", "python")


def test_a_tool_whose_schema_is_malformed_is_skipped_with_a_warning() -> None:
    from mcp import types

    from agent_kernel.mcp._connection import ConnectInfo
    from agent_kernel.mcp._hub import MCPHub
    from agent_kernel.tools._registry import ToolRegistry

    registry = ToolRegistry()
    hub = MCPHub(registry, [time_server()])
    good = types.Tool(name="ok", input_schema={"type": "object", "properties": {"a": {"type": "string"}}})
    bad = types.Tool(name="broken", input_schema={"type": "object", "properties": {"a": {"type": "no-such-type"}}})
    facts = hub._register(hub.servers["time"], ConnectInfo("x", "1", "2025-11-25", [good, bad]))
    assert registry.names == ["mcp__time__ok"]
    warning = next(data for kind, data in facts if kind is EventType.MCP_WARNING)
    assert warning["tool"] == "broken" and "not a valid JSON schema" in warning["message"]
    # The person sees it in the run's view (and its saved transcript), not only in the journal.
    from agent_kernel.events._event import AgentEvent
    from agent_kernel.jupyter._transcript import Transcript

    transcript = Transcript()
    transcript.apply(AgentEvent(1, 0.0, "s", "r", None, None, 0, EventType.MCP_WARNING, warning))
    [notice] = [item for item in transcript.items if item.kind == "notice"]
    assert notice.level == "warning" and "'broken'" in notice.message and "not a valid JSON schema" in notice.message


# ---- permissions ----------------------------------------------------------------------------


def test_rules_allow_and_deny_mcp_tools_by_name_and_glob(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    calls = [tool_call("mcp__git__git_add", {"repo_path": str(repo), "files": ["new.txt"]}), tool_call("mcp__time__get_current_time", {"timezone": "UTC"})]
    rules = Permissions(deny=["mcp__git__*"], allow=["mcp__time__get_current_time"])
    with agent_with([git_server(repo), time_server()], calls, "done", permissions=rules) as agent:
        run = agent.run_sync("go")
        denied = result_of(run, "mcp__git__git_add")
        assert denied["is_error"] and "mcp__git__*" in denied["content"]
        assert not result_of(run, "mcp__time__get_current_time")["is_error"]
    assert "new.txt" not in subprocess.run(["git", "-C", str(repo), "diff", "--cached", "--name-only"], capture_output=True, text=True).stdout


def test_the_approval_card_names_the_server_and_shows_the_exact_arguments(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Approval:
        asked.append(request)
        return Approval.approve()

    arguments = {"repo_path": str(repo), "files": ["new.txt"]}
    with agent_with([git_server(repo)], [tool_call("mcp__git__git_add", arguments)], "done", approver=approver) as agent:
        run = agent.run_sync("stage it")
        card = of_type(run.events, EventType.APPROVAL_REQUIRED)[0].data
        assert card["server"] == "git" and card["mcp_tool"] == "git_add"
        assert card["arguments"] == arguments and card["destructive"] is False
        assert asked[0].tool == "mcp__git__git_add"
        assert not result_of(run, "mcp__git__git_add")["is_error"]
    staged = subprocess.run(["git", "-C", str(repo), "diff", "--cached", "--name-only"], capture_output=True, text=True).stdout
    assert staged.split() == ["new.txt"]


def test_the_headless_policy_decides_mcp_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repository(tmp_path / "repo")
    monkeypatch.setenv("AGENT_KERNEL_APPROVAL", "scripted:mcp__git__git_add=deny,mcp__git__*=approve")
    calls = [tool_call("mcp__git__git_add", {"repo_path": str(repo), "files": ["new.txt"]}), tool_call("mcp__git__git_create_branch", {"repo_path": str(repo), "branch_name": "feature"})]
    with agent_with([git_server(repo)], calls, "done") as agent:
        run = agent.run_sync("go")
        assert result_of(run, "mcp__git__git_add")["is_error"]
        assert not result_of(run, "mcp__git__git_create_branch")["is_error"]
        decisions = {e.data["tool"]: e.data["decided_by"] for e in of_type(run.events, EventType.APPROVAL_DECISION)}
        assert decisions == {"mcp__git__git_add": "policy", "mcp__git__git_create_branch": "policy"}
    assert "feature" in subprocess.run(["git", "-C", str(repo), "branch"], capture_output=True, text=True).stdout


def test_a_server_in_bypass_mode_runs_its_tools_without_asking_while_others_still_ask(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    other = make_repository(tmp_path / "other")
    calls = [tool_call("mcp__git__git_create_branch", {"repo_path": str(repo), "branch_name": "b1"}), tool_call("mcp__strict__git_create_branch", {"repo_path": str(other), "branch_name": "b2"})]
    with agent_with([git_server(repo, permissions="bypass"), git_server(other, name="strict")], calls, "done") as agent:
        run = agent.run_sync("go")
        assert not result_of(run, "mcp__git__git_create_branch")["is_error"]
        refused = result_of(run, "mcp__strict__git_create_branch")
        assert refused["is_error"] and "AGENT_KERNEL_APPROVAL" in refused["content"]
        assert [e.data["tool"] for e in of_type(run.events, EventType.APPROVAL_REQUIRED)] == ["mcp__strict__git_create_branch"]


def test_plan_mode_keeps_a_bypassed_server_read_only(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    calls = [tool_call("mcp__git__git_create_branch", {"repo_path": str(repo), "branch_name": "b1"}), tool_call("mcp__git__git_status", {"repo_path": str(repo)})]
    with agent_with([git_server(repo, permissions="bypass")], calls, "done", permissions="plan") as agent:
        run = agent.run_sync("go")
        assert result_of(run, "mcp__git__git_create_branch")["is_error"]
        assert "new.txt" in result_of(run, "mcp__git__git_status")["content"]


# ---- results, progress, cancellation ----------------------------------------------------------


def test_images_and_embedded_resources_are_described_for_the_model(everything: None) -> None:
    calls = [tool_call("mcp__ev__get-tiny-image", {}), tool_call("mcp__ev__get-resource-reference", {"resourceType": "Text", "resourceId": 1})]
    with agent_with([everything_stdio()], calls, "done") as agent:
        run = agent.run_sync("show me")
        image = result_of(run, "mcp__ev__get-tiny-image")["content"]
        assert "[image: image/png," in image and "bytes]" in image and "iVBOR" not in image
        resource = result_of(run, "mcp__ev__get-resource-reference")["content"]
        assert "[resource demo://resource/dynamic/text/1 (text/plain)]" in resource
        assert "Resource 1: This is a plaintext resource" in resource


def test_a_large_result_is_capped_like_every_tool_result(everything: None, tmp_path: Path) -> None:
    message = "x" * 5000
    with agent_with([everything_stdio()], [tool_call("mcp__ev__echo", {"message": message})], "done", tool_result_limit=1000, working_dir=tmp_path) as agent:
        run = agent.run_sync("echo")
        content = result_of(run, "mcp__ev__echo")["content"]
        assert len(content) < 2000 and "characters omitted" in content


def test_progress_notifications_become_tool_progress_events(everything: None) -> None:
    call = tool_call("mcp__ev__trigger-long-running-operation", {"duration": 0.3, "steps": 3})
    with agent_with([everything_stdio()], [call], "done") as agent:
        run = agent.run_sync("go")
        progress = of_type(run.events, EventType.TOOL_PROGRESS)
        fractions = [p.data["fraction"] for p in progress]
        # Coalesced (at most a few a second), in order, the first and the last always shown.
        assert fractions[0] == pytest.approx(1 / 3) and fractions[-1] == pytest.approx(1.0) and fractions == sorted(fractions)
        assert progress[0].data["name"] == "mcp__ev__trigger-long-running-operation"
        assert "completed" in result_of(run, "mcp__ev__trigger-long-running-operation")["content"]


@pytest.fixture
def cancellations(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once the MCP client sends ``notifications/cancelled`` for a call."""
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

    sent = threading.Event()
    original = JSONRPCDispatcher._cancel_outbound

    async def spy(self: Any, request_id: Any, reason: str, related: Any) -> None:
        await original(self, request_id, reason, related)
        sent.set()

    monkeypatch.setattr(JSONRPCDispatcher, "_cancel_outbound", spy)
    return sent


async def test_cancelling_a_call_sends_the_mcp_cancellation(everything: None, cancellations: threading.Event) -> None:
    sent = cancellations
    call = tool_call("mcp__ev__trigger-long-running-operation", {"duration": 60, "steps": 60})
    agent = agent_with([everything_stdio()], [call], "done")
    try:
        events = []
        async for event in agent.stream("go"):
            events.append(event)
            if event.type is EventType.TOOL_PROGRESS:
                agent.cancel("enough")
        assert events[-1].data["reason"] == "user_interrupt"
        assert sent.wait(30), "the MCP client never sent notifications/cancelled"
        assert of_type(events, EventType.TOOL_RESULT)[0].data["is_error"]
    finally:
        await agent.__aexit__(None, None, None)


def test_a_call_past_the_servers_call_timeout_is_cancelled_on_the_server_and_reported(everything: None, cancellations: threading.Event) -> None:
    sent = cancellations
    server = dataclasses.replace(everything_stdio(), call_timeout=0.5)
    call = tool_call("mcp__ev__trigger-long-running-operation", {"duration": 60, "steps": 60})
    with agent_with([server], [call], "It took too long.") as agent:
        run = agent.run_sync("go")
        result = result_of(run, "mcp__ev__trigger-long-running-operation")
        assert result["is_error"] and "timed out after 0.5 s" in result["content"]
        assert run.text == "It took too long."  # the run goes on; the model read why
        assert sent.wait(30), "the MCP client never sent notifications/cancelled"


def test_a_call_timeout_that_is_not_a_positive_number_is_refused() -> None:
    with pytest.raises(UserError, match="call_timeout=0 for MCP server 'time' must be a positive number"):
        MCPServer.stdio("time", "python", call_timeout=0)


# ---- failures --------------------------------------------------------------------------------


def test_a_command_that_does_not_exist_is_named_in_a_clear_error() -> None:
    ghost = MCPServer.stdio("ghost", "no-such-mcp-server-xyz", "--flag")
    with agent_with([ghost, time_server()], "fine") as agent:
        run = agent.run_sync("hi")
        error = of_type(run.events, EventType.MCP_ERROR)[0].data
        assert error["server"] == "ghost" and "'no-such-mcp-server-xyz' was not found" in error["message"]
        assert of_type(run.events, EventType.ERROR)[0].data["kind"] == "mcp"
        assert run.text == "fine" and "mcp__time__get_current_time" in agent.tools.names


def test_a_url_that_refuses_connections_is_named_in_a_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with agent_with([MCPServer.http("remote", url, startup_timeout=30)], "fine") as agent:
        run = agent.run_sync("hi")
        message = of_type(run.events, EventType.MCP_ERROR)[0].data["message"]
        assert url in message and "refused the connection" in message


def test_a_server_that_exits_at_once_reports_its_stderr() -> None:
    crash = MCPServer.stdio("crash", sys.executable, "-c", "import sys; sys.stderr.write('boom: no config file\\n'); sys.exit(3)")
    with agent_with([crash], "fine") as agent:
        run = agent.run_sync("hi")
        error = of_type(run.events, EventType.MCP_ERROR)[0].data
        assert "boom: no config file" in error["stderr_tail"] and "boom: no config file" in error["message"]


def test_a_crashed_server_ends_the_call_with_an_error_and_the_next_use_reconnects(everything: None) -> None:
    echo = tool_call("mcp__ev__echo", {"message": "hi"})
    with agent_with([everything_stdio()], [echo], "one", [echo], "two", [echo], "three") as agent:
        assert "Echo: hi" in result_of(agent.run_sync("1"), "mcp__ev__echo")["content"]
        (proc,) = server_processes(str(EVERYTHING))
        proc.kill()
        proc.wait(30)
        crashed = agent.run_sync("2")
        result = result_of(crashed, "mcp__ev__echo")
        assert result["is_error"] and "'ev'" in result["content"]
        error = of_type(crashed.events, EventType.MCP_ERROR)[0].data
        assert error["phase"] == "call" and "Starting default (STDIO) server" in error["stderr_tail"]
        assert of_type(crashed.events, EventType.ERROR)[0].data["server"] == "ev"
        again = agent.run_sync("3")
        assert of_type(again.events, EventType.MCP_CONNECT)[0].data["reconnect"] is True
        assert "Echo: hi" in result_of(again, "mcp__ev__echo")["content"]


# ---- transports and lifetime -----------------------------------------------------------------


def test_a_streamable_http_server_serves_tools_and_lists_resources_and_prompts(everything: None) -> None:
    with everything_http() as url:
        with agent_with([MCPServer.http("web", url, trusted=True)], [tool_call("mcp__web__get-sum", {"a": 2, "b": 3})], "done") as agent:
            run = agent.run_sync("add")
            assert "5" in result_of(run, "mcp__web__get-sum")["content"]
            listed = of_type(run.events, EventType.MCP_TOOLS_LISTED)[0].data
            assert "demo://resource/static/document/architecture.md" in listed["resources"]
            assert "simple-prompt" in listed["prompts"]
            (row,) = agent.mcp.status()
            assert row["status"] == "connected" and row["transport"] == "http"


def test_after_close_the_server_process_is_gone() -> None:
    agent = agent_with([time_server()], "hi")
    agent.run_sync("hi")
    procs = server_processes("mcp_server_time")
    assert len(procs) == 1
    agent.close()
    gone, alive = psutil.wait_procs(procs, timeout=30)
    assert not alive
    assert agent.mcp.status()[0]["status"] == "stopped" and "mcp__time__get_current_time" not in agent.tools.names


async def test_async_with_stops_the_servers() -> None:
    async with agent_with([time_server()], "hi") as agent:
        await agent.run("hi")
        procs = server_processes("mcp_server_time")
        assert procs
    _, alive = psutil.wait_procs(procs, timeout=30)
    assert not alive


def test_servers_stop_when_the_interpreter_exits_without_close() -> None:
    script = (
        "import sys\n"
        "from agent_kernel import Agent\n"
        "from agent_kernel.mcp import MCPServer\n"
        "from tests.mcp_servers import server_processes\n"
        "agent = Agent('offline', mcp=[MCPServer.stdio('time', sys.executable, '-m', 'mcp_server_time')], journal=None)\n"
        "agent.run_sync('hi')\n"
        "print(server_processes('mcp_server_time')[0].pid)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90, cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.split()[-1])
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    _, alive = psutil.wait_procs([proc], timeout=30)
    assert not alive, f"the server {pid} outlived the interpreter"


# ---- elicitation -----------------------------------------------------------------------------


def test_elicitation_is_declined_headless_by_default_and_nothing_waits(everything: None) -> None:
    with agent_with([everything_stdio()], [tool_call("mcp__ev__trigger-elicitation-request", {})], "done", permissions="bypass") as agent:
        run = agent.run_sync("ask me")
        content = result_of(run, "mcp__ev__trigger-elicitation-request")["content"]
        assert "decline" in content.lower()
        (asked,) = of_type(run.events, EventType.MCP_ELICITATION)
        assert asked.data["action"] == "decline" and asked.data["server"] == "ev"
        assert "name" in asked.data["schema"]["properties"]


def test_the_live_views_approval_card_says_when_the_server_marks_a_tool_destructive(tmp_path: Path) -> None:
    from agent_kernel.jupyter._transcript import Transcript

    repo = make_repository(tmp_path / "repo")
    call = tool_call("mcp__git__git_reset", {"repo_path": str(repo)})
    with agent_with([git_server(repo)], [call], "done", approver=lambda request: Approval.reject("not now")) as agent:
        run = agent.run_sync("reset")
    view = Transcript()
    for event in run.events:
        view.apply(event)
    (card,) = view.tool_cards
    assert card.name == "mcp__git__git_reset"
    assert "the MCP server 'git' marks this tool destructive" in (card.approval_reason or "")
    assert card.status == "rejected"


def test_an_approving_policy_accepts_an_elicitation_only_when_the_form_can_be_answered_from_defaults(
    everything: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_KERNEL_APPROVAL", "scripted:mcp__ev__elicitation=approve")
    with agent_with([everything_stdio()], [tool_call("mcp__ev__trigger-elicitation-request", {})], "done", permissions="bypass") as agent:
        run = agent.run_sync("ask me")
        (asked,) = of_type(run.events, EventType.MCP_ELICITATION)
        # "name" is required and has no default: nothing to answer it with, so it is declined.
        assert asked.data["action"] == "decline" and "required field has no default" in asked.data["reason"]
    from agent_kernel.mcp._hub import _defaults

    assert _defaults({"type": "object", "properties": {"a": {"type": "string", "default": "x"}, "b": {"type": "boolean"}}}) == {"a": "x"}
    assert _defaults({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}) is None


def test_a_sub_agents_servers_start_with_its_first_task_and_its_calls_are_recorded() -> None:
    clock = agent_with([time_server()], [tool_call("mcp__time__get_current_time", {"timezone": "UTC"})], "It is noon somewhere.", name="clock", permissions="bypass")
    lead = Agent(ScriptedModel([[tool_call("task", {"agent": "clock", "instructions": "What time is it?"})], "done"]), subagents={"clock": clock}, journal=None, context=None, permissions="bypass")
    with lead, clock:
        run = lead.run_sync("time?")
        sub = [e for e in run.events if e.agent_id is not None]
        assert [e.data["server"] for e in sub if e.type is EventType.MCP_CONNECT] == ["time"]
        result = next(e.data for e in sub if e.type is EventType.TOOL_RESULT)
        assert result["name"] == "mcp__time__get_current_time" and not result["is_error"]
        assert "It is noon somewhere." in result_of(run, "task")["content"]


async def test_a_servers_resources_can_be_read_through_the_hub(everything: None) -> None:
    async with agent_with([everything_stdio()], "hi") as agent:
        await agent.run("hi")
        result = await agent.mcp.read_resource("ev", "demo://resource/static/document/architecture.md")
        assert result.contents[0].uri == "demo://resource/static/document/architecture.md"
        assert result.contents[0].text.strip()


# ---- resources in prompts -------------------------------------------------------------------


def test_a_mentioned_resource_longer_than_the_limit_is_capped_and_kept_whole_in_the_session_folder(everything: None, tmp_path: Path) -> None:
    uri = "demo://resource/static/document/architecture.md"
    with agent_with([everything_stdio()], "ok", tool_result_limit=600, working_dir=tmp_path) as agent:
        run = agent.run_sync(f"Summarise @ev:{uri}.")
        prompt = of_type(run.events, EventType.RUN_START)[0].data["prompt"]
        assert "characters omitted" in prompt and len(prompt) < 1500
        (read,) = of_type(run.events, EventType.MCP_RESOURCE)
        assert read.data["capped"] and read.data["uri"] == uri  # the trailing full stop is not part of it
        (kept,) = (tmp_path / ".agent_kernel").rglob("resource-ev-*.txt")
        assert len(kept.read_text()) == read.data["chars"]


def test_a_mention_of_something_that_is_not_a_server_stays_prose() -> None:
    with agent_with([time_server()], "ok") as agent:
        run = agent.run_sync("Mail me@home:later or ping @work:now.")
        assert of_type(run.events, EventType.RUN_START)[0].data["prompt"] == "Mail me@home:later or ping @work:now."
        assert not of_type(run.events, EventType.MCP_RESOURCE)


# ---- sampling --------------------------------------------------------------------------------

SAMPLE = tool_call("mcp__ev__trigger-sampling-request", {"prompt": "Say hi", "maxTokens": 20})


def test_a_server_allowed_to_sample_is_answered_by_the_agents_model_and_the_exchange_is_journaled(everything: None, tmp_path: Path) -> None:
    journal = tmp_path / "s.jsonl"
    with agent_with([everything_stdio(sampling=True)], [SAMPLE], "Hi from the model.", "done", permissions="bypass", journal=journal) as agent:
        run = agent.run_sync("go")
        assert '"text": "Hi from the model."' in result_of(run, "mcp__ev__trigger-sampling-request")["content"]
        assert run.text == "done"
    from agent_kernel.journal import read_events

    (sampled,) = [e.data for e in read_events(journal) if e.type is EventType.MCP_SAMPLING]
    assert sampled["action"] == "accept" and sampled["server"] == "ev" and sampled["model"] == "scripted"
    assert sampled["messages"] == ["user: Resource trigger-sampling-request context: Say hi"]
    assert sampled["max_tokens"] == 20 and sampled["text"] == "Hi from the model."
    assert sampled["usage"]["output_tokens"] > 0


def test_a_sampling_call_counts_in_the_runs_tokens_and_cost_and_in_every_usage_table(everything: None, tmp_path: Path) -> None:
    # The real Anthropic SDK against the strict fake endpoint: each model call reports its usage.
    import pandas as pd

    from agent_kernel.journal import sql, turns_df, usage_df
    from agent_kernel.models import _pricing as pricing
    from agent_kernel.models._base import Usage
    from agent_kernel.models.anthropic import AnthropicModel

    from .fakes.server import FakeProvider
    from .fakes.turns import turn

    journal = tmp_path / "s.jsonl"
    ask = {"prompt": "Say hi", "maxTokens": 20}
    with FakeProvider() as provider:
        provider.script(
            turn(calls=[("c1", "mcp__ev__trigger-sampling-request", ask)], usage={"input_tokens": 100, "output_tokens": 10}),
            turn("Hi from the model.", usage={"input_tokens": 30, "output_tokens": 5}),  # the server's sample
            turn("done", usage={"input_tokens": 200, "output_tokens": 3}),
        )
        model = AnthropicModel("claude-sonnet-4-6", base_url=provider.url, api_key="sk-ant-test")
        with Agent(model, mcp=[everything_stdio(sampling=True)], permissions="bypass", journal=journal, context=None) as agent:
            run = agent.run_sync("go")
        assert not provider.rejected
    assert '"text": "Hi from the model."' in result_of(run, "mcp__ev__trigger-sampling-request")["content"]
    (sampled,) = of_type(run.events, EventType.MCP_SAMPLING)
    one = pricing.cost("claude-sonnet-4-6", Usage(30, 5))
    assert one is not None and sampled.data["cost_usd"] == pytest.approx(one)
    assert sampled.data["usage"]["input_tokens"] == 30 and sampled.data["stop_reason"] == "end_turn" and sampled.data["duration_s"] >= 0
    # The run's totals are its three model calls: two turns and the sample.
    assert (run.usage.input_tokens, run.usage.output_tokens, run.stats.llm_calls) == (330, 18, 3)
    every = pricing.cost("claude-sonnet-4-6", Usage(330, 18))
    assert run.cost_usd == pytest.approx(every)
    usage = usage_df(journal)
    assert list(usage["purpose"]) == ["turn", "sampling", "turn"] and list(usage["input_tokens"]) == [100, 30, 200]
    assert usage["cost_usd"].sum() == pytest.approx(every)
    turns = turns_df(journal)
    assert turns["input_tokens"].sum() == 330 and turns["llm_calls"].sum() == 3 and turns["cost_usd"].sum() == pytest.approx(every)
    by_sql = sql("SELECT purpose, input_tokens, cost_usd FROM usage ORDER BY seq", journal)
    pd.testing.assert_frame_equal(by_sql, usage[["purpose", "input_tokens", "cost_usd"]], check_dtype=False)
    assert sql("SELECT sum(llm_calls) AS n, sum(input_tokens) AS t FROM turns", journal).iloc[0].tolist() == [3, 330]
    # In OpenTelemetry the sample is a chat span under the tool call that the server was serving.
    from agent_kernel.journal import export_otel

    from .test_otel import memory_provider, tree

    provider, exporter = memory_provider()
    export_otel(journal, provider)
    spans = exporter.get_finished_spans()
    assert tree(spans) == [(0, "invoke_agent"), (1, "chat claude-sonnet-4-6"), (1, "execute_tool mcp__ev__trigger-sampling-request"),
                           (2, "chat claude-sonnet-4-6"), (1, "chat claude-sonnet-4-6")]
    (sample,) = [span for span in spans if (span.attributes or {}).get("agent_kernel.purpose") == "sampling"]
    assert sample.attributes is not None and sample.attributes["gen_ai.usage.input_tokens"] == 30
    assert sample.attributes["agent_kernel.mcp.server"] == "ev" and sample.attributes["agent_kernel.cost_usd"] == pytest.approx(one)


def test_a_sampling_call_is_named_and_priced_by_the_model_the_provider_says_answered(everything: None, tmp_path: Path) -> None:
    # A gateway's deployment name the price table does not know, serving a model it does: turns
    # and samples alike are priced by the served model, so the run's cost stays known.
    from agent_kernel.journal import usage_df
    from agent_kernel.models import _pricing as pricing
    from agent_kernel.models._base import Usage
    from agent_kernel.models.anthropic import AnthropicModel

    from .fakes.server import FakeProvider
    from .fakes.turns import turn

    journal = tmp_path / "s.jsonl"
    with FakeProvider() as provider:
        provider.served = "claude-sonnet-4-6"
        provider.script(turn(calls=[("c1", "mcp__ev__trigger-sampling-request", {"prompt": "Say hi", "maxTokens": 20})]), turn("Hi."), turn("done"))
        model = AnthropicModel("our-gateway-deployment", base_url=provider.url, api_key="sk-ant-test")
        with Agent(model, mcp=[everything_stdio(sampling=True)], permissions="bypass", journal=journal, context=None) as agent:
            run = agent.run_sync("go")
    (sampled,) = of_type(run.events, EventType.MCP_SAMPLING)
    assert sampled.data["model"] == "claude-sonnet-4-6"
    assert sampled.data["cost_usd"] == pytest.approx(pricing.cost("claude-sonnet-4-6", Usage(40, 12)))
    assert run.cost_usd is not None and list(usage_df(journal)["model"]) == ["claude-sonnet-4-6"] * 3


def test_sampling_is_declined_by_default_headless_and_the_server_is_told_how_to_allow_it(everything: None) -> None:
    with agent_with([everything_stdio()], [SAMPLE], "done", permissions="bypass") as agent:
        run = agent.run_sync("go")
        content = result_of(run, "mcp__ev__trigger-sampling-request")["content"]
        assert "Sampling declined" in content and "sampling=True" in content
        (sampled,) = of_type(run.events, EventType.MCP_SAMPLING)
        assert sampled.data["action"] == "decline" and sampled.data["text"] is None
        assert run.text == "done"  # the model was not asked: its one scripted answer ends the run


def test_an_approving_policy_lets_a_server_sample(everything: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_KERNEL_APPROVAL", "scripted:mcp__ev__sampling=approve")
    with agent_with([everything_stdio()], [SAMPLE], "Hello.", "done", permissions="bypass") as agent:
        run = agent.run_sync("go")
        (sampled,) = of_type(run.events, EventType.MCP_SAMPLING)
        assert sampled.data["action"] == "accept" and "policy approved" in sampled.data["reason"]
        assert '"text": "Hello."' in result_of(run, "mcp__ev__trigger-sampling-request")["content"]


# ---- where connections live ------------------------------------------------------------------


async def test_a_connection_lives_on_the_callers_loop_and_run_sync_beside_it_neither_hangs_nor_orphans() -> None:
    import asyncio

    call = [tool_call("mcp__time__get_current_time", {"timezone": "UTC"})]
    agent = agent_with([time_server()], call, "one", call, "two")
    try:
        await agent.run("first")
        assert agent.mcp.connections["time"].loop is asyncio.get_running_loop()
        assert not agent.mcp.runtime.started  # no thread hop on this loop's calls
        # run_sync blocks its caller until it returns: it must not wait on this loop's connection.
        again = await asyncio.to_thread(agent.run_sync, "second")
        assert not result_of(again, "mcp__time__get_current_time")["is_error"]
        procs = server_processes("mcp_server_time")
        assert len(procs) == 2
    finally:
        await agent.__aexit__(None, None, None)
    _, alive = psutil.wait_procs(procs, timeout=30)
    assert not alive


async def test_while_someone_can_answer_an_elicitation_their_answer_goes_back_to_the_server(everything: None) -> None:
    asked: list[dict[str, Any]] = []

    async def person(request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        asked.append(request)
        return "accept", {"name": "Ada", "check": True, "email": "ada@example.com"}

    agent = agent_with([everything_stdio()], [tool_call("mcp__ev__trigger-elicitation-request", {})], "done", permissions="bypass")
    agent.mcp.ask = person
    try:
        run = await agent.run("ask me")
        (request,) = asked
        assert request["server"] == "ev" and "name" in request["schema"]["properties"]
        (answered,) = of_type(run.events, EventType.MCP_ELICITATION)
        assert answered.data["action"] == "accept" and answered.data["reason"] == "the user answered"
        content = result_of(run, "mcp__ev__trigger-elicitation-request")["content"]
        assert "Ada" in content and "accept" in content.lower()
    finally:
        await agent.__aexit__(None, None, None)


async def test_an_answer_that_does_not_fit_the_form_is_declined_with_the_reason(everything: None) -> None:
    async def person(request: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "accept", {"name": 7}

    agent = agent_with([everything_stdio()], [tool_call("mcp__ev__trigger-elicitation-request", {})], "done", permissions="bypass")
    agent.mcp.ask = person
    try:
        run = await agent.run("ask me")
        (answered,) = of_type(run.events, EventType.MCP_ELICITATION)
        assert answered.data["action"] == "decline" and "does not fit the form" in answered.data["reason"]
    finally:
        await agent.__aexit__(None, None, None)


def test_the_live_view_notes_each_sampling_request_and_how_it_was_answered(everything: None) -> None:
    from agent_kernel.jupyter._transcript import Transcript

    with agent_with([everything_stdio(sampling=True)], [SAMPLE], "Hi.", "done", permissions="bypass") as agent:
        run = agent.run_sync("go")
    view = Transcript()
    for event in run.events:
        view.apply(event)
    notes = [item.message for item in view.items if getattr(item, "topic", None) == "mcp_sampling"]
    assert notes == ["MCP server 'ev' asked the model (scripted) for a completion: answered, 1 token out"]
    # The status line counts the sample among the run's tokens, as the run's totals do.
    assert view.status.output_tokens == run.usage.output_tokens and view.status.input_tokens == run.usage.input_tokens
    assert run.stats.llm_calls == 3


async def test_the_live_view_shows_an_elicitation_as_a_form_and_the_persons_answer_resolves_it() -> None:
    import asyncio

    from agent_kernel.jupyter._view import AgentView

    view = AgentView()
    request = {"id": "elicitation-1", "server": "ev", "message": "Who are you?", "schema": {"type": "object", "properties": {"name": {"type": "string"}}}}
    asked = asyncio.ensure_future(view.ask_elicitation(request))
    await asyncio.sleep(0)  # let the question be put to the view
    assert view.elicitation == request
    view._on_front_end_msg(view, {"type": "elicitation", "id": "someone-else", "action": "accept", "content": {}}, [])
    view._on_front_end_msg(view, {"type": "elicitation", "id": "elicitation-1", "action": "accept", "content": {"name": "Ada"}}, [])
    assert await asked == ("accept", {"name": "Ada"})
    assert view.elicitation == {}
