"""Redaction cost: µs added to each streamed text event, and ms to redact a 30 KB tool result.

Every event goes through the agent's ``Redactor``, which watches ``os.environ`` (a dictionary
comparison per event) and runs text deltas through its ``SecretStream``. The goal is the loop's:
a text event, redaction included, within 10 µs (``benchmarks/loop_overhead.py`` measures the whole
loop); this script isolates what redaction adds, with no secrets in the environment and with three.

Figures are thread CPU time, the fastest of several rounds, so other work on the machine does not
inflate them.

Run: python benchmarks/redaction.py
"""

from __future__ import annotations

import os
import time
from typing import Any

from agent_kernel.events._event import EventType
from agent_kernel.events._sink import EventRecorder
from agent_kernel.guard._redaction import Redactor
from agent_kernel.runtime._emitter import Emitter

EVENTS = 50_000
GOAL_US = 10.0  # per text event, the loop's whole budget
SECRETS = {
    "OPENAI_API_KEY": "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD",
    "GITHUB_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "DATABASE_URL": "postgres://app:s3cretpassw0rd@db/x",
}


def per_event(redact: Any, rounds: int = 7) -> float:
    best = float("inf")
    for _ in range(rounds):
        em = Emitter("s", "r", None, [EventRecorder([])], redact)
        t0 = time.thread_time()
        for _ in range(EVENTS):
            em.emit(EventType.TEXT_DELTA, {"text": "x"})
        best = min(best, (time.thread_time() - t0) / EVENTS * 1e6)
    return best


def tool_result_ms(redactor: Redactor, rounds: int = 5) -> float:
    text = "total 48\ndrwxr-xr-x  5 user staff  160 Jan  1 12:00 notebooks\n" * 500  # ~30 KB
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time()
        redactor.redact(text)
        best = min(best, time.thread_time() - t0)
    return best * 1e3


def main() -> None:
    for name in SECRETS:
        os.environ.pop(name, None)
    bare = per_event(None)
    watching = per_event(Redactor.from_environ())
    os.environ.update(SECRETS)
    try:
        redactor = Redactor.from_environ()
        with_secrets = per_event(redactor)
        big = tool_result_ms(redactor)
    finally:
        for name in SECRETS:
            os.environ.pop(name, None)
    print(f"emit per text event: {bare:.2f} µs without a redactor")
    for label, value in (("watching the environment, no secrets", watching), ("with 3 secrets in the environment", with_secrets)):
        added = value - bare
        print(f"redaction adds {added:.2f} µs per text event {label} ({added / GOAL_US:.2f}x of the {GOAL_US:g} µs per-event budget)")
    print(f"redacting a 30 KB tool result with 3 secrets: {big:.2f} ms")


if __name__ == "__main__":
    main()
