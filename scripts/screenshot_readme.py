"""Takes the README's picture of the live view (docs/live-view.png) in real JupyterLab.

Usage::

    .venv/bin/python scripts/screenshot_readme.py [--out docs/live-view.png]

It starts JupyterLab on 127.0.0.1 with temporary configuration, data, runtime and home folders
(the virtualenv's lab extensions are still found under ``sys.prefix``), opens a notebook whose
``%%agent`` cell runs a scripted model that streams an answer, reads a file and then asks to
write one, runs it in headless Chromium (the system one, through Playwright), waits until the
write's card asks for approval, and screenshots the cell's output holding the live view. Then it
approves, so the run ends cleanly (its transcript replacing the view), and stops everything it
started.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
#: No news or update pop-ups over the notebook, and every cell kept in the DOM.
QUIET_LAB = {
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}
#: The largest picture worth committing (bytes).
MAX_BYTES = 300_000

SETUP = '''\
%load_ext agent_kernel
from pathlib import Path
from agent_kernel.models.scripted import ScriptedModel, text, tool_call

Path("notes").mkdir(exist_ok=True)
Path("notes/todo.md").write_text("- water the plants\\n- call the bank\\n- book the train to Porto\\n")

assistant = ScriptedModel([
    [text("I'll read your to-do list first.", chunk=3, delay=0.02),
     tool_call("read_file", {"path": "notes/todo.md"})],
    [text("Your list has **three** items:\\n\\n- water the plants\\n- call the bank\\n"
          "- book the train to Porto\\n\\nI'll save a one-line summary next to it.", chunk=3, delay=0.02),
     tool_call("write_file", {"path": "notes/summary.md", "content": "3 to-dos: plants, bank, train.\\n"})],
    "Saved the summary to `notes/summary.md`.",
])
'''
PROMPT = "%%agent -m assistant --tools read_file write_file\nSummarise my to-do list and save the summary."


def _refresh_script() -> ModuleType:
    """``scripts/refresh_notebooks.py``: its environment and kernel installer are reused here."""
    spec = importlib.util.spec_from_file_location("refresh_notebooks", REPO / "scripts" / "refresh_notebooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _notebook(path: Path) -> None:
    cells = [{"cell_type": "code", "execution_count": None, "id": f"cell-{n}", "metadata": {},
              "outputs": [], "source": source} for n, source in enumerate([SETUP, PROMPT])]
    path.write_text(json.dumps({
        "cells": cells,
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                     "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }, indent=1))


def _wait_for_kernel(url: str, token: str, notebook: str, timeout: float = 90) -> None:
    """Waits until the server reports the notebook's kernel started and idle (the page reads
    "idle" for a moment before the kernel even starts, and keys pressed then are lost)."""
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(f"{url}/api/sessions?token={token}", timeout=10) as reply:
            sessions = json.loads(reply.read())
        if any(s["path"].endswith(notebook) and s["kernel"]["execution_state"] == "idle" for s in sessions):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"The kernel of {notebook} did not start in {timeout} s: {sessions}")
        time.sleep(0.2)  # polling a starting kernel


@contextmanager
def jupyterlab(base: Path) -> Iterator[tuple[str, str, Path]]:
    """A JupyterLab on 127.0.0.1 with everything under ``base``; yields (url, token, root)."""
    folders = {name: base / name for name in ("root", "config", "data", "runtime", "home", "ipython", "tmp")}
    for folder in folders.values():
        folder.mkdir()
    overrides = folders["config"] / "labconfig" / "default_setting_overrides.json"
    overrides.parent.mkdir()
    overrides.write_text(json.dumps(QUIET_LAB))
    refresh = _refresh_script()
    kernels = refresh.install_kernels(base / "prefix")
    # Provider keys out (the scripted model needs none), and no headless policy: a person answers.
    env = {key: value for key, value in refresh.notebook_environment(jupyter_path=kernels, tmpdir=folders["tmp"]).items()
           if key != "AGENT_KERNEL_APPROVAL" and not key.startswith(("JUPYTER_CONFIG", "JUPYTER_DATA", "JUPYTER_RUNTIME", "JPY_"))}
    env.update(JUPYTER_CONFIG_DIR=str(folders["config"]), JUPYTER_DATA_DIR=str(folders["data"]),
               JUPYTER_RUNTIME_DIR=str(folders["runtime"]), HOME=str(folders["home"]),
               IPYTHONDIR=str(folders["ipython"]), JUPYTER_PLATFORM_DIRS="1")
    token, port = secrets.token_hex(16), _free_port()
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={folders['root']}",
               "--ServerApp.port_retries=0", "--LabApp.news_url=",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # containers run as root
    log = base / "jupyterlab.log"
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=folders["root"])
    try:
        deadline = time.monotonic() + 90
        while True:
            if process.poll() is not None:
                raise SystemExit(f"JupyterLab exited early:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise SystemExit(f"JupyterLab did not start in 90 s:\n{log.read_text()[-3000:]}") from None
                time.sleep(0.2)  # polling a starting server
        yield url, token, folders["root"]
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def take(out: Path) -> int:
    """Takes the screenshot into ``out``; returns its size in bytes."""
    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory(prefix="agent_kernel_screenshot_") as tmp, jupyterlab(Path(tmp)) as (url, token, root):
        _notebook(root / "live-view.ipynb")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1000, "height": 1600}, device_scale_factor=1.5)
                page.goto(f"{url}/lab/tree/live-view.ipynb?token={token}&reset")
                cells = page.locator(".jp-Notebook .jp-Cell")
                expect(cells).to_have_count(2, timeout=60_000)
                _wait_for_kernel(url, token, "live-view.ipynb")
                expect(page.locator(".jp-Notebook-ExecutionIndicator").first).to_have_attribute(
                    "data-status", "idle", timeout=60_000)
                for index in range(2):
                    cells.nth(index).locator(".jp-InputArea-editor").click()
                    page.keyboard.press("Shift+Enter")
                    if index == 0:
                        expect(cells.nth(0).locator(".jp-InputPrompt")).to_have_text("[1]:", timeout=60_000)
                view = cells.nth(1).locator(".ak-view")
                approve = view.locator(".ak-approve:visible")  # only the card that asks shows its buttons
                expect(approve).to_be_visible(timeout=60_000)
                page.mouse.move(0, 0)  # no hover highlight in the picture
                page.wait_for_timeout(300)  # let the last streamed characters paint
                out.parent.mkdir(parents=True, exist_ok=True)
                # The output holding the view, without the empty prompt column beside it.
                output = cells.nth(1).locator(".jp-OutputArea-output").filter(has=page.locator(".ak-view"))
                output.evaluate("el => { el.style.padding = '14px'; el.style.background = 'white'; }")  # a margin
                output.screenshot(path=str(out))
                approve.click()
                # The run ends: its transcript takes the live view's place.
                expect(cells.nth(1).locator(".ak-static")).to_be_visible(timeout=60_000)
            finally:
                browser.close()
    return out.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "live-view.png", help="where to write the PNG")
    args = parser.parse_args(argv)
    size = take(args.out)
    print(f"{args.out}: {size:,} bytes ({size / MAX_BYTES:.0%} of the {MAX_BYTES:,}-byte limit)")
    if size > MAX_BYTES:
        print("Too large for the README: lower device_scale_factor or the viewport size.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
