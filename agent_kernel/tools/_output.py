"""tools.output — the cap on what one tool result sends to the model.

A tool result goes into every later request of the conversation, so one huge result (a 5 MB
log, a whole table) makes each of them fail for good: too large for the provider, and too large
to summarise. Every result, from a built-in tool or an ``@tool`` function alike, is capped: past
``limit`` characters the whole output is written to a file in the session's folder and the
model gets its beginning, its end and the file's path, which ``read_file`` or ``grep`` can open
when the rest matters (the tool-output cache of Claude Code's loop).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["DEFAULT_TOOL_RESULT_LIMIT", "cap_tool_output"]

#: Characters of one tool result sent to the model (the built-in tools' own cap).
DEFAULT_TOOL_RESULT_LIMIT = 30_000

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")


def cap_tool_output(content: str, limit: int | None, folder: Path | None, call_id: str) -> str:
    """``content`` if it fits in ``limit`` characters, else a preview that names the full copy.

    Args:
        content: the tool's whole output.
        limit: most characters to keep; None keeps everything.
        folder: where the full output is written (``<call_id>.txt``); None writes nothing and
            the preview says the rest was dropped.
        call_id: names the file.
    """
    if limit is None or len(content) <= limit:
        return content
    where = "was not kept (no session folder)"
    if folder is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = folder / f"{_UNSAFE_NAME.sub('_', call_id)[:100] or 'output'}.txt"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with open(fd, "w", encoding="utf-8", errors="replace") as f:
                f.write(content)
            where = f"is in {path}; read parts of it with read_file (offset and limit) or search it with grep"
        except OSError as exc:
            where = f"could not be saved ({exc})"
    head_chars = max(0, limit * 2 // 3)
    tail_chars = max(0, limit - head_chars - 400)
    omitted = len(content) - head_chars - tail_chars
    return (
        f"{content[:head_chars]}\n\n[... {omitted:,} of {len(content):,} characters omitted: "
        f"the whole output {where} ...]\n\n{content[len(content) - tail_chars:] if tail_chars else ''}"
    )
