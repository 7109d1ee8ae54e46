"""tools.builtin.images — pictures for the model: capped in number and size, scaled, described.

A plot in a tool result goes to the model as an ``ImageBlock``. Each costs about as much as a
page of text, and providers refuse large ones, so a result carries at most ``MAX_IMAGES``, each
scaled to at most ``MAX_EDGE`` pixels on its long edge (with Pillow, when installed) and refused
past ``MAX_BYTES``. Every image has an ``alt`` line (its size, and for a matplotlib figure its
title and axes) that a model taking no images reads instead.
"""

from __future__ import annotations

import base64
import binascii
import io
import struct
from typing import Any

from agent_kernel.messages import ImageBlock

#: Images one tool result sends at most (the rest are named in its text).
MAX_IMAGES = 4
#: Pixels on an image's long edge at most (Anthropic's and OpenAI's recommended size).
MAX_EDGE = 1568
#: Bytes of one image at most, after scaling.
MAX_BYTES = 1_000_000
#: The image types models take.
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def png_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from a PNG's header, or None when ``data`` is no PNG."""
    if len(data) >= 24 and data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    return None


def _scaled(data: bytes, media_type: str) -> tuple[bytes, int | None, int | None]:
    """``data`` scaled to ``MAX_EDGE`` (when Pillow is installed), with its size."""
    size = png_size(data)
    try:
        from PIL import Image
    except ImportError:  # no Pillow: sent as it is (still capped in bytes)
        return data, *(size or (None, None))
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if max(width, height) <= MAX_EDGE:
                return data, width, height
            ratio = MAX_EDGE / max(width, height)
            small = image.resize((max(1, round(width * ratio)), max(1, round(height * ratio))))
            out = io.BytesIO()
            small.save(out, format="PNG" if media_type == "image/png" else (image.format or "PNG"))
            return out.getvalue(), small.size[0], small.size[1]
    except Exception:  # an image Pillow cannot read: sent unscaled if small enough
        return data, *(size or (None, None))


def image_block(media_type: str, data: bytes | str, alt: str = "") -> ImageBlock | None:
    """An image for the model, scaled and capped; None when it is not an image a model takes,
    cannot be decoded, or is too large even when scaled."""
    if media_type not in IMAGE_TYPES:
        return None
    if isinstance(data, str):
        try:
            raw = base64.b64decode(data.replace("\n", ""), validate=True)
        except (binascii.Error, ValueError):
            return None
    else:
        raw = data
    raw, width, height = _scaled(raw, media_type)
    if len(raw) > MAX_BYTES:
        return None
    return ImageBlock(media_type, base64.b64encode(raw).decode("ascii"), width, height, alt)


def describe_figure(figure: Any) -> dict[str, Any]:
    """A matplotlib figure's title and each axes' title and labels (what ``alt`` says of it)."""
    suptitle = getattr(figure, "_suptitle", None)
    axes = []
    for ax in figure.get_axes():
        axes.append({"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel()})
    title = suptitle.get_text() if suptitle is not None else ""
    if not title and axes:
        title = axes[0]["title"]
    return {"title": title, "axes": axes}


def figure_alt(info: dict[str, Any]) -> str:
    """One line saying what a figure shows: ``figure 'Sales': x 'month', y 'units'``."""
    parts = [f"figure {info.get('title')!r}" if info.get("title") else "figure"]
    for ax in info.get("axes") or ():
        labels = ", ".join(f"{k[0]} {ax[k]!r}" for k in ("xlabel", "ylabel") if ax.get(k))
        if labels:
            parts.append(labels)
    return ": ".join([parts[0], "; ".join(parts[1:])]) if len(parts) > 1 else parts[0]
