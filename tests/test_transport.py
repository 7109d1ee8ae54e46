"""models.transport: one SDK client per event loop, closed when that loop shuts down."""

from __future__ import annotations

import asyncio

from agent_kernel.models.transport import LoopBound


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
