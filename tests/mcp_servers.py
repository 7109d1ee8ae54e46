"""Real MCP servers for the MCP tests: mcp-server-time, mcp-server-git and server-everything.

The helpers mark these servers ``trusted`` (their annotations are believed) unless a test says
otherwise: most tests are about the protocol, not about untrusted claims.

server-everything (npm) is installed by ``make mcp-servers`` into ``.cache/npm``; the helpers
run its installed entry point with ``node`` (no npx, no network).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from agent_kernel.mcp import MCPServer

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = ROOT / ".cache" / "npm" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
NODE = shutil.which("node")


def everything_missing() -> str | None:
    """Why server-everything cannot run here, or None."""
    if NODE is None:
        return "node is not installed (make test installs it with the MCP servers: make mcp-servers)"
    if not EVERYTHING.exists():
        return f"{EVERYTHING} is missing; run make mcp-servers"
    return None


def time_server(name: str = "time", **kwargs: object) -> MCPServer:
    """mcp-server-time over stdio."""
    kwargs.setdefault("trusted", True)
    return MCPServer.stdio(name, sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC", **kwargs)  # type: ignore[arg-type]


def git_server(repository: Path, name: str = "git", **kwargs: object) -> MCPServer:
    """mcp-server-git over stdio, on ``repository``."""
    kwargs.setdefault("trusted", True)
    return MCPServer.stdio(name, sys.executable, "-m", "mcp_server_git", "--repository", str(repository), **kwargs)  # type: ignore[arg-type]


def everything_stdio(name: str = "ev", **kwargs: object) -> MCPServer:
    """server-everything over stdio."""
    kwargs.setdefault("trusted", True)
    return MCPServer.stdio(name, NODE or "node", str(EVERYTHING), "stdio", **kwargs)  # type: ignore[arg-type]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def everything_http() -> Iterator[str]:
    """server-everything over streamable HTTP on a free loopback port; yields its URL."""
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    proc = subprocess.Popen([NODE or "node", str(EVERYTHING), "streamableHttp"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        # It says so on stderr once it listens: wait for that line, not for a time.
        for line in proc.stderr:
            if "listening on port" in line:
                break
        else:
            raise RuntimeError(f"server-everything exited with {proc.wait()} before listening")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


def server_processes(marker: str) -> list[psutil.Process]:
    """This process's descendants whose command line contains ``marker``."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if any(marker in part for part in child.cmdline()):
                found.append(child)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def make_repository(path: Path) -> Path:
    """A git repository with one committed file and one untracked file."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    (path / "a.txt").write_text("one\n")
    subprocess.run(["git", "-C", str(path), "add", "a.txt"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", "first"], check=True, env=env)
    (path / "new.txt").write_text("two\n")
    return path
