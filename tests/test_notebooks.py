"""The teaching notebooks (notebooks/*.ipynb) run top to bottom under nbval and show what they store.

One ``pytest --nbval`` process runs every notebook (starting pytest is the slow part on a small
machine, so it is paid once), in a scratch copy, each notebook with the kernel its metadata names
(``python3``, or the Agent kernel for 06) installed into a temporary prefix for this interpreter,
and in the environment ``scripts/refresh_notebooks.py`` stores the outputs with: no provider keys
and the ``auto_approve`` headless policy. Outputs are compared after ``notebooks/sanitize.cfg``;
each notebook then gets a test of its own that reports its cells. After changing a notebook, or
what it shows, run ``.venv/bin/python scripts/refresh_notebooks.py``.
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

from agent_kernel.events._turn import new_id

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
SANITIZE = REPO / "notebooks" / "sanitize.cfg"
#: Seconds one cell may take under nbval before it fails (cells take well under a second).
CELL_TIMEOUT = 60
REFRESH_HINT = "If the notebook changed on purpose, store its new outputs: .venv/bin/python scripts/refresh_notebooks.py"


def _refresh_script() -> ModuleType:
    """``scripts/refresh_notebooks.py``, the one place the notebooks' environment is defined."""
    spec = importlib.util.spec_from_file_location("refresh_notebooks", REPO / "scripts" / "refresh_notebooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


refresh = _refresh_script()


@dataclass
class NbvalRun:
    """What the nbval process reported: its output, and each notebook's cells (junit test cases)."""

    output: str
    cells: dict[str, list[ET.Element]] = field(default_factory=dict)

    def problems(self, notebook: str) -> list[str]:
        """The failure and error reports of ``notebook``'s cells."""
        found = []
        for case in self.cells.get(notebook, []):
            for problem in [*case.iter("failure"), *case.iter("error")]:
                found.append(f"--- {notebook} {case.get('name')}:\n{problem.text or problem.get('message', '')}")
        return found


@pytest.fixture(scope="module")
def nbval(tmp_path_factory: pytest.TempPathFactory) -> NbvalRun:
    """Every notebook run once under nbval, in a scratch folder."""
    kernels = refresh.install_kernels(tmp_path_factory.mktemp("prefix"))
    folder = tmp_path_factory.mktemp("notebooks")
    for path in [*NOTEBOOKS, SANITIZE]:
        shutil.copy(path, folder / path.name)
    # An ini file of its own, so the repository's pytest settings (testpaths, warnings) stay out.
    (folder / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8")
    env = refresh.notebook_environment(jupyter_path=kernels, tmpdir=folder / "tmp")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval", *(nb.name for nb in NOTEBOOKS), "--nbval-sanitize-with",
         SANITIZE.name, "--nbval-cell-timeout", str(CELL_TIMEOUT), "-p", "no:cacheprovider", "-q", "--color=no",
         "--junitxml", "report.xml"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    result = NbvalRun(run.stdout + run.stderr)
    report = folder / "report.xml"
    assert report.exists(), f"nbval wrote no report (exit status {run.returncode}):\n{result.output}"
    for case in ET.parse(report).iter("testcase"):
        result.cells.setdefault(case.get("classname", ""), []).append(case)
    return result


def code_cells(notebook: Path) -> int:
    return sum(cell["cell_type"] == "code" for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"])


def test_the_notebooks_are_numbered_in_order_each_linked_from_the_readme() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(NOTEBOOKS) >= 8
    assert [nb.stem[:3] for nb in NOTEBOOKS] == [f"{n:02d}_" for n in range(1, len(NOTEBOOKS) + 1)]
    for notebook in NOTEBOOKS:
        assert f"notebooks/{notebook.name}" in readme, f"README.md does not link {notebook.name}"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_the_notebook_runs_under_nbval_and_shows_its_stored_outputs(notebook: Path, nbval: NbvalRun) -> None:
    problems = nbval.problems(notebook.name)
    assert not problems, "\n".join([*problems, REFRESH_HINT])
    # One nbval item per code cell: every cell ran and was compared, none was left out.
    ran = len(nbval.cells.get(notebook.name, []))
    assert ran == code_cells(notebook), f"{ran} of {code_cells(notebook)} cells ran:\n{nbval.output}"


def test_the_sanitizer_hides_ids_timings_and_token_counts_but_not_answers() -> None:
    config = configparser.ConfigParser()
    config.read(SANITIZE, encoding="utf-8")
    patterns = [(re.compile(config[s]["regex"]), config[s]["replace"]) for s in config.sections()]

    def sanitize(text: str) -> str:
        for regex, replace in patterns:
            text = regex.sub(replace, text)
        return text

    one = (f"Session 'default' ({new_id('s_')}) turn {new_id('t_')} of run {new_id('r_')}, "
           f"agent {new_id('researcher-')}: 1,234 tokens in · 56 out · 0.3 s · 2 min 05 s; "
           "answer: 42 · at 2026-01-02 03:04:05.678+00:00")
    other = (f"Session 'default' ({new_id('s_')}) turn {new_id('t_')} of run {new_id('r_')}, "
             f"agent {new_id('researcher-')}: 99 tokens in · 7 out · 12.5 s · 0 min 59 s; "
             "answer: 42 · at 2027-11-12 13:14:15+00:00")
    assert sanitize(one) == sanitize(other)
    assert sanitize(one) != sanitize(one.replace("answer: 42", "answer: 43"))
