"""journal.html_timeline — the timeline as HTML for live notebooks: full width, themed, hoverable.

``render_html(timeline)`` wraps the timeline's SVG in a ``<div>``: the picture scales to the
output area's width (``width="100%"`` and a viewBox), its page, stripes, grid and text take
JupyterLab's theme colours through CSS variables (``var(--jp-layout-color1, #fff)``, with the
light colours as fallbacks wherever the variables are not defined, as in nbconvert HTML), and
every bar keeps its ``<title>`` for hover details. No script and no external asset, so it
renders the same in a trusted or untrusted notebook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_kernel.journal._svg_timeline import Palette

if TYPE_CHECKING:
    from agent_kernel.journal._svg_timeline import Timeline

#: Colours that follow the JupyterLab theme, falling back to the static picture's.
THEMED = Palette(
    background="var(--jp-layout-color1, #ffffff)",
    stripe="var(--jp-layout-color2, #f6f6f6)",
    grid="var(--jp-border-color2, #e6e6e6)",
    text="var(--jp-ui-font-color1, #333)",
    muted="var(--jp-ui-font-color2, #777)",
    open_outline="var(--jp-ui-font-color1, #333)",
)


def render_html(timeline: Timeline) -> str:
    """``timeline`` as an HTML fragment: a responsive, theme-coloured inline SVG."""
    svg = timeline.to_svg(THEMED, responsive=True)
    return (
        '<div class="agent-kernel-timeline" style="width:100%;overflow:hidden;'
        'font-family:var(--jp-ui-font-family, sans-serif)">'
        f"{svg}</div>"
    )
