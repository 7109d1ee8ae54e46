"""Replaying a journal: the same events, in order, with the original pacing or none."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_kernel import Agent
from agent_kernel.journal import read_events, replay
from agent_kernel.models.scripted import ScriptedModel

from .journal_events import recorded_run


class FakeTime:
    """A clock that only moves when the replay sleeps, recording each sleep."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


async def test_a_replay_yields_the_events_of_the_original_run(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    agent = Agent(ScriptedModel(["Hello there, how can I help?"]), journal=path, context=None)
    result = await agent.run("hi")
    agent.close()
    replayed = [event async for event in replay(path, speed=None)]
    assert replayed == result.events == read_events(path)


async def test_the_original_pacing_is_kept_and_scaled_by_speed() -> None:
    events = recorded_run()
    for speed in (1.0, 4.0):
        fake = FakeTime()
        replayed = [e async for e in replay(events, speed, sleep=fake.sleep, clock=fake.clock)]
        assert replayed == events
        assert fake.now - 100.0 == pytest.approx((events[-1].ts - events[0].ts) / speed)
        gaps = [b.ts - a.ts for a, b in zip(events, events[1:])]
        assert fake.sleeps == pytest.approx([g / speed for g in gaps if g > 0])


async def test_a_slow_consumer_does_not_accumulate_drift() -> None:
    events = recorded_run()[:6]
    fake = FakeTime()
    seen = 0
    async for _ in replay(events, 1.0, sleep=fake.sleep, clock=fake.clock):
        seen += 1
        if seen == 2:
            fake.now += 0.5  # the consumer spends half a second on one event
    # The events due during that half second come at once; the total time is unchanged.
    assert fake.now - 100.0 == pytest.approx(max(0.5 + events[1].ts - events[0].ts, events[-1].ts - events[0].ts))


async def test_max_gap_caps_long_pauses() -> None:
    events = recorded_run()
    fake = FakeTime()
    [_ async for _ in replay(events, 1.0, max_gap=0.05, sleep=fake.sleep, clock=fake.clock)]
    assert max(fake.sleeps) <= 0.05 + 1e-9
    assert fake.now - 100.0 < events[-1].ts - events[0].ts


async def test_no_pacing_never_sleeps() -> None:
    fake = FakeTime()
    replayed = [e async for e in replay(recorded_run(), None, sleep=fake.sleep, clock=fake.clock)]
    assert len(replayed) == 31 and fake.sleeps == []


@pytest.mark.parametrize("speed", [0, -1.0])
async def test_a_speed_that_is_not_positive_is_refused(speed: float) -> None:
    with pytest.raises(ValueError, match="speed must be positive"):
        [_ async for _ in replay(recorded_run(), speed)]
