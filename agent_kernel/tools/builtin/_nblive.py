"""tools.builtin.nblive — the seam between the notebook tools and a notebook open in a front end.

The notebook tools work on ``.ipynb`` files. Where the notebook is open in JupyterLab or Notebook 7,
the Jupyter part of the package registers a ``LiveNotebooks`` here (``use_live_notebooks``), and
the tools then read and change the open document instead of the file: the person sees each edit
and each cell's outputs at once, and the file is left to the person's own save.

The tools never import the Jupyter part; it plugs in from above. Without a registered provider, or
when it reaches no front end, ``open_live`` gives None and the tools use the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class LiveUnavailable(Exception):
    """The open notebook could not be reached before the request was made (no front end, the
    notebook was closed, no answer): nothing was changed, so the file may be used instead."""


class LiveNotebook(Protocol):
    """A notebook open in a front end, changed through it."""

    #: The notebook's path as the front end names it (relative to the server's root).
    path: str

    async def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Sends one request (``hello``, ``read``, ``insert``, ``replace``, ``delete``, ``outputs``)
        and returns the front end's answer.

        Raises:
            LiveUnavailable: the front end was not reached (nothing was changed).
            ToolError: the front end refused the request or did not confirm it in time (its words).
        """
        ...


class LiveNotebooks(Protocol):
    """Finds the front end that shows a notebook."""

    async def open(self, notebook: Path) -> LiveNotebook | None:
        """The open document of ``notebook`` (an absolute path), or None when no front end shows it."""
        ...


_provider: LiveNotebooks | None = None


def use_live_notebooks(provider: LiveNotebooks | None) -> None:
    """Makes the notebook tools change open notebooks through ``provider`` (None: files only)."""
    global _provider
    _provider = provider


def live_notebooks() -> LiveNotebooks | None:
    """The registered provider, or None."""
    return _provider


async def open_live(notebook: Path) -> LiveNotebook | None:
    """The open document of ``notebook`` when a registered front end shows it, else None."""
    provider = _provider
    if provider is None:
        return None
    try:
        return await provider.open(notebook)
    except LiveUnavailable:
        return None
