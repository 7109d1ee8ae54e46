"""Starting the agent kernel for tests: a kernelspec installed into a temporary prefix, a keyless
environment, and a helper that runs one cell and collects what it sent.

Kernels get an explicit environment (never the test process's): no provider keys, the offline
model, and the ``auto_approve`` headless policy, so prompt cells are deterministic and nothing
can reach a real model.
"""

from __future__ import annotations

import os
from pathlib import Path
from queue import Empty
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from agent_kernel.jupyter.install import KERNEL_NAME, install

#: Seconds to wait for one cell (prompt cells with scripted models take well under one).
CELL_TIMEOUT = 30
_STRIPPED = ("AGENT_KERNEL_", "ANTHROPIC_", "OPENAI_")


def install_kernelspec(prefix: Path) -> Path:
    """Installs the ``agent`` kernelspec under ``prefix``; returns its ``share/jupyter`` folder."""
    install(prefix=prefix)
    return prefix / "share" / "jupyter"


def kernel_environment(jupyter_path: Path | None = None, **extra: str) -> dict[str, str]:
    """This process's environment without provider settings, plus the offline model and the
    ``auto_approve`` policy (and ``JUPYTER_PATH`` when given), plus ``extra``."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(_STRIPPED) and not name.endswith("_API_KEY")}
    env["AGENT_KERNEL_MODEL"] = "offline"
    env["AGENT_KERNEL_APPROVAL"] = "auto_approve"
    if jupyter_path is not None:
        env["JUPYTER_PATH"] = os.pathsep.join([str(jupyter_path), env.get("JUPYTER_PATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def start_agent_kernel(jupyter_path: Path, cwd: Path, **extra: str) -> tuple[KernelManager, BlockingKernelClient]:
    """Starts the installed ``agent`` kernel in ``cwd`` (``extra`` added to its environment) and
    returns its manager and a ready client."""
    specs = KernelSpecManager(kernel_dirs=[str(jupyter_path / "kernels")])
    km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)
    km.start_kernel(cwd=str(cwd), env=kernel_environment(jupyter_path, **extra))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
    except RuntimeError:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        raise
    return km, kc


def stop_agent_kernel(km: KernelManager, kc: BlockingKernelClient) -> None:
    """Shuts the kernel down and closes the client."""
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def execute(kc: BlockingKernelClient, code: str, *, timeout: float = CELL_TIMEOUT) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Runs ``code``; returns the execute reply's content and the cell's iopub messages
    (everything between busy and idle that answers this request, status messages excluded)."""
    msg_id = kc.execute(code)
    return await_cell(kc, msg_id, timeout=timeout)


def await_cell(kc: BlockingKernelClient, msg_id: str, *, timeout: float = CELL_TIMEOUT) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Collects the iopub messages of request ``msg_id`` until idle, then its reply."""
    messages: list[dict[str, Any]] = []
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=timeout)
        except Empty:
            raise AssertionError(f"the kernel sent nothing for {timeout} s; messages so far: {messages}") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status":
            if msg["content"]["execution_state"] == "idle":
                break
            continue
        messages.append(msg)
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    return reply["content"], messages


def outputs(messages: list[dict[str, Any]], msg_type: str) -> list[dict[str, Any]]:
    """The contents of the messages of one type."""
    return [m["content"] for m in messages if m["msg_type"] == msg_type]


def stdout(messages: list[dict[str, Any]]) -> str:
    """Everything the cell printed to stdout."""
    return "".join(c["text"] for c in outputs(messages, "stream") if c["name"] == "stdout")
