"""jupyter.kernel_main — starts the agent kernel: ``python -m agent_kernel.jupyter.kernel_main -f FILE``.

The kernelspec runs this module, not ``jupyter.kernel``, so the module defining ``AgentKernel``
is never also ``__main__`` (which would give two different ``AgentKernel`` classes).
"""

from __future__ import annotations

__all__ = ["main"]


def main() -> None:
    """Launches ``AgentKernel`` with ipykernel's application (reads ``-f CONNECTION_FILE``)."""
    from ipykernel.kernelapp import IPKernelApp

    from agent_kernel.jupyter._kernel import AgentKernel

    IPKernelApp.launch_instance(kernel_class=AgentKernel)


if __name__ == "__main__":
    main()
