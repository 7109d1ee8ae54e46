"""Fixtures for browser tests: a real JupyterLab on 127.0.0.1 in a temporary directory, and the
system Chromium driven by Playwright.

The server's configuration, data, runtime and home folders are all temporary, so nothing from the
machine's own Jupyter setup leaks in; the virtualenv's kernelspec and lab extensions (anywidget,
ipywidgets) are still found because they live under ``sys.prefix``, and the package's own
front-end extension (``agent-kernel-live``) is linked into the data folder from this checkout. Settings a test needs are
JupyterLab default-setting overrides (``labconfig/default_setting_overrides.json``), and the
server's merged settings are read back through its REST API so a test knows they took effect.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "browser"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
KERNEL_SETTINGS = "@jupyterlab/apputils-extension:kernels-settings"
#: Settings that keep the page deterministic: no news or update pop-ups over the notebook, and
#: every cell kept in the DOM (no virtual scrolling).
QUIET_LAB = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in this folder drives a browser."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)


@dataclass
class LabServer:
    """A running JupyterLab: its URL, token and notebook folder."""

    url: str
    token: str
    root: Path
    config_dir: Path
    process: subprocess.Popen[bytes]
    log: Path

    def api(self, path: str, method: str = "GET", body: Any = None) -> Any:
        """Calls the server's REST API and returns the decoded JSON reply."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method, headers={
            "Authorization": f"token {self.token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            text = reply.read().decode()
        return json.loads(text) if text else None

    def page_url(self, notebook: str, app: str = "lab") -> str:
        """The notebook's page in JupyterLab (``lab``) or Notebook 7 (``notebooks``)."""
        if app == "lab":
            return f"{self.url}/lab/tree/{notebook}?token={self.token}&reset"
        return f"{self.url}/notebooks/{notebook}?token={self.token}"

    def wait_for_kernel(self, notebook: str, timeout: float = 90) -> None:
        """Waits until the server reports the notebook's kernel started and idle.

        The page's own indicator reads "idle" for a moment before the kernel even starts, so
        the server is asked first; the page then shows idle once it has connected.
        """
        deadline = time.monotonic() + timeout
        while True:
            sessions = self.api("/api/sessions")
            if any(s["path"].endswith(notebook) and s["kernel"]["execution_state"] == "idle" for s in sessions):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the kernel of {notebook} did not start in {timeout} s: {sessions}")
            time.sleep(0.2)  # polling a starting kernel; nothing to race

    def shutdown_kernels(self, timeout: float = 60) -> None:
        """Stops every kernel (each test's notebook starts a fresh one).

        A kernel still restarting (a test that pressed Kernel > Restart) answers the delete with
        an error until it is up again, so a session is asked again until the server lists it no
        more.
        """
        deadline = time.monotonic() + timeout
        while sessions := self.api("/api/sessions"):
            for session in sessions:
                try:
                    self.api(f"/api/sessions/{session['id']}", method="DELETE")
                except urllib.error.HTTPError as exc:
                    if time.monotonic() > deadline:
                        raise AssertionError(f"the server would not stop session {session['path']}: {exc}") from exc
            time.sleep(0.2)  # polling the server for sessions it still lists; nothing to race


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The system Chromium; a missing one fails the test (``make test`` installs it)."""
    if not CHROMIUM.exists():
        pytest.fail(f"Chromium is not installed at {CHROMIUM}: run `make chromium` "
                    "(apt-get install chromium) to run the browser tests.")
    return CHROMIUM


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """One JupyterLab per test module, bound to 127.0.0.1 with a random token."""
    base = tmp_path_factory.mktemp("lab")
    folders = {name: base / name for name in ("root", "config", "data", "runtime", "home", "ipython")}
    for folder in folders.values():
        folder.mkdir()
    # The package's front-end extension as this checkout has it (before an installed copy).
    (folders["data"] / "labextensions").mkdir()
    (folders["data"] / "labextensions" / "agent-kernel-live").symlink_to(REPO / "agent_kernel" / "_labextension")
    overrides = folders["config"] / "labconfig" / "default_setting_overrides.json"
    overrides.parent.mkdir()
    overrides.write_text(json.dumps(QUIET_LAB))
    token = secrets.token_hex(16)
    port = _free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("JUPYTER", "JPY_"))}
    env.update(JUPYTER_CONFIG_DIR=str(folders["config"]), JUPYTER_DATA_DIR=str(folders["data"]),
               JUPYTER_RUNTIME_DIR=str(folders["runtime"]), HOME=str(folders["home"]),
               IPYTHONDIR=str(folders["ipython"]), JUPYTER_PLATFORM_DIRS="1",
               PYTHONPATH=str(REPO))  # the kernel imports this checkout
    log = base / "jupyterlab.log"
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
               f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={folders['root']}",
               "--ServerApp.port_retries=0", "--LabApp.news_url=",
               # window.jupyterapp, as JupyterLab offers it to extensions' tests: what the live
               # view feature-detects to raise a notification for a pending approval
               "--LabApp.expose_app_in_browser=True", "--LabApp.check_for_updates_class="
               "jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # CI containers run as root
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=folders["root"])
    server = LabServer(f"http://127.0.0.1:{port}", token, folders["root"], folders["config"], process, log)
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                pytest.fail(f"JupyterLab exited early:\n{log.read_text()[-3000:]}")
            try:
                server.api("/api/status")
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start in 90 s:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)  # polling a starting server; nothing to race
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def browser(chromium: Path) -> Iterator[Any]:
    """Headless system Chromium through Playwright (no browser download)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go (``test-artifacts/browser``, ignored by git)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
