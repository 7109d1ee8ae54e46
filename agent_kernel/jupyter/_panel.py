"""jupyter.panel — ``%agent panel``: the session's conversation in a panel beside the notebook.

The panel is one ipywidgets ``VBox``: the runs it has shown, each under the prompt that started
it (its live ``AgentView`` while it runs, approval cards included, then its static transcript),
a box for the next prompt, and Send. Send starts the next run of the magics' current session as
an ``%%agent`` cell would: the same agent, the same journal, the same checks (a session that is
still running says so). It is a widget click, which the kernel handles while it is idle; the
click is handed to the kernel's loop, since it may arrive on a comm thread. Runs that
``%%agent`` cells start while the panel exists show in it too (the panel is the runner's
``ViewHost`` for them): the panel holds the conversation, whoever asked.

**Where it shows.** ``%agent panel`` displays one output in two forms: ``PANEL_MIME``, which the
package's front-end extension (JupyterLab 4, Notebook 7) draws as a line saying where the panel
is, and the widget itself (under a line saying no side panel is possible here), which any other
front end draws (VS Code, Colab, classic Notebook). It also asks the extension, over the comm
target of ``jupyter.live``, to open the panel beside the notebook: split beside it in
JupyterLab's main area, in the right sidebar in Notebook 7. ``%agent panel`` again shows the same
panel (the extension brings it back if it was closed).

A finished run leaves its static transcript in the panel, as in a cell, and its view closes;
there is no notebook cell to save it into, but the session's journal holds the run. So that a
long session's panel stays light (each transcript is kept in the kernel and sent to every page
that draws the panel), it shows the last ``KEEP_RUNS`` finished runs, and a line above them says
how many earlier ones were folded away and how to see them (``%agent show``). A run that ends
without telling the panel (its task cancelled before it began) still leaves its transcript.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agent_kernel.errors import UserError
from agent_kernel.jupyter._runner import RunHandle
from agent_kernel.jupyter._static_view import StaticTranscript

if TYPE_CHECKING:
    from agent_kernel.jupyter._magics import AgentMagics

#: The output the front-end extension draws (``{"model_id", "session"}``) and opens the panel for.
PANEL_MIME = "application/vnd.agent-kernel.panel+json"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"
#: What the cell says above the panel where no extension can put it beside the notebook.
NO_SIDE_PANEL = ("This front end has no side panel for it (that needs JupyterLab 4 or Notebook 7 with "
                 "agent_kernel's extension), so the session's panel is here.")
#: Characters of a prompt shown above its run; the journal keeps all of it.
PROMPT_PREVIEW = 2_000
#: Finished runs the panel shows; older ones are folded into one line (the journal keeps them).
KEEP_RUNS = 20
#: Who asked, above a run: from the panel's Send, and otherwise (a cell, an Agent-kernel prompt).
FROM_PANEL = "You"
FROM_CELL = "You, in a cell"

_MUTED = "color: var(--jp-content-font-color2, #6e7781);"


class SessionPanel:
    """The session panel of one notebook: its runs, a prompt box and Send (see the module docs).

    Args:
        magics: the notebook's ``AgentMagics``; Send runs its current session.

    Attributes:
        widget: the panel (an ipywidgets ``VBox``).
        runs: the box holding each run under its prompt.
        prompt: the text box for the next prompt.
        send_button: starts a run with the prompt (``send``).
        notice: a line under the box: why Send did nothing, or how a run failed.
        folded: the line above the runs saying how many earlier ones were folded away.
    """

    def __init__(self, magics: AgentMagics) -> None:
        import ipywidgets as w

        self.magics = magics
        self.title = w.HTML()
        self.runs = w.VBox(layout=w.Layout(flex="1 1 auto", overflow_y="auto", min_height="0"))
        self.runs.add_class("ak-panel-runs")
        self.prompt = w.Textarea(placeholder="The next prompt for the session (Ctrl+Enter sends it)",
                                 rows=3, layout=w.Layout(width="auto", flex="0 0 auto"))
        self.prompt.add_class("ak-panel-prompt")
        self.send_button = w.Button(description="Send", button_style="primary",
                                    tooltip="Start the session's next run with this prompt")
        self.send_button.add_class("ak-panel-send")
        self.notice = w.HTML()
        self.widget = w.VBox([self.title, self.runs, self.prompt,
                              w.HBox([self.send_button, self.notice], layout=w.Layout(flex="0 0 auto"))],
                             layout=w.Layout(height="100%"))
        self.widget.add_class("ak-panel")
        self._inline = w.VBox([w.HTML(f'<div style="{_MUTED}">{html.escape(NO_SIDE_PANEL, quote=False)}</div>'), self.widget])
        self.folded = w.HTML()  # above the runs once some are folded away
        self.folded.add_class("ak-panel-folded")
        self._loop = _kernel_loop()
        self._shown: dict[RunHandle, tuple[Any, Any]] = {}  # a live run -> (its prompt line, its view)
        self._finished: deque[tuple[Any, Any]] = deque()  # (prompt line, transcript), oldest first
        self._folded = 0
        self._asker: tuple[str, str | None] | None = None  # set while ``asking`` starts a run
        self._closed = False
        self._click_pending = False  # a Send click handed to the loop and not yet taken
        self.send_button.on_click(lambda _button: self._clicked())
        self._show_title()

    # -- showing the panel ---------------------------------------------------------------------

    def show(self) -> None:
        """Displays the panel's output in the current cell and asks the front end to open it."""
        from IPython.display import display

        self._show_title()
        session = self.magics.sessions.current
        data = {
            PANEL_MIME: {"model_id": self.widget.model_id, "session": session},
            WIDGET_VIEW_MIME: {"version_major": 2, "version_minor": 0, "model_id": self._inline.model_id},
            "text/plain": f"The panel of agent session {session!r} (it needs a front end that shows widgets).",
        }
        display(data, raw=True)
        self._ask_front_end(session)

    def _ask_front_end(self, session: str) -> None:
        """Asks the front-end extension to open the panel beside the notebook; nothing waits for
        the answer (the comm closes when it comes). Without the extension nobody answers, and the
        cell's output shows the panel instead."""
        if getattr(self.magics.shell, "kernel", None) is None:
            return  # no front end to ask
        from comm import create_comm

        from agent_kernel.jupyter._live import TARGET

        comm = create_comm(target_name=TARGET, data={
            "id": "panel", "op": "panel", "model_id": self.widget.model_id,
            "title": f"Agent: {session}"})
        comm.on_msg(lambda _msg: comm.close())

    def _show_title(self) -> None:
        session = self.magics.sessions.find()
        name = html.escape(self.magics.sessions.current)
        about = (f"{html.escape(session.agent.model.name)} · {len(session.runs)} run{'s' if len(session.runs) != 1 else ''}"
                 if session is not None else "no run yet")
        self.title.value = f'<b>Agent session {name!r}</b> <span style="{_MUTED}">{about}</span>'

    # -- Send ----------------------------------------------------------------------------------

    def _clicked(self) -> None:
        # A comm callback, maybe on a kernel subshell's thread: the run starts on the kernel's loop.
        # A second click (a double click, Ctrl+Enter then a click) before the loop has taken the
        # first sends nothing more: it would only be refused as the run it started is going.
        if self._click_pending:
            return
        self._click_pending = True
        text = self.prompt.value
        try:
            self._loop.call_soon_threadsafe(self._send_click, text)
        except RuntimeError:  # the loop has closed: the kernel is going down
            self._click_pending = False
            self._say("The kernel's event loop has stopped, so nothing was sent; restart the kernel, "
                      "then run %agent panel again.", error=True)

    def _send_click(self, text: str) -> None:
        try:
            self.send(text)
        finally:
            self._click_pending = False

    def send(self, text: str) -> RunHandle | None:
        """Starts the session's next run with ``text`` (what Send does), on the kernel's loop.

        Returns:
            The run's handle, or None when it did not start (the notice says why).
        """
        from agent_kernel.jupyter._magics import in_magic_terms

        text = text.strip()
        if not text:
            self._say("Type a prompt in the box first, then Send.")
            return None
        self._say("")
        try:
            with self.asking(FROM_PANEL):
                handle = self.magics.start_panel_run(text, on_end=self._panel_run_ended)
        except UserError as exc:
            self._say(in_magic_terms(str(exc)), error=True)
            return None
        except Exception as exc:  # the click must not fail silently
            self._say(f"Could not start the run: {type(exc).__name__}: {exc}", error=True)
            return None
        self.prompt.value = ""
        return handle

    @contextlib.contextmanager
    def asking(self, who: str, shown: str | None = None) -> Iterator[None]:
        """Labels the run started inside the block: asked by ``who``, its prompt shown as
        ``shown`` (a line standing for a long generated prompt) instead of as sent."""
        self._asker = (who, shown)
        try:
            yield
        finally:
            self._asker = None

    def _panel_run_ended(self, handle: RunHandle) -> None:
        if handle.task.cancelled():
            self._say("The run was cancelled before it ended.", error=True)
            return
        error = handle.task.exception()
        if error is not None:
            self._say(f"The run failed: {type(error).__name__}: {error}", error=True)
        elif handle.result().error:
            self._say(f"The run ended with an error: {handle.result().error}", error=True)
        self._show_title()

    def _say(self, message: str, *, error: bool = False) -> None:
        colour = "var(--jp-error-color1, #cf222e)" if error else "var(--jp-content-font-color2, #6e7781)"
        self.notice.value = f'<span style="color: {colour};">{html.escape(message, quote=False)}</span>' if message else ""

    # -- the runner's ViewHost -----------------------------------------------------------------

    def run_started(self, handle: RunHandle) -> None:
        """Adds the run under its prompt: its live view, or a line for a run without one."""
        import ipywidgets as w

        if self._closed:
            return
        who, shown = self._asker or (FROM_CELL, None)
        line = w.HTML(_prompt_html(handle.prompt if shown is None else shown, who=who))
        body = handle.view if handle.view is not None else w.HTML(
            f'<div style="{_MUTED}">Running without a live view (--quiet); its transcript shows here when it ends.</div>')
        self._shown[handle] = (line, body)
        self.runs.children = (*self.runs.children, line, body)
        self.send_button.disabled = True
        self._show_title()
        # The runner tells the panel when the run ends; a task cancelled before it began never
        # runs that code, and its view would stay here, Send greyed out, for good.
        handle.task.add_done_callback(lambda _task: self._settle(handle))

    def run_ended(self, handle: RunHandle, transcript: StaticTranscript) -> None:
        """Puts the run's static transcript where its view was (the view closes next), and folds
        the oldest finished runs beyond ``KEEP_RUNS`` into the line above them."""
        import ipywidgets as w

        shown = self._shown.pop(handle, None)
        if shown is None or self._closed:
            return
        line, body = shown
        final = w.HTML(transcript.html)
        children = [final if child is body else child for child in self.runs.children]
        self._finished.append((line, final))
        folded: list[Any] = []
        while len(self._finished) > KEEP_RUNS:
            folded.extend(self._finished.popleft())
            self._folded += 1
        if folded:
            gone = {id(widget) for widget in (*folded, self.folded)}
            children = [child for child in children if id(child) not in gone]
            runs = "run" if self._folded == 1 else "runs"
            self.folded.value = (f'<div style="{_MUTED}">{self._folded} earlier {runs} of this panel folded away '
                                 f"(it keeps the last {KEEP_RUNS}); the session's journal keeps every run: "
                                 "%agent show RUN_ID shows one, %agent events lists their ids.</div>")
            children.insert(0, self.folded)
        self.runs.children = tuple(children)
        for widget in (*folded, *(() if body is handle.view else (body,))):  # once the page no longer draws them
            widget.close()
        self.send_button.disabled = bool(self._shown)
        self._show_title()

    def _settle(self, handle: RunHandle) -> None:
        """The run's task is done: if the runner never said so, its transcript from its events."""
        if handle in self._shown:
            self.run_ended(handle, StaticTranscript.from_events(list(handle.events)))

    def close(self) -> None:
        """Closes the panel's widgets (the extension is unloading); live views close with their
        runs, which show nowhere here after."""
        self._closed = True
        views = {id(handle.view) for handle in self._shown if handle.view is not None}
        for child in self.runs.children:
            if id(child) not in views:
                child.close()
        self._shown.clear()
        self._finished.clear()
        for widget in (self.title, self.prompt, self.send_button, self.notice, self.folded, self.runs,
                       self.widget, *self._inline.children, self._inline):
            widget.close()


def _prompt_html(prompt: str | None, *, who: str) -> str:
    """The line above a run: ``who`` asked what (a long prompt cut; the journal has all of it)."""
    if prompt is None:
        said = f'<i style="{_MUTED}">Continuing the run the last kernel left waiting for approval.</i>'
    else:
        text = prompt if len(prompt) <= PROMPT_PREVIEW else prompt[:PROMPT_PREVIEW] + "…"
        said = f'<div style="white-space: pre-wrap;">{html.escape(text, quote=False)}</div>'
    return (f'<div class="ak-panel-prompt-line" style="margin-top: 8px; padding: 4px 8px; '
            f'border-left: 3px solid var(--jp-brand-color1, #1a73e8);"><b>{html.escape(who)}</b>{said}</div>')


def _kernel_loop() -> asyncio.AbstractEventLoop:
    """The loop cells run on: the running one in a kernel, else the one IPython awaits cells on."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        from IPython.core.async_helpers import get_asyncio_loop

        return get_asyncio_loop()
