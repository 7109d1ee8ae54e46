"""The timeline in real JupyterLab under the dark theme (headless Chromium through Playwright).

A cell displays the timeline of a recorded run with a sub-agent whose name is too long for the
label column. JupyterLab renders the HTML form: an inline SVG that fits the output area, whose
page and labels take the dark theme's colours, whose bars each carry a hover title, and whose
lane labels end before the plot begins. The screenshot goes to ``test-artifacts/browser``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, expect

from .conftest import LabServer

THEMES = "@jupyterlab/apputils-extension:themes"
LONG_NAME = "a-research-assistant-with-a-rather-long-name"
CELL = f'''from agent_kernel.events import AgentEvent, EventType
from agent_kernel.journal import timeline
from tests.journal_events import recorded_run

events = recorded_run()
child = [AgentEvent(40 + i, events[5].ts + i * 0.01, "s_frames", "r_child", "t_child", "t_first", 0, kind, data,
                    {LONG_NAME!r})
         for i, (kind, data) in enumerate([(EventType.LLM_START, {{"model": "small"}}), (EventType.LLM_COMPLETE, {{}})])]
timeline(events[:10] + child + events[10:])'''


def _write_notebook(path: Path) -> None:
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": "timeline", "metadata": {},
                   "outputs": [], "source": CELL}],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                    "name": "python3"}, "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook, indent=1))


@pytest.fixture
def dark_lab(lab: LabServer) -> Iterator[LabServer]:
    """JupyterLab with the dark theme chosen, as a person chooses it in the Settings menu."""
    lab.api(f"/lab/api/settings/{THEMES}", method="PUT", body={"raw": json.dumps({"theme": "JupyterLab Dark"})})
    assert lab.api(f"/lab/api/settings/{THEMES}")["settings"]["theme"] == "JupyterLab Dark"
    try:
        yield lab
    finally:
        lab.api(f"/lab/api/settings/{THEMES}", method="PUT", body={"raw": "{}"})


def _rgb_sum(css: str) -> int:
    channels = [int(c) for c in re.findall(r"\d+", css)[:3]]
    assert len(channels) == 3, css
    return sum(channels)


def test_the_timeline_fits_the_output_follows_the_dark_theme_and_titles_every_bar(
        dark_lab: LabServer, browser: Any, artifacts: Path) -> None:
    _write_notebook(dark_lab.root / "timeline.ipynb")
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    try:
        page.goto(dark_lab.page_url("timeline.ipynb"))
        expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "false", timeout=60_000)
        cell = page.locator(".jp-Notebook .jp-Cell").first
        expect(cell).to_be_visible(timeout=60_000)
        dark_lab.wait_for_kernel("timeline.ipynb")
        expect(page.locator(".jp-Notebook-ExecutionIndicator").first).to_have_attribute(
            "data-status", "idle", timeout=60_000)
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        svg: Locator = cell.locator(".jp-OutputArea-output .agent-kernel-timeline svg")
        expect(svg).to_be_visible(timeout=60_000)

        measured = svg.evaluate("""svg => {
            const area = svg.closest('.jp-OutputArea-output').getBoundingClientRect();
            const box = svg.getBoundingClientRect();
            const bars = [...svg.querySelectorAll('rect.bar')];
            const plotStart = Math.min(...bars.map(b => b.x.baseVal.value));
            const labels = [...svg.querySelectorAll('text.lane-label')].map(t => {
                const b = t.getBBox();
                return {text: t.firstChild.nodeValue, right: b.x + b.width};
            });
            return {
                areaRight: area.right, areaWidth: area.width, right: box.right, width: box.width,
                background: getComputedStyle(svg.querySelector('rect')).fill,
                label: getComputedStyle(svg.querySelector('text.lane-label')).fill,
                bars: bars.length,
                titled: bars.filter(b => b.querySelector('title') && b.querySelector('title').textContent).length,
                plotStart, labels,
            };
        }""")
        cell.locator(".jp-OutputArea-output").screenshot(path=str(artifacts / "timeline-dark.png"))
    finally:
        context.close()
        dark_lab.shutdown_kernels()

    assert measured["right"] <= measured["areaRight"] + 0.5, measured  # nothing cut off on the right
    assert measured["width"] >= 0.9 * measured["areaWidth"], measured  # and it uses the width it has
    assert _rgb_sum(measured["background"]) < 150, measured  # a dark page, not a white one
    assert _rgb_sum(measured["label"]) > 450, measured  # light text on it
    assert measured["bars"] == 8 and measured["titled"] == 8, measured
    long_label = next(label for label in measured["labels"] if label["text"].startswith(LONG_NAME[:10]))
    assert long_label["text"].endswith("…"), measured
    assert all(label["right"] <= measured["plotStart"] for label in measured["labels"]), measured
