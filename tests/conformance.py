"""The conformance matrix: every loop scenario, run against every model adapter.

A scenario is written once, against ``Harness``: it scripts what "the model" answers in neutral
turns (``fakes.turns``) and failures (``fakes.server``), runs an ``Agent`` as a user would, and
asserts what the user relies on. Each harness turns the script into its adapter's reality:

* ``scripted``: ``ScriptedModel`` parts, in process;
* ``anthropic``: ``AnthropicModel`` over the real ``anthropic`` SDK, against the strict fake
  Messages endpoint on loopback HTTP;
* ``openai-chat``: ``OpenAIModel`` (Chat Completions) over the real ``openai`` SDK, likewise;
* ``openai-responses``: ``OpenAIModel(api="responses")``, likewise, where the adapter exists.

A cell an adapter cannot have says why in ``NOT_APPLICABLE``; the test run prints the matrix.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from agent_kernel import Agent, tool
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.guard._approvals import Approval
from agent_kernel.models import scripted as s
from agent_kernel.models._base import Model

from .fakes.server import Cut, Fail, FakeProvider, Hang, Pings, Reply
from .fakes.turns import turn

# ---------------------------------------------------------------------------- harnesses


class Harness:
    """One adapter under test: builds its models and plays scripted replies to them."""

    name = ""

    def model(self, name: str | None = None) -> Model:
        raise NotImplementedError

    def script(self, *replies: Reply) -> None:
        raise NotImplementedError

    @property
    def rejected(self) -> list[str]:
        """Requests the real API would have refused (always empty for in-process models)."""
        return []

    def requests(self) -> list[Any]:
        """What each model call sent, in the adapter's own form."""
        raise NotImplementedError

    def tool_choice(self, request: Any) -> Any:
        """The tool choice ``request`` carried, in the API's shape (None when absent)."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class ScriptedHarness(Harness):
    name = "scripted"

    def __init__(self) -> None:
        self.queue: list[Reply] = []
        self.models: list[s.FunctionModel] = []

    def model(self, name: str | None = None) -> Model:
        def respond(messages: Any, tools: Any) -> Any:
            if not self.queue:
                return s.fail("bad_request", "no reply scripted for this request")
            return _parts(self.queue.pop(0))

        model = s.FunctionModel(respond, name=name or "scripted")
        self.models.append(model)
        return model

    def script(self, *replies: Reply) -> None:
        self.queue.extend(replies)

    def requests(self) -> list[Any]:
        return [r for m in self.models for r in m.requests]

    def tool_choice(self, request: Any) -> Any:
        return request.options.get("tool_choice")


def _parts(reply: Reply) -> list[Any]:
    """A fake-server reply as ScriptedModel parts."""
    if isinstance(reply, Fail):
        kind = {429: "rate_limit", 500: "server", 529: "overloaded", 503: "unavailable"}.get(reply.status, "bad_request")
        if reply.status in (400, 413) and ("context" in reply.message or "too long" in reply.message):
            kind = "context_length"
        retry_after = reply.headers.get("retry-after")
        return [s.fail(kind, reply.message, retry_after=float(retry_after) if retry_after else None)]
    t = reply if isinstance(reply, dict) else reply.turn
    parts: list[Any] = []
    if t["thinking"]:
        parts.append(s.thinking(t["thinking"][0], signature=t["thinking"][1]))
    if t["text"]:
        parts.append(s.text(t["text"]))
    calls = [s.tool_call(name, args, id=cid) for cid, name, args in t["tool_calls"]]
    if isinstance(reply, Cut):
        keep = reply.after_calls
        return parts + calls[:keep] + [s.fail("stream_cut")] if keep else parts + [s.fail("stream_cut")]
    if isinstance(reply, Hang):
        return parts + [s.stall(60)]
    parts += calls
    if t["stop"] == "max_tokens":
        parts.append(s.stop("max_tokens"))
    return parts


class HTTPHarness(Harness):
    """An SDK adapter against the strict fake server."""

    def __init__(self, name: str, build: Callable[[str, str], Model], path: str) -> None:
        self.name = name
        self.server = FakeProvider()
        self._build = build
        self._path = path

    def model(self, name: str | None = None) -> Model:
        return self._build(self.server.url, name or "")

    def script(self, *replies: Reply) -> None:
        self.server.script(*replies)

    @property
    def rejected(self) -> list[str]:
        return self.server.rejected

    def requests(self) -> list[Any]:
        return [body for path, body in self.server.requests if path == self._path]

    def tool_choice(self, request: Any) -> Any:
        return request.get("tool_choice")

    def close(self) -> None:
        self.server.close()


def _anthropic(url: str, name: str) -> Model:
    from agent_kernel.models.anthropic import AnthropicModel

    return AnthropicModel(name or "claude-sonnet-4-6", base_url=url, api_key="sk-ant-test")


def _chat(url: str, name: str) -> Model:
    from agent_kernel.models.openai import OpenAIModel

    return OpenAIModel(name or "gpt-4.1", base_url=url + "/v1", api_key="sk-test")


def _responses(url: str, name: str) -> Model:
    from agent_kernel.models.openai import OpenAIModel

    return OpenAIModel(name or "gpt-4.1", base_url=url + "/v1", api_key="sk-test", api="responses")  # type: ignore[call-arg]


def responses_supported() -> str | None:
    """None when the Responses API adapter and its fake exist, else why not."""
    import inspect

    from agent_kernel.models.openai import OpenAIModel

    if "api" not in inspect.signature(OpenAIModel).parameters:
        return "OpenAIModel has no api='responses' mode"
    try:
        from .fakes import responses_api  # noqa: F401
    except ImportError:
        return "no strict fake Responses endpoint"
    return None


HARNESSES: dict[str, Callable[[], Harness]] = {
    "scripted": ScriptedHarness,
    "anthropic": lambda: HTTPHarness("anthropic", _anthropic, "/v1/messages"),
    "openai-chat": lambda: HTTPHarness("openai-chat", _chat, "/v1/chat/completions"),
    "openai-responses": lambda: HTTPHarness("openai-responses", _responses, "/v1/responses"),
}

# ---------------------------------------------------------------------------- helpers


def agent(h: Harness, tmp: Path, tools: Any = (), **kwargs: Any) -> Agent:
    kwargs.setdefault("retry_base_delay", 0.001)
    kwargs.setdefault("stall_timeout", 30.0)
    return Agent(h.model(), tools=tools, working_dir=tmp, **kwargs)  # journaled in the session folder


async def collect(a: Agent, prompt: str, on: Callable[[AgentEvent], None] | None = None) -> list[AgentEvent]:
    events = []
    async for event in a.stream(prompt):
        events.append(event)
        if on is not None:
            on(event)
    return events


def of(events: list[AgentEvent], t: EventType) -> list[AgentEvent]:
    return [e for e in events if e.type is t]


def finish(events: list[AgentEvent]) -> dict[str, Any]:
    return of(events, EventType.RUN_FINISH)[-1].data


def journaled(a: Agent) -> list[AgentEvent]:
    from agent_kernel.journal import read_events

    a.close()
    return read_events(a.journal.path)


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def write_note_tool(log: list[str]) -> Any:
    @tool
    def write_note(path: str) -> str:
        """Writes a note (a side effect: it must run once per call the model made)."""
        log.append(path)
        return f"wrote {path}"

    return write_note


# ---------------------------------------------------------------------------- scenarios

Scenario = Callable[[Harness, Path], Coroutine[Any, Any, None]]
SCENARIOS: dict[str, Scenario] = {}

#: Cells an adapter cannot have, and why (printed in the matrix instead of a silent skip).
NOT_APPLICABLE: dict[tuple[str, str], str] = {
    ("keep_alive_pings", "scripted"): "no wire: keep-alive pings are transport traffic",
    ("prompt_cache_breakpoints", "scripted"): "no provider cache",
    ("prompt_cache_breakpoints", "openai-chat"): "OpenAI caches prefixes itself; the API has no breakpoints",
    ("prompt_cache_breakpoints", "openai-responses"): "OpenAI caches prefixes itself; the API has no breakpoints",
    ("thinking_round_trip", "openai-chat"): "Chat Completions has no field to send reasoning back",
}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


@scenario
async def text_answer(h: Harness, tmp: Path) -> None:
    h.script(turn("Hello there, how are you today?"))
    events = await collect(agent(h, tmp), "Hi")
    assert (finish(events)["reason"], finish(events)["text"]) == ("end_turn", "Hello there, how are you today?"), finish(events)
    assert len(of(events, EventType.TEXT_DELTA)) > 1  # it streamed


@scenario
async def tool_turn(h: Harness, tmp: Path) -> None:
    h.script(turn("Adding.", calls=[("c1", "add", {"a": 2, "b": 3})]), turn("It is 5."))
    events = await collect(agent(h, tmp, [add]), "What is 2 + 3?")
    assert [e.data["content"] for e in of(events, EventType.TOOL_RESULT)] == ["5"]
    assert finish(events)["text"] == "It is 5." and len(h.requests()) == 2


@scenario
async def parallel_safe_and_serial_unsafe(h: Harness, tmp: Path) -> None:
    both_running = asyncio.Barrier(2)
    running, most, order = [0], [0], []

    @tool(read_only=True)
    async def lookup(key: str) -> str:
        """Looks a key up (safe to run beside others)."""
        await asyncio.wait_for(both_running.wait(), 10)  # only passes if both run at once
        return key.upper()

    @tool
    async def save(key: str) -> str:
        """Saves a key (a side effect: runs alone)."""
        running[0] += 1
        most[0] = max(most[0], running[0])
        await asyncio.sleep(0)
        order.append(key)
        running[0] -= 1
        return "saved"

    h.script(
        turn(calls=[("c1", "lookup", {"key": "a"}), ("c2", "lookup", {"key": "b"}), ("c3", "save", {"key": "x"}), ("c4", "save", {"key": "y"})]),
        turn("Done."),
    )
    events = await collect(agent(h, tmp, [lookup, save], permissions="bypass"), "go")
    results = {e.data["call_id"]: e.data["content"] for e in of(events, EventType.TOOL_RESULT)}
    assert results == {"c1": "A", "c2": "B", "c3": "saved", "c4": "saved"}, results
    assert order == ["x", "y"] and most[0] == 1
    assert finish(events)["reason"] == "end_turn"


@scenario
async def approval_allow_and_deny(h: Harness, tmp: Path) -> None:
    log: list[str] = []

    def approver(request: Any) -> Approval:
        return Approval.approve() if request.arguments["path"] == "ok.md" else Approval.reject("not that file")

    h.script(turn(calls=[("c1", "write_note", {"path": "ok.md"}), ("c2", "write_note", {"path": "secret.md"})]), turn("Done."))
    events = await collect(agent(h, tmp, [write_note_tool(log)], approver=approver), "write")
    assert log == ["ok.md"]
    assert [e.data["decision"] for e in of(events, EventType.APPROVAL_DECISION)] == ["approve", "reject"]
    assert "not that file" in of(events, EventType.TOOL_RESULT)[1].data["content"]


@scenario
async def max_iterations_final_answer(h: Harness, tmp: Path) -> None:
    h.script(turn(calls=[("c1", "add", {"a": 1, "b": 1})]), turn("Two, and that is all I can do."))
    events = await collect(agent(h, tmp, [add], max_iterations=1), "add")
    assert finish(events)["reason"] == "max_turns"
    assert finish(events)["text"] == "Two, and that is all I can do."
    final = h.requests()[-1]
    assert h.tool_choice(final) in ("none", {"type": "none"})  # tools declared, none may be called


@scenario
async def spending_cap(h: Harness, tmp: Path) -> None:
    """Agent(max_cost=...) ends the run (reason budget) before the model call that would pass
    the cap, after the tools of the calls it made; a model without a price ends it at once."""
    script = (turn(calls=[("c1", "add", {"a": 1, "b": 1})]), turn(calls=[("c2", "add", {"a": 2, "b": 2})]), turn("Done."))
    priced = "claude-sonnet-4-6" if h.name in ("scripted", "anthropic") else "gpt-4.1"
    h.script(*script)
    free = await collect(Agent(h.model(priced), tools=[add], working_dir=tmp, journal=None, retry_base_delay=0.001), "add")
    costs = [e.data["cost_usd"] for e in of(free, EventType.LLM_COMPLETE)]
    assert finish(free)["reason"] == "end_turn" and len(costs) == 3 and all(c > 0 for c in costs)

    h.script(*script)
    before = len(h.requests())
    cap = costs[0] + costs[1] + costs[2] / 2  # room for two calls, not a third
    capped = Agent(h.model(priced), tools=[add], working_dir=tmp, retry_base_delay=0.001, max_cost=cap)
    events = await collect(capped, "add")
    end = finish(events)
    made = len(h.requests()) - before
    assert end["reason"] == "budget" and end["max_cost"] == cap and 1 <= made < 3, (end, made)
    assert end["stats"]["llm_calls"] == made and end["stats"]["cost_usd"] <= cap
    assert end["stats"]["cost_usd"] + end["next_cost_estimate"] > cap  # the call refused would have passed it
    assert len(of(events, EventType.TOOL_RESULT)) == made  # the calls made had their tools run
    assert [e.data["reason"] for e in of(journaled(capped), EventType.RUN_FINISH)] == ["budget"]
    assert capped.result_type.from_events(events).termination_reason.value == "budget"

    h.script(*script)
    unknown = await collect(Agent(h.model("a-model-with-no-price"), tools=[add], working_dir=tmp, journal=None,
                                  max_cost=10.0), "add")
    assert finish(unknown)["reason"] == "budget" and finish(unknown)["next_cost_estimate"] is None
    assert of(unknown, EventType.LLM_START) == []  # a cap that cannot be checked is not left to luck


@scenario
async def cancel_mid_stream(h: Harness, tmp: Path) -> None:
    # Six events: every wire has sent a text delta by then (the Responses API opens with three
    # events of bookkeeping before its first).
    h.script(Hang(turn("A long answer that never finishes streaming"), keep=6))
    a = agent(h, tmp)
    events = await asyncio.wait_for(collect(a, "go", lambda e: e.type is EventType.TEXT_DELTA and a.cancel()), 30)
    assert finish(events)["reason"] == "user_interrupt"
    assert of(journaled(a), EventType.TEXT_DELTA)  # what streamed is kept


@scenario
async def cancel_mid_tool(h: Harness, tmp: Path) -> None:
    @tool
    async def wait_forever() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return "never"

    h.script(turn(calls=[("c1", "wait_forever", {})]), turn("Fine."))
    a = agent(h, tmp, [wait_forever], permissions="bypass")
    events = await asyncio.wait_for(collect(a, "go", lambda e: e.type is EventType.TOOL_START and a.cancel()), 30)
    assert finish(events)["reason"] == "user_interrupt", finish(events)
    assert of(events, EventType.TOOL_RESULT)[-1].data["is_error"] is True
    again = await collect(a, "never mind")  # the history the cancel left is valid for the API
    assert finish(again)["reason"] == "end_turn" and not h.rejected


@scenario
async def rate_limit_and_server_errors_with_retry_after(h: Harness, tmp: Path) -> None:
    h.script(Fail(429, "slow down", {"retry-after": "3600"}), Fail(500, "oops"), Fail(529, "Overloaded"), turn("Made it."))
    events = await collect(agent(h, tmp, retry_max_delay=0.01), "go")
    retries = of(events, EventType.RETRY)
    assert [r.data["status_code"] for r in retries] == [429, 500, 529]
    assert all(r.data["delay_s"] <= 0.01 for r in retries)  # retry-after: 3600 is capped
    assert retries[0].data["retry_after_s"] == 3600
    assert finish(events)["text"] == "Made it."


@scenario
async def fallback_on_overload(h: Harness, tmp: Path) -> None:
    h.script(Fail(529, "Overloaded"), turn("From the fallback."))
    a = agent(h, tmp, fallback_model=h.model("fallback-model"))
    events = await collect(a, "go")
    assert [e.data["to_model"] for e in of(events, EventType.MODEL_FALLBACK)] == ["fallback-model"]
    assert finish(events)["text"] == "From the fallback."


@scenario
async def stall(h: Harness, tmp: Path) -> None:
    h.script(Hang(turn("never sent")), turn("After the stall."))
    events = await asyncio.wait_for(collect(agent(h, tmp, stall_timeout=0.3), "go"), 30)
    assert len(of(events, EventType.STALL_DETECTED)) == 1
    assert finish(events)["text"] == "After the stall."


@scenario
async def keep_alive_pings(h: Harness, tmp: Path) -> None:
    # 70 pings 50 ms apart: 3.5 s of keep-alive traffic, past the 2 s stall timeout, with gaps
    # 40 times shorter than it (so a loaded machine cannot stretch one into a stall).
    h.script(Pings(turn("Alive all along."), count=70, every=0.05))
    events = await collect(agent(h, tmp, stall_timeout=2.0), "go")
    assert not of(events, EventType.STALL_DETECTED) and len(h.requests()) == 1
    assert finish(events)["text"] == "Alive all along."


@scenario
async def stream_cut_before_a_tool_call_completes(h: Harness, tmp: Path) -> None:
    log: list[str] = []
    call = ("c1", "write_note", {"path": "a.md"})
    h.script(Cut(turn(calls=[call]), after_calls=0), turn(calls=[call]), turn("Done."))
    events = await collect(agent(h, tmp, [write_note_tool(log)], permissions="bypass"), "go")
    assert log == ["a.md"] and len(of(events, EventType.RETRY)) == 1
    assert finish(events)["text"] == "Done."


@scenario
async def stream_cut_after_tool_calls_complete(h: Harness, tmp: Path) -> None:
    log: list[str] = []
    calls = [("c1", "add", {"a": 1, "b": 2}), ("c2", "write_note", {"path": "a.md"})]
    again = [("c3", "add", {"a": 1, "b": 2}), ("c4", "write_note", {"path": "a.md"})]
    h.script(Cut(turn("Working.", calls=calls), after_calls=2), turn(calls=again), turn("Done."))
    a = agent(h, tmp, [add, write_note_tool(log)], permissions="bypass")
    events = await collect(a, "go")
    # The side effect ran once for each response that completed and asked for it: never for a
    # response cut off and retried. (Chat Completions ends calls only with the finish, so a cut
    # after it loses only the usage, and that response counts as complete.)
    asked = [e for e in of(events, EventType.LLM_COMPLETE) if any(b.get("name") == "write_note" for b in e.data["message"]["content"])]
    assert len(log) == len(asked) and log
    assert finish(events)["text"] == "Done."
    seen = {(e.type, e.data.get("call_id")) for e in events}
    for e in journaled(a):  # every tool event the journal holds reached the stream too
        if e.type in (EventType.TOOL_START, EventType.TOOL_RESULT):
            assert (e.type, e.data.get("call_id")) in seen


@scenario
async def invalid_json_unknown_and_nameless_tools(h: Harness, tmp: Path) -> None:
    h.script(turn(calls=[("c1", "add", '{"a": 1,'), ("c2", "no_such_tool", {}), ("c3", "", {"a": 1})]), turn("Sorry."))
    events = await collect(agent(h, tmp, [add]), "go")
    results = {e.data["call_id"]: e.data for e in of(events, EventType.TOOL_RESULT)}
    assert all(r["is_error"] for r in results.values()) and len(results) == 3
    assert "not valid JSON" in results["c1"]["content"]
    assert "Unknown tool 'no_such_tool'" in results["c2"]["content"]
    assert "had no name" in results["c3"]["content"]
    assert finish(events)["text"] == "Sorry." and not h.rejected  # the follow-up request was valid


@scenario
async def max_tokens_continuation(h: Harness, tmp: Path) -> None:
    h.script(turn("The first half, ", stop="max_tokens"), turn("and the second half."))
    events = await collect(agent(h, tmp), "go")
    assert finish(events)["text"] == "The first half, and the second half.", finish(events)
    assert finish(events)["reason"] == "end_turn" and len(of(events, EventType.CONTINUATION)) == 1
    h.script(*[turn(f"part {i} ", stop="max_tokens") for i in range(4)])
    events = await collect(agent(h, tmp), "again")  # at most three continuations, then it says so
    assert len(of(events, EventType.CONTINUATION)) == 3
    assert finish(events)["reason"] == "stop_reason" and finish(events)["text"] == "part 0 part 1 part 2 part 3 "


@scenario
async def context_length_recovery(h: Harness, tmp: Path) -> None:
    @tool(read_only=True)
    def dump() -> str:
        """Returns a huge log."""
        return "log line\n" * 20_000  # 180,000 characters

    too_long = "prompt is too long: 250000 tokens > 200000 maximum; context length exceeded"
    h.script(turn(calls=[("c1", "dump", {})]), Fail(400, too_long), turn("Recovered."))
    a = agent(h, tmp, [dump])
    events = await collect(a, "go")
    result = of(events, EventType.TOOL_RESULT)[0].data["content"]
    assert len(result) < 31_000 and "tool-output" in result  # capped, with the path to the whole
    assert len(next((tmp / ".agent_kernel" / "sessions").glob("*/tool-output/*.txt")).read_text()) == 180_000
    assert [e.data.get("trigger") for e in of(events, EventType.MICRO_COMPACTION)] == ["overflow"]
    assert finish(events)["text"] == "Recovered."


@scenario
async def thinking_round_trip(h: Harness, tmp: Path) -> None:
    h.script(turn(thinking=("Two and three make five.", "sig-123"), calls=[("c1", "add", {"a": 2, "b": 3})]), turn("5."))
    # reasoning_effort: the Responses API returns reasoning that can go back only when asked.
    events = await collect(agent(h, tmp, [add], model_options={"reasoning_effort": "low"}), "add")
    assert "".join(e.data["text"] for e in of(events, EventType.THINKING_DELTA)) == "Two and three make five."
    second = h.requests()[1]
    if isinstance(second, dict) and "input" in second:
        # The Responses API: the reasoning item goes back (statelessly), before the call it led to.
        kinds = [item.get("type", "message") for item in second["input"]]
        reasoning = second["input"][kinds.index("reasoning")]
        assert kinds.index("reasoning") < kinds.index("function_call"), kinds
        assert reasoning["summary"] == [{"type": "summary_text", "text": "Two and three make five."}]
        assert reasoning["encrypted_content"] == "sig-123"
    elif isinstance(second, dict):
        assistant = next(m for m in second["messages"] if m.get("role") == "assistant")
        blocks = assistant["content"]
        assert {"type": "thinking", "thinking": "Two and three make five.", "signature": "sig-123"}.items() <= blocks[0].items()
    else:
        block = second.messages[1].content[0]
        assert (block.text, block.signature) == ("Two and three make five.", "sig-123")


@scenario
async def prompt_cache_breakpoints(h: Harness, tmp: Path) -> None:
    h.script(turn(calls=[("c1", "add", {"a": 2, "b": 3})]), turn("5."))
    await collect(agent(h, tmp, [add], system="You add."), "add")
    body = h.requests()[1]
    assert "cache_control" in body["system"][-1] and "cache_control" in body["tools"][-1]
    assert "cache_control" in body["messages"][-1]["content"][-1] and not h.rejected


@scenario
async def run_sync_three_times(h: Harness, tmp: Path) -> None:
    h.script(turn("One."), turn("Two."), turn("Three."))
    a = agent(h, tmp)

    def runs() -> list[str]:
        return [a.run_sync(p).text for p in ("1", "2", "3")]

    assert await asyncio.to_thread(runs) == ["One.", "Two.", "Three."]  # each on a loop of its own
    assert len(h.requests()) == 3


@scenario
async def run_then_stream_then_run(h: Harness, tmp: Path) -> None:
    h.script(turn("One."), turn("Two."), turn("Three."))
    a = agent(h, tmp)

    def runs() -> list[str]:
        first = asyncio.run(a.run("1")).text
        second = asyncio.run(_streamed(a, "2"))
        return [first, second, a.run_sync("3").text]

    assert await asyncio.to_thread(runs) == ["One.", "Two.", "Three."]


def sent_text(request: Any) -> str:
    """Everything one request carried, as text to search (the wire body, or the scripted request)."""
    if isinstance(request, dict):
        return json.dumps(request)
    parts = [request.system or ""]
    for m in request.messages:
        parts += [m.text] + [b.content for b in m.tool_results]
    return "\n".join(parts)


def small_window(window: int = 4_096, **kwargs: Any) -> Any:
    """A context manager for a small local model's window; uncalibrated, since the fake servers
    report a fixed 40 input tokens whatever was sent."""
    from agent_kernel.context import ContextManager

    return ContextManager(context_window=window, calibrate=False, **kwargs)


@scenario
async def oversized_request_is_refused_before_it_is_sent(h: Harness, tmp: Path) -> None:
    h.script(turn("never asked"))
    a = agent(h, tmp, system="Follow these rules. " * 1_500, context=small_window())  # ~7,500 tokens
    events = await collect(a, "go")
    assert h.requests() == []  # never sent
    [assembled] = of(events, EventType.CONTEXT_ASSEMBLED)
    assert not assembled.data["fits"] and assembled.data["total_tokens"] > 4_096 == assembled.data["window"]
    error = of(events, EventType.ERROR)[0].data
    assert error["kind"] == "context_overflow" and "Largest parts: the system prompt" in error["message"], error
    assert finish(events)["reason"] == "error"


@scenario
async def small_window_caps_results_and_checks_the_request(h: Harness, tmp: Path) -> None:
    @tool(read_only=True)
    def dump() -> str:
        """Returns a long log."""
        return "log line\n" * 3_200  # 28,800 characters: under the 30,000 default, over a 4k window

    h.script(turn(calls=[("c1", "dump", {})]), turn("Read it."))
    events = await collect(agent(h, tmp, [dump], context=small_window()), "go")
    result = of(events, EventType.TOOL_RESULT)[0].data["content"]
    assert len(result) <= 4_096 + 400 and "tool-output" in result  # a quarter of the window, with the path to the whole
    assert len(next((tmp / ".agent_kernel" / "sessions").glob("*/tool-output/c1.txt")).read_text()) == 28_800
    assembled = of(events, EventType.CONTEXT_ASSEMBLED)
    assert len(assembled) == 2 and all(e.data["fits"] and e.data["total_tokens"] <= 4_096 for e in assembled)
    assert finish(events)["text"] == "Read it." and len(h.requests()) == 2


@scenario
async def cleared_results_name_the_file_that_keeps_them(h: Harness, tmp: Path) -> None:
    @tool(read_only=True)
    def read_log(n: int) -> str:
        """Returns log n."""
        return f"log {n}: " + "e" * 3_000

    h.script(turn(calls=[("c1", "read_log", {"n": 1})]), turn(calls=[("c2", "read_log", {"n": 2})]), turn("Both read."))
    a = agent(h, tmp, [read_log], context=small_window(200_000, micro_keep=1, micro_threshold_tokens=1))
    events = await collect(a, "go")
    assert finish(events)["text"] == "Both read."
    spilled = next((tmp / ".agent_kernel" / "sessions").glob("*/tool-output/c1.txt"))
    assert spilled.read_text() == "log 1: " + "e" * 3_000  # the whole result, to read back
    last = sent_text(h.requests()[-1])
    # The path as the file tools take it, relative to the working folder the session lives in.
    shown = spilled.relative_to(tmp).as_posix()
    assert f"[tool result cleared to save context: 3007 chars, kept whole in {shown}]" in last
    assert "log 2: " + "e" * 3_000 in last and "log 1: eee" not in last
    assert of(events, EventType.MICRO_COMPACTION)[0].data["results_cleared"] == 1


@scenario
async def context_usage_on_every_call_and_a_warning_before_compaction(h: Harness, tmp: Path) -> None:
    h.script(turn(calls=[("c1", "add", {"a": 1, "b": 2})]), turn("3."))
    a = agent(h, tmp, [add], system="Be exact. " * 300, context=small_window(1_200, warn_threshold=0.6, threshold=0.95))
    events = await collect(a, "add")
    completes = of(events, EventType.LLM_COMPLETE)
    assert len(completes) == 2
    for e in completes:
        usage, figure = e.data["usage"], e.data["context_usage"]
        assert figure["window"] == 1_200 and figure["used_tokens"] == usage["input_tokens"] and not figure["estimated"]
        assert figure["share"] == round(figure["used_tokens"] / 1_200, 4)
    [warning] = of(events, EventType.CONTEXT_WARNING)  # once, not on every call past the share
    assert warning.seq < of(events, EventType.LLM_START)[0].seq
    assert (warning.data["warn_at"], warning.data["compact_at"]) == (0.6, 0.95) and warning.data["share"] >= 0.6
    assert "auto-compaction" in warning.data["message"]


@scenario
async def pinned_and_hook_context_count_in_the_budget(h: Harness, tmp: Path) -> None:
    from agent_kernel import Hooks
    from agent_kernel.context import Priority

    hooks = Hooks()
    hooks.on("after_context_assembly", lambda ctx: "retrieved: " + "r" * 8_000)  # more than the window has left
    h.script(turn("Using it."))
    a = agent(h, tmp, hooks=hooks, context=small_window(2_000))
    a.context.add("schema", "orders(id, total, placed_at)", priority=Priority.HIGH, truncatable=False)
    a.context.add("manual", "m" * 20_000)  # truncatable: cut to the budget
    a.context.add("extra", "x" * 400, priority=Priority.OPTIONAL, truncatable=False)  # no room left: left out
    events = await collect(a, "go")
    [assembled] = of(events, EventType.CONTEXT_ASSEMBLED)
    status = {c["name"]: c["status"] for c in assembled.data["components"]}
    assert (status["schema"], status["manual"], status["extra"], status["history"]) == ("included", "truncated", "excluded", "included")
    [added] = of(events, EventType.CONTEXT_ADDED)
    assert added.data["components"][0]["status"] in ("truncated", "excluded") and added.data["total_tokens"] <= 2_000
    body = sent_text(h.requests()[0])
    assert "orders(id, total, placed_at)" in body and "x" * 400 not in body and "r" * 8_000 not in body
    assert "truncated to fit the context budget" in body
    a.context.remove("manual")
    h.script(turn("Without it."))
    await collect(a, "again")
    assert "m" * 100 not in sent_text(h.requests()[1])


@scenario
async def replaced_request_is_journaled(h: Harness, tmp: Path) -> None:
    from agent_kernel import Hooks
    from agent_kernel.messages import Message

    hooks = Hooks()
    hooks.on("before_llm_call", lambda ctx: [Message.user("Say only: replaced.")])
    h.script(turn("replaced."))
    a = agent(h, tmp, hooks=hooks)
    await collect(a, "the original question")
    assert "Say only: replaced." in sent_text(h.requests()[0]) and "the original question" not in sent_text(h.requests()[0])
    [start] = of(journaled(a), EventType.LLM_START)
    assert start.data["request_replaced"] is True
    sent = start.data["sent"]
    assert (sent["kept_messages"], sent["messages_before"]) == (0, 1)
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Say only: replaced."}]}]


async def _streamed(a: Agent, prompt: str) -> str:
    events = [e async for e in a.stream(prompt)]
    return finish(events)["text"]


def not_applicable(scenario_name: str, harness: str) -> str | None:
    """Why a cell does not apply, or None."""
    if harness == "openai-responses":
        why = responses_supported()
        if why is not None:
            return why
    return NOT_APPLICABLE.get((scenario_name, harness))

