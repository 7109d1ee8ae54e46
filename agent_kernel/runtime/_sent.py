"""runtime.sent — what the loop records about a request it sends, besides the request itself.

Two facts, each worked out once per model call (never per token): how full the model's window
was (``llm_complete.context_usage``), and, when a ``before_llm_call`` hook replaced the request,
what was sent instead, as a compact diff against the prepared request (``llm_start.sent``), which
``journal.replaced_requests`` turns back into the request.
"""

from __future__ import annotations

from typing import Any

from agent_kernel.events import payloads as p
from agent_kernel.models._base import Model, ModelRequest, Usage


def context_usage(cm: Any, model: Model, usage: Usage | None) -> p.ContextUsage | None:
    """How full the window was for one call: the context policy's figure, else the reported
    input against the model's window (None when neither is known)."""
    figure = getattr(cm, "context_usage", None)
    if figure is not None:
        return figure(usage, model)
    window = int(getattr(model, "context_window", 0) or 0)
    if not window or usage is None:
        return None
    used = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return p.ContextUsage(used_tokens=used, window=window, share=round(used / window, 4), estimated=False)


def request_diff(before: ModelRequest, after: ModelRequest) -> dict[str, Any]:
    """``after`` as a compact diff against ``before``: the messages both start with are counted,
    the rest are given as sent; system and tools only when they changed."""
    kept = 0
    for old, new in zip(before.messages, after.messages):
        if old is not new and old != new:
            break
        kept += 1
    diff: dict[str, Any] = {"kept_messages": kept, "messages_before": len(before.messages), "messages": [m.to_dict() for m in after.messages[kept:]]}
    if after.system != before.system:
        diff["system"] = after.system
    if after.tools != before.tools:
        diff["tools"] = [t.name for t in after.tools]
    if after.options != before.options:
        diff["options"] = {k: v for k, v in after.options.items() if before.options.get(k) != v}
    return diff
