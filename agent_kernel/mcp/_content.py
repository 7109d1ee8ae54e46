"""mcp.content — an MCP tool result as the text a model reads.

Text blocks pass through; images and audio are described (type, size), never inlined as base64;
an embedded text resource is quoted under its URI, a binary one described; a resource link names
its URI. A result with only ``structuredContent`` is sent as JSON. The loop then caps the text
like every tool result.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any


def _size(data: str | None) -> str:
    if not data:
        return "0 bytes"
    try:
        n = len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        n = len(data)
    return f"{n:,} bytes" if n < 10_000 else f"{n / 1024:,.1f} KB"


def block_text(block: Any) -> str:
    """One content block as text."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind == "image":
        return f"[image: {block.mime_type}, {_size(block.data)}]"
    if kind == "audio":
        return f"[audio: {block.mime_type}, {_size(block.data)}]"
    if kind == "resource_link":
        mime = f", {block.mime_type}" if getattr(block, "mime_type", None) else ""
        about = f": {block.description}" if getattr(block, "description", None) else ""
        return f"[resource link: {block.name} <{block.uri}>{mime}{about}]"
    if kind == "resource":
        res = block.resource
        mime = f" ({res.mime_type})" if getattr(res, "mime_type", None) else ""
        text = getattr(res, "text", None)
        if text is not None:
            return f"[resource {res.uri}{mime}]\n{text}"
        return f"[resource {res.uri}{mime}: binary, {_size(getattr(res, 'blob', None))}]"
    dumped = block.model_dump(mode="json", exclude_none=True) if hasattr(block, "model_dump") else block
    return f"[{kind or 'content'}: {json.dumps(dumped, default=str)[:500]}]"


def result_text(result: Any) -> str:
    """A ``CallToolResult`` (content blocks, maybe structured content) as one text."""
    parts = [block_text(b) for b in (getattr(result, "content", None) or ())]
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False, default=str)
    return "\n".join(parts)
