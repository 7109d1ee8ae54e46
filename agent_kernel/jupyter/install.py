"""install — writes and installs the ``agent`` kernelspec ("Agent (Python)").

Usage::

    python -m agent_kernel.jupyter.install              # for this user (or system-wide when root)
    python -m agent_kernel.jupyter.install --sys-prefix # into the running environment (venv, conda)
    python -m agent_kernel.jupyter.install --prefix /some/prefix

The kernelspec launches the Python that ran this command, so the kernel always runs in the
environment agent_kernel is installed in. ``--prefix P`` puts it in ``P/share/jupyter/kernels/agent``,
which Jupyter finds when ``P/share/jupyter`` is on ``JUPYTER_PATH`` (tests use this to install into
a temporary folder).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["DISPLAY_NAME", "KERNEL_NAME", "install", "kernel_spec", "main"]

#: The kernelspec's directory name: ``jupyter console --kernel agent``, ``kernelspec.name`` in notebooks.
KERNEL_NAME = "agent"
#: What front-ends show in their kernel pickers.
DISPLAY_NAME = "Agent (Python)"
#: The module whose ``main()`` starts the kernel (kept apart from the kernel class, so running
#: it as ``__main__`` never creates a second copy of ``AgentKernel``).
LAUNCHER = "agent_kernel.jupyter.kernel_main"


def kernel_spec(executable: str | None = None) -> dict[str, Any]:
    """The contents of ``kernel.json`` for the agent kernel.

    Args:
        executable: the Python that runs the kernel (default: this one).
    """
    return {
        "argv": [executable or sys.executable, "-m", LAUNCHER, "-f", "{connection_file}"],
        "display_name": DISPLAY_NAME,
        "language": "python",
        "interrupt_mode": "signal",
        # Prompt cells are not Python source, so a debugger could not map breakpoints onto them.
        "metadata": {"debugger": False},
        "kernel_protocol_version": "5.5",
    }


def install(*, user: bool = False, prefix: str | os.PathLike[str] | None = None,
            executable: str | None = None) -> Path:
    """Installs the kernelspec and returns the folder it was installed into.

    Args:
        user: install for the current user (``~/.local/share/jupyter/kernels``).
        prefix: install under ``PREFIX/share/jupyter/kernels`` (``sys.prefix`` for ``--sys-prefix``).
        executable: the Python the kernel runs with (default: this one).

    Example:
        >>> install(prefix=sys.prefix)  # doctest: +SKIP
        PosixPath('.../share/jupyter/kernels/agent')
    """
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as source:
        spec_file = Path(source) / "kernel.json"
        spec_file.write_text(json.dumps(kernel_spec(executable), indent=2) + "\n", encoding="utf-8")
        where = KernelSpecManager().install_kernel_spec(
            source, KERNEL_NAME, user=user, prefix=None if prefix is None else os.fspath(prefix))
    return Path(where)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agent_kernel.jupyter.install",
        description=f"Install the {DISPLAY_NAME!r} Jupyter kernelspec (named {KERNEL_NAME!r}).")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true",
                       help="install for the current user (the default unless running as root)")
    where.add_argument("--sys-prefix", action="store_true",
                       help=f"install into this Python environment ({sys.prefix})")
    where.add_argument("--prefix", metavar="PATH",
                       help="install under PATH/share/jupyter/kernels")
    return parser


def _is_root() -> bool:
    geteuid = getattr(os, "geteuid", None)
    return geteuid is not None and geteuid() == 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (``python -m agent_kernel.jupyter.install``, ``agent-kernel-install``)."""
    args = _parser().parse_args(argv)
    prefix: str | None = sys.prefix if args.sys_prefix else args.prefix
    # Like ipykernel and bash_kernel: a plain user gets a per-user install by default.
    user = args.user or (prefix is None and not _is_root())
    try:
        where = install(user=user, prefix=prefix)
    except OSError as exc:
        print(f"Could not install the {KERNEL_NAME!r} kernelspec: {exc}. "
              "Try --user (your home folder) or --sys-prefix (this environment).", file=sys.stderr)
        return 1
    print(f"Installed the {DISPLAY_NAME!r} kernelspec ({KERNEL_NAME!r}) in {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
