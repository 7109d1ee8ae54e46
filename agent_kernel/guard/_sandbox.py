"""sandbox — an OS sandbox for shell commands (bubblewrap): what a command can write and reach.

``Agent(sandbox=True)`` (or ``%%agent --sandbox``) runs every ``bash`` call inside ``bwrap``:

- the working directory is writable; the rest of the file system is mounted read-only, and
  credential folders in the home directory (``~/.ssh``, ``~/.aws``, … see ``HIDDEN``) are
  replaced by empty ones;
- ``/tmp``, ``/proc`` and ``/dev`` are fresh and private to the command;
- no network at all (not even loopback) unless ``Sandbox(network=True)``;
- new PID, IPC, UTS and user namespaces, ``--die-with-parent`` and ``--new-session``: when the
  command ends or is stopped, every process it started dies with it.

Because the sandbox contains what a command can do, a shell call that no deny or ask rule names
runs without asking in sandbox mode (``Permissions.sandboxed``). Per-host network allow lists
are not supported: bubblewrap alone can only give a command the host's network or none.

When ``bwrap`` is missing or cannot create namespaces, ``check()`` raises ``SandboxUnavailable``
saying why and how to install it; a sandboxed command never falls back to running unsandboxed.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_kernel.errors import UserError

__all__ = ["HIDDEN", "INSTALL_HINT", "Sandbox", "SandboxUnavailable", "check", "sandbox_from"]

INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), "
    "and make sure user namespaces are enabled (sysctl kernel.unprivileged_userns_clone=1, or "
    "in a container run it with --security-opt seccomp=unconfined or as root)."
)

#: Paths under the home directory that a sandboxed command sees empty (credentials, tokens).
HIDDEN = (
    ".ssh", ".aws", ".gnupg", ".azure", ".kube", ".docker", ".config/gcloud", ".config/gh", ".netrc",
    ".git-credentials", ".pypirc", ".npmrc",
)


class SandboxUnavailable(UserError):
    """The OS sandbox cannot run here (no ``bwrap``, or no user namespaces)."""


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How ``bash`` commands are confined.

    Attributes:
        network: give commands the host's network (default: none, not even loopback).
        writable: more paths, besides the working directory, that commands may write.
        hidden: paths (relative ones are under the home directory) seen empty inside.

    Example:
        >>> Sandbox(network=False).network
        False
    """

    network: bool = False
    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = HIDDEN

    def wrap(self, argv: list[str], workdir: Path, *, bwrap: str = "bwrap") -> list[str]:
        """The ``bwrap`` command line that runs ``argv`` in ``workdir`` inside this sandbox."""
        work = Path(workdir).resolve()
        args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        if os.path.isdir("/var/tmp"):
            args += ["--tmpfs", "/var/tmp"]
        for extra in (str(work), *self.writable):
            bound = str(Path(extra).expanduser().resolve())
            args += ["--bind", bound, bound]
        # After the binds, so a working directory that holds a hidden path (the home folder) does
        # not mount it back into view.
        home = Path.home()
        for entry in self.hidden:
            path = (Path(entry) if os.path.isabs(entry) else home / entry).resolve()
            if not path.exists() or work == path or work.is_relative_to(path):
                continue
            # An empty folder over a folder, /dev/null over a file: the secret is not readable.
            args += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
        args += ["--unshare-all"]
        if self.network:
            args += ["--share-net"]
        args += ["--die-with-parent", "--new-session", "--chdir", str(work), "--setenv", "TMPDIR", "/tmp", "--", *argv]
        return args


def sandbox_from(spec: Any) -> Sandbox | None:
    """The ``Sandbox`` an ``Agent(sandbox=...)`` argument asks for (None: no sandbox).

    Args:
        spec: False/None (none), True (defaults), a ``Sandbox``, or a dict of its fields, e.g.
            ``{"network": True}``.

    Raises:
        UserError: anything else, or a per-host network list (not supported).
    """
    if spec is None or spec is False:
        return None
    if spec is True:
        return Sandbox()
    if isinstance(spec, Sandbox):
        return spec
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"network", "writable", "hidden"}
        if unknown:
            raise UserError(
                f"sandbox={dict(spec)!r}: unknown key(s) {', '.join(sorted(map(str, unknown)))}. "
                "Known: network (True/False), writable (paths), hidden (paths)."
            )
        network = spec.get("network", False)
        if not isinstance(network, bool):
            raise UserError(
                f"sandbox network={network!r} is not supported: the sandbox gives a command the host's network "
                "(network=True) or none (network=False); per-host allow lists are not available with bubblewrap."
            )
        return Sandbox(
            network=network,
            writable=tuple(str(p) for p in spec.get("writable", ())),
            hidden=tuple(str(p) for p in spec.get("hidden", HIDDEN)),
        )
    raise UserError(
        f"sandbox={spec!r} is not understood. Pass True, False, a Sandbox(...) or a dict like {{'network': True}}."
    )


@functools.lru_cache(maxsize=1)
def check() -> str:
    """The path of a working ``bwrap``; checked once per process by running ``true`` inside it.

    Raises:
        SandboxUnavailable: ``bwrap`` is missing or cannot create its namespaces (the message
            says which, with bubblewrap's own error, and how to fix it).
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(f"The command sandbox needs bubblewrap (bwrap), which is not installed. {INSTALL_HINT}")
    probe = Sandbox(hidden=()).wrap(["true"], Path("/"), bwrap=bwrap)
    try:
        done = subprocess.run(probe, check=False, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"bubblewrap ({bwrap}) could not be started: {exc}. {INSTALL_HINT}") from None
    if done.returncode != 0:
        why = done.stderr.strip() or f"exit code {done.returncode}"
        raise SandboxUnavailable(
            f"bubblewrap ({bwrap}) cannot create a sandbox here: {why}. User namespaces may be disabled. {INSTALL_HINT}"
        )
    return bwrap
