"""The timeline: bars per turn from the events, and an SVG that renders without scripts or assets."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest
from IPython.core.formatters import DisplayFormatter
from nbconvert import HTMLExporter

from agent_kernel import Agent
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.journal import Journal, Timeline, timeline
from agent_kernel.journal._svg_timeline import BAR_COLUMNS
from agent_kernel.models.scripted import ScriptedModel

from .journal_events import recorded_run, until

SVG = "{http://www.w3.org/2000/svg}"


def bars_of(t: Timeline) -> list[tuple[int, int, str, str, float, float, bool]]:
    return [
        (b.lane, b.sublane, b.kind, b.label, round(b.start_s, 2), round(b.end_s, 2), b.finished)
        for b in t.bars.itertuples(index=False)
    ]


def test_each_turn_gets_a_lane_and_overlapping_calls_stack() -> None:
    t = timeline(recorded_run())
    assert list(t.bars.columns) == list(BAR_COLUMNS)
    assert bars_of(t) == [
        (0, 0, "model", "scripted", 0.03, 0.6, True),
        (0, 1, "tool", "read", 0.33, 0.8, True),
        (0, 2, "tool", "read", 0.43, 0.9, True),  # runs beside the first read: its own sub-lane
        (0, 0, "approval", "write: approve", 0.61, 1.1, True),
        (0, 0, "tool", "write", 1.11, 1.3, True),
        (1, 0, "compaction", "compaction", 1.33, 1.8, True),
        (1, 0, "model", "scripted", 1.82, 2.0, True),
    ]
    assert t.bars["turn_counter"].tolist() == [0] * 5 + [1] * 2
    assert t.duration_s == pytest.approx(2.01)
    assert repr(t) == "Timeline(2 turns, 2.01 s: 1 approval, 1 compaction, 2 model, 3 tool)"


def test_a_run_in_progress_draws_open_bars_to_the_last_event() -> None:
    t = timeline(until(recorded_run(), EventType.TOOL_RESULT))
    open_bars = t.bars[~t.bars["finished"]]
    assert sorted(open_bars["label"]) == ["read", "write: waiting"]
    assert (open_bars["end_s"] == t.duration_s).all()
    assert 'stroke-dasharray="3,2"' in t.to_svg()


def test_the_svg_is_standalone_and_titles_every_bar() -> None:
    svg = timeline(recorded_run()).to_svg()
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert not root.findall(f".//{SVG}script") and "<script" not in svg
    assert not re.search(r"(?:href|src)=", svg)
    assert "http" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")
    tips = [(title.text or "").split("\n")[0] for title in root.iter(f"{SVG}title")]
    assert "tool: read (0.470 s)" in tips and "approval: write: approve (0.490 s)" in tips


def test_hovering_a_bar_tells_its_arguments_tokens_and_decision() -> None:
    root = ET.fromstring(timeline(recorded_run()).to_svg())
    tips = {(r.findtext(f"{SVG}title") or "") for r in root.iter(f"{SVG}rect") if r.get("class") == "bar"}

    assert "tool: read (0.470 s)\nread(path='a.txt')\nreturned: alpha\nrun 1 · turn 0" in tips
    model = next(t for t in tips if t.startswith("model: scripted (0.570 s)"))
    assert "100 tokens in, 20 out" in model and "$0.0010" in model and "stop: tool_use" in model
    approval = next(t for t in tips if t.startswith("approval:"))
    assert "decision: approve by callback" in approval and "asked because: write changes files" in approval
    assert any(t.startswith("compaction: compaction") and "5000 tokens → 900 tokens" in t for t in tips)


def test_labels_from_the_run_are_escaped() -> None:
    events = recorded_run()
    hostile = [
        AgentEvent(e.seq, e.ts, e.session_id, e.run_id, e.turn_id, e.parent_turn_id, e.iteration, e.type,
                   {**e.data, "name": "<b>&x</b>"} if e.type in (EventType.TOOL_START, EventType.TOOL_RESULT) else e.data)
        for e in events
    ]
    svg = timeline(hostile).to_svg()
    ET.fromstring(svg)  # still well-formed
    assert "<b>" not in svg and "&lt;b&gt;&amp;x&lt;/b&gt;" in svg


def test_a_notebook_gets_an_svg_that_nbconvert_html_keeps() -> None:
    t = timeline(recorded_run())
    data, _ = DisplayFormatter().format(t)
    assert data["image/svg+xml"] == t.to_svg() and data["text/plain"] == repr(t)
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("timeline(agent)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={k: data[k] for k in ("image/svg+xml", "text/plain")})]
    notebook.cells = [cell]
    html, _ = HTMLExporter().from_notebook_node(notebook)
    # nbconvert embeds an SVG output as a data URI image: the picture is there whole.
    [encoded] = re.findall(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', html)
    assert base64.b64decode(encoded).decode() == t.to_svg()


def test_sources_are_those_the_frames_take(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    agent = Agent(ScriptedModel(["Hi there."]), journal=path, context=None)
    agent.run_sync("hello")
    expected = bars_of(timeline(agent))
    assert [b[2] for b in expected] == ["model"]
    assert bars_of(timeline(path)) == expected and bars_of(timeline(agent.events)) == expected
    assert isinstance(agent.journal, Journal) and bars_of(timeline(agent.journal)) == expected
    agent.close()


def test_no_events_draw_an_empty_picture(tmp_path: Path) -> None:
    t = timeline([])
    assert len(t.bars) == 0 and "no events yet" in t.to_svg()
    t.save(str(tmp_path / "empty.svg"))
    ET.parse(tmp_path / "empty.svg")


def child_run(events: list[AgentEvent], agent_id: str) -> list[AgentEvent]:
    """A sub-agent's run of one model call, placed inside the first turn of ``events``."""
    return [AgentEvent(40 + i, events[5].ts + i * 0.01, "s_frames", "r_child", "t_child", "t_first", 0, kind, data, agent_id)
            for i, (kind, data) in enumerate([(EventType.LLM_START, {"model": "small"}), (EventType.LLM_COMPLETE, {})])]


def test_lanes_are_labelled_by_agent_run_and_turn() -> None:
    events = recorded_run()
    t = timeline(events[:10] + child_run(events, "researcher") + events[10:])
    labels = [text.text for text in ET.fromstring(t.to_svg()).iter(f"{SVG}text") if text.get("class") == "lane-label"]

    assert labels == ["run 1 · turn 0", "researcher · run 1 · turn 0", "run 1 · turn 1"]
    assert t.bars[t.bars["turn_id"] == "t_child"][["kind", "agent", "run_id"]].values.tolist() == [["model", "researcher", "r_child"]]
    second = [AgentEvent(e.seq + 100, e.ts + 5, e.session_id, "r_again", e.turn_id + "_2", None, e.iteration, e.type, e.data)
              for e in events]
    assert "run 2 · turn 0" in timeline(events + second).to_svg()


def test_a_label_too_long_for_its_column_ends_in_an_ellipsis_and_keeps_its_full_text() -> None:
    events = recorded_run()
    name = "a-research-assistant-with-a-very-long-name-indeed-" * 2
    root = ET.fromstring(timeline(events[:10] + child_run(events, name) + events[10:]).to_svg())
    label = next(t for t in root.iter(f"{SVG}text") if t.get("class") == "lane-label" and name[:10] in (t.text or ""))

    assert (label.text or "").endswith("…") and len(label.text or "") < len(name)
    assert label.findtext(f"{SVG}title") == f"{name} · run 1 · turn 0"
    first_bar = min(float(r.get("x", 0)) for r in root.iter(f"{SVG}rect") if r.get("class") == "bar")
    assert 6 + len(label.text or "") * 6.6 <= first_bar  # the label stops before the plot begins


def test_a_notebook_gets_themed_responsive_html_and_the_svg_image_as_fallback() -> None:
    t = timeline(recorded_run())
    data, _ = DisplayFormatter().format(t)

    assert data["image/svg+xml"] == t.to_svg() and data["text/html"] == t.to_html()
    html = data["text/html"]
    root = ET.fromstring(html)  # well-formed: one <div> around the <svg>
    svg = root.find(f"{SVG}svg")
    assert svg is not None and svg.get("width") == "100%" and svg.get("viewBox", "").startswith("0 0 760 ")
    assert "var(--jp-layout-color1, #ffffff)" in html and "var(--jp-ui-font-color1, #333)" in html
    assert "<script" not in html and not re.search(r"(?:href|src)=", html)
    static = ET.fromstring(data["image/svg+xml"])
    assert static.get("width") == "920" and "var(" not in data["image/svg+xml"]


def test_a_long_session_draws_only_its_latest_turns() -> None:
    events = recorded_run()
    t = timeline(events, max_turns=1)
    svg = t.to_svg()
    ET.fromstring(svg)
    assert "the last 1 of 2 turns" in svg and "run 1 · turn 1" in svg and "turn 0" not in svg
    assert len(t.bars) == 7  # the data keeps every turn
    assert svg.count("<rect") < timeline(events).to_svg().count("<rect")


def test_the_picture_is_a_png_only_so_an_untrusted_notebook_shows_it() -> None:
    from io import BytesIO

    from PIL import Image

    t = timeline(recorded_run())
    data, metadata = DisplayFormatter().format(t.picture())
    assert sorted(data) == ["image/png", "text/plain"]  # no HTML or SVG for a sanitiser to strip
    assert metadata["image/png"] == {"width": 920} and data["text/plain"] == repr(t)
    png = data["image/png"]  # bytes here; the kernel sends them base64-encoded
    image = Image.open(BytesIO(png if isinstance(png, bytes) else base64.b64decode(png))).convert("RGB")
    assert image.width == 2 * 920  # drawn at twice its shown size, for sharp screens
    colours = {colour for _, colour in image.getcolors(maxcolors=1 << 20)}
    for hex_colour in ("#4c78a8", "#f58518", "#e45756", "#54a24b"):  # every kind of bar is drawn
        assert tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)) in colours
    labels = image.crop((0, 0, 2 * 84, image.height))  # the lane labels' column holds dark text
    assert labels.convert("L").getextrema()[0] < 80


@pytest.mark.parametrize("name", ["03_journals_as_dataframes", "07_subagents_and_crews"])
def test_the_teaching_notebooks_store_their_timelines_as_pictures(name: str) -> None:
    notebook = nbformat.read(Path(__file__).parents[1] / "notebooks" / f"{name}.ipynb", as_version=4)
    cells = [cell for cell in notebook.cells if cell.cell_type == "code" and "timeline" in cell.source]
    shown = [output for cell in cells for output in cell.get("outputs", []) if "data" in output
             and output["data"].get("text/plain", "").startswith("Timeline(")]
    assert shown, "the notebook shows no timeline"
    for output in shown:
        assert "image/png" in output["data"]
        assert "text/html" not in output["data"] and "image/svg+xml" not in output["data"]
