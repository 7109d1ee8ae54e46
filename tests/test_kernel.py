"""The Agent kernel (jupyter/kernel.py, install.py), driven through jupyter_client like a front-end.

One kernel serves the whole module; each test configures the agent it needs in a ``%%python``
cell (``agent.model = ScriptedModel([...])``), the way the kernel documents it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

from agent_kernel import Agent
from agent_kernel.jupyter._kernel import _marker, classify, is_python_cell, strip_python_escape
from agent_kernel.jupyter.install import DISPLAY_NAME, KERNEL_NAME, kernel_spec, main
from agent_kernel.models.scripted import ScriptedModel

from .kernel_harness import (
    await_cell,
    execute,
    install_kernelspec,
    kernel_environment,
    outputs,
    start_agent_kernel,
    stdout,
    stop_agent_kernel,
)

WIDGET = "application/vnd.jupyter.widget-view+json"
PANEL = "application/vnd.agent-kernel.panel+json"
NOTEBOOKS = Path(__file__).parent / "notebooks_kernel"


@pytest.fixture(scope="module")
def kernel_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prefix holding the installed kernelspec (``share/jupyter``)."""
    return install_kernelspec(tmp_path_factory.mktemp("prefix"))


@pytest.fixture(scope="module")
def kernel(kernel_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    """One agent kernel running in a temporary folder: its manager and a client."""
    km, client = start_agent_kernel(kernel_home, tmp_path_factory.mktemp("work"))
    yield km, client
    stop_agent_kernel(km, client)


@pytest.fixture
def kc(kernel: tuple[KernelManager, BlockingKernelClient]) -> BlockingKernelClient:
    """The module kernel's client."""
    return kernel[1]


def script(kc: BlockingKernelClient, *responses: str) -> None:
    """Gives the kernel's agent a fresh conversation and a scripted model playing ``responses``
    (Python expressions for ScriptedModel items)."""
    reply, messages = execute(kc, "%%python\n"
                              "from agent_kernel.models.scripted import ScriptedModel, text, tool_call, stall\n"
                              "agent.reset()\n"
                              f"agent.model = ScriptedModel([{', '.join(responses)}])")
    assert reply["status"] == "ok", (reply, messages)


def marker(messages: list[dict[str, Any]]) -> str | None:
    """The marker line saying what the kernel did with a cell it judged, if the cell showed one."""
    shown = [c["data"]["text/plain"] for c in outputs(messages, "display_data") if "agent_kernel" in c.get("metadata", {})]
    return shown[0] if shown else None


def summary_text(messages: list[dict[str, Any]]) -> str:
    """The plain text of the static summary the prompt cell displayed last."""
    shown = [c["data"] for c in outputs(messages, "display_data")
             if WIDGET not in c["data"] and "agent_kernel" not in c.get("metadata", {})]
    assert shown, f"no summary was displayed: {messages}"
    return str(shown[-1]["text/plain"])


# -- which cells are Python ----------------------------------------------------------------


@pytest.mark.parametrize("cell", [
    "%%python\nx = 1",
    "%%python\nundefined_name",  # the escape wins over the judgement
    "%%time\nsum(range(10))",
    "%pwd",
    "!echo hi",
    "%cd /tmp\n!ls\n\n%who",
    "",
    "   \n",
])
def test_escapes_magics_shell_lines_and_empty_cells_are_python_without_judging(cell: str) -> None:
    kind = classify(cell, {})
    assert kind.python and not kind.judged


@pytest.mark.parametrize("cell", [
    "print('hello')",
    "x = 1",
    "df.describe()",
    "df",
    "df?",
    "import os\nos.getcwd()",
    "for i in range(3):\n    print(i)",
    "squares = [n * n for n in range(5)]\n%who\nsum(squares)",
])
def test_python_whose_names_are_all_defined_runs_as_python(cell: str) -> None:
    kind = classify(cell, {"df": object()})
    assert kind.python and kind.judged, kind


@pytest.mark.parametrize("cell", [
    "Summarise the data in df",
    "hello",
    "help",  # a builtin, but as a lone word it is a request
    "not sure",  # prose that parses as Python, as names and operators
    "tables and charts",
    "yes or no",
    "%pwd\nthen tell me what is there",
    "What does !important mean in CSS?",
    "print(1)\n%%python",
    "%%prompt\nprint('hello')",
])
def test_everything_else_is_a_prompt(cell: str) -> None:
    assert not is_python_cell(cell, {"df": object()})


@pytest.mark.parametrize("cell", ["prnt('hello')", "print(undefined)", "x = undefined + 1", "df.describ()",
                                  "import numpyy", "result = summarise(df)"])
def test_code_with_a_typo_runs_as_python_so_its_name_error_shows_rather_than_costing_a_request(cell: str) -> None:
    kind = classify(cell, {"df": object()})
    assert kind.python and kind.judged, kind
    assert "reads as Python code" in kind.reason or kind.reason.startswith("it is Python")


def test_the_judgement_says_why() -> None:
    assert classify("prnt('hello')", {}).reason == "it reads as Python code, though 'prnt' is not defined"
    assert "%%prompt" in _marker(classify("prnt('hello')", {}))["text/plain"]  # and how to send it instead
    assert classify("not sure", {}).reason == "'sure' is not defined"
    assert classify("Summarise it", {}).reason == "it is not Python"
    assert not classify("%%prompt\nx = 1", {}).judged


def test_the_python_escape_becomes_a_blank_line_so_line_numbers_match_the_cell() -> None:
    assert strip_python_escape(["%%python\n", "x = 1\n"]) == ["\n", "x = 1\n"]
    assert strip_python_escape(["%%time\n", "x = 1\n"]) == ["%%time\n", "x = 1\n"]


# -- the kernelspec ------------------------------------------------------------------------


def test_install_into_a_prefix_writes_a_kernelspec_that_runs_this_python(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--prefix", str(tmp_path)]) == 0
    spec = json.loads((tmp_path / "share/jupyter/kernels" / KERNEL_NAME / "kernel.json").read_text())
    assert spec == kernel_spec()
    assert spec["display_name"] == DISPLAY_NAME == "Agent (Python)"
    assert spec["argv"][0] == sys.executable
    assert spec["argv"][1:] == ["-m", "agent_kernel.jupyter.kernel_main", "-f", "{connection_file}"]
    assert str(tmp_path) in capsys.readouterr().out


def test_install_accepts_one_location_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--user", "--sys-prefix"])
    assert "not allowed with argument" in capsys.readouterr().err


# -- through a running kernel --------------------------------------------------------------


def test_kernel_info_says_it_is_the_agent_kernel_running_python(kc: BlockingKernelClient) -> None:
    kc.kernel_info()
    info = kc.get_shell_msg(timeout=10)["content"]
    assert info["implementation"] == "agent_kernel"
    assert info["language_info"]["name"] == "python"
    assert "%%python" in info["banner"] and "%%prompt" in info["banner"]


def test_cells_are_highlighted_as_markdown_not_as_python(kc: BlockingKernelClient) -> None:
    kc.kernel_info()
    language = kc.get_shell_msg(timeout=10)["content"]["language_info"]
    assert language["codemirror_mode"] == "markdown" and language["pygments_lexer"] == "markdown"
    assert language["file_extension"] == ".py"  # still Python to exporters


def test_print_hello_runs_as_python_and_says_so(kc: BlockingKernelClient) -> None:
    reply, messages = execute(kc, "print('hello')")

    assert reply["status"] == "ok" and stdout(messages) == "hello\n"
    assert (marker(messages) or "").startswith("▶ ran as Python")
    assert "%%prompt" in (marker(messages) or "")
    assert marker(execute(kc, "%%python\nprint('hi')")[1]) is None  # an escape needs no marker


def test_a_prompt_is_marked_as_sent_to_the_agent_with_the_reason(kc: BlockingKernelClient) -> None:
    script(kc, '"Hi there."')
    reply, messages = execute(kc, "greeting or farewell")

    assert reply["status"] == "ok", messages
    assert marker(messages) == ("▶ sent to the agent ('greeting' is not defined; start the cell "
                                "with %%python to run it as Python)")
    assert "Hi there." in summary_text(messages)


def test_a_python_typo_shows_its_name_error_and_costs_no_request(kc: BlockingKernelClient) -> None:
    reply, messages = execute(kc, "prnt('hello')")

    assert reply["status"] == "error" and reply["ename"] == "NameError", reply
    assert marker(messages) == ("▶ ran as Python (it reads as Python code, though 'prnt' is not defined; start "
                                "the cell with %%prompt to send it to the agent)")


def test_the_prompt_escape_sends_python_to_the_agent_without_the_escape_line(kc: BlockingKernelClient) -> None:
    script(kc, '"It prints hello."')
    execute(kc, "%%prompt\nprint('hello')")
    reply, messages = execute(kc, "%%python\nprint(agent.messages[0].text)")
    assert stdout(messages) == "print('hello')\n"


def test_the_first_prompt_on_the_offline_model_answers_without_an_error(kc: BlockingKernelClient) -> None:
    execute(kc, "%%python\nfrom agent_kernel.models._offline import OfflineModel\n"
                "agent.reset()\nagent.model = OfflineModel(delay=0)")
    reply, messages = execute(kc, "hello")

    assert reply["status"] == "ok", messages
    answer = summary_text(messages)
    assert "offline model" in answer and "NameError" not in answer and "python(" not in answer
    reply, messages = execute(kc, "What is 6 * 7?")  # arithmetic: the python tool computes it
    assert reply["status"] == "ok" and "42" in summary_text(messages)


def test_a_prompt_whose_agent_runs_python_creates_a_variable_the_next_python_cell_reads(kc: BlockingKernelClient) -> None:
    script(kc, 'tool_call("python", {"code": "squares = [n * n for n in range(5)]\\nlen(squares)"})',
           '"I made `squares`."')

    reply, messages = execute(kc, "Make a list of the first five squares called squares.")

    assert reply["status"] == "ok", messages
    summary = summary_text(messages)
    assert "I made `squares`." in summary
    assert "python(" in summary and "ok" in summary
    reply, messages = execute(kc, "%%python\nprint(squares)")
    assert reply["status"] == "ok"
    assert stdout(messages) == "[0, 1, 4, 9, 16]\n"


def test_the_person_and_the_agent_share_one_namespace(kc: BlockingKernelClient) -> None:
    execute(kc, "%%python\nprices = {'apple': 3, 'pear': 5}")
    script(kc, 'tool_call("python", {"code": "total = sum(prices.values())\\ntotal"})', '"The total is 8."')

    reply, messages = execute(kc, "What do the prices add up to?")

    assert reply["status"] == "ok", messages
    assert "8" in summary_text(messages)
    assert stdout(execute(kc, "%%python\nprint(total)")[1]) == "8\n"


def test_a_prompt_cell_shows_the_live_view_then_the_static_summary(kc: BlockingKernelClient) -> None:
    script(kc, '"Hello from the script."')

    reply, messages = execute(kc, "Say hello")

    shown = [c["data"] for c in outputs(messages, "display_data")]
    assert shown[0]["text/plain"].startswith("▶ sent to the agent (it is not Python"), "the marker comes first"
    assert WIDGET in shown[1], "then the live view"
    assert {"text/plain", "text/html"} <= set(shown[-1])
    assert summary_text(messages).startswith("Answer:\nHello from the script.")
    assert any(m["msg_type"] == "comm_open" for m in messages), "the view is a widget"
    assert reply["status"] == "ok"


def test_prompts_count_as_executions_and_are_kept_in_history(kc: BlockingKernelClient) -> None:
    script(kc, '"one"', '"two"')
    first, _ = execute(kc, "First prompt")
    second, _ = execute(kc, "Second prompt")
    assert second["execution_count"] == first["execution_count"] + 1

    kc.history(hist_access_type="tail", n=2, raw=True, output=False)
    history = kc.get_shell_msg(timeout=10)["content"]["history"]

    assert [entry[2] for entry in history] == ["First prompt", "Second prompt"]


def test_a_failed_run_is_an_error_reply_that_names_the_cause(kc: BlockingKernelClient) -> None:
    script(kc)  # no responses: the first model call fails

    reply, messages = execute(kc, "Anything")

    assert reply["status"] == "error"
    assert reply["ename"] == "AgentError"
    assert "no response left" in reply["evalue"]
    errors = outputs(messages, "error")
    assert len(errors) == 1 and "add more responses" in errors[0]["evalue"]
    assert "ended: error" in summary_text(messages)


def test_interrupting_a_prompt_cancels_the_run_and_the_conversation_goes_on(kernel: tuple[KernelManager, BlockingKernelClient]) -> None:
    km, kc = kernel
    script(kc, '[text("Thinking about it"), stall(60), text(" never said")]', '"Recovered."')
    msg_id = kc.execute("Take your time")
    # Interrupt once the run has started: the view's first batch carries run_start.
    while True:
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "comm_msg":
            content = msg["content"]["data"].get("content", {})
            if content.get("type") == "batch":
                break
    km.interrupt_kernel()

    reply, messages = await_cell(kc, msg_id)

    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    assert "kernel interrupt in cell" in reply["evalue"]
    assert "ended: user_interrupt" in summary_text(messages)
    reply, messages = execute(kc, "Are you still there?")
    assert reply["status"] == "ok"
    assert "Recovered." in summary_text(messages)


def test_interrupting_a_prompt_whose_call_waits_for_approval_stops_the_run(kernel: tuple[KernelManager, BlockingKernelClient]) -> None:
    km, kc = kernel
    script(kc, "tool_call('python', {'code': 'ran = True'})", '"Not run."')
    # Nobody answers here: without the headless policy the call waits for the view to render.
    reply, messages = execute(kc, "%%python\npolicy, agent.permissions.policy = agent.permissions.policy, None")
    assert reply["status"] == "ok", messages
    try:
        msg_id = kc.execute("Set ran")
        while True:
            msg = kc.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "comm_msg":
                if "awaiting_approval" in str(msg["content"]["data"].get("content", {})):
                    break
        km.interrupt_kernel()

        reply, messages = await_cell(kc, msg_id)

        assert reply["ename"] == "KeyboardInterrupt", reply
        assert "ended: user_interrupt" in summary_text(messages)
        reply, messages = execute(kc, "%%python\nprint('ran' in globals(), [e.data['is_error'] for e in agent.events if e.type.value == 'tool_result'])")
        assert stdout(messages) == "False [True]\n"  # the call was answered as stopped and never ran
    finally:
        execute(kc, "%%python\nagent.permissions.policy = policy")


def _approval_card(kc: BlockingKernelClient, msg_id: str) -> tuple[str, list[dict[str, Any]]]:
    """Reads cell ``msg_id``'s messages until its view shows a call waiting for approval, tells
    the view it rendered (so the call waits for a click), and returns the view's comm id and the
    messages read."""
    view, seen = None, []
    while True:
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        seen.append(msg)
        if msg["msg_type"] == "comm_open" and "_esm" in str(msg["content"]["data"]):
            view = msg["content"]["comm_id"]
        if msg["msg_type"] == "comm_msg" and "awaiting_approval" in str(msg["content"]["data"].get("content", {})):
            break
    assert view is not None
    click(kc, view, {"type": "sync"})
    return view, seen


def click(kc: BlockingKernelClient, view: str, message: dict[str, Any]) -> None:
    """Sends ``message`` from the live view ``view`` to the kernel, as its front end does."""
    kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": view, "data": {"method": "custom", "content": message}}))


def test_a_restart_while_a_prompt_waits_for_approval_leaves_the_approval_to_resume(kernel_home: Path, tmp_path: Path) -> None:
    # Jupyter interrupts a kernel before it restarts it: that interrupt must not answer the call.
    km, kc = start_agent_kernel(kernel_home, tmp_path, AGENT_KERNEL_APPROVAL="")  # nobody but a person decides
    try:
        script(kc, "tool_call('python', {'code': 'ran = True'}, id='call_1')", '"Unused."')
        _approval_card(kc, kc.execute("Set ran"))

        km.restart_kernel(now=False)  # interrupts, asks the kernel to shut down, starts a new one

        [journal] = (tmp_path / ".agent_kernel" / "sessions").glob("*.jsonl")
        resumed = Agent.resume(journal, model=ScriptedModel(["Done."]), tools=["python"], approver=lambda request: False)
        assert [p.call_id for p in resumed.pending_approvals] == ["call_1"]
        assert resumed.continue_run_sync().text == "Done."  # asked again, refused, answered
        resumed.close()
    finally:
        stop_agent_kernel(km, kc)


def test_running_a_cut_off_prompt_again_after_a_restart_shows_its_card_and_finishes_its_run(kernel_home: Path, tmp_path: Path) -> None:
    km, kc = start_agent_kernel(kernel_home, tmp_path, AGENT_KERNEL_APPROVAL="")
    try:
        script(kc, "tool_call('python', {'code': 'ran = True'}, id='call_1')", '"Unused."')
        _approval_card(kc, kc.execute("Set ran"))
        km.restart_kernel(now=False)
        kc.wait_for_ready(timeout=60)

        msg_id = kc.execute("Set ran")  # the same prompt, as the new kernel's first cell
        view, before = _approval_card(kc, msg_id)  # the card again, not a new question to the model
        click(kc, view, {"type": "approval", "call_id": "call_1", "decision": "approve"})
        reply, messages = await_cell(kc, msg_id)

        assert reply["status"] == "ok", reply
        assert "waiting for approval (call_1) when the kernel went down; continuing it" in stdout(before + messages)
        reply, messages = execute(kc, "%%python\nprint(ran)")
        assert stdout(messages) == "True\n"  # the approved call ran, in the notebook's namespace
        [journal] = (tmp_path / ".agent_kernel" / "sessions").glob("*.jsonl")  # one conversation, continued
        events = [json.loads(line) for line in journal.read_text().splitlines()[1:]]
        assert [e["data"]["call_id"] for e in events if e["type"] == "tool_start"] == ["call_1"]  # run once
        asked = [e for e in events if e["type"] == "llm_complete" and "call_1" in json.dumps(e["data"]["message"])]
        assert len(asked) == 1  # the model call that asked for it was not repeated
        assert events[-1]["type"] == "run_finish" and events[-1]["data"]["reason"] == "end_turn"
    finally:
        stop_agent_kernel(km, kc)


def test_after_a_restart_an_agent_the_person_made_answers_the_cut_off_prompt_afresh(kernel_home: Path, tmp_path: Path) -> None:
    # Only the kernel's own, unused agent gives way to the cut-off run: never one the person chose.
    km, kc = start_agent_kernel(kernel_home, tmp_path, AGENT_KERNEL_APPROVAL="")
    try:
        script(kc, "tool_call('python', {'code': 'ran = True'}, id='call_1')", '"Unused."')
        _approval_card(kc, kc.execute("Set ran"))
        km.restart_kernel(now=False)
        kc.wait_for_ready(timeout=60)
        execute(kc, "%%python\nfrom agent_kernel import Agent\n"
                    "from agent_kernel.models.scripted import ScriptedModel\n"
                    "agent = Agent(ScriptedModel(['A fresh answer.']), journal=None)")

        reply, messages = execute(kc, "Set ran")

        assert reply["status"] == "ok", messages
        assert "A fresh answer." in summary_text(messages)
        assert "continuing it" not in stdout(messages)
    finally:
        stop_agent_kernel(km, kc)


def test_an_interrupt_delivered_to_another_thread_still_stops_a_silent_run(kc: BlockingKernelClient) -> None:
    # The OS may hand a process-directed SIGINT to any thread. Here a worker thread takes it while
    # the kernel's main thread idles in its event loop, waiting on a model that says nothing.
    reply, messages = execute(kc, "%%python\n"
                              "import signal, sys, threading, time\n"
                              "from agent_kernel.models.scripted import ScriptedModel, text, stall\n"
                              "agent.reset()\n"
                              "agent.model = ScriptedModel([[text('Waiting'), stall(60)]])\n"
                              "agent.stall_timeout = None\n"
                              "main = threading.main_thread().ident\n"
                              "def idle():  # the main thread waits in its event loop's select()\n"
                              "    frame = sys._current_frames().get(main)\n"
                              "    return frame is not None and frame.f_code.co_name in ('select', 'poll')\n"
                              "def interrupt_when_silent():\n"
                              "    while not (agent.running and agent.events[-1].type.value == 'text_delta' and idle()):\n"
                              "        time.sleep(0.01)\n"
                              "    signal.pthread_kill(threading.get_ident(), signal.SIGINT)\n"
                              "threading.Thread(target=interrupt_when_silent, daemon=True).start()")
    assert reply["status"] == "ok", messages

    reply, messages = execute(kc, "Wait for me", timeout=20)

    assert reply["ename"] == "KeyboardInterrupt", reply
    execute(kc, "%%python\nagent.stall_timeout = 30.0")


def test_a_python_cell_that_is_only_a_magic_or_shell_line_runs_in_ipython(kc: BlockingKernelClient) -> None:
    reply, messages = execute(kc, "!echo from the shell")
    assert reply["status"] == "ok"
    assert "from the shell" in stdout(messages)
    reply, messages = execute(kc, "%%python\nvalue = 41\nvalue + 1")
    assert outputs(messages, "execute_result")[0]["data"]["text/plain"] == "42"


def test_python_errors_point_at_the_line_as_written_in_the_cell(kc: BlockingKernelClient) -> None:
    reply, messages = execute(kc, "%%python\nx = 1\nraise ValueError('third line')")
    assert reply["status"] == "error"
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(outputs(messages, "error")[0]["traceback"]))
    assert "----> 3 raise ValueError('third line')" in traceback, traceback


def test_a_python_cell_can_replace_the_agent_and_prompts_go_to_the_new_one(kc: BlockingKernelClient) -> None:
    execute(kc, "%%python\nfrom agent_kernel import Agent\n"
                "from agent_kernel.models.scripted import ScriptedModel\n"
                "previous = agent\n"
                "agent = Agent(ScriptedModel(['A new agent answers.']), journal=None)")
    try:
        reply, messages = execute(kc, "Who is there?")
        assert reply["status"] == "ok"
        assert "A new agent answers." in summary_text(messages)
    finally:
        execute(kc, "%%python\nagent = previous")


def test_a_person_may_use_the_name_agent_for_something_else(kc: BlockingKernelClient) -> None:
    script(kc, '"Still here."')
    execute(kc, "%%python\nsession_agent = agent\nagent = 'Agent Smith'")
    try:
        reply, messages = execute(kc, "Are you there?")
        assert "Still here." in summary_text(messages)
        assert stdout(execute(kc, "%%python\nprint(agent)")[1]) == "Agent Smith\n"
    finally:
        execute(kc, "%%python\nagent = session_agent")


def test_agent_magics_act_on_the_agent_that_prompts_go_to(kc: BlockingKernelClient) -> None:
    execute(kc, "%%python\nfrom agent_kernel.models.scripted import ScriptedModel\n"
                "switched = ScriptedModel(['Switched by a magic.'])")
    reply, messages = execute(kc, "%agent model switched")
    assert reply["status"] == "ok", messages

    reply, messages = execute(kc, "Which model are you?")

    assert "Switched by a magic." in summary_text(messages)
    reply, messages = execute(kc, "%agent reset")  # a new conversation: a new agent
    assert reply["status"] == "ok", messages
    reply, messages = execute(kc, "%%python\nfrom agent_kernel.jupyter._extension import loaded_magics\n"
                                  "print(loaded_magics(get_ipython()).sessions.get().agent is agent)")
    assert stdout(messages) == "True\n"


def test_agent_panel_asks_the_front_end_to_open_it_and_shows_prompt_cells_too(kc: BlockingKernelClient) -> None:
    script(kc, "'Shown beside the notebook as well.'")
    reply, messages = execute(kc, "%agent panel")
    assert reply["status"] == "ok", messages
    asked = [c["data"] for c in outputs(messages, "comm_open") if c["target_name"] == "agent_kernel.notebook"]
    assert [request["op"] for request in asked] == ["panel"]
    panel_output = next(c["data"] for c in outputs(messages, "display_data") if PANEL in c["data"])
    assert panel_output[PANEL]["model_id"] == asked[0]["model_id"]

    reply, messages = execute(kc, "Say something.")
    assert reply["status"] == "ok", messages
    assert "Shown beside the notebook as well." in summary_text(messages)  # the cell shows it as ever
    reply, messages = execute(kc, "%%python\nfrom agent_kernel.jupyter._extension import loaded_magics\n"
                                  "shown = [getattr(c, 'value', '') for c in loaded_magics(get_ipython()).panel.runs.children]\n"
                                  "print('Say something.' in shown[-2], 'Shown beside the notebook as well.' in shown[-1])")
    assert stdout(messages) == "True True\n"


def test_completion_offers_python_names_in_python_cells_and_in_prompts(kc: BlockingKernelClient) -> None:
    execute(kc, "%%python\nquarterly_sales = 1")
    for code in ("%%python\nquarterly_s", "Plot quarterly_s"):
        kc.complete(code, len(code))
        reply = kc.get_shell_msg(timeout=10)["content"]
        assert "quarterly_sales" in reply["matches"], code
        assert code[reply["cursor_start"]:reply["cursor_end"]] == "quarterly_s"


def test_a_prompt_is_always_complete_and_python_cells_are_judged_as_python(kc: BlockingKernelClient) -> None:
    for code, status in [("Tell me about", "complete"), ("%%python\nfor x in y:", "incomplete"),
                         ("%%python\nx = 1", "complete")]:
        kc.is_complete(code)
        assert kc.get_shell_msg(timeout=10)["content"]["status"] == status, code


# -- a saved notebook under nbval ----------------------------------------------------------


def test_a_notebook_saved_with_the_agent_kernel_runs_under_nbval(kernel_home: Path, tmp_path: Path) -> None:
    # Run in a copy, so the journal the kernel writes lands in a temporary folder. A second copy
    # whose stored answer differs shows that nbval really compares the prompt cell's summary.
    smoke = NOTEBOOKS / "agent_kernel_smoke.ipynb"
    (tmp_path / smoke.name).write_text(smoke.read_text(encoding="utf-8"), encoding="utf-8")
    tampered = json.loads(smoke.read_text(encoding="utf-8"))
    summary = tampered["cells"][2]["outputs"][-1]["data"]
    summary["text/plain"] = [line.replace("first five squares", "first five cubes") for line in summary["text/plain"]]
    (tmp_path / "tampered.ipynb").write_text(json.dumps(tampered), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")

    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", "--nbval-sanitize-with", str(NOTEBOOKS / "sanitize.cfg"),
         "-p", "no:cacheprovider", "-q", smoke.name, "tampered.ipynb"],
        cwd=tmp_path, env=kernel_environment(kernel_home), capture_output=True, text=True, timeout=240)

    report = run.stdout + run.stderr
    assert "1 failed, 7 passed" in report, report
    assert "mismatch 'text/plain'" in report and "first five cubes" in report, report
