"""jupyter.on_error — ``%agent on-error``: an "Ask the agent" button under each traceback.

When it is on, a ``post_run_cell`` handler looks at every cell that ran. Under the traceback of
one that raised it shows an ``ipywidgets.Output`` holding a small "Ask the agent" button, unless
the error is a ``KeyboardInterrupt``, an agent run's own failure or interruption, comes from a
``%%agent`` cell, or is a ``%agent`` line's usage error (which says what to do already). The
failure is kept as it was then (the cell's source, its traceback, its cell id), so a click asks
about *that* cell however many have failed since (``%agent fix`` asks about the last); the names
the cell uses are described as they are at the click. Running a cell again
closes the button under its old traceback; where the front-end sends no cell id (so no cell is
known to have run again), only the last ``KEEP_BUTTONS`` buttons nobody clicked stay, and older
ones close, so a long session does not keep every failure's traceback and widgets.

**A click has no cell.** What a click handler displays goes to the click's message, which the
page stops listening to once the click is handled, so the question runs detached, as a
``%%agent`` run of the session (``AgentMagics.ask_in``), shown inside the Output: its live view
replaces the button, approvals are answered there as anywhere, and the transcript replaces the
view when the run ends. The page then puts that transcript in the Output's place in the notebook
(``runner.start_run``'s ``output``), so a saved notebook holds the traceback and the transcript,
no widget.

**Which loop.** JupyterLab sends widget messages on kernel subshells, whose threads run loops of
their own: the run is handed (``call_soon_threadsafe``) to the loop that ran the failing cell, the
kernel's, where cells and runs live. With no loop running there (IPython without a kernel, where
no page shows the button) a click runs the question to its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from agent_kernel.errors import RunCancelled, UserError
from agent_kernel.jupyter._fix import Failure, failure_of, names_used, prompt_about
from agent_kernel.jupyter._runner import RunFailed, RunHandle

if TYPE_CHECKING:
    from agent_kernel.jupyter._magics import AgentMagics

_log = logging.getLogger("agent_kernel.jupyter")

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
#: What a front-end without widgets (or a notebook reopened without the kernel) shows instead.
FALLBACK_TEXT = "Ask the agent (a button, shown while the kernel runs; %agent fix asks about the last error)"
#: An ``%%agent`` cell: its failures are the run's own, shown in its view.
_AGENT_CELL = re.compile(r"^\s*%%agent(?=\s|$)")
#: A ``%agent`` line: its usage errors say what to do already.
_AGENT_LINE = re.compile(r"^\s*%agent(?=\s|$)", re.M)
#: What a click says when the kernel's loop has stopped (the kernel is going down).
_LOOP_GONE = ("The kernel's event loop has stopped (the kernel is shutting down), so nothing was asked; "
              "after a restart, run the cell again and ask, or use %agent fix.")
#: Buttons nobody clicked that stay clickable at most; older ones close (see the module docs).
KEEP_BUTTONS = 50
#: Who asked, as the session panel says above the run (its line: the question's first sentence).
ASKED_BY = 'You, with "Ask the agent" under a traceback'
#: Errors that are no bug in the cell: a person stopped it, or an agent run failed (its view says why).
_NOT_ASKED = (KeyboardInterrupt, RunCancelled, RunFailed)


class AskButton:
    """One failing cell's "Ask the agent" button, and the Output the answer appears in.

    Attributes:
        failure: the cell's source, traceback and error, as they were when it failed.
        cell_id: the failing cell's id, where the front-end sent one (the agent's notebook edits
            then go after that cell).
        output: the ``ipywidgets.Output`` shown under the traceback: the button, then the run's
            live view, then its transcript.
        button: the button.
        handle: the run a click started (None before).
    """

    def __init__(self, magics: AgentMagics, failure: Failure, cell_id: str | None,
                 loop: asyncio.AbstractEventLoop) -> None:
        import ipywidgets

        self.magics = magics
        self.failure = failure
        self.cell_id = cell_id
        self.loop = loop
        self.handle: RunHandle | None = None
        self._asked = False
        self._closed = False  # its Output closed: a click on its way starts nothing
        self.button = ipywidgets.Button(
            description="Ask the agent", icon="question",
            tooltip="Ask the session's agent what went wrong in this cell and how to fix it (as %agent fix does)",
            layout=ipywidgets.Layout(width="auto"))
        self.button.add_class("ak-onerror-button")
        self.button.on_click(self._clicked)
        self.output = ipywidgets.Output()
        self.output.add_class("ak-onerror-output")
        self.output.outputs = (self._button_output(),)

    def show(self) -> None:
        """Displays the Output (with the button in it) in the cell being run."""
        from IPython.display import display

        shown = self.output._repr_mimebundle_()
        display({WIDGET_VIEW: shown[WIDGET_VIEW], "text/plain": FALLBACK_TEXT}, raw=True)

    def prompt(self) -> str:
        """What a click asks: the failing cell, its traceback, and the names it uses as they are now."""
        now = replace(self.failure, names=names_used(self.failure.source, self.magics.user_ns))
        return prompt_about(now, which="A notebook cell")

    @property
    def finished(self) -> bool:
        """True once a run was asked for and has ended."""
        return self.handle is not None and self.handle.done()

    @property
    def settled(self) -> bool:
        """True when nothing is on its way: not clicked (or the click refused), or answered.
        A click whose run has not started yet (it waits for the loop) is not settled."""
        return (self.handle is None and not self._asked) or self.finished

    def close(self) -> None:
        """Closes the button, and the Output too unless it shows an answer (the page then shows
        nothing in their place)."""
        self.button.close()
        if self.handle is None:
            self._closed = True
            self.output.close()

    def discard(self) -> None:
        """Closes both widgets, the cell's outputs being gone, unless an answer is still coming."""
        if not self.settled:
            return
        self._closed = True
        self.button.close()
        self.output.close()

    # -- the click -------------------------------------------------------------------------------

    def _clicked(self, _button: Any) -> None:
        """The button's handler: on whichever thread the click arrived; the run starts on the loop."""
        if self._asked:
            return
        self._asked = True
        self.button.disabled = True
        loop = self.loop
        if loop.is_closed():
            self._refused(_LOOP_GONE)
            return
        if loop.is_running():
            try:
                loop.call_soon_threadsafe(self._ask)
            except RuntimeError:  # the loop has closed since: the kernel is going down
                self._refused(_LOOP_GONE)
            return
        loop.run_until_complete(self._ask_and_wait())

    async def _ask_and_wait(self) -> None:
        handle = self._ask()
        if handle is not None:
            with contextlib.suppress(Exception):  # ``_ended`` shows how it failed
                await handle.wait()

    def _ask(self) -> RunHandle | None:
        """Starts the run in the Output (on the loop's thread); a refusal shows under the button."""
        from agent_kernel.jupyter._magics import in_magic_terms

        if self._closed:  # turned off, or its cell ran again, while the click waited for the loop
            return None
        try:
            prompt = self.prompt()
            self.handle = self.magics.ask_in(self.output, prompt, cell_id=self.cell_id, on_end=self._ended,
                                             asked_by=ASKED_BY, shown=prompt.split("\n", 1)[0])
        except UserError as exc:
            self._refused(in_magic_terms(str(exc)))
            return None
        except Exception as exc:  # shown where the person clicked; the log keeps the traceback
            _log.debug("asking the agent about a failed cell", exc_info=True)
            self._refused(f"Could not ask the agent: {type(exc).__name__}: {exc}")
            return None
        return self.handle

    def _refused(self, message: str) -> None:
        """Shows why nothing was asked under the button, and lets it be clicked again."""
        self._asked = False
        self.button.disabled = False
        self.output.outputs = (self._button_output(),
                               {"output_type": "stream", "name": "stderr", "text": message + "\n"})

    def _ended(self, handle: RunHandle) -> None:
        """The run ended (its transcript is in the Output): the button is no longer needed."""
        self.button.close()
        if handle.task.cancelled():
            return
        error = handle.task.exception()
        if error is not None:
            self.output.append_stderr(f"The agent run failed: {type(error).__name__}: {error}\n")

    def _button_output(self) -> dict[str, Any]:
        bundle = self.button._repr_mimebundle_()
        return {"output_type": "display_data", "metadata": {},
                "data": {WIDGET_VIEW: bundle[WIDGET_VIEW], "text/plain": "Ask the agent"}}


class OnError:
    """The ``post_run_cell`` handler behind ``%agent on-error``, and the buttons it has shown.

    Attributes:
        buttons: the buttons shown and not yet closed, oldest first.
    """

    def __init__(self, magics: AgentMagics) -> None:
        self.magics = magics
        self.buttons: list[AskButton] = []
        self._on = False

    @property
    def on(self) -> bool:
        """Whether failing cells show the button."""
        return self._on

    def turn_on(self) -> None:
        """Registers the handler (once)."""
        if self._on:
            return
        self._shell().events.register("post_run_cell", self.after_cell)
        self._on = True

    def turn_off(self) -> None:
        """Unregisters the handler and closes the buttons; answers asked for stay."""
        if self._on:
            with contextlib.suppress(ValueError):  # unregistered from outside
                self._shell().events.unregister("post_run_cell", self.after_cell)
            self._on = False
        for button in self.buttons:
            button.close()
        self.buttons = [button for button in self.buttons if button.handle is not None]

    def after_cell(self, result: Any) -> None:
        """After each cell: a button under the traceback of one that failed (see the module docs).

        Never raises, nor logs a traceback (a kernel prints what is logged in the cell): a
        failure here would show as a second traceback under the cell's own. One line says why."""
        try:
            self._after_cell(result)
        except Exception as exc:
            _log.debug("showing the 'Ask the agent' button", exc_info=True)
            print(f"The \"Ask the agent\" button could not be shown ({type(exc).__name__}: {exc}); "
                  "%agent fix asks the agent about this cell instead.", file=sys.stderr)

    def _after_cell(self, result: Any) -> None:
        from agent_kernel.jupyter._magics import _running_cell_id

        cell_id = _running_cell_id(self.magics.shell)
        if cell_id is not None:
            self._forget_cell(cell_id)  # the cell ran again: its old outputs are gone from the page
        error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        if error is None or isinstance(error, _NOT_ASKED):
            return
        source = getattr(getattr(result, "info", None), "raw_cell", None)
        if isinstance(source, str) and (_AGENT_CELL.match(source) or (
                isinstance(error, UsageError) and _AGENT_LINE.search(source))):
            return
        failure = failure_of(error, None, source if isinstance(source, str) and source.strip() else None)
        button = AskButton(self.magics, failure, cell_id, _shell_loop())
        self.buttons.append(button)
        button.show()
        self._keep_the_last()

    def _keep_the_last(self) -> None:
        """Closes the oldest buttons beyond ``KEEP_BUTTONS`` nobody clicked, and forgets the
        oldest answered ones beyond it (their Output keeps showing the answer)."""
        excess = len(self.buttons) - KEEP_BUTTONS
        if excess <= 0:
            return
        kept = []
        for button in self.buttons:
            if excess > 0 and button.settled:
                button.close()
                excess -= 1
            else:
                kept.append(button)
        self.buttons = kept

    def _forget_cell(self, cell_id: str) -> None:
        """Closes the widgets shown under ``cell_id``'s last run, but not an answer still coming."""
        kept = []
        for button in self.buttons:
            if button.cell_id == cell_id and button.settled:
                button.discard()
            else:
                kept.append(button)
        self.buttons = kept

    def _shell(self) -> Any:
        shell = self.magics.shell
        assert shell is not None  # the extension registers the magics on a shell
        return shell


def _shell_loop() -> asyncio.AbstractEventLoop:
    """The loop the failing cell ran on (a kernel's), else the one IPython runs async cells on."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        from IPython.core.async_helpers import get_asyncio_loop

        return get_asyncio_loop()
