"""The diff of two runs is readable in JupyterLab's light and dark themes (headless Chromium).

A cell shows ``diff_view`` of a run and its fork (they part at turn 1, with a long cut result).
For every piece of text the diff draws, the test takes the computed colour of the text and of the
backgrounds under it (composited up to the page, the output area's striped rows included) and
checks WCAG contrast of at least 4.5:1 in both themes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import LabServer

THEMES = "@jupyterlab/apputils-extension:themes"
CELL = '''import pathlib, tempfile
from agent_kernel.journal import diff_view
from tests.test_diff_view import forked

agent, fork = await forked(pathlib.Path(tempfile.mkdtemp()))
diff_view(agent, fork, labels=("original", "fork"))'''

#: Computes, for each visible element of the diff holding text of its own, its contrast ratio.
CONTRASTS = """root => {
    const parse = (css) => {
        const m = css.match(/rgba?\\(([^)]+)\\)/);
        if (!m) return [0, 0, 0, 0];
        const v = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
        return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1];
    };
    const over = (top, under) => {  // top composited over an opaque colour
        const a = top[3];
        return [0, 1, 2].map(i => top[i] * a + under[i] * (1 - a)).concat([1]);
    };
    const background = (node) => {
        const layers = [];
        for (let n = node; n && n.nodeType === 1; n = n.parentElement) {
            const c = parse(getComputedStyle(n).backgroundColor);
            if (c[3] > 0) layers.push(c);
            if (c[3] >= 1) break;
        }
        let colour = [255, 255, 255, 1];
        for (const layer of layers.reverse()) colour = over(layer, colour);
        return colour;
    };
    const luminance = (c) => {
        const [r, g, b] = c.slice(0, 3).map(v => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const out = [];
    for (const el of [root, ...root.querySelectorAll('*')]) {
        const own = [...el.childNodes].filter(n => n.nodeType === 3 && n.nodeValue.trim()).map(n => n.nodeValue.trim());
        if (!own.length || !el.getClientRects().length) continue;
        let opacity = 1;
        for (let n = el; n && n.nodeType === 1; n = n.parentElement) opacity *= Number(getComputedStyle(n).opacity);
        const bg = background(el);
        const fg = parse(getComputedStyle(el).color);
        const text = over([fg[0], fg[1], fg[2], fg[3] * opacity], bg);
        const [hi, lo] = [luminance(text), luminance(bg)].sort((a, b) => b - a);
        out.push({text: own.join(' ').slice(0, 40), ratio: (hi + 0.05) / (lo + 0.05)});
    }
    return out;
}"""


def _write_notebook(path: Path) -> None:
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": "diff", "metadata": {},
                   "outputs": [], "source": CELL}],
        "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                    "name": "python3"}, "language_info": {"name": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook, indent=1))


@pytest.mark.parametrize("app", ["lab", "notebooks"])  # JupyterLab and Notebook 7
@pytest.mark.parametrize("theme", ["JupyterLab Light", "JupyterLab Dark"])
def test_every_text_of_the_diff_view_has_a_contrast_of_at_least_4_5_to_1(
        lab: LabServer, browser: Any, artifacts: Path, theme: str, app: str) -> None:
    lab.api(f"/lab/api/settings/{THEMES}", method="PUT", body={"raw": json.dumps({"theme": theme})})
    name = f"diff-{theme.split()[-1].lower()}-{app}.ipynb"
    _write_notebook(lab.root / name)
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    try:
        page.goto(lab.page_url(name, app))
        light = "true" if theme.endswith("Light") else "false"
        expect(page.locator("body")).to_have_attribute("data-jp-theme-light", light, timeout=60_000)
        cell = page.locator(".jp-Notebook .jp-Cell").first
        expect(cell).to_be_visible(timeout=60_000)
        lab.wait_for_kernel(name)
        expect(page.locator(".jp-Notebook-ExecutionIndicator").first).to_have_attribute(
            "data-status", "idle", timeout=60_000)
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        diff = cell.locator(".jp-OutputArea-output .ak-diff")
        expect(diff.locator(".ak-diff-first")).to_be_visible(timeout=60_000)
        measured = diff.evaluate(CONTRASTS)
        diff.screenshot(path=str(artifacts / name.replace(".ipynb", ".png")))
    finally:
        context.close()
        lab.shutdown_kernels()
        lab.api(f"/lab/api/settings/{THEMES}", method="PUT", body={"raw": "{}"})

    texts = {m["text"] for m in measured}
    assert "first divergence" in texts and "original" in texts and "tool call" in texts, texts
    poor = [m for m in measured if m["ratio"] < 4.5]
    assert not poor, poor
