"""jupyter.view — ``AgentView``, the live anywidget of one run, and its coalesced wire protocol.

The runner calls ``view.handle(event)`` for every event of a run. The view folds events into a
``Transcript`` and sends the front-end only what changed, batched:

* Python → JS ``{"type": "batch", "v": n, "ops": [...]}`` at most once per ``flush_interval``
  (45 ms, so at most ~22 a second whatever the token rate), plus at once for what a person must
  see at once (an approval is needed, a decision was taken, the run ended). Ops are
  ``{"op": "add", "item"}``, ``{"op": "append", "texts": {id: text}}`` (only the new text, of
  every block that grew, in one op so that sub-agents streaming side by side cost little more
  than one agent), ``{"op": "draw", "id", "html", "drawn"}``, ``{"op": "set", "id", "patch"}``
  and ``{"op": "status", "patch"}``. Bytes therefore grow linearly with the text, where setting
  a string trait per token would resend it all each time.
* Every item on the wire carries ``html``, its drawing by ``item_html`` (the lasting transcript
  is made of the same), and the front-end draws nothing itself; an item's fields that only its
  drawing reads and that can be long (a tool's arguments and result, say) are not sent besides.
  A ``set`` of a card carries ``edits`` of the drawing the front-end has, ``[[start, end, html],
  ...]``, each replacing ``html[start:end]`` (UTF-16 offsets, in order; found tag by tag), so a
  progress update does not resend the card's arguments (or its whole ``html`` in the patch, when
  that is shorter). A text or thinking block being written is drawn a
  paragraph at a time: its ``html`` covers the first ``drawn`` characters of its ``text``
  (UTF-16 units, as JavaScript counts), the front-end shows the rest as plain text, and each
  ``draw`` op brings the drawing of the next finished piece (``item_html.stable_end``), to be
  put at the end of the block's body, and the new ``drawn``. When the block ends, a last
  ``draw`` completes it, or, where drawing the whole differs from the pieces put together (a
  list a blank line parts, say), a ``set`` of its whole ``html``: the finished block is then
  byte for byte what the lasting transcript shows.
  Sub-agents travel the same way: an item's ``agent`` says which agent it belongs to, and an
  item of kind ``subagent`` is the card whose ``agent_id`` those items carry; the front-end
  nests them (see ``transcript.py``), so nesting costs no extra messages.
* JS → Python ``{"type": "sync"}`` when a view renders (or sees a gap in ``v``): the reply is
  ``{"type": "snapshot", "v": n, "state": {...}}``, the whole transcript. Custom messages sent
  before a view existed are lost, so a late or reloaded view rebuilds from this. A ``sync`` is
  also the first sign that a front-end is showing the view (headless clients never send one).
* The synced ``snapshot`` trait holds the whole transcript once the run has ended, so saved
  widget state and exported HTML show the finished run with no kernel. The runner goes further
  and replaces the view's output with ``static()``, a static transcript drawn from the same
  snapshot, so a saved notebook needs no widget state at all (see ``static_view.py``).
* The synced ``saved`` trait is what the page puts in the notebook in the view's place when the
  kernel cannot: ``{"model_id", "html", "text", "final"}``, the run's static transcript, put in
  place of the output of the widget ``model_id`` names (the view, or the ``Output`` it is shown
  in: ``saved_in``). It is drawn at the run's milestones (its start, each approval asked for, and every ``SAVE_EVERY_S`` at most
  as model calls and tool results come in; never per token) as if the run stopped there, and
  drawn once more, ``final``, when it ends. A page reloaded mid-run, a detached cell whose display
  update no longer reaches the page, and a kernel that restarts with a card pending so all leave
  a transcript in the saved notebook rather than a bare widget.
* JS → Python ``{"type": "approval", "call_id", "agent", "decision", "reason"}`` (decision
  ``approve``, ``reject`` or ``always_allow``; ``agent`` the card's agent, which tells apart
  sub-agents whose calls have equal ids) and ``{"type": "stop"}`` call ``on_decision`` /
  ``on_stop``. A sub-agent's call is answered like any other: its approvals go through the top
  run's broker, so ``on_decision(call_id, ..., agent)`` is the same callback.
* JS → Python ``{"type": "steer", "text"}``, ``{"type": "pause"}`` and ``{"type": "resume_run"}``
  call ``on_steer(text)`` / ``on_pause`` / ``on_resume`` (``agent.steer`` / ``agent.pause`` /
  ``agent.resume_run``). They come from a page, so they are checked here: blank text is ignored,
  text past ``STEER_CAP`` and anything sent once the run has ended is refused with a notice in
  the view. The run's own ``steer``, ``paused`` and ``resumed`` events then show what happened.

Comm callbacks may arrive on another thread (a kernel subshell), so the transcript and the
pending changes are guarded by one lock, and the callbacks given to the view must be thread-safe.
"""

from __future__ import annotations

import asyncio
import difflib
import itertools
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anywidget
import traitlets

import agent_kernel
from agent_kernel.events._event import AgentEvent, EventType
from agent_kernel.jupyter._item_html import block_body, block_frame, item_html, stable_end
from agent_kernel.jupyter._items import TERMINAL_STATUSES, Item, Notice, TextBlock, utf16_length
from agent_kernel.jupyter._protocol import TO_KERNEL, Batch, Snapshot, problem
from agent_kernel.jupyter._static_view import StaticTranscript, render_html
from agent_kernel.jupyter._summary import RunSummary
from agent_kernel.jupyter._transcript import Transcript

DecisionCallback = Callable[[str, str, "str | None", "str | None"], None]
StopCallback = Callable[[], None]
#: Called with a message for the running agent; returning False means no run took it.
SteerCallback = Callable[[str], object]
#: Pause and Resume: ``agent.pause`` and ``agent.resume_run``, whose return value is ignored.
ControlCallback = Callable[[], object]

#: Decisions the front-end may send.
DECISIONS = frozenset({"approve", "reject", "always_allow"})
#: Longest rejection reason accepted from the front-end (characters).
REASON_CAP = 2_000
#: Longest message to a running agent accepted from the front-end (characters).
STEER_CAP = 4_000
#: Seconds between two drawings of the ``saved`` transcript, apart from milestones.
SAVE_EVERY_S = 2.0
#: Events after which the ``saved`` transcript may be drawn again (rate-limited).
_SAVE_AFTER = frozenset({EventType.TOOL_RESULT, EventType.LLM_COMPLETE, EventType.APPROVAL_DECISION})

#: Events a person must see at once, so they are flushed without waiting for the timer: a
#: request for approval (and the decision on one, see ``handle``), the top-level start and end,
#: and what answers a person steering the run (it holds, goes on, takes their message in).
_URGENT_TOP_LEVEL = frozenset({EventType.RUN_START, EventType.CANCELLED, EventType.ERROR,
                               EventType.RUN_FINISH, EventType.PAUSED, EventType.RESUMED,
                               EventType.STEER})


#: Fields only an item's drawing reads, which can be long: sent in its ``html``, not besides.
_DRAWN_ONLY = frozenset({"arguments", "result", "images", "diff", "approval_reason", "prompt",
                         "summary", "error", "message"})

#: The code a disposed view is left with: a module that draws nothing (``AgentView.dispose``).
_CLOSED_ESM = "export default {};"
#: Numbers the views of this process, for their ``_anywidget_id``.
_VIEW_IDS = itertools.count(1)


def _static_file(name: str) -> Path:
    """The shipped front-end file ``name``: inside the wheel, else in the source checkout."""
    packaged = Path(agent_kernel.__file__).parent / "_static" / name
    if packaged.is_file():
        return packaged
    return Path(__file__).resolve().parents[2] / "widgets" / name


class AgentView(anywidget.AnyWidget):
    """The live view of one agent run: streamed text, tool cards, approvals, a Stop button.

    Args:
        on_decision: called as ``on_decision(call_id, decision, reason, agent)`` when a person
            clicks Approve / Reject / Always on a card awaiting approval; ``decision`` is
            ``approve``, ``reject`` or ``always_allow``; ``agent`` is the sub-agent whose call it
            is (None for the top-level agent). Must be thread-safe. Called at most once per
            call, and never for a call already decided or finished.
        on_stop: called with no arguments when a person clicks Stop. Must be thread-safe.
        on_steer: called with the text a person sends to the running agent (stripped, at most
            ``STEER_CAP`` characters); returning False says no run took it. Must be thread-safe.
        on_pause, on_resume: called with no arguments for the Pause and Resume buttons. Must be
            thread-safe.
        flush_interval: seconds between batches sent to the front-end.
        clock: a monotonic clock, injectable for tests.

    Example:
        >>> def decide(call_id, decision, reason, agent):  # doctest: +SKIP
        ...     broker.resolve(call_id, Approval.reject(reason) if decision == "reject"
        ...                    else Approval.always() if decision == "always_allow"
        ...                    else Approval.approve(), agent_id=agent)
        >>> view = AgentView(on_decision=decide, on_stop=agent.cancel)  # doctest: +SKIP
        >>> display(view)  # doctest: +SKIP
        >>> async for event in agent.stream(prompt):  # doctest: +SKIP
        ...     view.handle(event)
        >>> view.close_run(); display(view.summary())  # doctest: +SKIP
    """

    _esm = _static_file("agent_view.js")
    _css = _static_file("agent_view.css")

    #: The whole transcript (``{"v", "items", "status"}``), set when the run ends.
    snapshot = traitlets.Dict().tag(sync=True)
    #: An MCP server's pending question, shown as a form: ``{id, server, message, schema}``, or
    #: ``{}``. The front end answers with an ``elicitation`` message (``jupyter.protocol``).
    elicitation = traitlets.Dict().tag(sync=True)
    #: The static transcript the page saves in the view's place (see the module docs).
    saved = traitlets.Dict().tag(sync=True)

    def __init__(self, *, on_decision: DecisionCallback | None = None,
                 on_stop: StopCallback | None = None, on_steer: SteerCallback | None = None,
                 on_pause: ControlCallback | None = None, on_resume: ControlCallback | None = None,
                 flush_interval: float = 0.045, clock: Callable[[], float] = time.monotonic,
                 **kwargs: Any) -> None:
        # anywidget keeps a widget's CSS in one <style> per ``_anywidget_id``; one of its own per
        # view lets ``dispose`` drop a finished view's CSS without unstyling the views still live.
        kwargs.setdefault("_anywidget_id", f"agent_kernel.AgentView.{next(_VIEW_IDS)}")
        super().__init__(**kwargs)
        self.on_decision = on_decision
        self.on_stop = on_stop
        self.on_steer = on_steer
        self.on_pause = on_pause
        self.on_resume = on_resume
        self.flush_interval = flush_interval
        self._clock = clock
        self._lock = threading.RLock()
        self.transcript = Transcript(observer=_Changes(self), clock=clock)
        self._version = 0
        self._last_flush = float("-inf")
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._new: dict[str, Item] = {}
        self._appended: dict[str, list[str]] = {}
        self._appended_items: dict[str, TextBlock] = {}
        self._changed: dict[str, tuple[Item, set[str]]] = {}
        # The first batch carries the whole status; later ones only what changed.
        self._status_changed: set[str] = set(self.transcript.status.to_json())
        self._decided: set[tuple[str | None, str]] = set()
        self._stop_sent = False
        self._asking: tuple[str, asyncio.AbstractEventLoop, asyncio.Future[Any]] | None = None
        self._saved_at = float("-inf")
        #: The model id of the widget whose output in the notebook the page replaces with the
        #: transcript (``saved``): this view's own, or that of the ``ipywidgets.Output`` it is
        #: shown in (a run started by a click, see ``runner.start_run``).
        self.saved_in: str | None = None
        self._drawings: dict[str, _Drawing] = {}  # text and thinking blocks being written
        self._shown: dict[str, str] = {}  # the drawing of each card, as last sent
        self._closing = False
        self.on_msg(self._on_front_end_msg)

    # -- feeding ---------------------------------------------------------------------------------

    def handle(self, event: AgentEvent) -> None:
        """Folds ``event`` in and schedules (or, when urgent, sends) the changes. Cheap; sync."""
        with self._lock:
            urgent = event.type is EventType.APPROVAL_REQUIRED or (
                event.agent_id is None and event.type in _URGENT_TOP_LEVEL)
            if event.type is EventType.APPROVAL_DECISION:
                # Answers to a person (or a policy) waiting on the card; not the rule approvals
                # that come with every allowed call.
                card = self.transcript.card(str(event.data.get("call_id")), event.agent_id)
                urgent = card is not None and card.status == "awaiting_approval"
            if event.type is EventType.RUN_START and event.agent_id is None:
                self._decided.clear()  # a view reused for a new run takes new clicks
                self._stop_sent = False
            self.transcript.apply(event)
            if event.type is EventType.RUN_FINISH and event.agent_id is None:
                self.close_run()
                self._save(final=True)
                return
            if event.type is EventType.APPROVAL_REQUIRED or (
                    event.type is EventType.RUN_START and event.agent_id is None) or (
                    event.type in _SAVE_AFTER and self._clock() - self._saved_at >= SAVE_EVERY_S):
                self._save(final=False)
            if urgent:
                self.flush()
                return
            if self._has_pending():
                self._schedule()

    def flush(self) -> None:
        """Sends everything that changed since the last batch (nothing if nothing did)."""
        with self._lock:
            self._cancel_timer()
            ops = self._take_ops()
            self._last_flush = self._clock()
            if not ops:
                return
            self._version += 1
            self.send(Batch(type="batch", v=self._version, ops=ops))

    def close_run(self) -> None:
        """Sends the last changes and stores the whole transcript in ``snapshot``. Idempotent."""
        with self._lock:
            # Blocks that end here are sent finished in the snapshot, not drawn a second time.
            self._closing = True
            try:
                self.flush()
            finally:
                self._closing = False
            if self.snapshot.get("v") != self._version:
                self.snapshot = {"v": self._version, **self._state()}

    def dispose(self) -> None:
        """Closes the view of a run that has ended, once its output shows the static transcript.

        Its comms (the widget's and its layout's) close, so a kernel of many runs keeps none
        open and a front-end that saves live widgets saves none of it. Just before, one state
        update empties its code, style and snapshot: a client that keeps the state of every
        widget it saw, closed or not (nbclient writes it into an executed notebook), keeps a stub
        of a few hundred bytes instead of the view's 60 KB of JS and CSS and a second copy of the
        transcript. The transcript stays readable here (``static``, ``summary``). Idempotent.
        """
        with self._lock:
            self._cancel_timer()
            if self.comm is None:
                return
            self.flush()
            with self.hold_sync():
                # Instance traits (anywidget adds them) over the class's file paths.
                self._esm = _CLOSED_ESM  # type: ignore[assignment]
                self._css = ""  # type: ignore[assignment]
                self.snapshot = {}
                self.elicitation = {}
                # The page had the final transcript when the run ended (``_save``); the output
                # now shows it, so a saved widget state need not carry it a second time.
                self.saved = {}
        layout = self.layout
        self.close()
        if layout is not None:
            layout.close()

    def _save(self, *, final: bool) -> None:
        """Draws the ``saved`` transcript: the run as it ended, or as if it stopped now."""
        state = self.transcript.to_json()
        status = state.get("status") or {}
        if not final and status.get("phase") == "running":
            # What the notebook keeps if the kernel goes now: the run cut off here.
            status.update(phase="interrupted", reason="interrupted", stopping=False, activity=None,
                          paused=False, pausing=False)
        self._saved_at = self._clock()
        self.saved = {"model_id": self.saved_in or self.model_id, "html": render_html(state),
                      "text": RunSummary.from_transcript(self.transcript).text, "final": final}

    def show_diff(self, call_id: str, agent: str | None, diff: str) -> None:
        """Shows on a card waiting for approval the change its call would make, at once."""
        with self._lock:
            self.transcript.set_diff(call_id, agent, diff)
            self.flush()

    def summary(self) -> RunSummary:
        """The static summary of the run so far (answer, tool calls, usage)."""
        with self._lock:
            return RunSummary.from_transcript(self.transcript)

    def static(self) -> StaticTranscript:
        """The run so far as a static transcript: what this view shows, with no widget."""
        with self._lock:
            return StaticTranscript.from_transcript(self.transcript)

    def __repr__(self) -> str:
        """A one-liner without ids or addresses, e.g. ``AgentView(run finished: end_turn)``.

        It is the widget's ``text/plain``, which notebook checkers such as nbval compare."""
        status = self.transcript.status
        if status.phase == "idle":
            return "AgentView(waiting for a run)"
        if status.phase == "running":
            return "AgentView(running)"
        return f"AgentView(run {status.phase}: {status.reason or status.phase})"

    # -- coalescing ------------------------------------------------------------------------------

    def _has_pending(self) -> bool:
        return bool(self._new or self._appended or self._changed or self._status_changed)

    def _schedule(self) -> None:
        """Arranges a flush at most ``flush_interval`` after the previous one."""
        if self._timer is not None:
            if self._timer_loop is not None and not self._timer_loop.is_closed():
                return
            self._timer = None  # left behind by a loop that has gone (asyncio.run ended)
        delay = max(0.0, self._last_flush + self.flush_interval - self._clock())
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            # No loop in this thread (a script feeding events by hand): flush when due.
            if delay == 0.0:
                self.flush()
            return
        self._timer = loop.call_later(delay, self._on_timer)
        self._timer_loop = loop

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            self.flush()

    def _cancel_timer(self) -> None:
        if self._timer is None:
            return
        try:
            on_its_loop = asyncio.get_running_loop() is self._timer_loop
        except RuntimeError:
            on_its_loop = False
        if on_its_loop:  # a timer handle may only be cancelled from its loop's thread
            self._timer.cancel()
            self._timer = None
        # Otherwise (a flush from a comm thread) it fires later and finds nothing to send.

    def _take_ops(self) -> list[dict[str, Any]]:
        drawn = self._draw_blocks()
        ops: list[dict[str, Any]] = [{"op": "add", "item": self._wire(item)}
                                     for item in self._new.values()]
        if self._appended:
            ops.append({"op": "append", "texts": {item_id: "".join(chunks)
                                                  for item_id, chunks in self._appended.items()}})
        for item_id, (item, fields) in self._changed.items():
            shown = self._shown.get(item_id)  # what the front-end has, before it is drawn anew
            if item_id in drawn or item_id in self._drawings:  # drawn as it streams (below)
                wire = {name: value for name, value in item.to_json().items() if name not in _DRAWN_ONLY}
            else:
                wire = self._wire(item)
            op: dict[str, Any] = {"op": "set", "id": item_id, "patch": {
                name: value for name, value in wire.items() if name in fields or name in ("html", "drawn")}}
            html = op["patch"].get("html")
            if shown is not None and html is not None and not isinstance(item, TextBlock):
                del op["patch"]["html"]
                edits = _edits(shown, html)
                if sum(len(text) + 24 for _, _, text in edits) < len(html):
                    op["edits"] = edits
                else:
                    op["patch"]["html"] = html
            ops.append(op)
        for item_id in self._appended.keys() - self._changed.keys() - self._drawings.keys() - drawn.keys():
            # Text that came after its block ended (not from a run): the block drawn again.
            wire = self._wire(self._appended_items[item_id])
            ops.append({"op": "set", "id": item_id, "patch": {"html": wire["html"], "drawn": wire["drawn"]}})
        ops.extend(op for op in drawn.values() if op is not None)
        status = self.transcript.status.to_json()
        patch = {name: status[name] for name in sorted(self._status_changed) if name in status}
        if patch:
            # The front-end's clock counts on from here; resent only with other status changes
            # (turns, usage), which keeps batches of streamed text small.
            elapsed = self.transcript.elapsed()
            patch["elapsed_s"] = None if elapsed is None else round(elapsed, 2)
            ops.append({"op": "status", "patch": patch})
        self._new.clear()
        self._appended.clear()
        self._appended_items.clear()
        self._changed.clear()
        self._status_changed.clear()
        return ops

    # -- drawing -----------------------------------------------------------------------------------

    def _wire(self, item: Item) -> dict[str, Any]:
        """``item`` as the front-end gets it: its fields, less those only its drawing reads, and
        its ``html`` (for a block being written, the part drawn so far; see the module docs)."""
        data = item.to_json()
        wire = {name: value for name, value in data.items() if name not in _DRAWN_ONLY}
        if not isinstance(item, TextBlock):
            wire["html"] = self._shown[item.id] = item_html(data)
            return wire
        drawing = self._drawings.get(item.id)
        if drawing is None:
            wire["html"] = item_html(wire)
            wire["drawn"] = utf16_length(item.text)
        else:
            drawing.frame = block_frame(wire)
            wire["html"] = drawing.frame[0] + "".join(drawing.body) + drawing.frame[1]
            wire["drawn"] = drawing.utf16
        return wire

    def _state(self) -> dict[str, Any]:
        """The whole transcript as the front-end gets it (a snapshot's ``state``)."""
        status = self.transcript.status.to_json()
        status["elapsed_s"] = self.transcript.elapsed()
        return {"items": [self._wire(item) for item in self.transcript.items], "status": status}

    def _draw_blocks(self) -> dict[str, dict[str, Any] | None]:
        """Draws what blocks being written have finished since the last batch: the op that sends
        it, by block id (None: nothing to send, the block's ``add`` or the snapshot carries it)."""
        ops: dict[str, dict[str, Any] | None] = {}
        for block_id, drawing in list(self._drawings.items()):
            block, new = drawing.block, block_id in self._new
            if not self._closing and self.transcript.is_open(block):
                if not new and block_id not in self._appended:
                    continue  # nothing new to draw
                text = block.text
                end = stable_end(text, drawing.chars)
                if end > drawing.chars:
                    ops[block_id] = drawing.extend(text, end, None if new else block_id)
                continue
            del self._drawings[block_id]
            ops[block_id] = None
            if new or self._closing:
                continue  # its add, or the snapshot that follows, carries it finished
            text = block.text
            wire = block.to_json()
            whole = block_body(block.kind, text)
            rest = block_body(block.kind, text[drawing.chars:])
            if drawing.frame == block_frame(wire) and "".join(drawing.body) + rest == whole:
                if drawing.chars < len(text):
                    ops[block_id] = drawing.extend(text, len(text), block_id)
            else:
                ops[block_id] = {"op": "set", "id": block_id,
                                 "patch": {"html": item_html(wire), "drawn": utf16_length(text)}}
        return ops

    # -- front-end messages ----------------------------------------------------------------------

    def _on_front_end_msg(self, _widget: Any, content: dict[str, Any], _buffers: Any) -> None:
        if problem(content, TO_KERNEL) is not None:
            return  # not a message of jupyter.protocol: a stale or foreign front end
        kind = content["type"]
        if kind == "sync":
            self._send_snapshot()
        elif kind == "approval":
            self._on_approval(content)
        elif kind == "stop":
            self._on_stop()
        elif kind == "elicitation":
            self._on_elicitation(content)
        elif kind == "steer":
            self._on_steer(content["text"])
        elif kind == "pause":
            self._on_pause()
        elif kind == "resume_run":
            self._on_resume()

    async def ask_elicitation(self, request: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """Shows an MCP server's question (``{id, server, message, schema}``) as a form and waits
        for the person's answer: ``(action, content)``, action accept, decline or cancel."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        self._asking = (str(request["id"]), loop, answer)
        self.elicitation = dict(request)
        try:
            return await answer
        finally:
            self._asking = None
            self.elicitation = {}

    def _on_elicitation(self, content: dict[str, Any]) -> None:
        # A comm callback, maybe on a kernel subshell thread: the answer goes to the asking loop.
        asking = self._asking
        if asking is None or content["id"] != asking[0]:
            return  # already answered, or a question that is gone
        _, loop, future = asking
        answer = (content["action"], content.get("content") if content["action"] == "accept" else None)

        def settle() -> None:
            if not future.done():
                future.set_result(answer)

        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop has closed: nobody waits
            pass

    def _send_snapshot(self) -> None:
        with self._lock:
            self.flush()
            self.send(Snapshot(type="snapshot", v=self._version, state=self._state()))

    def _on_approval(self, content: dict[str, Any]) -> None:
        call_id = str(content.get("call_id") or "")
        decision = content.get("decision")
        reason = content.get("reason")
        reason = str(reason)[:REASON_CAP] if reason else None
        agent = content.get("agent")
        agent = agent if isinstance(agent, str) else None
        with self._lock:
            if "agent" in content:
                card = self.transcript.card(call_id, agent)
            else:  # a front-end that does not say whose card: the one waiting, else any
                cards = self.transcript.cards(call_id)
                card = next((c for c in cards if c.status == "awaiting_approval"),
                            cards[0] if cards else None)
            if card is not None:
                agent = card.agent
            decided = card is not None and (card.decision is not None
                                            or card.status in TERMINAL_STATUSES)
            key = (agent, call_id)
            if decision not in DECISIONS or not call_id or decided or key in self._decided \
                    or self.on_decision is None:
                return  # a repeated or stale click: this call has been answered already
            # A call the view has not heard of yet goes through too: whoever asked (the approval
            # broker) knows its pending calls, and ignores ids it does not know.
            self._decided.add(key)
            name = card.name if card is not None else call_id
        try:
            self.on_decision(call_id, str(decision), reason, agent)
        except Exception as exc:  # the click must not vanish silently
            with self._lock:
                self._decided.discard(key)
                self.transcript.add_notice(
                    "error", "error", f"Could not deliver the decision on {name}: {exc}")
                self.flush()

    def _on_stop(self) -> None:
        with self._lock:
            if self._stop_sent or self.transcript.status.phase != "running" \
                    or self.on_stop is None:
                return
            self._stop_sent = True
            self.transcript.mark_stopping()
            self.flush()
        try:
            self.on_stop()
        except Exception as exc:
            with self._lock:
                self._stop_sent = False
                self.transcript.mark_stopping(False)
                self.transcript.add_notice("error", "error", f"Could not stop the run: {exc}")
                self.flush()


    # -- steering ------------------------------------------------------------------------------

    def _on_steer(self, text: str) -> None:
        text = text.strip()
        with self._lock:
            if not text:
                return
            if self.on_steer is None:
                self._note("This run cannot take messages while it runs (a crew's members run on their own); "
                           "ask in a new %%agent cell once it ends.")
                return
            if self._refused("send a message to it", text):
                return
            if len(text) > STEER_CAP:
                self._note(f"Your message was not sent: it has {len(text):,} characters, more than the "
                           f"{STEER_CAP:,} a message to a running agent may have. Shorten it, or ask "
                           "in a new %%agent cell once the run ends.")
                return
            self.transcript.mark_queued()
            self.flush()
        try:
            taken = self.on_steer(text)
            problem_text = "no run was in progress to take it" if taken is False else None
        except Exception as exc:  # the message must not vanish silently
            problem_text = str(exc)
        if problem_text is not None:
            with self._lock:
                self.transcript.mark_queued(-1)
                self._note(f"Could not send your message ({_preview(text)}): {problem_text}.",
                           level="error")

    def _on_pause(self) -> None:
        with self._lock:
            status = self.transcript.status
            if self.on_pause is None or self._refused("pause it"):
                return
            if status.paused or status.pausing:
                return  # a repeated click
            self.transcript.mark_pausing()
            self.flush()
        try:
            self.on_pause()
        except Exception as exc:
            with self._lock:
                self.transcript.mark_pausing(False)
                self._note(f"Could not pause the run: {exc}", level="error")

    def _on_resume(self) -> None:
        with self._lock:
            status = self.transcript.status
            if self.on_resume is None or self._refused("resume it"):
                return
            if not (status.paused or status.pausing):
                return  # not paused: nothing to do
            self.transcript.mark_pausing(False)
            self.flush()
        try:
            self.on_resume()
        except Exception as exc:
            with self._lock:
                self._note(f"Could not resume the run: {exc}", level="error")

    def _refused(self, what: str, text: str | None = None) -> bool:
        """Whether the run is not in progress, in which case a notice says ``what`` was not done."""
        phase = self.transcript.status.phase
        if phase == "running":
            return False
        said = f" ({_preview(text)})" if text else ""
        if phase == "idle":
            self._note(f"The run has not started yet, so the view could not {what}{said}; "
                       "try again once it is running.")
        else:
            self._note(f"The run has ended, so the view could not {what}{said}; "
                       "ask in a new %%agent cell instead.")
        return True

    def _note(self, message: str, level: str = "warning") -> None:
        """Shows ``message`` in the view at once (once, if a page repeats itself). Under the lock."""
        last = self.transcript.items[-1] if self.transcript.items else None
        if not (isinstance(last, Notice) and last.message == message):
            self.transcript.add_notice("steer", level, message)
        self.flush()
        if self.transcript.status.phase not in ("idle", "running"):
            self.close_run()  # the saved snapshot shows the notice too


_TAG = re.compile(r"(?=<)")


def _edits(old: str, new: str) -> list[tuple[int, int, str]]:
    """What turns the drawing ``old`` into ``new``: ``(start, end, html)`` replacing
    ``old[start:end]``, in order, offsets in UTF-16 units (as JavaScript slices strings)."""
    before, after = _TAG.split(old), _TAG.split(new)
    offsets = list(itertools.accumulate(map(utf16_length, before), initial=0))
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    return [(offsets[i1], offsets[i2], "".join(after[j1:j2]))
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _preview(text: str, limit: int = 60) -> str:
    """``text`` quoted on one line, cut to ``limit`` characters."""
    line = " ".join(text.split())
    return f"“{line[:limit]}…”" if len(line) > limit else f"“{line}”"


@dataclass
class _Drawing:
    """What the front-end has of a block being written: the drawing of its first ``chars``
    characters (``utf16`` as JavaScript counts them), in pieces, in the ``frame`` it was sent in."""

    block: TextBlock
    frame: tuple[str, str] | None = None
    body: list[str] = field(default_factory=list)
    chars: int = 0
    utf16: int = 0

    def extend(self, text: str, end: int, block_id: str | None) -> dict[str, Any] | None:
        """Draws ``text`` up to ``end`` as the next piece; the ``draw`` op that sends it, unless
        ``block_id`` is None (the block's ``add`` carries it)."""
        piece = text[self.chars:end]
        html = block_body(self.block.kind, piece)
        self.body.append(html)
        self.chars = end
        self.utf16 += utf16_length(piece)
        return None if block_id is None else {"op": "draw", "id": block_id, "html": html, "drawn": self.utf16}


class _Changes:
    """Records the transcript's changes as pending ops of its view (called under its lock)."""

    def __init__(self, view: AgentView) -> None:
        self._view = view

    def item_added(self, item: Item) -> None:
        self._view._new[item.id] = item
        if isinstance(item, TextBlock):
            self._view._drawings[item.id] = _Drawing(item)

    def text_appended(self, block: TextBlock, text: str) -> None:
        if block.id not in self._view._new:  # a new item is sent whole, text included
            self._view._appended.setdefault(block.id, []).append(text)
            self._view._appended_items[block.id] = block

    def item_changed(self, item: Item, fields: Iterable[str]) -> None:
        if item.id not in self._view._new:
            self._view._changed.setdefault(item.id, (item, set()))[1].update(fields)

    def status_changed(self, fields: Iterable[str]) -> None:
        self._view._status_changed.update(fields)

