"""Shared pytest fixtures: every test runs with no provider keys and no way to reach a real model."""

from __future__ import annotations

import os

import pytest

# Variables that would point a test at a real provider or change the default model.
_ENV_PREFIXES = ("AGENT_KERNEL_", "ANTHROPIC_", "OPENAI_")


@pytest.fixture(autouse=True)
def _no_provider_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Removes provider keys, base URLs and AGENT_KERNEL_* settings, and blocks real HTTP.

    The SDKs send through httpx2's real transports; tests hand them an ``httpx2.MockTransport``
    instead, so any request that reaches a real transport is a test bug and fails loudly.
    """
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES) or name.endswith("_API_KEY"):
            monkeypatch.delenv(name, raising=False)
    try:
        import httpx2
    except ImportError:  # older SDKs send through httpx, which tests mock the same way
        return

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a test tried to reach the network; pass a client with an httpx2.MockTransport")

    async def refuse_async(*args: object, **kwargs: object) -> None:
        refuse()

    monkeypatch.setattr(httpx2.HTTPTransport, "handle_request", refuse)
    monkeypatch.setattr(httpx2.AsyncHTTPTransport, "handle_async_request", refuse_async)
