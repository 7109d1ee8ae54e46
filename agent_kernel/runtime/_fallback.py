"""fallback — the answer a run gives when its final, tools-disabled model call fails.

At ``max_iterations`` the loop asks the model once more, without tools, to sum up. If that call
fails for good, the run's work must not end as an empty answer: ``max_turns_fallback`` writes one
from the history instead (the limit, the files the tools wrote, what the last calls returned).
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_kernel.messages import Message
from agent_kernel.tools._registry import ToolRegistry

_LAST_RESULTS = 3  # the newest tool results quoted
_RESULT_CHARS = 300  # of each one
_PATH_ARGUMENTS = ("path", "file_path", "filename")


def max_turns_fallback(messages: Sequence[Message], tools: ToolRegistry, max_iterations: int | None, error: str) -> str:
    """A plain-text summary of what the run's tools did, for when the final answer failed.

    Args:
        messages: the run's conversation (tool calls and their results).
        tools: the tools offered (their ``category`` says which ones write files).
        max_iterations: the limit that was reached.
        error: why the final answer could not be had.
    """
    names: dict[str, tuple[str, dict[str, object]]] = {}
    written: list[str] = []
    results: list[tuple[str, str, bool]] = []
    for message in messages:
        for use in message.tool_uses:
            names[use.id] = (use.name, dict(use.input))
        for block in message.tool_results:
            name, arguments = names.get(block.tool_use_id, ("a tool", {}))
            results.append((name, block.content, block.is_error))
            tool = tools.get(name)
            if not block.is_error and tool is not None and tool.category == "edit":
                path = next((str(arguments[k]) for k in _PATH_ARGUMENTS if k in arguments), None)
                if path is not None and path not in written:
                    written.append(path)
    limit = f"the limit of {max_iterations} turns" if max_iterations is not None else "the turn limit"
    lines = [f"The run reached {limit} and its final answer failed ({error}), so this summary was written from the tool results instead."]
    if written:
        lines.append("Files written: " + ", ".join(written) + ".")
    if results:
        lines.append(f"{len(results)} tool calls ran; the last {min(len(results), _LAST_RESULTS)}:")
        for name, content, is_error in results[-_LAST_RESULTS:]:
            text = " ".join(content.split())
            if len(text) > _RESULT_CHARS:
                text = text[: _RESULT_CHARS - 1] + "…"
            lines.append(f"- {name}{' (error)' if is_error else ''}: {text}")
    else:
        lines.append("No tool calls ran.")
    return "\n".join(lines)
