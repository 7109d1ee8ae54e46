"""background — work a run starts that goes on beside its turns, and what it hands back.

Two kinds of work run beside a run's turns instead of inside one: a sub-agent started with
``as_tool(..., background=True)`` and a session-memory summary update. Each is a task the run
owns (``BackgroundWork``): it ends with a ``Finished`` that the loop collects at a turn boundary
(a report becomes a message for the model; a model call's usage is charged to the run), and the
loop decides what happens to work still running when the run ends (see ``runtime._loop``).

It sits at the bottom layer because the parts that start such work (``memory``, ``team``) sit
on both sides of the loop that collects it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Finished:
    """What one piece of background work handed back.

    Attributes:
        name: what it was (a sub-agent's name, ``"session memory"``).
        report: a message for the model at the next turn boundary (None: nothing to say).
        usage: a model call's usage (``models.Usage``) to charge to the run (None: none, or
            already charged, as a sub-agent's is).
        cost_usd: that call's cost (None: unknown).
        data: what the loop journals with the report (``subagent_report``'s keys).
    """

    name: str
    report: str | None = None
    usage: Any = None
    cost_usd: float | None = None
    data: Any = None


class BackgroundWork:
    """The background tasks of one run.

    ``start`` runs a coroutine as a task; when it returns a ``Finished`` the loop collects it
    with ``take``. Work that ``reports`` keeps a run from ending on the model's answer: the run
    waits for it and hands its report to the model first.
    """

    def __init__(self) -> None:
        self._running: dict[asyncio.Task[Finished | None], bool] = {}  # task -> reports
        self._finished: list[Finished] = []
        self.on_change: Callable[[], None] | None = None  # wakes the loop when a task ends

    def start(self, name: str, work: Coroutine[Any, Any, Finished | None], *, reports: bool) -> asyncio.Task[Finished | None]:
        """Runs ``work`` beside the run; ``reports``: its answer is a message the run waits for."""
        task = asyncio.get_running_loop().create_task(work, name=f"background:{name}")
        self._running[task] = reports
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Finished | None]) -> None:
        self._running.pop(task, None)
        if not task.cancelled() and task.exception() is None:
            result = task.result()
            if result is not None:
                self._finished.append(result)
        if self.on_change is not None:
            self.on_change()

    @property
    def has_finished(self) -> bool:
        """True when finished work waits to be collected."""
        return bool(self._finished)

    @property
    def has_reports(self) -> bool:
        """True when finished work has a report for the model waiting to be collected."""
        return any(f.report is not None for f in self._finished)

    @property
    def reporting(self) -> bool:
        """True while work the run must wait for (a background sub-agent) is running."""
        return any(self._running.values())

    @property
    def running(self) -> int:
        """How many tasks are running."""
        return len(self._running)

    def take(self) -> list[Finished]:
        """The finished work not collected yet, oldest first."""
        finished, self._finished = self._finished, []
        return finished

    async def wait(self, *, reporting_only: bool = False) -> None:
        """Returns once one task (of the reporting ones, if asked) has ended, or at once if none runs."""
        tasks = [t for t, reports in self._running.items() if reports or not reporting_only]
        if tasks:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)

    async def cancel(self, *, reporting_only: bool = False) -> list[str]:
        """Cancels the running tasks (their own cleanup records how they ended), waits for them,
        and returns their names."""
        tasks = [t for t, reports in self._running.items() if reports or not reporting_only]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        return [t.get_name().removeprefix("background:") for t in tasks]

    async def finish(self) -> None:
        """Waits for every running task to end."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
