"""A provider-neutral model turn, rendered by each fake endpoint in its own wire format.

A turn is a dict: ``text`` (str or None), ``thinking`` ((text, signature) or None),
``tool_calls`` ([(call_id, name, arguments_json), ...]), ``stop`` (``end_turn``, ``tool_use`` or
``max_tokens``; None picks ``tool_use`` when there are calls) and ``usage`` (``input_tokens`` and
``output_tokens``, or None when the server reports none).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

Turn = dict[str, Any]


def turn(
    text: str | None = None,
    *,
    thinking: tuple[str, str] | None = None,
    calls: Sequence[tuple[str, str, dict[str, Any] | str]] = (),
    stop: str | None = None,
    usage: dict[str, int] | None = None,
    no_usage: bool = False,
) -> Turn:
    """A neutral turn; ``calls`` arguments may be dicts or raw (possibly invalid) JSON text."""
    tool_calls = [(cid, name, args if isinstance(args, str) else json.dumps(args)) for cid, name, args in calls]
    return {
        "text": text,
        "thinking": thinking,
        "tool_calls": tool_calls,
        "stop": stop or ("tool_use" if tool_calls else "end_turn"),
        "usage": None if no_usage else (usage or {"input_tokens": 40, "output_tokens": 12}),
    }


def pieces(text: str, size: int = 7) -> list[str]:
    """``text`` in ``size``-character deltas, as servers stream it."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
