"""text — making text encodable where it enters the conversation.

A Python ``str`` can hold lone surrogates: ``os.listdir`` returns them for file names that are
not UTF-8 (``surrogateescape``), ``json.loads`` returns them for an escaped half pair, and a
prompt can carry one pasted from elsewhere. UTF-8 cannot encode them, so one such character in
the conversation makes every later request fail ("surrogates not allowed"). Every content block
passes its text through ``encodable`` when it is built, so whatever enters the conversation,
including a journal being resumed, reaches the provider as U+FFFD instead.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

REPLACEMENT = "\ufffd"

# A str never holds a valid surrogate pair (those are single code points), so any surrogate is lone.
_SURROGATES = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` with every lone surrogate (undecodable byte) replaced by U+FFFD."""
    if _SURROGATES.search(text) is None:  # the common case: one scan, no copy
        return text
    return _SURROGATES.sub(REPLACEMENT, text)


def encodable_data(value: Any) -> Any:
    """``value`` (JSON-like data) with ``encodable`` applied to every string, keys included.

    Returns ``value`` itself when nothing needed replacing, so clean data is never copied.
    """
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        items = [(encodable_data(k), encodable_data(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items())):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        cleaned = [encodable_data(v) for v in value]
        if all(c is v for c, v in zip(cleaned, value)):
            return value
        return type(value)(cleaned)
    return value


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _invisible(ch: str, keep: str) -> bool:
    """A character that moves, hides or reorders what is around it (controls, bidi, zero-width)."""
    return ch not in keep and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cn")


def shown_name(name: str) -> str:
    """``name`` (a tool's, a server's, an agent's) with every control, bidi-override and
    zero-width character written out visibly (``\\u202e``), as the live view and transcript show it.

    A name comes from a model or a server, both hostile input: a U+202E reverses what follows it
    on screen, a newline starts a fake line; written out, the person sees what the name really is.
    """
    if name.isascii() and name.isprintable():  # the common case: nothing to escape
        return name
    return "".join(_escape(ch) if _invisible(ch, "") else ch for ch in name)


def shown_text(text: str) -> str:
    """Like ``shown_name`` for a message of several lines: line breaks and tabs are kept."""
    if text.isascii() and all(ch.isprintable() or ch in "\n\t" for ch in text):
        return text
    return "".join(_escape(ch) if _invisible(ch, "\n\t") else ch for ch in text)
