"""``%agent mcp``: listing a session's MCP servers and adding one from a notebook."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from agent_kernel.jupyter._extension import loaded_magics

from .mcp_servers import EVERYTHING, NODE, everything_missing, server_processes

pytestmark = pytest.mark.timeout(120)

SETUP = '''
from agent_kernel.models.scripted import ScriptedModel, tool_call
model = ScriptedModel([[tool_call("mcp__time__get_current_time", {"timezone": "UTC"})], "It is time.", "Again."])
'''


@pytest.fixture(scope="module")
def shell() -> InteractiveShell:
    ip = InteractiveShell.instance()
    ip.history_manager.enabled = False
    return ip


def run(ip: InteractiveShell, code: str) -> tuple[Any, Any]:
    with capture_output() as captured:
        result = ip.run_cell(code)
    error = result.error_in_exec or result.error_before_exec
    if error is not None:
        raise AssertionError(f"cell failed: {code!r}\n{captured.stdout}") from error
    return result, captured


def error_of(ip: InteractiveShell, code: str) -> BaseException:
    with capture_output():
        result = ip.run_cell(code)
    error = result.error_in_exec or result.error_before_exec
    assert error is not None, f"expected {code!r} to fail"
    return error


@pytest.fixture
def ip(shell: InteractiveShell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    monkeypatch.chdir(tmp_path)
    names = set(shell.user_ns)
    shell.run_cell("%load_ext agent_kernel")
    run(shell, SETUP)
    run(shell, f"%config AgentMagics.journal_dir = {str(tmp_path / 'journals')!r}")
    yield shell
    shell.run_cell("%unload_ext agent_kernel")
    for name in set(shell.user_ns) - names:
        del shell.user_ns[name]
    shell.config.pop("AgentMagics", None)


def test_mcp_add_then_a_cell_uses_the_servers_tools_and_mcp_lists_them(ip: InteractiveShell) -> None:
    _, added = run(ip, f"%agent mcp add time -- {sys.executable} -m mcp_server_time")
    assert "Added MCP server 'time' (stdio)" in added.stdout and "starts on the next run" in added.stdout
    before = ip.run_cell("%agent mcp").result
    assert before.loc[0, "status"] == "stopped" and before.loc[0, "tools"] == []
    run(ip, "%%agent -m model --mode bypass\nWhat time is it?")
    agent = loaded_magics(ip).sessions.get().agent
    (call,) = [e.data for e in agent.events if e.type.value == "tool_result"]
    assert call["name"] == "mcp__time__get_current_time" and '"timezone": "UTC"' in call["content"]
    table = ip.run_cell("%agent mcp").result
    row = table.iloc[0]
    assert row["server"] == "time" and row["status"] == "connected" and row["transport"] == "stdio"
    assert "mcp__time__get_current_time" in row["tools"]


def test_mcp_add_refuses_a_second_server_of_the_same_name_and_bad_syntax(ip: InteractiveShell) -> None:
    run(ip, f"%agent mcp add time -- {sys.executable} -m mcp_server_time")
    twice = str(error_of(ip, "%agent mcp add time http://127.0.0.1:9/mcp"))
    assert "already has a server named 'time'" in twice and "%agent mcp remove time" in twice
    assert "put -- before a command" in str(error_of(ip, "%agent mcp add other python -m x"))
    assert "with a host" in str(error_of(ip, "%agent mcp add other http://"))
    assert "a quote is not closed" in str(error_of(ip, '%agent mcp add other -- "python -m x'))
    assert "not understood" in str(error_of(ip, "%agent mcp drop time"))


def test_a_mistyped_server_is_removed_and_added_again_and_a_running_one_is_stopped(ip: InteractiveShell) -> None:
    run(ip, "%agent mcp add time -- pythn -m mcp_server_time")  # the typo shows only when it starts
    run(ip, "%agent reset")  # a new conversation takes the servers along, typo included
    assert "no MCP server named 'tme'" in str(error_of(ip, "%agent mcp remove tme"))
    run(ip, "%agent mcp remove time")
    assert ip.run_cell("%agent mcp").result.empty
    run(ip, f"%agent mcp add time -- {sys.executable} -m mcp_server_time")
    run(ip, "%%agent -m model --mode bypass\nWhat time is it?")
    agent = loaded_magics(ip).sessions.get().agent
    assert "mcp__time__get_current_time" in agent.tools
    procs = server_processes("mcp_server_time")
    assert procs
    run(ip, "%agent mcp remove time")
    _, alive = psutil.wait_procs(procs, timeout=30)
    assert not alive and "mcp__time__get_current_time" not in agent.tools


def test_a_new_conversation_keeps_the_servers_and_stops_the_old_ones(ip: InteractiveShell) -> None:
    run(ip, f"%agent mcp add time -- {sys.executable} -m mcp_server_time")
    run(ip, "%%agent -m model --mode bypass\nWhat time is it?")
    procs = server_processes("mcp_server_time")
    assert procs
    run(ip, "%agent reset")
    _, alive = psutil.wait_procs(procs, timeout=30)
    assert not alive
    table = ip.run_cell("%agent mcp").result
    assert list(table["server"]) == ["time"] and table.loc[0, "status"] == "stopped"


def test_mcp_add_trusted_believes_the_servers_annotations_and_says_so(ip: InteractiveShell) -> None:
    _, added = run(ip, f"%agent mcp add time --trusted -- {sys.executable} -m mcp_server_time")
    assert "(stdio, trusted)" in added.stdout
    run(ip, "%%agent -m model --mode plan\nWhat time is it?")  # read-only by its trusted claim: plan mode runs it
    agent = loaded_magics(ip).sessions.get().agent
    assert agent.mcp.servers["time"].trusted
    (call,) = [e.data for e in agent.events if e.type.value == "tool_result"]
    assert not call["is_error"] and '"timezone": "UTC"' in call["content"]


def test_mcp_add_with_a_url_adds_a_streamable_http_server(ip: InteractiveShell) -> None:
    _, added = run(ip, "%agent mcp add docs http://127.0.0.1:3001/mcp")
    assert "Added MCP server 'docs' (http)" in added.stdout
    table = ip.run_cell("%agent mcp").result
    assert list(table["server"]) == ["docs"] and table.loc[0, "transport"] == "http"
    assert table.loc[0, "target"] == "http://127.0.0.1:3001/mcp" and table.loc[0, "status"] == "stopped"


# ---- resources and prompts in cells (server-everything) --------------------------------------

ARCHITECTURE = "demo://resource/static/document/architecture.md"


@pytest.fixture
def ev(ip: InteractiveShell) -> InteractiveShell:
    """The session has server-everything as ``ev`` and a model that only answers."""
    missing = everything_missing()
    if missing:
        pytest.fail(missing)
    run(ip, f"%agent mcp add ev -- {NODE} {EVERYTHING} stdio")
    run(ip, "plain = ScriptedModel(['Read it.', 'Again.', 'Once more.'])")
    return ip


def last_run(ip: InteractiveShell) -> list[Any]:
    agent = loaded_magics(ip).sessions.get().agent
    starts = [i for i, e in enumerate(agent.events) if e.type.value == "run_start"]
    return agent.events[starts[-1]:]


def test_a_resource_option_puts_the_resources_text_after_the_prompt_and_journals_it(ev: InteractiveShell) -> None:
    run(ev, f"%%agent -m plain --resource ev:{ARCHITECTURE}\nSummarise the architecture.")
    events = last_run(ev)
    prompt = events[0].data["prompt"]
    assert prompt.startswith("Summarise the architecture.")
    assert f'<mcp-resource server="ev" uri="{ARCHITECTURE}" mime-type="text/markdown">' in prompt
    assert "# Everything Server – Architecture" in prompt and prompt.rstrip().endswith("</mcp-resource>")
    (read,) = [e.data for e in events if e.type.value == "mcp_resource"]
    assert read["server"] == "ev" and read["uri"] == ARCHITECTURE and read["chars"] > 100 and not read["capped"]
    # What the model was sent is what the journal says the user asked.
    agent = loaded_magics(ev).sessions.get().agent
    assert agent.messages[-2].content[0].text == prompt


def test_a_mention_in_the_prompt_attaches_the_resource_and_a_template_uri_is_accepted(ev: InteractiveShell) -> None:
    run(ev, "%%agent -m plain\nWhat does @ev:demo://resource/dynamic/text/3 say?")
    prompt = last_run(ev)[0].data["prompt"]
    assert prompt.startswith("What does @ev:demo://resource/dynamic/text/3 say?")
    assert "Resource 3: This is a plaintext resource" in prompt


def test_an_unknown_resource_or_server_is_refused_naming_what_exists(ev: InteractiveShell) -> None:
    bad_uri = str(error_of(ev, "%%agent -m plain --resource ev:demo://nope\nRead it."))
    assert "has no resource 'demo://nope'" in bad_uri and ARCHITECTURE in bad_uri and "demo://resource/dynamic/text/{resourceId}" in bad_uri
    bad_server = str(error_of(ev, f"%%agent -m plain --resource docs:{ARCHITECTURE}\nRead it."))
    assert "no MCP server 'docs'" in bad_server and "Its MCP servers: ev." in bad_server
    assert "SERVER:URI" in str(error_of(ev, "%%agent -m plain --resource architecture.md\nRead it."))


def test_a_server_prompt_becomes_the_cells_prompt_with_its_arguments(ev: InteractiveShell) -> None:
    run(ev, '%%agent -m plain --prompt ev:args-prompt city="New York" state=NY\n')
    events = last_run(ev)
    assert events[0].data["prompt"] == "What's weather in New York, NY?"
    # The server started to render the prompt, before the run: the run still records that.
    assert [e.data["server"] for e in events if e.type.value == "mcp_connect"] == ["ev"]
    run(ev, "%%agent -m plain --prompt ev:simple-prompt\nAnswer in French.")
    assert last_run(ev)[0].data["prompt"] == "This is a simple prompt without arguments.\n\nAnswer in French."


def test_an_unknown_prompt_or_a_missing_argument_is_refused_naming_the_prompts(ev: InteractiveShell) -> None:
    unknown = str(error_of(ev, "%%agent -m plain --prompt ev:weather city=Paris\n"))
    assert "has no prompt 'weather'" in unknown and "ev:args-prompt city=… [state=…]" in unknown and "ev:simple-prompt" in unknown
    missing = str(error_of(ev, "%%agent -m plain --prompt ev:args-prompt state=NY\n"))
    assert "needs city=…" in missing
    assert "is not KEY=VALUE" in str(error_of(ev, "%%agent -m plain --prompt ev:args-prompt Paris\n"))


def test_help_explains_the_resource_and_prompt_options(ev: InteractiveShell) -> None:
    _, shown = run(ev, "%agent help")
    assert "--resource SERVER:URI" in shown.stdout and "--prompt SERVER:NAME" in shown.stdout
    assert "KEY=VALUE" in shown.stdout


def test_mcp_add_timeout_cancels_a_call_that_takes_longer_and_the_model_reads_why(ip: InteractiveShell) -> None:
    missing = everything_missing()
    if missing:
        pytest.fail(missing)
    _, added = run(ip, f"%agent mcp add ev --timeout 0.5 -- {NODE} {EVERYTHING} stdio")
    assert "Added MCP server 'ev' (stdio, calls cancelled after 0.5 s)" in added.stdout
    slow = '{"duration": 60, "steps": 60}'
    run(ip, f"slow = ScriptedModel([[tool_call('mcp__ev__trigger-long-running-operation', {slow})], 'It took too long.'])")
    run(ip, "%%agent -m slow --mode bypass\nRun the long operation.")
    agent = loaded_magics(ip).sessions.get().agent
    (result,) = [e.data for e in agent.events if e.type.value == "tool_result"]
    assert result["is_error"] and "timed out after 0.5 s" in result["content"]


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf", ""])
def test_mcp_add_refuses_a_timeout_that_is_not_a_positive_number_of_seconds(ip: InteractiveShell, value: str) -> None:
    error = str(error_of(ip, f"%agent mcp add time --timeout {value!r} -- python -m mcp_server_time"))
    assert "%agent mcp add time --timeout" in error and "give a positive number of seconds, as in --timeout 30" in error
    assert ip.run_cell("%agent mcp").result.empty  # nothing was added
