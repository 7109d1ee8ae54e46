"""models.transport: one SDK client per event loop, closed when that loop shuts down."""

from __future__ import annotations

import asyncio
import gc
import warnings
import weakref
from typing import Any

import pytest

from agent_kernel import Agent
from agent_kernel.models._transport import LoopBound


class Client:
    """Stands in for an SDK client: records the loop it was made on and whether it was closed."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.closed_on: asyncio.AbstractEventLoop | None = None

    async def close(self) -> None:
        self.closed_on = asyncio.get_running_loop()


def test_each_event_loop_gets_its_own_client_and_closes_it_when_the_loop_shuts_down() -> None:
    clients = LoopBound(Client)

    async def use() -> Client:
        first = clients.get()
        assert clients.get() is first  # one per loop
        return first

    a, b = asyncio.run(use()), asyncio.run(use())  # as two run_sync calls do
    assert a is not b
    assert a.closed_on is a.loop and b.closed_on is b.loop  # closed on its own loop, before it ended


def test_a_client_on_a_loop_that_keeps_running_stays_open() -> None:
    clients = LoopBound(Client)

    async def main() -> None:
        client = clients.get()
        await asyncio.sleep(0)
        assert client.closed_on is None

    asyncio.run(main())


def test_a_client_the_user_gave_is_used_on_every_loop_and_never_closed() -> None:
    given = object()
    clients = LoopBound(given=given)

    async def use() -> object:
        return clients.get()

    assert asyncio.run(use()) is given and asyncio.run(use()) is given


def test_a_client_closed_at_its_loops_shutdown_is_not_kept_for_the_next_loop() -> None:
    clients = LoopBound(Client)

    async def use() -> None:
        clients.get()

    for _ in range(5):  # five run_sync calls on one agent
        asyncio.run(use())
    assert len(clients._closers) == 1  # only the last loop's, already finished; none piles up


@pytest.mark.parametrize("adapter", ["anthropic", "openai-chat"])
async def test_an_agent_dropped_while_its_loop_runs_closes_its_pooled_connection(adapter: str) -> None:
    # A notebook cell that builds a new Agent over the old one: the old one is freed by the cycle
    # collector, which must not tear down its pooled socket unclosed ("unclosed transport").
    from agent_kernel.models.anthropic import AnthropicModel
    from agent_kernel.models.openai import OpenAIModel

    from .conformance import collect
    from .fakes.server import FakeProvider
    from .fakes.turns import turn

    with FakeProvider() as server:
        server.script(turn("Hello."))
        if adapter == "anthropic":
            model: Any = AnthropicModel("claude-sonnet-4-6", base_url=server.url, api_key="sk-ant-test")
        else:
            model = OpenAIModel("gpt-4.1", base_url=server.url + "/v1", api_key="sk-test")
        agent = Agent(model, journal=None)
        agent.cycle = agent  # type: ignore[attr-defined]  # freed only by the cycle collector, as agents are
        await collect(agent, "hi")  # leaves a keep-alive connection in the client's pool
        client = weakref.ref(model.client)
        with warnings.catch_warnings():  # agents earlier tests dropped: collected now, not counted below
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()
        del agent, model
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gc.collect()
        # Only the warning that the agent was not closed, as a file's; never a socket torn down unclosed.
        resource = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
        assert len(resource) == 1 and resource[0].startswith("unclosed model client"), resource
        for _ in range(1_000):  # the loop closes the client in a task of its own
            if (c := client()) is None or c.is_closed():
                break
            await asyncio.sleep(0)
        assert client() is None or client().is_closed()  # type: ignore[union-attr]
