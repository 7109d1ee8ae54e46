"""Re-executes the teaching notebooks and saves their outputs, as the notebook tests compare them.

Usage::

    .venv/bin/python scripts/refresh_notebooks.py                  # every notebooks/*.ipynb
    .venv/bin/python scripts/refresh_notebooks.py 02 notebooks/07_subagents_and_crews.ipynb

Each notebook runs with its own kernel (``python3`` or the Agent kernel ``agent``, as its
metadata says), both installed into a temporary prefix that launches this interpreter, in a
scratch copy of ``notebooks/`` so the journals the runs write never land in the repository. The
environment is the one the tests use (``notebook_environment``): no provider keys, so every
notebook runs on the offline and scripted models, and the ``auto_approve`` headless policy.
Outputs are saved without widget state and execution timings, so a refresh changes little more
than what the notebook really shows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
#: Seconds one cell may take before the refresh gives up on the notebook.
CELL_TIMEOUT = 120
#: Environment variables a notebook run never inherits: provider keys and endpoints, the
#: package's own settings, the local-server settings notebook 05 reads, and VS Code's (a kernel
#: that sees them runs cells detached, which changes what the cells show).
STRIPPED_PREFIXES = ("AGENT_KERNEL_", "ANTHROPIC_", "OPENAI_", "LOCAL_MODEL_", "VSCODE_")
#: What every notebook runs with: nobody watches the live view, so the headless policy answers
#: the approvals (notebook 02 explains it).
NOTEBOOK_SETTINGS = {"AGENT_KERNEL_APPROVAL": "auto_approve"}


def notebook_environment(base: Mapping[str, str] | None = None, *, jupyter_path: Path | None = None,
                         tmpdir: Path | None = None) -> dict[str, str]:
    """The environment notebooks run in.

    Args:
        base: the environment to start from (default: this process's); provider settings are
            dropped from it and ``NOTEBOOK_SETTINGS`` added.
        jupyter_path: put first on ``JUPYTER_PATH`` (where ``install_kernels`` put the kernels).
        tmpdir: the kernels' ``TMPDIR`` (created), so the scratch folders notebooks make are
            removed with it.
    """
    source = os.environ if base is None else base
    env = {name: value for name, value in source.items()
           if not name.startswith(STRIPPED_PREFIXES) and not name.endswith("_API_KEY")}
    env.update(NOTEBOOK_SETTINGS)
    if jupyter_path is not None:
        env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(jupyter_path), env.get("JUPYTER_PATH")]))
    if tmpdir is not None:
        tmpdir.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(tmpdir)
    return env


def install_kernels(prefix: Path) -> Path:
    """Installs the ``python3`` and ``agent`` kernelspecs for this interpreter under ``prefix``;
    returns the ``share/jupyter`` folder to put on ``JUPYTER_PATH``."""
    from ipykernel.kernelspec import install as install_python

    from agent_kernel.jupyter.install import install as install_agent

    install_python(prefix=str(prefix))
    install_agent(prefix=prefix)
    return prefix / "share" / "jupyter"


@contextmanager
def scratch_copy(notebooks: Sequence[Path]) -> Iterator[Path]:
    """A temporary folder holding copies of ``notebooks`` (and the folder's other files)."""
    with tempfile.TemporaryDirectory(prefix="agent_kernel_notebooks_") as tmp:
        folder = Path(tmp)
        for path in NOTEBOOKS.iterdir():
            if path.is_file() and path.suffix != ".ipynb":
                shutil.copy(path, folder / path.name)
        for notebook in notebooks:
            shutil.copy(notebook, folder / notebook.name)
        yield folder


#: The output type of a live widget: a pointer to widget state, which is not saved.
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Drops what changes on every run without being output: widget state, timings, versions.

    When a run ends its live view gives way to its static transcript, so a stored notebook needs
    no widget state: a widget output left behind would only point at a model that no longer
    exists (JupyterLab shows "model not found"). Such pointers go, and so do the outputs left
    with no data at all (a view emptied when its transcript took its place), which nothing
    renders and no checker compares.
    """
    nb.metadata.pop("widgets", None)
    info = nb.metadata.get("language_info")
    if info is not None:
        info.pop("version", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if "outputs" not in cell:
            continue
        for output in cell.outputs:
            output.get("data", {}).pop(WIDGET_VIEW, None)
        cell.outputs = [output for output in cell.outputs
                        if output.get("output_type") not in ("display_data", "update_display_data")
                        or output.get("data")]
    return nb


def execute(path: Path, folder: Path, env: Mapping[str, str], kernels: Path) -> nbformat.NotebookNode:
    """Runs the copy of ``path`` in ``folder`` with the kernel its metadata names."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    nb = nbformat.read(folder / path.name, as_version=4)
    name = nb.metadata.get("kernelspec", {}).get("name", "python3")
    specs = KernelSpecManager(kernel_dirs=[str(kernels / "kernels")])
    km = KernelManager(kernel_name=name, kernel_spec_manager=specs)
    client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT, kernel_name=name,
                            resources={"metadata": {"path": str(folder)}})
    client.execute(env=dict(env), cwd=str(folder))
    return clean(nb)


def resolve(names: Sequence[str]) -> list[Path]:
    """The notebooks ``names`` refer to (a path, a file name, or its number prefix such as ``02``)."""
    every = sorted(NOTEBOOKS.glob("*.ipynb"))
    if not names:
        return every
    chosen: list[Path] = []
    for name in names:
        path = Path(name)
        if path.is_file():
            chosen.append(path.resolve())
            continue
        matches = [nb for nb in every if nb.name == name or nb.stem == name or nb.name.startswith(f"{name}_")]
        if len(matches) != 1:
            known = ", ".join(nb.name for nb in every)
            raise SystemExit(f"{name!r} names {len(matches)} notebooks; give a path or a number. Notebooks: {known}.")
        chosen.append(matches[0])
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="notebooks to refresh (default: all in notebooks/)")
    args = parser.parse_args(argv)
    notebooks = resolve(args.notebooks)
    with tempfile.TemporaryDirectory(prefix="agent_kernel_kernels_") as prefix:
        kernels = install_kernels(Path(prefix))
        with scratch_copy(notebooks) as folder:
            env = notebook_environment(jupyter_path=kernels, tmpdir=folder / "tmp")
            for path in notebooks:
                started = time.perf_counter()
                nb = execute(path, folder, env, kernels)
                nbformat.write(nb, path)
                print(f"{path.name}: {len(nb.cells)} cells, {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
