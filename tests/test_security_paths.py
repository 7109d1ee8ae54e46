"""File paths against a hostile model: every spelling of a denied path, reads through search, link races.

The attacker is a ``ScriptedModel`` whose tool calls go through the public ``Agent`` API, so the
permission gate, the tools and the journal all run as they do for a real model.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from agent_kernel import Agent
from agent_kernel.errors import ToolError
from agent_kernel.events._event import EventType
from agent_kernel.guard._paths import PathKey, Workspace
from agent_kernel.guard._permissions import Permissions
from agent_kernel.models.scripted import ScriptedModel, tool_call
from agent_kernel.tools._tool import ToolContext
from agent_kernel.tools.builtin._files import edit_file, read_file, write_file
from agent_kernel.tools.builtin._search import glob, grep, list_files

TOOLS = [read_file, write_file, edit_file, list_files, glob, grep]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".env").write_text("OPENAI_KEY=original\n")
    (root / "sub").mkdir()
    (root / "sub" / "ok.txt").write_text("fine\n")
    (root / "secrets").mkdir()
    (root / "secrets" / "key.txt").write_text("hunter2-password-line\n")
    (root / "notes.md").write_text("public notes\n")
    (tmp_path / "outside.txt").write_text("outside secret\n")
    return root


def attack(root: Path, calls: list[tuple[str, dict[str, Any]]], permissions: Permissions) -> list[dict[str, Any]]:
    """Runs one turn of hostile tool calls; returns the tool_result payloads in call order."""
    model = ScriptedModel([[tool_call(name, args) for name, args in calls], "done"])
    agent = Agent(model, tools=TOOLS, permissions=permissions, working_dir=root, journal=None, context=None)
    agent.run_sync("go")
    order = [e.data["call_id"] for e in agent.events if e.type is EventType.TOOL_CALL_READY]
    results = {e.data["call_id"]: e.data for e in agent.events if e.type is EventType.TOOL_RESULT}
    return [results[call_id] for call_id in order]


def env_spellings(root: Path) -> list[str]:
    (root / "link_to_env").symlink_to(root / ".env")
    (root / "sub" / "up").symlink_to(root)
    return [
        ".env",
        str(root / ".env"),
        "./.env",
        "./sub/../.env",
        "sub//../.env",
        ".//.env",
        "sub/./../.env",
        "link_to_env",
        "sub/up/.env",
        f"{root}/sub/../.env",
    ]


# ---- every spelling of a denied path --------------------------------------------------------


def test_a_denied_write_holds_for_every_spelling_of_the_path(ws: Path) -> None:
    spellings = env_spellings(ws)
    results = attack(ws, [("write_file", {"path": p, "content": "PWNED"}) for p in spellings], Permissions(mode="accept_edits", deny=["write_file(.env)"]))
    assert len(results) == len(spellings)
    assert all(r["is_error"] and "Permission denied" in r["content"] for r in results), results
    assert (ws / ".env").read_text() == "OPENAI_KEY=original\n"


def test_a_denied_edit_and_read_hold_for_every_spelling(ws: Path) -> None:
    spellings = env_spellings(ws)
    calls = [("edit_file", {"path": p, "old_string": "original", "new_string": "PWNED"}) for p in spellings]
    calls += [("read_file", {"path": p}) for p in spellings]
    results = attack(ws, calls, Permissions(mode="bypass", deny=["edit_file(.env)", "read_file(.env)"]))
    assert all(r["is_error"] and "original" not in r["content"] for r in results), results
    assert (ws / ".env").read_text() == "OPENAI_KEY=original\n"


def test_a_rule_written_with_another_spelling_still_names_the_file(ws: Path) -> None:
    alias = ws.parent / "alias"  # the workspace reached through a link, as /tmp is on macOS
    alias.symlink_to(ws)
    for rule in ("write_file(./.env)", f"write_file({ws}/.env)", "write_file(sub/../.env)", f"write_file({alias}/.env)", "write_file(.env/)"):
        for root in (ws, alias):
            results = attack(root, [("write_file", {"path": ".env", "content": "PWNED"})], Permissions(mode="accept_edits", deny=[rule]))
            assert results[0]["is_error"], (rule, root)
    assert (ws / ".env").read_text() == "OPENAI_KEY=original\n"


def test_a_rule_naming_a_folder_covers_everything_inside_it(ws: Path) -> None:
    results = attack(
        ws,
        [("write_file", {"path": "secrets/new.txt", "content": "x"}), ("write_file", {"path": "./secrets//deep/x.txt", "content": "x"})],
        Permissions(mode="accept_edits", deny=["write_file(secrets)"]),
    )
    assert all(r["is_error"] for r in results)
    assert sorted(p.name for p in (ws / "secrets").iterdir()) == ["key.txt"]


def test_an_allowed_folder_does_not_stretch_to_a_sibling_by_dot_dot(ws: Path) -> None:
    # allow write_file(sub/*) must not allow sub/../.env, which is .env (and asks, with nobody to answer).
    results = attack(ws, [("write_file", {"path": "sub/../.env", "content": "PWNED"})], Permissions(mode="default", allow=["write_file(sub/*)"]))
    assert results[0]["is_error"]
    assert (ws / ".env").read_text() == "OPENAI_KEY=original\n"


def test_the_approval_request_shows_the_canonical_path(ws: Path) -> None:
    seen: list[str] = []

    def approver(request: Any) -> bool:
        seen.append(request.key)
        return False

    model = ScriptedModel([[tool_call("write_file", {"path": f"{ws}/sub/../notes.md", "content": "x"})], "done"])
    Agent(model, tools=TOOLS, permissions="default", approver=approver, working_dir=ws, journal=None, context=None).run_sync("go")
    assert seen == ["write_file(notes.md)"]


def test_a_link_re_pointed_after_the_check_still_meets_the_deny_rule(ws: Path) -> None:
    # The gate saw "notes_link" lead to notes.md; by the time the tool opens it, it leads to .env.
    from types import SimpleNamespace

    from agent_kernel.guard._permissions import build_gate

    (ws / "notes_link").symlink_to(".env")
    run = SimpleNamespace(permissions=build_gate(Permissions(mode="accept_edits", deny=["write_file(.env)", "read_file(.env)"])))
    ctx = ToolContext("c", "write_file", working_dir=ws, run=run)
    with pytest.raises(ToolError, match="Permission denied"):
        write_file.function("notes_link", "PWNED", ctx)
    with pytest.raises(ToolError, match="Permission denied"):
        read_file.function("notes_link", ctx)
    assert (ws / ".env").read_text() == "OPENAI_KEY=original\n"


# ---- read rules hold for every tool that reads ----------------------------------------------


def test_a_denied_read_is_withheld_from_grep_glob_and_list_files(ws: Path) -> None:
    calls = [
        ("read_file", {"path": str(ws / "secrets" / "key.txt")}),
        ("grep", {"pattern": "hunter2"}),
        ("grep", {"pattern": "hunter2", "path": "secrets"}),
        ("grep", {"pattern": "hunter2", "path": "secrets/key.txt"}),
        ("glob", {"pattern": "**/*.txt"}),
        ("list_files", {"path": ".", "recursive": True}),
        ("list_files", {"path": "secrets"}),
        ("edit_file", {"path": "secrets/key.txt", "old_string": "hunter2", "new_string": "x"}),
    ]
    results = attack(ws, calls, Permissions(mode="accept_edits", deny=["read_file(secrets/*)"]))
    for (name, _), r in zip(calls, results):
        assert "password-line" not in r["content"], (name, r)
        if name in ("read_file", "edit_file"):
            assert r["is_error"] and "Permission denied" in r["content"], (name, r)
        else:  # the search tools do not even name it
            assert "key.txt" not in r["content"], (name, r)
    assert "withheld by permission rules" in results[1]["content"]
    assert "sub/ok.txt" in results[4]["content"]  # the rest is still found
    assert (ws / "secrets" / "key.txt").read_text() == "hunter2-password-line\n"


def test_a_link_to_a_denied_file_is_withheld_from_search(ws: Path) -> None:
    (ws / "innocent.txt").symlink_to(ws / "secrets" / "key.txt")
    results = attack(ws, [("grep", {"pattern": "hunter2"}), ("read_file", {"path": "innocent.txt"})], Permissions(mode="default", deny=["read_file(secrets)"]))
    assert all("password-line" not in r["content"] for r in results)
    assert results[1]["is_error"]


def test_an_ask_rule_on_reads_also_withholds_search_results(ws: Path) -> None:
    results = attack(ws, [("grep", {"pattern": "OPENAI"})], Permissions(mode="default", ask=["read_file(.env)"]))
    assert "original" not in results[0]["content"]


# ---- confinement and odd files ----------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["../outside.txt", "sub/../../outside.txt", "{tmp}/outside.txt", "escape/outside.txt", "escape_file", "dangling", "~/outside.txt"]
)
def test_every_way_out_of_the_workspace_is_refused(ws: Path, path: str) -> None:
    (ws / "escape").symlink_to(ws.parent)
    (ws / "escape_file").symlink_to(ws.parent / "outside.txt")
    (ws / "dangling").symlink_to(ws.parent / "created_outside.txt")
    path = path.format(tmp=ws.parent)
    results = attack(ws, [("read_file", {"path": path}), ("write_file", {"path": path, "content": "PWNED"})], Permissions(mode="bypass"))
    assert all(r["is_error"] and "outside" in r["content"].lower() for r in results), results
    assert (ws.parent / "outside.txt").read_text() == "outside secret\n"
    assert not (ws.parent / "created_outside.txt").exists()


def test_a_path_with_a_nul_character_is_refused_with_a_message(ws: Path) -> None:
    results = attack(ws, [("write_file", {"path": ".env\x00.txt", "content": "x"})], Permissions(mode="bypass", deny=["write_file(.env)"]))
    assert results[0]["is_error"] and "NUL" in results[0]["content"]
    assert (ws / ".env").read_text() == "OPENAI_KEY=original\n"


def test_a_fifo_a_socket_and_a_device_link_are_refused_without_blocking(ws: Path) -> None:
    import socket

    os.mkfifo(ws / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(ws / "sock"))
        calls = [("read_file", {"path": "pipe"}), ("write_file", {"path": "pipe", "content": "x"}), ("read_file", {"path": "sock"})]
        results = attack(ws, calls, Permissions(mode="bypass"))
    finally:
        sock.close()
    assert all(r["is_error"] and "not a regular file" in r["content"] for r in results), results


def test_grep_skips_a_fifo_instead_of_hanging(ws: Path) -> None:
    os.mkfifo(ws / "sub" / "pipe")
    results = attack(ws, [("grep", {"pattern": "fine"})], Permissions(mode="bypass"))
    assert results[0]["content"] == "sub/ok.txt:1: fine"


def test_links_inside_the_workspace_still_work(ws: Path) -> None:
    (ws / "alias.md").symlink_to("notes.md")
    (ws / "subdir_link").symlink_to("sub")
    results = attack(ws, [("read_file", {"path": "alias.md"}), ("write_file", {"path": "subdir_link/new.txt", "content": "hi"})], Permissions(mode="bypass"))
    assert "public notes" in results[0]["content"]
    assert (ws / "sub" / "new.txt").read_text() == "hi"
    assert "sub/new.txt" in results[1]["content"]


# ---- the canonical key itself -----------------------------------------------------------------


def test_every_spelling_has_one_canonical_key(ws: Path) -> None:
    workspace = Workspace(ws)
    assert {workspace.canonical(p) for p in env_spellings(ws)} == {".env"}
    assert workspace.canonical("secrets/") == "secrets"
    assert workspace.canonical("../outside.txt") == str(ws.parent / "outside.txt")
    assert PathKey.of("secrets/a/b.txt", str(ws)).matched_by(f"{ws}/secrets/")


# ---- the race: a name flipped between a file and a link out ------------------------------------


def _move_away(folder: Path) -> None:
    import shutil

    trash = folder.with_name(folder.name + ".trash")
    try:
        os.rename(folder, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


class Flipper:
    """Flips ``name`` between a regular file and a link to ``target`` until stopped (atomic renames)."""

    def __init__(self, root: Path, name: str, target: Path, *, folder: bool = False) -> None:
        self.root, self.name, self.target, self.folder = root, name, target, folder
        self.stop = threading.Event()
        self.started = threading.Event()
        self.flips = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        tmp_link, tmp_real = self.root / ".flip_link", self.root / ".flip_real"
        while not self.stop.is_set():
            for make in (self._link, self._real):
                make(tmp_link, tmp_real)
                self.flips += 1
            self.started.set()

    def _link(self, tmp_link: Path, tmp_real: Path) -> None:
        tmp_link.unlink(missing_ok=True)
        tmp_link.symlink_to(self.target)
        dest = self.root / self.name
        if self.folder and dest.is_dir() and not dest.is_symlink():
            _move_away(dest)  # a link cannot replace a folder in one step
        with contextlib.suppress(OSError):  # the tool made a folder there meanwhile: next round
            os.replace(tmp_link, dest)

    def _real(self, tmp_link: Path, tmp_real: Path) -> None:
        dest = self.root / self.name
        if not self.folder:
            tmp_real.write_text("inside\n")
            os.replace(tmp_real, dest)
            return
        _move_away(tmp_real)
        tmp_real.mkdir()
        if dest.is_symlink():
            dest.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the tool made a folder there meanwhile: next round
            os.rename(tmp_real, dest)

    def __enter__(self) -> Flipper:
        self.thread.start()
        self.started.wait()  # the name has been both a file and a link at least once
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


ROUNDS = 400


def test_a_racing_link_never_lets_write_file_leave_the_workspace(ws: Path) -> None:
    outside = ws.parent / "outside.txt"
    ctx = ToolContext("c", "write_file", working_dir=ws)
    outcomes = {"wrote": 0, "refused": 0}
    with Flipper(ws, "race", outside):
        for _ in range(ROUNDS):
            try:
                write_file.function("race", "PWNED\n", ctx)
                outcomes["wrote"] += 1
            except ToolError:
                outcomes["refused"] += 1
    assert outside.read_text() == "outside secret\n"
    assert outcomes["wrote"] + outcomes["refused"] == ROUNDS


def test_a_racing_link_never_lets_read_file_or_grep_see_outside(ws: Path) -> None:
    outside = ws.parent / "outside.txt"
    ctx = ToolContext("c", "read_file", working_dir=ws)
    seen: list[str] = []
    with Flipper(ws, "race", outside):
        for _ in range(ROUNDS):
            for fn in (lambda: read_file.function("race", ctx), lambda: grep.function(ctx, "secret")):
                try:
                    seen.append(fn())
                except ToolError as exc:
                    seen.append(str(exc))
    assert seen and not any("outside secret" in s for s in seen)


def test_a_racing_folder_link_never_lets_a_write_land_outside(ws: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ctx = ToolContext("c", "write_file", working_dir=ws)
    with Flipper(ws, "dir", elsewhere, folder=True):
        for _ in range(ROUNDS):
            with contextlib.suppress(ToolError):  # refused while the folder was a link: the point
                write_file.function("dir/f.txt", "PWNED\n", ctx)
    assert list(elsewhere.iterdir()) == []
