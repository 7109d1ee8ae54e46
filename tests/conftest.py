"""Shared pytest fixtures: every test runs with no provider keys and no way to reach a real model."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import looptime
import pytest

from .fakes.server import FakeProvider
from .payload_check import check_emitted_payloads

# Variables that would point a test at a real provider or change the default model.
_ENV_PREFIXES = ("AGENT_KERNEL_", "ANTHROPIC_", "OPENAI_")


@pytest.fixture(autouse=True)
def _no_provider_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Removes provider keys, base URLs and AGENT_KERNEL_* settings, and blocks real HTTP.

    The SDKs send through httpx2's real transports. Tests either hand them an
    ``httpx2.MockTransport`` or point them at a server of their own on loopback (the strict fake
    providers, a llama.cpp server); any other host is a test bug and fails loudly.
    """
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES) or name.endswith("_API_KEY"):
            monkeypatch.delenv(name, raising=False)
    try:
        import httpx2
    except ImportError:  # older SDKs send through httpx, which tests mock the same way
        return

    def check(request: Any) -> None:
        if request.url.host not in _LOOPBACK:
            raise RuntimeError(f"a test tried to reach {request.url.host}; use an httpx2.MockTransport or a server on 127.0.0.1")

    sync_send, async_send = httpx2.HTTPTransport.handle_request, httpx2.AsyncHTTPTransport.handle_async_request

    def handle(self: Any, request: Any) -> Any:
        check(request)
        return sync_send(self, request)

    async def handle_async(self: Any, request: Any) -> Any:
        check(request)
        return await async_send(self, request)

    monkeypatch.setattr(httpx2.HTTPTransport, "handle_request", handle)
    monkeypatch.setattr(httpx2.AsyncHTTPTransport, "handle_async_request", handle_async)


_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Prints the conformance matrix (scenario × adapter) when its tests ran."""
    from .test_conformance import RESULTS, matrix_lines

    if not RESULTS:
        return
    terminalreporter.section("conformance matrix: loop scenarios × model adapters")
    for line in matrix_lines():
        terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _payloads_match_their_types() -> Any:
    """Every event emitted in any test matches its ``PAYLOADS`` type (keys and value types)."""
    with check_emitted_payloads() as violations:
        yield
    assert not violations, "events whose data does not match agent_kernel.events.payloads:\n" + "\n".join(violations[:10])


@pytest.fixture
async def fake_clock() -> None:
    """Puts the test's event loop on looptime's fake clock: sleeps and timers take no real time,
    and time moves only when every task waits, so timing behaviour is decided exactly.

    (looptime's own pytest plugin is turned off in pyproject: it makes an event loop for every
    sync test and leaves it unclosed.)
    """
    looptime.patch_event_loop(asyncio.get_running_loop())


@pytest.fixture
def fake_provider() -> Any:
    """A strict fake Anthropic and OpenAI endpoint on loopback (``FakeProvider``), closed after the test."""
    with FakeProvider() as provider:
        yield provider
