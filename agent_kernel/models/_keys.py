"""models.keys — finding a provider's API key before any request, and the error when there is none."""

from __future__ import annotations

import os

from agent_kernel.errors import MissingAPIKey


def require_key(provider: str, key_env: str, api_key: str | None, base_url: str | None, base_env: str) -> str | None:
    """Returns the key to use, or raises ``MissingAPIKey`` naming the variable to set.

    A base URL (passed, or in ``base_env``) points at a server of the user's choosing, such as a
    local OpenAI-compatible one, which often needs no key: then a missing key is allowed and the
    server decides.
    """
    key = api_key or os.environ.get(key_env)
    if key:
        return key
    if base_url or os.environ.get(base_env):
        return None
    raise MissingAPIKey(
        f"The {provider} model needs an API key: set the {key_env} environment variable (or pass "
        f"api_key=...). To run without a key, use the offline model: Agent(model='offline')."
    )
