"""models.catalog — the models agent_kernel knows by name, with their context windows.

A name missing here still works (providers add models faster than any table); it gets its
provider's default window. The registry uses this table for defaults, ``list_models`` and
"did you mean" suggestions.
"""

from __future__ import annotations

import re

# A dated snapshot ("claude-sonnet-4-5-20250929", "gpt-4.1-2025-04-14") or a "-latest" alias is
# its family's model; anything else after a family name is a different model.
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")

# claude-sonnet-4-5 reaches end-of-life on 2026-11-30 (the anthropic SDK warns), so 4-6 is the default.
DEFAULT_MODELS: dict[str, str] = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}

# Window for a model of the provider that the table below does not name.
DEFAULT_CONTEXT_WINDOW: dict[str, int] = {"anthropic": 200_000, "openai": 128_000, "offline": 200_000}

CONTEXT_WINDOWS: dict[str, dict[str, int]] = {
    "anthropic": {
        "claude-opus-4-6": 200_000,
        "claude-sonnet-4-6": 200_000,
        "claude-opus-4-5": 200_000,
        "claude-opus-4-1": 200_000,
        "claude-opus-4-0": 200_000,
        "claude-sonnet-4-5": 200_000,
        "claude-sonnet-4-0": 200_000,
        "claude-3-7-sonnet-latest": 200_000,
        "claude-haiku-4-5": 200_000,
        "claude-3-5-haiku-latest": 200_000,
    },
    "openai": {
        "gpt-5.1": 400_000,
        "gpt-5": 400_000,
        "gpt-5-mini": 400_000,
        "gpt-5-nano": 400_000,
        "gpt-4.1": 1_047_576,
        "gpt-4.1-mini": 1_047_576,
        "gpt-4.1-nano": 1_047_576,
        "gpt-4o": 128_000,
        "gpt-4o-mini": 128_000,
        "o3": 200_000,
        "o4-mini": 200_000,
    },
}


def family(name: str) -> str:
    """``name`` without a snapshot date or ``-latest`` suffix."""
    return _SNAPSHOT.sub("", name)


def provider_of(name: str) -> str | None:
    """The provider of a model the table knows (snapshots included), else None."""
    for provider, known in CONTEXT_WINDOWS.items():
        if name in known or family(name) in known:
            return provider
    return None


def context_window(provider: str, name: str) -> int:
    """Tokens ``name`` accepts per request: from the table (snapshots too), else the provider default."""
    known = CONTEXT_WINDOWS.get(provider, {})
    window = known.get(name) or known.get(family(name))
    return window or DEFAULT_CONTEXT_WINDOW.get(provider, 128_000)
