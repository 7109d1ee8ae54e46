"""tools.output — the cap on what one tool result sends to the model.

A tool result goes into every later request of the conversation, so one huge result (a 5 MB
log, a whole table) makes each of them fail for good: too large for the provider, and too large
to summarise. Every result, from a built-in tool or an ``@tool`` function alike, is capped: past
``limit`` characters (30,000, and at most a quarter of the model's window: ``result_limit_for_window``,
applied by the loop) the whole output is written to a file in the session's folder and the
model gets its beginning, its end and the file's path, which ``read_file`` or ``grep`` can open
when the rest matters (the tool-output cache of Claude Code's loop).
"""

from __future__ import annotations

from pathlib import Path

from agent_kernel._util.spill import shown_path, write_spill

#: Characters of one tool result sent to the model (the built-in tools' own cap), at most.
DEFAULT_TOOL_RESULT_LIMIT = 30_000

#: The share of the model's context window one tool result may fill: a 4,096-token local model
#: gets about 4,000 characters, not 30,000 (more than its whole window).
WINDOW_SHARE = 0.25

# Characters per token for turning a window into characters (English text and code land near 4).
_CHARS_PER_TOKEN = 4


def result_limit_for_window(limit: int | None, window_tokens: int | None) -> int | None:
    """The cap for a model with a ``window_tokens``-token window: ``limit``, or a quarter of
    the window when that is less (``limit`` None, no cap, stays None; an unknown window changes
    nothing).

    Example:
        >>> result_limit_for_window(30_000, 4_096), result_limit_for_window(30_000, 200_000)
        (4096, 30000)
    """
    if limit is None or not window_tokens or window_tokens <= 0:
        return limit
    return max(1, min(limit, int(window_tokens * WINDOW_SHARE * _CHARS_PER_TOKEN)))


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
            path = write_spill(folder, call_id, content)
            where = f"is in {shown_path(path)}; read parts of it with read_file (offset and limit) or search it with grep"
        except OSError as exc:
            where = f"could not be saved ({exc})"
    head_chars = max(0, limit * 2 // 3)
    tail_chars = max(0, limit - head_chars - 400)
    omitted = len(content) - head_chars - tail_chars
    return (
        f"{content[:head_chars]}\n\n[... {omitted:,} of {len(content):,} characters omitted: "
        f"the whole output {where} ...]\n\n{content[len(content) - tail_chars:] if tail_chars else ''}"
    )
