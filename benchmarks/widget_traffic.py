"""widget_traffic — what the live view sends to the front-end for a fast token stream.

Streams 10,000 text tokens at 1,000 tokens a second (real asyncio timing, about 10 s) through an
``AgentView`` whose comm records every message, then prints:

* messages per second to the front-end (busiest one-second window, and the average), against
  the goal of at most 25 a second;
* bytes sent while streaming, against the goal of at most 3x the text size (the one-time cost
  of opening the widget, which carries the ES module and CSS, is printed separately).

It checks that the front-end, applying the batches, ends with exactly the streamed text.

Run: ``.venv/bin/python benchmarks/widget_traffic.py [--tokens N] [--rate TOKENS_PER_S]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import comm  # noqa: E402

from agent_kernel.events import AgentEvent, EventType  # noqa: E402

GOAL_MESSAGES_PER_S = 25
GOAL_BYTES_RATIO = 3.0
WORDS = ("the agent reads a file then writes a short summary of what it found in the notes and "
         "asks before running anything that could change the workspace").split()


class RecordingComm:
    """A comm that keeps every message with the loop time it was sent at."""

    comm_id = "benchmark"
    kernel = "benchmark"

    def __init__(self, **kwargs: Any) -> None:
        self.open_bytes = len(json.dumps(kwargs.get("data"), ensure_ascii=False).encode())
        self.sent: list[tuple[float, int, dict[str, Any]]] = []

    def open(self, *args: Any, **kwargs: Any) -> None:
        pass

    def on_msg(self, callback: Any) -> None:
        pass

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        size = len(json.dumps(data, ensure_ascii=False).encode())
        self.sent.append((asyncio.get_running_loop().time(), size, data))

    def close(self, *args: Any, **kwargs: Any) -> None:
        pass


def event(seq: int, type: EventType, **data: Any) -> AgentEvent:
    return AgentEvent(seq, 0.0, "bench", "r_bench", "t_bench", None, 0, type, data)


async def stream(n_tokens: int, rate: float) -> tuple[Any, list[str], float]:
    """Feeds the view ``n_tokens`` deltas at ``rate`` per second; returns view, tokens, seconds."""
    from agent_kernel.jupyter.view import AgentView

    view = AgentView()
    loop = asyncio.get_running_loop()
    seq = 1
    view.handle(event(seq, EventType.RUN_START, prompt="benchmark", model="scripted",
                      max_iterations=1))
    tokens = [(" " if i else "") + WORDS[i % len(WORDS)] for i in range(n_tokens)]
    started = loop.time()
    fed = 0
    while fed < n_tokens:
        due = min(n_tokens, int((loop.time() - started) * rate) + 1)
        for token in tokens[fed:due]:
            seq += 1
            view.handle(event(seq, EventType.TEXT_DELTA, text=token))
        fed = max(fed, due)
        await asyncio.sleep(1 / rate)
    seconds = loop.time() - started
    view.handle(event(seq + 1, EventType.RUN_FINISH, reason="end_turn", text="".join(tokens),
                      stats={"turns": 1, "input_tokens": 0, "output_tokens": n_tokens}))
    return view, tokens, seconds


def replayed_text(messages: list[dict[str, Any]]) -> str:
    """The text the front-end shows after applying every batch, as agent_view.js does."""
    texts: dict[str, str] = {}
    for message in messages:
        content = message.get("content") or {}
        for op in content.get("ops", []):
            if op["op"] == "add" and op["item"]["kind"] == "text":
                texts[op["item"]["id"]] = op["item"]["text"]
            elif op["op"] == "append":
                texts[op["id"]] += op["text"]
    return "".join(texts.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=1_000.0, help="tokens per second")
    args = parser.parse_args()
    comm.create_comm = lambda **kwargs: RecordingComm(**kwargs)  # type: ignore[assignment]

    view, tokens, seconds = asyncio.run(stream(args.tokens, args.rate))
    text = "".join(tokens)
    recorder: RecordingComm = view.comm
    times = [t for t, _, _ in recorder.sent]
    busiest = max(sum(1 for u in times if t <= u < t + 1.0) for t in times)
    average = len(times) / seconds
    streamed_bytes = sum(size for _, size, _ in recorder.sent)
    text_bytes = len(text.encode())
    ratio = streamed_bytes / text_bytes

    assert replayed_text([m for _, _, m in recorder.sent if m["method"] == "custom"]) == text, \
        "the front-end would not end with the streamed text"
    assert view.snapshot["items"][0]["text"] == text, "the saved snapshot lacks the full text"

    print(f"widget_traffic: {args.tokens:,} tokens at {args.rate:,.0f}/s over {seconds:.1f} s "
          f"({args.tokens / seconds:,.0f} tokens/s achieved)")
    print(f"  messages to the front-end: {len(times)} in all; busiest second {busiest}, "
          f"average {average:.1f}/s; goal <= {GOAL_MESSAGES_PER_S}/s "
          f"-> ratio {busiest / GOAL_MESSAGES_PER_S:.2f} of the limit")
    print(f"  bytes while streaming: {streamed_bytes:,} for {text_bytes:,} bytes of text "
          f"= {ratio:.2f}x; goal <= {GOAL_BYTES_RATIO:g}x -> ratio {ratio / GOAL_BYTES_RATIO:.2f} "
          f"of the limit (deltas {sum(s for _, s, m in recorder.sent if m['method'] == 'custom'):,}"
          f" + final snapshot {sum(s for _, s, m in recorder.sent if m['method'] == 'update'):,})")
    print(f"  one-time widget open (ES module, CSS, initial state): {recorder.open_bytes:,} bytes")
    naive, length = 0, 0
    for token in tokens:
        length += len(token.encode())
        naive += length
    print(f"  for comparison, setting a string trait per token would send {naive:,} bytes "
          f"({naive / text_bytes:,.0f}x the text)")
    view.close()


if __name__ == "__main__":
    main()
