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

from agent_kernel.jupyter.extension import loaded_magics

from .mcp_servers import server_processes

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
    assert "Two MCP servers are named 'time'" in str(error_of(ip, "%agent mcp add time http://127.0.0.1:9/mcp"))
    assert "put -- before a command" in str(error_of(ip, "%agent mcp add other python -m x"))
    assert "not understood" in str(error_of(ip, "%agent mcp remove time"))


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


def test_mcp_add_with_a_url_adds_a_streamable_http_server(ip: InteractiveShell) -> None:
    _, added = run(ip, "%agent mcp add docs http://127.0.0.1:3001/mcp")
    assert "Added MCP server 'docs' (http)" in added.stdout
    table = ip.run_cell("%agent mcp").result
    assert list(table["server"]) == ["docs"] and table.loc[0, "transport"] == "http"
    assert table.loc[0, "target"] == "http://127.0.0.1:3001/mcp" and table.loc[0, "status"] == "stopped"
