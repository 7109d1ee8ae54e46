"""The built-in tools: their happy paths, their refusals, and the processes they leave behind."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent_kernel.errors import ToolError
from agent_kernel.tools._registry import BUILTIN_TOOLS, as_tool
from agent_kernel.tools._tool import Tool, ToolContext
from agent_kernel.tools.builtin._files import edit_file, read_file, write_file
from agent_kernel.tools.builtin._limits import truncate
from agent_kernel.tools.builtin._python import python
from agent_kernel.tools.builtin._search import glob, grep, list_files
from agent_kernel.tools.builtin._shell import bash


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "notes.md").write_text("alpha\nbeta\ngamma\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    return 'hello'\n")
    (root / "outside.txt").write_text("x")
    (tmp_path / "secret.txt").write_text("top secret\n")
    return root


def ctx(root: Path, **extras: Any) -> ToolContext:
    return ToolContext("call_1", "tool", working_dir=root, extras=dict(extras))


async def call(tool: Tool, root: Path, **arguments: Any) -> str:
    return await tool.invoke(tool.validate(arguments), ctx(root))


async def refused(tool: Tool, root: Path, **arguments: Any) -> str:
    with pytest.raises(ToolError) as info:
        await call(tool, root, **arguments)
    return str(info.value)


def test_every_builtin_name_resolves_to_a_tool_with_that_name() -> None:
    for name in BUILTIN_TOOLS:
        assert as_tool(name).name == name


def test_builtins_declare_read_only_concurrency_and_category() -> None:
    flags = {t.name: (t.read_only, t.concurrency_safe, t.category) for t in map(as_tool, BUILTIN_TOOLS)}
    assert flags == {
        "read_file": (True, True, "read"),
        "write_file": (False, False, "edit"),
        "edit_file": (False, False, "edit"),
        "list_files": (True, True, "read"),
        "glob": (True, True, "read"),
        "grep": (True, True, "read"),
        "bash": (False, False, "shell"),
        "python": (False, False, "execute"),
        "read_notebook": (True, True, "read"),
        "edit_notebook": (False, False, "edit"),
        "run_cell": (False, False, "execute"),
        "web_fetch": (False, True, "network"),
    }


def test_permission_keys_are_the_command_and_the_path() -> None:
    assert bash.key({"command": "git status", "timeout": 5}) == "git status"
    assert write_file.key({"path": "./notebooks/a.py", "content": "x"}) == "notebooks/a.py"
    assert edit_file.key({"path": "a/../b.py", "old_string": "x", "new_string": "y"}) == "b.py"


# ---- read_file -----------------------------------------------------------------------------


async def test_read_file_numbers_lines(work: Path) -> None:
    assert await call(read_file, work, path="notes.md") == "     1\talpha\n     2\tbeta\n     3\tgamma"


async def test_read_file_reads_a_range_and_says_how_to_read_on(work: Path) -> None:
    (work / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    out = await call(read_file, work, path="long.txt", offset=10, limit=3)
    assert out.splitlines()[:3] == ["    10\tline 10", "    11\tline 11", "    12\tline 12"]
    assert "offset=13" in out


async def test_read_file_cuts_very_long_lines_and_caps_its_output(work: Path) -> None:
    (work / "wide.txt").write_text(("x" * 5000 + "\n") * 50)
    out = await call(read_file, work, path="wide.txt")
    assert "line cut: 5,000 characters" in out
    assert "more characters cut" in out and len(out) < 31_000


async def test_read_file_refuses_binary_missing_and_folders(work: Path) -> None:
    (work / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    assert "binary file" in await refused(read_file, work, path="image.png")
    assert "No such file" in await refused(read_file, work, path="nope.md")
    assert "is a directory" in await refused(read_file, work, path="src")
    assert "only 3 lines" in await refused(read_file, work, path="notes.md", offset=9)


# ---- confinement ---------------------------------------------------------------------------


@pytest.mark.parametrize("tool", [read_file, write_file, edit_file])
async def test_file_tools_refuse_paths_outside_the_working_directory(work: Path, tool: Tool) -> None:
    args = {"read_file": {}, "write_file": {"content": "x"}, "edit_file": {"old_string": "top", "new_string": "no"}}[tool.name]
    assert "outside the working directory" in await refused(tool, work, path="../secret.txt", **args)
    outside = str(work.parent / "secret.txt")
    assert "an absolute path outside the working directory" in await refused(tool, work, path=outside, **args)
    (work / "link").symlink_to(work.parent)
    assert "symbolic link" in await refused(tool, work, path="link/secret.txt", **args)
    assert (work.parent / "secret.txt").read_text() == "top secret\n"


async def test_an_absolute_path_inside_the_working_directory_is_fine(work: Path) -> None:
    assert "alpha" in await call(read_file, work, path=str(work / "notes.md"))


async def test_search_tools_refuse_to_start_outside_and_skip_links_out(work: Path) -> None:
    assert "outside the working directory" in await refused(list_files, work, path="..")
    assert "outside the working directory" in await refused(grep, work, pattern="secret", path="..")
    assert "leaves the search folder" in await refused(glob, work, pattern="../*.txt")
    (work / "leak.txt").symlink_to(work.parent / "secret.txt")
    assert "No matches" in await call(grep, work, pattern="top secret")
    assert "leak.txt" not in await call(glob, work, pattern="*.txt")


async def test_the_working_directory_defaults_to_the_current_one(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(work)
    out = await read_file.invoke({"path": "notes.md", "offset": 1, "limit": 10}, ToolContext("c", "read_file"))
    assert "alpha" in out


# ---- write_file and edit_file --------------------------------------------------------------


async def test_write_file_creates_folders_and_reports(work: Path) -> None:
    out = await call(write_file, work, path="new/deep/file.txt", content="one\ntwo\n")
    assert (work / "new/deep/file.txt").read_text() == "one\ntwo\n"
    assert out == "Wrote 2 lines (8 bytes) to new/deep/file.txt (new file)."
    out = await call(write_file, work, path="notes.md", content="replaced")
    assert "replaced the previous contents" in out and (work / "notes.md").read_text() == "replaced"


async def test_edit_file_replaces_a_unique_string(work: Path) -> None:
    out = await call(edit_file, work, path="notes.md", old_string="beta", new_string="BETA")
    assert out == "Edited notes.md: replaced 1 occurrence at line 2."
    assert (work / "notes.md").read_text() == "alpha\nBETA\ngamma\n"


async def test_edit_file_says_how_many_matches_when_not_exactly_one(work: Path) -> None:
    (work / "dup.txt").write_text("x = 1\nx = 1\nx = 1\n")
    assert "occurs 3 times" in await refused(edit_file, work, path="dup.txt", old_string="x = 1", new_string="x = 2")
    assert "0 matches" in await refused(edit_file, work, path="dup.txt", old_string="y = 1", new_string="y = 2")
    assert (work / "dup.txt").read_text() == "x = 1\nx = 1\nx = 1\n"
    out = await call(edit_file, work, path="dup.txt", old_string="x = 1", new_string="x = 2", replace_all=True)
    assert "3 occurrences" in out and (work / "dup.txt").read_text() == "x = 2\nx = 2\nx = 2\n"


async def test_edit_file_keeps_bytes_it_cannot_decode(work: Path) -> None:
    (work / "latin.txt").write_bytes(b"caf\xe9 = 1\n")
    await call(edit_file, work, path="latin.txt", old_string="= 1", new_string="= 2")
    assert (work / "latin.txt").read_bytes() == b"caf\xe9 = 2\n"


# ---- list_files, glob, grep ----------------------------------------------------------------


async def test_list_files_shows_folders_first_and_recurses_past_caches(work: Path) -> None:
    (work / ".git").mkdir()
    (work / ".git" / "HEAD").write_text("ref")
    assert (await call(list_files, work)).splitlines() == [".git/", "src/", "notes.md", "outside.txt"]
    assert (await call(list_files, work, recursive=True)).splitlines() == ["notes.md", "outside.txt", "src/app.py"]


async def test_glob_matches_across_folders(work: Path) -> None:
    (work / "src" / "pkg").mkdir()
    (work / "src" / "pkg" / "mod.py").write_text("")
    assert (await call(glob, work, pattern="**/*.py")).splitlines() == ["src/app.py", "src/pkg/mod.py"]
    assert (await call(glob, work, pattern="*.py", path="src")).splitlines() == ["src/app.py"]
    assert "No files match" in await call(glob, work, pattern="*.rs")


async def test_grep_finds_lines_and_skips_binary_files(work: Path) -> None:
    (work / "blob.bin").write_bytes(b"hello\0world")
    out = await call(grep, work, pattern=r"hel+o")
    assert out.splitlines() == ["src/app.py:2:     return 'hello'", "(1 binary or very large file skipped)"]
    assert await call(grep, work, pattern="ALPHA", ignore_case=True, glob="*.md") == "notes.md:1: alpha"


async def test_grep_explains_a_bad_regex(work: Path) -> None:
    assert "not a valid regular expression" in await refused(grep, work, pattern="(unclosed")


# ---- bash ----------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def gone_within(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


async def test_bash_runs_in_the_working_directory(work: Path) -> None:
    assert (await call(bash, work, command="pwd; cat notes.md | wc -l")).split() == [str(work.resolve()), "3"]


async def test_bash_reports_a_failing_command_as_an_error_with_its_exit_code(work: Path) -> None:
    message = await refused(bash, work, command="echo oops >&2; exit 3")
    assert message == "oops\n\n[exit code 3]"


async def test_bash_caps_output_keeping_start_and_end(work: Path) -> None:
    out = await call(bash, work, command="echo START; head -c 200000 /dev/zero | tr '\\0' 'x'; echo; echo END")
    assert out.startswith("START") and out.rstrip().endswith("END")
    assert "bytes of output cut from the middle" in out and len(out) < 31_000


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to see processes")
async def test_bash_timeout_kills_the_whole_process_group(work: Path) -> None:
    message = await refused(bash, work, command="sleep 60 & echo $! > child.pid; echo started; sleep 60", timeout=1)
    assert "timed out after 1 s" in message and "started" in message
    assert gone_within(int((work / "child.pid").read_text()))


@pytest.mark.skipif(not Path("/proc").exists(), reason="needs /proc to see processes")
async def test_cancelling_bash_leaves_no_child_behind_even_one_ignoring_sigterm(work: Path) -> None:
    # Each pid file appears complete (written, then renamed), so it is read only once whole.
    command = (
        "(trap '' TERM; sleep 60) & echo $! > a.tmp; mv a.tmp child.pid; "
        "sleep 60 & echo $! > b.tmp; mv b.tmp child2.pid; wait"
    )
    task = asyncio.create_task(call(bash, work, command=command))
    deadline = time.monotonic() + 10
    while not ((work / "child.pid").exists() and (work / "child2.pid").exists()):
        assert time.monotonic() < deadline, "the command never started"
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for name in ("child.pid", "child2.pid"):
        assert gone_within(int((work / name).read_text()))


# ---- python --------------------------------------------------------------------------------


async def test_python_returns_stdout_stderr_and_the_last_value(work: Path) -> None:
    code = "import sys\nprint('out')\nprint('err', file=sys.stderr)\n6 * 7"
    assert await python.invoke({"code": code}, ctx(work)) == "out\n[stderr]\nerr\n[result]\n42"


async def test_python_keeps_variables_in_a_private_namespace_between_calls(work: Path) -> None:
    context = ctx(work)
    await python.invoke({"code": "x = 20"}, context)
    assert await python.invoke({"code": "x + 1"}, context) == "21"
    assert "x" not in globals()
    assert await python.invoke({"code": "y = 1"}, context) == "(no output)"


async def test_python_uses_the_namespace_it_is_given(work: Path) -> None:
    namespace: dict[str, Any] = {"data": [1, 2, 3]}
    assert await python.invoke({"code": "total = sum(data)\ntotal"}, ctx(work, namespace=namespace)) == "6"
    assert namespace["total"] == 6


async def test_python_runs_in_the_ipython_user_namespace_when_inside_ipython(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython

    class Shell:
        user_ns: dict[str, Any] = {"df_rows": 10}

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell)
    assert await python.invoke({"code": "df_rows * 2"}, ctx(work)) == "20"
    await python.invoke({"code": "made_by_agent = True"}, ctx(work))
    assert Shell.user_ns["made_by_agent"] is True


async def test_python_shows_dataframes_compactly(work: Path) -> None:
    code = "import pandas as pd\npd.DataFrame({'a': range(1000), 'b': range(1000)})"
    out = await python.invoke({"code": code}, ctx(work))
    assert out.endswith("[DataFrame 1000 × 2]")
    assert len(out.splitlines()) < 30


async def test_python_errors_show_the_traceback_of_the_code_only(work: Path) -> None:
    with pytest.raises(ToolError) as info:
        await python.invoke({"code": "print('before')\ndef f():\n    return 1 / 0\nf()"}, ctx(work))
    message = str(info.value)
    assert message.startswith("before\nTraceback")
    assert "return 1 / 0" in message and message.endswith("ZeroDivisionError: division by zero")
    assert "agent_kernel" not in message
    with pytest.raises(ToolError, match="SyntaxError"):
        await python.invoke({"code": "def ("}, ctx(work))


async def test_python_output_from_other_threads_is_not_captured(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started, proceed = threading.Event(), threading.Event()
    namespace = {"started": started, "proceed": proceed}
    code = "print('inside before')\nstarted.set()\nproceed.wait(10)\nprint('inside after')"
    task = asyncio.create_task(python.invoke({"code": code}, ctx(work, namespace=namespace)))
    await asyncio.to_thread(started.wait, 10)
    print("printed by the event loop while the code ran")
    proceed.set()
    assert await task == "inside before\ninside after"
    assert "printed by the event loop while the code ran" in capsys.readouterr().out


def test_truncate_says_how_much_was_cut() -> None:
    assert truncate("abc", 10) == "abc"
    assert truncate("x" * 100, 10, hint="Read less.") == "xxxxxxxxxx\n[… 90 more characters cut (100 in all). Read less.]"
    middle = truncate("a" * 50 + "b" * 50, 10, keep="middle")
    assert middle.startswith("aaaaa\n") and middle.endswith("\nbbbbb") and "90 characters cut from the middle" in middle
