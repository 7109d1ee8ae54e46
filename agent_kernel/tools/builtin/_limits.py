"""tools.builtin.limits — output caps: text over a limit is cut with a note saying how much.

A tool result goes into the model's context on every later turn, so one ``cat`` of a log file
must not fill it. The note tells the model what was cut and how to see the rest.
"""

from __future__ import annotations

from typing import Literal

MAX_OUTPUT_CHARS = 30_000


def truncate(text: str, limit: int = MAX_OUTPUT_CHARS, *, keep: Literal["head", "middle"] = "head", hint: str = "") -> str:
    """``text`` cut to about ``limit`` characters, with a note of how much was left out.

    Args:
        text: the output.
        limit: the most characters kept.
        keep: ``head`` keeps the start; ``middle`` keeps start and end (errors are often last).
        hint: appended to the note, e.g. how to read the rest.

    Example:
        >>> truncate("x" * 100, 10)
        'xxxxxxxxxx\\n[… 90 more characters cut (100 in all).]'
    """
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    note = f"[… {cut:,} more characters cut ({len(text):,} in all).{' ' + hint if hint else ''}]"
    if keep == "middle":
        head = limit // 2
        tail = limit - head
        note = f"[… {cut:,} characters cut from the middle ({len(text):,} in all).{' ' + hint if hint else ''}]"
        return f"{text[:head]}\n{note}\n{text[len(text) - tail:]}"
    return f"{text[:limit]}\n{note}"
