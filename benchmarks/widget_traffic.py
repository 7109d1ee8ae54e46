"""widget_traffic — what the live view sends to the front-end for a fast token stream.

Streams 10,000 text tokens at 1,000 tokens a second (real asyncio timing, about 10 s) through an
``AgentView`` whose comm records every message, then does it again with the same tokens shared
by three sub-agents working side by side (each in its card under the ``task`` call that started
it, interleaving token by token), and prints for each run:

* messages per second to the front-end (busiest one-second window, and the average), against
  the goal of at most 25 a second;
* bytes sent while streaming, against the goal of at most 3x the text size (the one-time cost
  of opening the widget, which carries the ES module and CSS, is printed separately).

It checks that the front-end, applying the batches, ends with exactly the streamed text of
each agent, and that the saved snapshot holds it too, each block drawn as the lasting transcript
draws it. The HTML of the finished paragraphs (``draw`` ops) is counted with the deltas and also
printed on its own.

Run: ``.venv/bin/python benchmarks/widget_traffic.py [--tokens N] [--rate TOKENS_PER_S]
[--subagents N]`` (``--subagents 0`` runs only the plain stream).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import comm

from agent_kernel.events._event import AgentEvent, EventType

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


class Feed:
    """Numbers the events fed to one view."""

    def __init__(self, view: Any) -> None:
        self.view = view
        self.seq = 0

    def __call__(self, type: EventType, agent: str | None = None, /, **data: Any) -> None:
        self.seq += 1
        self.view.handle(AgentEvent(self.seq, 0.0, "bench", "r_bench", "t_bench", None, 0, type,
                                    data, agent))


async def stream(n_tokens: int, rate: float,
                 n_agents: int) -> tuple[Any, dict[str | None, list[str]], float]:
    """Feeds the view ``n_tokens`` deltas at ``rate`` per second, dealt round-robin to
    ``n_agents`` concurrent sub-agents (or all to the top-level agent when 0).

    Returns the view, the tokens each agent streamed, and the seconds it took.
    """
    from agent_kernel.jupyter._view import AgentView

    view = AgentView()
    feed = Feed(view)
    loop = asyncio.get_running_loop()
    feed(EventType.RUN_START, prompt="benchmark", model="scripted", max_iterations=2)
    agents: list[str | None] = [f"worker{k}" for k in range(n_agents)] or [None]
    for k, agent in enumerate(agents if n_agents else ()):
        link = {"agent_id": agent, "name": "worker", "parent_agent_id": None, "parent_call_id": f"p{k}"}
        feed(EventType.TOOL_CALL_READY, call_id=f"p{k}", name="task", index=k,
             arguments={"agent": "worker", "instructions": f"part {k}"})
        feed(EventType.TOOL_START, call_id=f"p{k}", name="task")
        feed(EventType.SUBAGENT_START, agent, **link, prompt=f"part {k}", model="scripted")
        feed(EventType.RUN_START, agent, prompt=f"part {k}", model="scripted", max_iterations=2)
    tokens = [(" " if i else "") + WORDS[i % len(WORDS)] for i in range(n_tokens)]
    texts: dict[str | None, list[str]] = {agent: [] for agent in agents}
    started = loop.time()
    fed = 0
    while fed < n_tokens:
        due = min(n_tokens, int((loop.time() - started) * rate) + 1)
        for i in range(fed, due):
            agent = agents[i % len(agents)]
            texts[agent].append(tokens[i])
            feed(EventType.TEXT_DELTA, agent, text=tokens[i])
        fed = max(fed, due)
        await asyncio.sleep(1 / rate)
    seconds = loop.time() - started
    for k, agent in enumerate(agents if n_agents else ()):
        # Each answers in a line of its own (the streamed text was its working), which the
        # parent's call then returns: as in a run, that is text the front-end also shows.
        link = {"agent_id": agent, "name": "worker", "parent_agent_id": None, "parent_call_id": f"p{k}"}
        answer = f"Part {k} is done."
        feed(EventType.RUN_FINISH, agent, reason="end_turn", text=answer, stats={})
        feed(EventType.SUBAGENT_FINISH, agent, **link, text=answer, reason="end_turn",
             usage={"input_tokens": 0, "output_tokens": 0}, cost_usd=0.0, turns=1, tool_calls=0,
             duration_s=seconds, error=None)
        feed(EventType.TOOL_RESULT, call_id=f"p{k}", name="task", content=answer,
             is_error=False, duration_s=seconds)
    feed(EventType.RUN_FINISH, reason="end_turn", text="" if n_agents else "".join(tokens),
         stats={"turns": 1, "input_tokens": 0, "output_tokens": n_tokens})
    return view, texts, seconds


def replayed_texts(messages: list[dict[str, Any]]) -> dict[str | None, str]:
    """Each agent's text as the front-end shows it after applying every batch (as agent_view.js)."""
    texts: dict[str, str] = {}
    owner: dict[str, str | None] = {}
    for message in messages:
        content = message.get("content") or {}
        for op in content.get("ops", []):
            if op["op"] == "add" and op["item"]["kind"] == "text":
                texts[op["item"]["id"]] = op["item"]["text"]
                owner[op["item"]["id"]] = op["item"]["agent"]
            elif op["op"] == "append":
                for item_id, text in op["texts"].items():
                    texts[item_id] += text
    out: dict[str | None, str] = {}
    for item_id, text in texts.items():
        out[owner[item_id]] = out.get(owner[item_id], "") + text
    return out


def measure(n_tokens: int, rate: float, n_agents: int) -> None:
    """Runs one stream and prints its figures against the goals."""
    from agent_kernel.jupyter._item_html import item_html

    view, tokens, seconds = asyncio.run(stream(n_tokens, rate, n_agents))
    streamed = {agent: "".join(parts) for agent, parts in tokens.items()}
    text = "".join(streamed.values())
    recorder: RecordingComm = view.comm
    times = [t for t, _, _ in recorder.sent]
    busiest = max(sum(1 for u in times if t <= u < t + 1.0) for t in times)
    average = len(times) / seconds
    streamed_bytes = sum(size for _, size, _ in recorder.sent)
    text_bytes = len(text.encode())
    ratio = streamed_bytes / text_bytes

    assert replayed_texts([m for _, _, m in recorder.sent if m["method"] == "custom"]) == streamed, \
        "the front-end would not end with the streamed text of every agent"
    saved = {i["agent"]: i["text"] for i in view.snapshot["items"] if i["kind"] == "text"}
    assert saved == streamed, "the saved snapshot lacks some of the text"
    drawings = {i["id"]: item_html(i) for i in view.transcript.to_json()["items"]}
    assert all(i["html"] == drawings[i["id"]] for i in view.snapshot["items"] if i["kind"] == "text"), \
        "the saved snapshot does not show a block as the lasting transcript draws it"
    drawn = sum(len(json.dumps(op, ensure_ascii=False).encode()) for _, _, m in recorder.sent
                if m["method"] == "custom" for op in m["content"].get("ops", ()) if op["op"] == "draw")
    if n_agents:
        cards = [i for i in view.snapshot["items"] if i["kind"] == "subagent"]
        assert [(c["parent_call_id"], c["status"]) for c in cards] == \
            [(f"p{k}", "done") for k in range(n_agents)], "a sub-agent card is missing or unfinished"

    who = f"{n_agents} concurrent sub-agents" if n_agents else "the top-level agent"
    print(f"widget_traffic ({who}): {n_tokens:,} tokens at {rate:,.0f}/s over {seconds:.1f} s "
          f"({n_tokens / seconds:,.0f} tokens/s achieved)")
    print(f"  messages to the front-end: {len(times)} in all; busiest second {busiest}, "
          f"average {average:.1f}/s; goal <= {GOAL_MESSAGES_PER_S}/s "
          f"-> ratio {busiest / GOAL_MESSAGES_PER_S:.2f} of the limit")
    print(f"  bytes while streaming: {streamed_bytes:,} for {text_bytes:,} bytes of text "
          f"= {ratio:.2f}x; goal <= {GOAL_BYTES_RATIO:g}x -> ratio {ratio / GOAL_BYTES_RATIO:.2f} "
          f"of the limit (deltas {sum(s for _, s, m in recorder.sent if m['method'] == 'custom'):,}"
          f", of which drawn paragraphs {drawn:,}; + final snapshot "
          f"{sum(s for _, s, m in recorder.sent if m['method'] == 'update'):,})")
    print(f"  one-time widget open (ES module, CSS, initial state): {recorder.open_bytes:,} bytes")
    naive = 0
    for parts in tokens.values():
        length = 0
        for token in parts:
            length += len(token.encode())
            naive += length
    print(f"  for comparison, setting a string trait per token would send {naive:,} bytes "
          f"({naive / text_bytes:,.0f}x the text)")
    view.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=1_000.0, help="tokens per second")
    parser.add_argument("--subagents", type=int, default=3,
                        help="sub-agents sharing the tokens in the second run (0: skip it)")
    args = parser.parse_args()
    comm.create_comm = lambda **kwargs: RecordingComm(**kwargs)  # type: ignore[assignment]
    measure(args.tokens, args.rate, 0)
    if args.subagents > 0:
        measure(args.tokens, args.rate, args.subagents)


if __name__ == "__main__":
    main()
