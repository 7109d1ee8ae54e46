"""The cell runner (jupyter/runner.py): blocking and detached runs, the view, approvals, cancelling.

The view runs against a recording comm; "the front-end" is a message handed to the widget the
way ipywidgets hands it a comm message. The last tests drive a real ipykernel with
jupyter_client, acting as the front-end, to show a click is handled while the cell awaits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import comm
import IPython.display
import pytest
import traitlets

from agent_kernel import Agent, tool
from agent_kernel.events._event import EventType
from agent_kernel.journal import read_events
from agent_kernel.jupyter import _runner as runner
from agent_kernel.jupyter._runner import ExecutionMode, RunHandle, RunInterrupted, detect_mode, kernel_handles_comms_while_awaiting, run_cell, start_run, wait_all
from agent_kernel.jupyter._static_view import StaticTranscript
from agent_kernel.jupyter._view import AgentView
from agent_kernel.models.scripted import FunctionModel, ScriptedModel, text, tool_call
from agent_kernel.runtime._state import TerminationReason


class RecordingComm:
    """Stands in for a kernel comm; calls ``on_send`` with each message the widget sends."""

    comm_id = "recording-comm"
    kernel = "recording"

    def __init__(self, **kwargs: Any) -> None:
        self.messages: list[dict[str, Any]] = []
        self.on_send: Callable[[dict[str, Any]], None] | None = None

    def open(self, *args: Any, **kwargs: Any) -> None:
        pass

    def on_msg(self, callback: Any) -> None:
        pass

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        self.messages.append(data)
        if self.on_send is not None:
            self.on_send(data)

    def close(self, *args: Any, **kwargs: Any) -> None:
        pass


@pytest.fixture(autouse=True)
def recording_comm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm, "create_comm", lambda **kwargs: RecordingComm(**kwargs))


class Shown:
    """Everything the runner displayed, in order, with display-id updates."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.updates: list[tuple[int, Any]] = []  # (index of the output updated, what it shows)

    def __call__(self, obj: Any, display_id: Any = None, **kwargs: Any) -> Any:
        self.items.append(obj)
        if display_id:
            index = len(self.items) - 1
            return SimpleNamespace(update=lambda new, **kw: self.updates.append((index, new)))
        return None

    def final(self) -> list[Any]:
        """What the cell shows once every update has been applied, empty outputs left out."""
        outputs = list(self.items)
        for index, new in self.updates:
            outputs[index] = new
        return [obj for obj in outputs if obj != {}]

    def of(self, kind: type) -> list[Any]:
        return [obj for obj in self.items if isinstance(obj, kind)]


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> Shown:
    recorder = Shown()
    monkeypatch.setattr(IPython.display, "display", recorder)
    return recorder


def front_end(view: AgentView, content: dict[str, Any]) -> None:
    """A message from the widget's front-end, delivered as ipywidgets delivers comm messages."""
    view._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def on_batch(view: AgentView, predicate: Callable[[str], bool], action: Callable[[], None]) -> None:
    """Runs ``action`` once, the first time the view sends a message whose JSON matches."""
    fired = False

    def check(message: dict[str, Any]) -> None:
        nonlocal fired
        if not fired and predicate(json.dumps(message)):
            fired = True
            action()

    view.comm.on_send = check


@tool
def touch(name: str) -> str:
    """Touches a file (not read-only, so the default mode asks first)."""
    return f"touched {name}"


def touching_model() -> ScriptedModel:
    return ScriptedModel([[text("I will touch it."), tool_call("touch", {"name": "notes.txt"})], "Done."])


def agent_with(model: Any, tools: list[Any] | None = None, **kwargs: Any) -> Agent:
    return Agent(model, tools or [], journal=None, **kwargs)


# ---- blocking runs ------------------------------------------------------------------------


async def test_run_cell_shows_the_live_view_then_one_transcript_in_its_place(shown: Shown) -> None:
    agent = agent_with(ScriptedModel([text("Hello there, notebook.", chunk=4)]))

    result = await run_cell(agent, "Say hello")

    assert result.text == "Hello there, notebook."
    view = shown.items[0]
    assert isinstance(view, AgentView)
    # The finished view is closed: no comm open, and no code, style or transcript left in its state.
    assert view.comm is None and view.layout.comm is None
    assert view.snapshot == {} and view._esm == "export default {};" and view._css == ""
    assert view.summary().phase == "finished"
    # Nobody rendered the view (no front-end here): it is emptied and the transcript follows.
    [transcript] = shown.final()
    assert isinstance(transcript, StaticTranscript)
    assert transcript.text.startswith("Answer:\nHello there, notebook.")
    assert transcript.html.count("Hello there, notebook.") == 1


async def test_a_view_a_front_end_rendered_is_replaced_in_place_by_its_transcript(
        shown: Shown) -> None:
    agent = agent_with(ScriptedModel([text("Hello there, notebook.", chunk=4)]))
    handle = start_run(agent, "Say hello", detached=False)
    view = handle.view
    assert view is not None
    front_end(view, {"type": "sync"})  # the view rendered in a page

    await handle

    assert len(shown.items) == 1 and [index for index, _ in shown.updates] == [0]
    [transcript] = shown.final()
    assert isinstance(transcript, StaticTranscript)
    assert transcript.html == view.static().html
    assert handle.view is None and view.comm is None  # the handle lets go of the closed view


async def test_quiet_shows_only_the_transcript_and_display_false_shows_nothing(shown: Shown) -> None:
    await run_cell(agent_with(ScriptedModel(["One."])), "Hi", quiet=True)
    assert [type(obj) for obj in shown.items] == [StaticTranscript]

    shown.items.clear()
    result = await run_cell(agent_with(ScriptedModel(["Two."])), "Hi", display=False)
    assert result.text == "Two." and shown.items == []


async def test_a_click_on_approve_after_the_view_renders_lets_the_tool_run(shown: Shown) -> None:
    agent = agent_with(touching_model(), [touch])
    task = asyncio.ensure_future(run_cell(agent, "Touch notes.txt"))
    await asyncio.sleep(0)  # the view exists once run_cell has started the run
    view = shown.of(AgentView)[0]
    front_end(view, {"type": "sync"})  # the front-end rendered it: a person is watching
    on_batch(view, lambda sent: "awaiting_approval" in sent, lambda: front_end(
        view, {"type": "approval", "call_id": "call_0_1", "decision": "approve"}))

    result = await task

    assert result.tool_calls[0]["content"] == "touched notes.txt"
    decision = [e for e in result.events if e.type is EventType.APPROVAL_DECISION][-1]
    assert decision.data["decided_by"] == "person"


async def test_reject_with_a_reason_sends_the_reason_to_the_model(shown: Shown) -> None:
    model = touching_model()
    agent = agent_with(model, [touch])
    task = asyncio.ensure_future(run_cell(agent, "Touch notes.txt"))
    await asyncio.sleep(0)
    view = shown.of(AgentView)[0]
    front_end(view, {"type": "sync"})
    on_batch(view, lambda sent: "awaiting_approval" in sent, lambda: front_end(
        view, {"type": "approval", "call_id": "call_0_1", "decision": "reject", "reason": "not that file"}))

    await task

    tool_result = model.requests[-1].messages[-1].content[0]
    assert "not that file" in tool_result.content and tool_result.is_error


async def test_a_view_that_renders_while_an_approval_waits_still_gets_asked(shown: Shown) -> None:
    agent = agent_with(touching_model(), [touch])
    task = asyncio.ensure_future(run_cell(agent, "Touch notes.txt", render_grace=30))
    await asyncio.sleep(0)
    view = shown.of(AgentView)[0]
    # The front-end renders only once the card is already waiting (a slow page), and the
    # person clicks at once, before the question has reached the broker.
    def render_and_click() -> None:
        front_end(view, {"type": "sync"})
        front_end(view, {"type": "approval", "call_id": "call_0_1", "decision": "approve"})

    on_batch(view, lambda sent: "awaiting_approval" in sent, render_and_click)

    result = await task

    assert result.tool_calls[0]["content"] == "touched notes.txt"


async def test_with_no_front_end_and_no_policy_the_call_is_refused_naming_the_policy(shown: Shown) -> None:
    agent = agent_with(touching_model(), [touch])

    result = await run_cell(agent, "Touch notes.txt", render_grace=0.01)

    refusal = result.tool_calls[0]
    assert refusal["is_error"] and "AGENT_KERNEL_APPROVAL" in refusal["content"]
    assert result.termination_reason is TerminationReason.END_TURN
    assert agent.approvals.interactive is False


async def test_with_no_front_end_the_headless_policy_decides_at_once(
        shown: Shown, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_KERNEL_APPROVAL", "auto_approve")
    agent = agent_with(touching_model(), [touch])

    # A grace this long would time the test out if the policy waited for a render.
    result = await asyncio.wait_for(run_cell(agent, "Touch notes.txt", render_grace=600), 30)

    assert result.tool_calls[0]["content"] == "touched notes.txt"


async def test_the_agents_own_approver_is_asked_first_and_restored_after_the_run(shown: Shown) -> None:
    asked: list[str] = []

    def approver(request: Any) -> bool:
        asked.append(request.tool)
        return True

    agent = agent_with(touching_model(), [touch], approver=approver)

    result = await run_cell(agent, "Touch notes.txt", render_grace=600)

    assert asked == ["touch"] and result.tool_calls[0]["content"] == "touched notes.txt"
    assert agent.permissions.approver is approver


async def test_the_stop_button_cancels_the_run_with_its_reason(shown: Shown) -> None:
    never = asyncio.Event()

    async def hang(messages: Any, tools: Any) -> str:
        await never.wait()
        return "unreachable"

    agent = agent_with(FunctionModel(hang))
    task = asyncio.ensure_future(run_cell(agent, "Think forever"))
    await asyncio.sleep(0)
    view = shown.of(AgentView)[0]
    on_batch(view, lambda sent: '"running"' in sent, lambda: front_end(view, {"type": "stop"}))

    result = await asyncio.wait_for(task, 30)

    assert result.termination_reason is TerminationReason.USER_INTERRUPT
    cancelled = [e for e in result.events if e.type is EventType.CANCELLED]
    assert cancelled and cancelled[0].data.get("reason") == "stopped from the live view"


async def test_cancelling_the_awaiting_cell_cancels_the_run_and_keeps_the_journal(
        shown: Shown, tmp_path: Path) -> None:
    started = asyncio.Event()

    async def hang(messages: Any, tools: Any) -> str:
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    journal = tmp_path / "run.jsonl"
    agent = Agent(FunctionModel(hang), journal=journal)
    cell = asyncio.ensure_future(run_cell(agent, "Think forever"))
    await started.wait()

    cell.cancel()  # what ipykernel does to an awaiting cell on a kernel interrupt
    with pytest.raises(RunInterrupted) as interrupted:
        await cell

    assert interrupted.value.result is not None
    assert interrupted.value.result.termination_reason is TerminationReason.USER_INTERRUPT
    assert interrupted.value._render_traceback_() == [
        "Interrupted: the agent run was cancelled (its end is recorded in the journal)."]
    agent.close()
    recorded = read_events(journal)
    assert recorded[-1].type is EventType.RUN_FINISH
    assert [e.data.get("reason") for e in recorded if e.type is EventType.CANCELLED] == ["kernel interrupt"]


async def test_a_cell_cancelled_as_its_kernel_shuts_down_keeps_the_waiting_approval_open(
        shown: Shown, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython

    journal = tmp_path / "run.jsonl"
    agent = Agent(ScriptedModel([tool_call("touch", {"name": "a"}, id="call_1"), "unused"]), tools=[touch],
                  journal=journal, permissions="default")
    cell = asyncio.ensure_future(run_cell(agent, "Touch a", render_grace=30))
    view = shown.of(AgentView)[0] if shown.of(AgentView) else None
    while view is None:
        await asyncio.sleep(0.01)
        view = shown.of(AgentView)[0] if shown.of(AgentView) else None
    front_end(view, {"type": "sync"})  # a person watches: the call waits for them
    while not agent.approvals.pending:
        await asyncio.sleep(0.01)

    # ipykernel sets the shell's exit_now when a shutdown or restart request arrives, then stops
    # its event loop, which cancels the cell still awaiting the run.
    monkeypatch.setattr(IPython, "get_ipython", lambda: SimpleNamespace(exit_now=True))
    cell.cancel()
    with pytest.raises(RunInterrupted):
        await cell
    agent.close()

    [cancelled] = [e for e in read_events(journal) if e.type is EventType.CANCELLED]
    assert cancelled.data["reason"] == "the kernel shut down" and cancelled.data["keeps_calls_open"] is True
    resumed = Agent.resume(journal, model=ScriptedModel([]), tools=[touch])
    assert [p.call_id for p in resumed.pending_approvals] == ["call_1"]  # %agent resume shows the card again
    resumed.close()


class KernelShell(traitlets.HasTraits):
    """The part of IPython's shell a shutdown touches: ipykernel sets ``exit_now`` on its control
    thread when a shutdown or restart request arrives."""

    exit_now = traitlets.Bool(False)

    def __init__(self) -> None:
        super().__init__()
        self.watched = threading.Event()  # someone waits to see whether exit_now turns True

    def observe(self, handler: Any, names: Any = traitlets.All, type: str = "change") -> None:
        super().observe(handler, names, type)
        self.watched.set()


async def waiting_cell(shown: Shown, journal: Path) -> tuple[Agent, asyncio.Future[Any]]:
    """A ``%%agent`` cell whose call waits for a person watching its view."""
    agent = Agent(ScriptedModel([tool_call("touch", {"name": "a"}, id="call_1"), "unused"]), tools=[touch],
                  journal=journal, permissions="default")
    cell = asyncio.ensure_future(run_cell(agent, "Touch a", render_grace=30))
    while not shown.of(AgentView):
        await asyncio.sleep(0.01)
    front_end(shown.of(AgentView)[0], {"type": "sync"})
    while not agent.approvals.pending:
        await asyncio.sleep(0.01)
    return agent, cell


async def test_an_interrupt_that_a_shutdown_follows_keeps_the_waiting_approval_open(
        shown: Shown, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython

    journal = tmp_path / "run.jsonl"
    agent, cell = await waiting_cell(shown, journal)
    shell = KernelShell()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)

    # Jupyter interrupts a kernel before it restarts it; the interrupt cancels the cell's wait.
    cell.cancel()
    while not shell.watched.is_set() and not cell.done():
        await asyncio.sleep(0.01)
    # Then the shutdown request arrives, on the kernel's control thread.
    threading.Thread(target=setattr, args=(shell, "exit_now", True)).start()
    with pytest.raises(RunInterrupted):
        await cell
    agent.close()

    [cancelled] = [e for e in read_events(journal) if e.type is EventType.CANCELLED]
    assert cancelled.data["reason"] == "the kernel shut down" and cancelled.data["keeps_calls_open"] is True
    resumed = Agent.resume(journal, model=ScriptedModel([]), tools=[touch])
    assert [p.call_id for p in resumed.pending_approvals] == ["call_1"]
    resumed.close()


async def test_an_interrupt_no_shutdown_follows_answers_the_waiting_call_for_good(
        shown: Shown, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython

    journal = tmp_path / "run.jsonl"
    agent, cell = await waiting_cell(shown, journal)
    monkeypatch.setattr(IPython, "get_ipython", KernelShell)
    monkeypatch.setattr(runner, "SHUTDOWN_WINDOW_S", 0.05)  # no shutdown comes: no need to wait a second

    cell.cancel()
    with pytest.raises(RunInterrupted):
        await cell
    agent.close()

    [cancelled] = [e for e in read_events(journal) if e.type is EventType.CANCELLED]
    assert cancelled.data["reason"] == "kernel interrupt" and "keeps_calls_open" not in cancelled.data
    resumed = Agent.resume(journal, model=ScriptedModel([]), tools=[touch])
    assert resumed.pending_approvals == []
    resumed.close()


# ---- detached runs --------------------------------------------------------------------------


async def test_start_run_returns_at_once_and_the_transcript_replaces_the_placeholder(shown: Shown) -> None:
    go = asyncio.Event()

    async def answer(messages: Any, tools: Any) -> str:
        await go.wait()
        return "Finished later."

    ended: list[RunHandle] = []
    handle = start_run(agent_with(FunctionModel(answer)), "Take your time", on_end=ended.append)

    assert handle.state == "running" and repr(handle).endswith("running)")
    assert "appears here when it ends" in IPython.display.display.items[1]._repr_mimebundle_()["text/plain"]
    go.set()
    result = await handle

    assert result.text == "Finished later." and handle.result() is result
    [transcript] = shown.final()
    assert isinstance(transcript, StaticTranscript) and "Finished later." in transcript.html
    assert ended == [handle] and handle.state == "finished"


class RecordingHost:
    """A ``ViewHost`` that records what it was handed."""

    def __init__(self) -> None:
        self.started: list[RunHandle] = []
        self.ended: list[tuple[RunHandle, StaticTranscript]] = []

    def run_started(self, handle: RunHandle) -> None:
        self.started.append(handle)

    def run_ended(self, handle: RunHandle, transcript: StaticTranscript) -> None:
        self.ended.append((handle, transcript))


async def test_a_run_that_raises_still_ends_with_its_transcript_in_its_views_place(shown: Shown) -> None:
    agent = agent_with(ScriptedModel(["Never read."]))
    real = agent.stream

    async def breaks(prompt: str | None) -> Any:
        async with contextlib.aclosing(real(prompt)) as events:
            async for event in events:
                yield event
                if event.type is EventType.RUN_START:
                    raise RuntimeError("the MCP server went away")

    agent.stream = breaks  # type: ignore[method-assign]
    host = RecordingHost()
    handle = start_run(agent, "Read the report", host=host)
    view = handle.view
    assert view is not None

    with pytest.raises(RuntimeError, match="went away"):
        await handle

    # The cell keeps the transcript, not a dead widget that a saved notebook would hold.
    [transcript] = shown.final()
    assert isinstance(transcript, StaticTranscript) and 'data-phase="interrupted"' in transcript.html
    assert view.comm is None
    assert [(h, t.html) for h, t in host.ended] == [(handle, transcript.html)]


async def test_a_host_that_fails_costs_the_run_nothing_and_says_so_in_one_line(
        shown: Shown, caplog: pytest.LogCaptureFixture) -> None:
    class Broken(RecordingHost):
        def run_ended(self, handle: RunHandle, transcript: StaticTranscript) -> None:
            raise RuntimeError("the panel is gone")

    result = await run_cell(agent_with(ScriptedModel(["Still answered."])), "Hello", host=Broken())

    assert result.text == "Still answered."
    # A kernel prints what is logged in the current cell: one line saying what to do, no traceback.
    [said] = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert said.exc_info is None and "(RuntimeError: the panel is gone)" in said.getMessage()
    assert "%agent show" in said.getMessage()


async def test_a_second_run_of_a_running_agent_is_refused_with_the_way_out(shown: Shown) -> None:
    go = asyncio.Event()

    async def answer(messages: Any, tools: Any) -> str:
        await go.wait()
        return "ok"

    agent = agent_with(FunctionModel(answer))
    handle = start_run(agent, "first", display=False)
    with pytest.raises(Exception, match="already running.*%agent wait"):
        start_run(agent, "second", display=False)
    go.set()
    await handle


async def test_waiting_on_detached_runs_and_being_interrupted_cancels_them_all(shown: Shown) -> None:
    async def hang(messages: Any, tools: Any) -> str:
        await asyncio.Event().wait()
        return "unreachable"

    handles = [start_run(agent_with(FunctionModel(hang)), "wait", display=False) for _ in range(2)]
    waiter = asyncio.ensure_future(wait_all(handles))
    await asyncio.sleep(0)

    waiter.cancel()
    with pytest.raises(RunInterrupted):
        await waiter

    assert [h.result().termination_reason for h in handles] == [TerminationReason.USER_INTERRUPT] * 2


# ---- which mode -----------------------------------------------------------------------------


class OldKernel:
    async def dispatch_shell(self, msg: Any, /, subshell_id: str | None = None) -> None: ...


class NewKernel:
    async def dispatch_shell(self, msg: Any, /, subshell_id: str | None = None, *, concurrent: bool = False) -> None: ...


def fake_shell(kernel: Any = None, autoawait: bool = True, runner: Any = None) -> Any:
    from IPython.core.async_helpers import _asyncio_runner

    return SimpleNamespace(kernel=kernel, autoawait=autoawait,
                           loop_runner=_asyncio_runner if runner is None else runner)


def test_blocking_needs_a_kernel_that_dispatches_comms_while_a_cell_awaits() -> None:
    assert detect_mode(fake_shell(NewKernel()), environ={}, modules={}).blocking
    old = detect_mode(fake_shell(OldKernel()), environ={}, modules={})
    assert not old.blocking and "ipykernel >= 7.4" in old.reason


def test_the_installed_ipykernel_is_detected_by_its_capability() -> None:
    from ipykernel.ipkernel import IPythonKernel

    assert kernel_handles_comms_while_awaiting(IPythonKernel)
    assert not kernel_handles_comms_while_awaiting(object())


@pytest.mark.parametrize(("environ", "modules", "words"), [
    ({"VSCODE_PID": "123"}, {}, "VS Code"),
    ({}, {"google.colab": object()}, "Colab"),
])
def test_vs_code_and_colab_run_detached(environ: dict[str, str], modules: dict[str, Any], words: str) -> None:
    mode = detect_mode(fake_shell(NewKernel()), environ=environ, modules=modules)
    assert mode == ExecutionMode(False, mode.reason) and words in mode.reason


def test_jupyterlab_started_from_a_vs_code_terminal_still_blocks() -> None:
    environ = {"VSCODE_PID": "123", "JPY_SESSION_NAME": "/home/me/analysis.ipynb"}
    assert detect_mode(fake_shell(NewKernel()), environ=environ, modules={}).blocking


def test_without_autoawait_or_with_another_loop_runner_runs_are_detached() -> None:
    assert "autoawait" in detect_mode(fake_shell(NewKernel(), autoawait=False), environ={}, modules={}).reason
    assert "asyncio" in detect_mode(fake_shell(NewKernel(), runner=object()), environ={}, modules={}).reason
    assert detect_mode(fake_shell(None), environ={}, modules={}).blocking  # plain IPython


# ---- a real kernel --------------------------------------------------------------------------


class KernelClient:
    """A real ipykernel driven through jupyter_client, with this test as its front-end."""

    def __init__(self, cwd: Path) -> None:
        from jupyter_client.manager import start_new_kernel

        self.manager, self.client = start_new_kernel(kernel_name="python3", startup_timeout=60, cwd=str(cwd))
        self.iopub: list[dict[str, Any]] = []

    def execute(self, code: str) -> str:
        return self.client.execute(code)

    def reply(self, msg_id: str, timeout: float = 60) -> dict[str, Any]:
        while True:
            message = self.client.get_shell_msg(timeout=timeout)
            if message["parent_header"].get("msg_id") == msg_id:
                self.drain()
                return message

    def drain(self, until: Callable[[dict[str, Any]], bool] | None = None, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                message = self.client.get_iopub_msg(timeout=0.1 if until is None else 1)
            except queue.Empty:
                if until is None:
                    return None
                continue
            self.iopub.append(message)
            if until is not None and until(message):
                return message
        raise AssertionError("the kernel did not send the expected message in time")

    def comm_msg(self, comm_id: str, content: dict[str, Any]) -> None:
        data = {"method": "custom", "content": content}
        self.client.shell_channel.send(self.client.session.msg("comm_msg", {"comm_id": comm_id, "data": data}))

    def outputs(self, msg_id: str) -> list[tuple[str, Any]]:
        out = []
        for m in self.iopub:
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            content = m["content"]
            if m["msg_type"] == "stream":
                out.append(("stream", content["text"]))
            elif m["msg_type"] in ("display_data", "update_display_data", "execute_result"):
                out.append((m["msg_type"], content["data"].get("text/plain")))
            elif m["msg_type"] == "error":
                out.append(("error", content["ename"]))
        return out

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelClient]:
    client = KernelClient(tmp_path_factory.mktemp("kernel"))  # journals go there
    setup = client.execute(
        "%load_ext agent_kernel\n"
        "from agent_kernel import tool\n"
        "from agent_kernel.models.scripted import ScriptedModel, FunctionModel, text, tool_call\n"
        "@tool\n"
        "def touch(name: str) -> str:\n"
        "    '''Touches a file.'''\n"
        "    return f'touched {name}'\n")
    assert client.reply(setup)["content"]["status"] == "ok"
    yield client
    client.close()


def test_in_a_real_kernel_a_click_is_handled_while_the_agent_cell_is_busy(kernel: KernelClient) -> None:
    define = kernel.execute('model = ScriptedModel([[text("Touching."), tool_call("touch", {"name": "a"})], "Done."])')
    assert kernel.reply(define)["content"]["status"] == "ok"

    cell = kernel.execute("%%agent -m model --tools touch --new\nTouch a\n")
    opened = kernel.drain(lambda m: m["msg_type"] == "comm_open" and "_esm" in json.dumps(m["content"]["data"]))
    comm_id = opened["content"]["comm_id"]
    kernel.comm_msg(comm_id, {"type": "sync"})
    kernel.drain(lambda m: m["msg_type"] == "comm_msg" and "awaiting_approval" in json.dumps(m["content"]))
    busy = [m for m in kernel.iopub if m["msg_type"] == "status" and m["parent_header"].get("msg_id") == cell]
    assert busy[-1]["content"]["execution_state"] == "busy"  # the cell is still running

    kernel.comm_msg(comm_id, {"type": "approval", "call_id": "call_0_1", "decision": "approve"})

    assert kernel.reply(cell)["content"]["status"] == "ok"
    # The view rendered (it asked for a sync), so its output is updated in place to the transcript.
    kind, summary = [(kind, text) for kind, text in kernel.outputs(cell) if "display_data" in kind][-1]
    assert kind == "update_display_data" and 'touch(name="a") - done' in summary


def test_in_a_real_kernel_an_interrupt_cancels_the_run_and_fails_the_cell(kernel: KernelClient) -> None:
    define = kernel.execute("import asyncio\n"
                            "async def _hang(messages, tools):\n"
                            "    await asyncio.Event().wait()\n"
                            "hang = FunctionModel(_hang)")
    assert kernel.reply(define)["content"]["status"] == "ok"
    cell = kernel.execute("%%agent -m hang --new\nThink forever\n")
    kernel.drain(lambda m: m["msg_type"] == "comm_msg" and '"running"' in json.dumps(m["content"]))

    kernel.manager.interrupt_kernel()

    reply = kernel.reply(cell)["content"]
    assert reply["status"] == "error" and reply["ename"] == "RunInterrupted"
    check = kernel.execute("print(get_ipython().magics_manager.registry['AgentMagics'].sessions.get()"
                           ".agent.events[-1].data['reason'])")
    kernel.reply(check)
    assert ("stream", "user_interrupt\n") in kernel.outputs(check)


def test_in_a_real_kernel_a_restart_while_a_card_waits_leaves_its_approval_to_resume(tmp_path: Path) -> None:
    client = KernelClient(tmp_path)
    try:
        setup = client.execute(
            "%load_ext agent_kernel\n"
            "from agent_kernel import tool\n"
            "from agent_kernel.models.scripted import ScriptedModel, tool_call\n"
            "@tool\n"
            "def touch(name: str) -> str:\n"
            "    '''Touches a file.'''\n"
            "    return f'touched {name}'\n"
            "model = ScriptedModel([tool_call('touch', {'name': 'a'}, id='call_1'), 'unused'])\n")
        assert client.reply(setup)["content"]["status"] == "ok"
        client.execute("%%agent -m model --tools touch --new\nTouch a\n")
        opened = client.drain(lambda m: m["msg_type"] == "comm_open" and "_esm" in json.dumps(m["content"]["data"]))
        client.comm_msg(opened["content"]["comm_id"], {"type": "sync"})
        client.drain(lambda m: m["msg_type"] == "comm_msg" and "awaiting_approval" in json.dumps(m["content"]))

        client.manager.restart_kernel(now=False)  # interrupts, asks the kernel to shut down, starts a new one

        # Whatever the kernel recorded as it went, the call still waits for its answer.
        [journal] = (tmp_path / ".agent_kernel" / "sessions").glob("*.jsonl")
        resumed = Agent.resume(journal, model=ScriptedModel(["Touched."]), tools=[touch], approver=lambda r: True)
        assert [p.call_id for p in resumed.pending_approvals] == ["call_1"]
        assert resumed.continue_run_sync().text == "Touched."
        resumed.close()
    finally:
        client.close()


def test_in_a_real_kernel_twenty_agent_cells_leave_no_comm_open_and_their_handles_hold_no_events(kernel: KernelClient) -> None:
    define = kernel.execute("many = ScriptedModel([text(f'Answer {i}. ' * 50, chunk=7) for i in range(20)])")
    assert kernel.reply(define)["content"]["status"] == "ok"
    cells = []
    for i in range(20):
        cell = kernel.execute(f"%%agent -m many{' --new' if i == 0 else ''}\nQuestion {i}\n")
        assert kernel.reply(cell)["content"]["status"] == "ok"
        cells.append(cell)

    mine = [m for m in kernel.iopub if m["parent_header"].get("msg_id") in cells]
    opened = {m["content"]["comm_id"] for m in mine if m["msg_type"] == "comm_open"}
    closed = {m["content"]["comm_id"] for m in mine if m["msg_type"] == "comm_close"}
    assert len(opened) == 40  # each run's view and its layout
    assert opened - closed == set()
    check = kernel.execute(
        "import json\n"
        "runs = get_ipython().magics_manager.registry['AgentMagics'].sessions.get().runs\n"
        "print(json.dumps({'runs': len(runs), 'lists': sum(isinstance(r.events, list) for r in runs),\n"
        "                  'views': sum(r.view is not None for r in runs), 'answer': runs[-1].summary.answer[:10],\n"
        "                  'events': len(runs[-1].events), 'last': runs[-1].result().events[-1].type.value}))")
    kernel.reply(check)
    [printed] = [text for kind, text in kernel.outputs(check) if kind == "stream"]
    held = json.loads(printed)
    # 20 handles: no list of events and no view held; the summary and the result are there, and
    # the result's events are read from agent.events (or the journal) when asked for.
    assert (held["runs"], held["lists"], held["views"]) == (20, 0, 0)
    assert held["answer"] == "Answer 19." and held["events"] > 50 and held["last"] == "run_finish"


def test_an_executed_notebook_of_fifty_agent_runs_holds_their_transcripts_and_little_else(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    runs = 50
    setup = ("%load_ext agent_kernel\n"
             "from agent_kernel.models.scripted import ScriptedModel, text\n"
             f"model = ScriptedModel([text(f'Answer {{i}}. ' * 40, chunk=5) for i in range({runs})])")
    cells = [setup] + [f"%%agent -m model\nQuestion {i}" for i in range(runs)]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(notebook, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(tmp_path)}})

    client.execute()

    size = len(nbformat.writes(notebook).encode())
    transcripts = [o for cell in notebook.cells[1:] for o in cell.outputs if "text/html" in o.get("data", {})]
    assert len(transcripts) == runs and all(f"Answer {i}." in o["data"]["text/plain"] for i, o in enumerate(transcripts))
    transcript_bytes = sum(len(json.dumps(o, indent=1).encode()) for o in transcripts)
    beyond = (size - transcript_bytes) / runs
    assert beyond <= 5_000, f"{beyond:,.0f} bytes per run beyond its transcript"
    state = notebook.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    assert not any("render" in json.dumps(model) for model in state.values())  # no view's code is saved


def test_under_nbclient_nobody_is_asked_and_the_policy_or_a_refusal_decides(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    cells = [
        "%load_ext agent_kernel\n"
        "from agent_kernel import tool\n"
        "from agent_kernel.models.scripted import ScriptedModel, text, tool_call\n"
        "@tool\n"
        "def touch(name: str) -> str:\n"
        "    '''Touches a file.'''\n"
        "    return f'touched {name}'\n"
        "model = ScriptedModel([[tool_call('touch', {'name': 'a'})], 'Refused.', "
        "[tool_call('touch', {'name': 'b'})], 'Approved.'])",
        "%%agent -m model --tools touch -o refused\nTouch a",
        "import os; os.environ['AGENT_KERNEL_APPROVAL'] = 'auto_approve'",
        "%%agent --new -m model --tools touch -o approved\nTouch b",  # a cell's options are its own
        "print(refused.tool_calls[0]['is_error'], approved.tool_calls[0]['content'])",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(notebook, kernel_name="python3", timeout=60,
                            resources={"metadata": {"path": str(tmp_path)}})

    client.execute()  # a click that never comes would time this out

    plain = [[o.get("data", {}).get("text/plain", o.get("text", "")) for o in cell.outputs]
             for cell in notebook.cells]
    assert notebook.cells[1].outputs[0]["data"] == {}  # the unrendered view, emptied
    assert "AGENT_KERNEL_APPROVAL" in plain[1][1] and "rejected" in plain[1][1]
    assert 'touch(name="b") - done' in plain[3][1]
    assert plain[4] == ["True touched b\n"]


async def test_a_crew_run_in_a_cell_returns_a_crew_result() -> None:
    from agent_kernel import Crew, CrewResult, Task

    from .helpers import make_agent

    crew = Crew([make_agent(ScriptedModel(["Facts."]), name="researcher")], [Task("Find facts", agent="researcher", name="facts")], journal=None)
    result = await run_cell(crew, "go", display=False)
    assert isinstance(result, CrewResult) and result.outputs["facts"].text == "Facts."
