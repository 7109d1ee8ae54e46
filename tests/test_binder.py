"""Binder, as Binder builds it: every teaching notebook runs in an environment made by ``binder/postBuild``.

``make test`` runs the notebooks with the ``dev`` extra installed, which has everything; Binder
installs only what ``binder/postBuild`` says. So this test makes a fresh virtualenv (no system
site-packages, nothing of this checkout on ``PYTHONPATH``), runs ``binder/postBuild`` in it as
Binder does (its ``python`` is the virtualenv's), and executes every notebook top to bottom with
nbclient, with the kernel each notebook names, installed by postBuild. A notebook importing what
the Binder extra lacks fails here with the missing module's name. Packages come from the package
registry through pip (its cache makes a second run quick); the virtualenv is made once per test
session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from .test_notebooks import NOTEBOOKS, REPO, refresh

pytestmark = [pytest.mark.binder, pytest.mark.timeout(2700)]  # the first test pays for the build

#: Runs in the Binder virtualenv: executes each notebook and records its first error, if any.
EXECUTE = r'''
import json, sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

report, paths = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
results = {}
for path in paths:
    notebook = nbformat.read(path, as_version=4)
    kernel = notebook.metadata.get("kernelspec", {}).get("name", "python3")
    try:
        NotebookClient(notebook, timeout=120, kernel_name=kernel,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        results[path.name] = None
    except Exception as exc:  # reported by the test, notebook by notebook
        results[path.name] = f"{type(exc).__name__}: {exc}"[-4000:]
report.write_text(json.dumps(results))
'''


def _binder_environment(prefix: Path) -> dict[str, str]:
    """This process's environment as a Binder image has it: the virtualenv's ``python`` first on
    ``PATH``, and nothing that would import this checkout or another Jupyter setup instead."""
    env = refresh.notebook_environment()
    for name in list(env):
        if name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") or name.startswith(("JUPYTER", "JPY_", "IPYTHON")):
            del env[name]
    env["VIRTUAL_ENV"] = str(prefix)
    env["PATH"] = os.pathsep.join([str(prefix / "bin"), env.get("PATH", "")])
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="session")
def binder_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh virtualenv with exactly what ``binder/postBuild`` installs."""
    prefix = tmp_path_factory.mktemp("binder") / "venv"
    venv.create(prefix, with_pip=True, system_site_packages=False)
    env = _binder_environment(prefix)
    source = tmp_path_factory.mktemp("binder-source")  # postBuild runs in the repository's root
    shutil.copytree(REPO, source / "repo", ignore=shutil.ignore_patterns(
        ".venv", ".git", "node_modules", "test-artifacts", "__pycache__", ".mypy_cache", ".ruff_cache",
        ".pytest_cache", ".agent_kernel", "build", "dist"))
    built = subprocess.run(["bash", "binder/postBuild"], cwd=source / "repo", env=env,
                           capture_output=True, text=True, timeout=1500)
    assert built.returncode == 0, f"binder/postBuild failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    return prefix, env


@pytest.fixture(scope="session")
def binder_results(binder_env: tuple[Path, dict[str, str]], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | None]:
    """Every notebook executed once in the Binder virtualenv, in a scratch folder."""
    prefix, env = binder_env
    folder = tmp_path_factory.mktemp("binder-notebooks")
    for path in NOTEBOOKS:
        shutil.copy(path, folder / path.name)
    shutil.copytree(REPO / "notebooks" / "notes", folder / "notes", dirs_exist_ok=True)
    env = {**env, "TMPDIR": str(folder / "tmp")}
    (folder / "tmp").mkdir()
    report = folder / "report.json"
    run = subprocess.run([str(prefix / "bin" / "python"), "-c", EXECUTE, str(report),
                          *(str(folder / nb.name) for nb in NOTEBOOKS)],
                         cwd=folder, env=env, capture_output=True, text=True, timeout=1200)
    assert report.exists(), f"the notebooks did not run (exit status {run.returncode}):\n{run.stderr[-4000:]}"
    return dict(json.loads(report.read_text()))


def test_postbuild_installs_the_package_not_this_checkout_and_no_dev_extra(binder_env: tuple[Path, dict[str, str]]) -> None:
    prefix, env = binder_env
    probe = subprocess.run([str(prefix / "bin" / "python"), "-c",
                            "import agent_kernel, importlib.util as u; print(agent_kernel.__file__); "
                            "print(u.find_spec('pytest') is None, u.find_spec('hypothesis') is None)"],
                           env=env, capture_output=True, text=True, check=True, cwd=prefix)
    where, no_dev = probe.stdout.splitlines()
    assert Path(where).is_relative_to(prefix), where
    assert no_dev == "True True"
    kernels = subprocess.run([str(prefix / "bin" / "python"), "-m", "jupyter", "kernelspec", "list", "--json"],
                             env=env, capture_output=True, text=True, check=True)
    assert {"python3", "agent"} <= set(json.loads(kernels.stdout)["kernelspecs"])


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])
def test_the_notebook_runs_top_to_bottom_on_binder(notebook: Path, binder_results: dict[str, str | None]) -> None:
    assert notebook.name in binder_results
    assert binder_results[notebook.name] is None, binder_results[notebook.name]
