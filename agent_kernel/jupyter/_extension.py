"""jupyter.extension — ``%load_ext agent_kernel`` and ``%unload_ext agent_kernel``.

Loading registers ``AgentMagics`` (the ``%%agent`` and ``%agent`` magics, configurable with
``%config AgentMagics...`` or ``c.AgentMagics...`` in a profile) and its input transformer, which
lets a ``%%agent`` cell await its run on the kernel's loop. Loading twice is harmless. Unloading
cancels runs in progress, closes the journals and removes all of it; ``%reload_ext`` does both.

To load it in every session, add ``c.InteractiveShellApp.extensions = ["agent_kernel"]`` to
``ipython_config.py``.
"""

from __future__ import annotations

from typing import Any

from agent_kernel.jupyter._live import install as install_live_notebooks
from agent_kernel.jupyter._live import uninstall as uninstall_live_notebooks
from agent_kernel.jupyter._magics import AgentMagics


def loaded_magics(ipython: Any) -> AgentMagics | None:
    """The ``AgentMagics`` registered in ``ipython``, or None when the extension is not loaded."""
    magics = ipython.magics_manager.registry.get(AgentMagics.__name__)
    return magics if isinstance(magics, AgentMagics) else None


def load_ipython_extension(ipython: Any) -> None:
    """Registers the magics and the input transformer (once)."""
    if loaded_magics(ipython) is not None:
        return
    magics = AgentMagics(shell=ipython)  # joins ipython.configurables and reads its config
    ipython.register_magics(magics)
    ipython.input_transformers_cleanup.append(magics.transform)
    install_live_notebooks(getattr(ipython, "kernel", None))


def unload_ipython_extension(ipython: Any) -> None:
    """Cancels runs in progress, closes journals, and removes the magics and the transformer."""
    magics = loaded_magics(ipython)
    if magics is None:
        return
    magics.sessions.close()
    magics.on_error_handler.turn_off()  # no handler left behind, no button left to click
    if magics.panel is not None:
        magics.panel.close()
        magics.panel = None
    uninstall_live_notebooks()
    transformers = ipython.input_transformers_cleanup
    transformers[:] = [t for t in transformers if getattr(t, "__self__", None) is not magics]
    if magics in ipython.configurables:
        ipython.configurables.remove(magics)
    manager = ipython.magics_manager
    for kind, name in (("line", "agent"), ("cell", "agent")):
        bound = manager.magics[kind].get(name)
        if getattr(bound, "__self__", None) is magics:
            del manager.magics[kind][name]
    del manager.registry[AgentMagics.__name__]
