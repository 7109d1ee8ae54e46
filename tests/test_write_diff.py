"""The diff a write_file / edit_file approval card shows (jupyter/write_diff.py)."""

from __future__ import annotations

import os
from pathlib import Path

from agent_kernel.jupyter._write_diff import write_diff


def test_write_file_over_an_existing_file_shows_the_lines_it_replaces(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("one\ntwo\nthree\n")
    diff = write_diff("write_file", {"path": "notes.md", "content": "one\n2\nthree\n"}, tmp_path)
    assert diff is not None
    assert diff.splitlines()[:2] == ["--- a/notes.md", "+++ b/notes.md"]
    assert "-two" in diff.splitlines() and "+2" in diff.splitlines()


def test_a_new_file_is_all_additions_and_an_edit_is_the_replaced_text(tmp_path: Path) -> None:
    diff = write_diff("write_file", {"path": "new/hello.txt", "content": "hi\n"}, tmp_path)
    assert diff is not None and diff.splitlines()[:3] == ["--- /dev/null", "+++ b/new/hello.txt", "@@ -0,0 +1 @@"]
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    diff = write_diff("edit_file", {"path": "a.py", "old_string": "y = 2", "new_string": "y = 3"}, tmp_path)
    assert diff is not None and "-y = 2" in diff.splitlines() and "+y = 3" in diff.splitlines()


def test_what_cannot_be_told_exactly_shows_no_diff(tmp_path: Path) -> None:
    outside = tmp_path.parent / "outside.txt"
    outside.write_text("secret\n")
    os.symlink(outside, tmp_path / "link.txt")
    (tmp_path / "twice.txt").write_text("a\na\n")
    (tmp_path / "bytes.bin").write_bytes(b"\xff\xfe\x00")
    for tool, arguments in [
        ("write_file", {"path": "../outside.txt", "content": "x"}),  # outside the working directory
        ("write_file", {"path": "link.txt", "content": "x"}),  # a link that leads out
        ("edit_file", {"path": "twice.txt", "old_string": "a", "new_string": "b"}),  # edit_file refuses it
        ("edit_file", {"path": "missing.txt", "old_string": "a", "new_string": "b"}),
        ("write_file", {"path": "bytes.bin", "content": "x"}),  # not text
        ("write_file", {"path": "notes.md"}),  # no content
        ("bash", {"command": "rm -rf /"}),
    ]:
        assert write_diff(tool, arguments, tmp_path) is None, (tool, arguments)
