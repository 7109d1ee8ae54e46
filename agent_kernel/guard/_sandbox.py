"""sandbox — an OS sandbox for shell commands (bubblewrap): what a command can write, reach and use.

``Agent(sandbox=True)`` (or ``%%agent --sandbox``) runs every ``bash`` call inside ``bwrap``:

- the working directory is writable; the rest of the file system is mounted read-only, and
  credential folders in the home directory (``~/.ssh``, ``~/.aws``, … see ``HIDDEN``) are
  replaced by empty ones;
- inside the working directory, what runs later *outside* the sandbox stays read-only: ``.git``
  (its config and hooks run on the person's next ``git status``), ``.agent_kernel`` (journals and
  memory), ``AGENTS.md`` (the next session obeys it) and ``Sandbox.protected`` (virtualenvs,
  ``.envrc``), and what runs later because of where it is (``runs_later``: Python environments
  under any name, the running Python's own, ``PATH`` folders). A missing one is held by an empty read-only folder for the call, so it cannot be
  created either; the placeholder is removed afterwards. The folders between a writable folder
  and a protected entry are made mount points, so they cannot be renamed to put another file in
  its place, and a protected symlink the command removes or re-points is put back afterwards;
- a writable folder that is, or holds, the home folder is refused: its startup files
  (``.bashrc``, ``.gitconfig``, ``.local/lib/.../*.pth``) run later outside;
- the host's runtime directories (``/run``, ``$XDG_RUNTIME_DIR``, any socket an environment
  variable names: the ssh and gpg agents, D-Bus, Docker) are replaced by empty ones, and a
  seccomp filter makes ``socket(AF_UNIX, …)`` fail (``_seccomp``): a read-only mount does not
  stop ``connect(2)`` on a socket, and abstract sockets live in no file system at all;
- the command starts from a clean environment: ``PATH``, ``HOME``, ``LANG``, ``LC_*``,
  ``TERM``, ``TZ`` and what ``Sandbox.env`` names; API keys and other secrets stay outside;
- ``/tmp``, ``/proc`` and ``/dev`` are fresh and private to the command;
- no network at all (not even loopback) unless ``Sandbox(network=True)``;
- new PID, IPC, UTS and user namespaces, ``--die-with-parent`` and ``--new-session``: when the
  command ends, is stopped or its supervisor dies, every process it started dies with it;
- limits on processes, memory and CPU time (``max_processes``, ``max_memory``,
  ``max_cpu_seconds``), so a fork bomb stays inside; every tmpfs has a size (``max_tmp`` for
  ``/tmp``, ``/var/tmp`` and ``/dev/shm``), since its files are memory ``max_memory`` does not
  count, and ``/dev`` is read-only. The process count is set inside the
  sandbox's user namespace, where the kernel counts only the sandbox's own processes; root is
  exempt from that limit, so for root the supervisor puts the command in a ``pids`` cgroup.

Because the sandbox contains what a command can do, a shell call that no deny or ask rule names
runs without asking in sandbox mode (``Permissions.sandboxed``). Per-host network allow lists
are not supported: bubblewrap alone can only give a command the host's network or none.

When ``bwrap`` is missing or cannot create namespaces, ``check()`` raises ``SandboxUnavailable``
saying why and how to install it; a sandboxed command never falls back to running unsandboxed.
When one protection cannot be had here (``PROTECTIONS``: no seccomp, no way to limit processes),
``Sandbox.missing()`` names it and the command is not run, unless the person accepts running
without it (``Sandbox(allow_weaker=("unix_sockets",))``).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import itertools
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_kernel.errors import UserError
from agent_kernel.guard._seccomp import SeccompUnavailable, unix_socket_filter
from agent_kernel.guard._signing import key_path

INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), "
    "and make sure user namespaces are enabled (sysctl kernel.unprivileged_userns_clone=1, or "
    "in a container run it with --security-opt seccomp=unconfined or as root)."
)

#: Paths under the home directory that a sandboxed command sees empty (credentials, tokens).
HIDDEN = (
    ".ssh", ".aws", ".gnupg", ".azure", ".kube", ".docker", ".config/gcloud", ".config/gh", ".netrc",
    ".git-credentials", ".pypirc", ".npmrc",
    # Jupyter's kernel connection files (each kernel's HMAC key) and servers' tokens: with them a
    # command could run code in a kernel or server outside the sandbox.
    ".local/share/jupyter/runtime",
)

#: Environment variables a sandboxed command sees (globs allowed); ``Sandbox.env`` adds to them.
ENV_ALLOWED = ("PATH", "HOME", "LANG", "LC_*", "TERM", "TZ")

#: Read-only in every writable folder whatever the settings: what runs or is read later outside
#: the sandbox.
ALWAYS_PROTECTED = (".git", ".agent_kernel", "AGENTS.md")

#: The default of ``Sandbox.protected``: more read-only entries of each writable folder.
PROTECTED = (".venv", ".envrc")

#: What a sandbox promises beyond bubblewrap's namespaces, each of which may be missing on a
#: machine: the names ``Sandbox.allow_weaker`` accepts.
PROTECTIONS = {
    "unix_sockets": "unix sockets outside the sandbox are unreachable (a seccomp filter)",
    "process_limit": "the number of processes is limited (a fork bomb stays inside)",
}

# The host's runtime folders: sockets of the session bus, the ssh and gpg agents, Docker, ...
_RUNTIME_DIRS = ("/run", "/var/run", "/var/lock")
# Absolute paths inside an environment variable's value (DOCKER_HOST=unix:///var/run/docker.sock,
# DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus,guid=…).
_PATH_IN_VALUE = re.compile(r"/[^\s:;,=]+")
_GiB = 1024**3
# The size of a tmpfs that only holds the name of something hidden (and the folders bubblewrap
# makes in it to mount a writable folder back): it stays next to empty.
_EMPTY = ("--size", str(1024 * 1024))
# Numbers the cgroups of this process's commands apart.
_launches = itertools.count(1)


class SandboxUnavailable(UserError):
    """The OS sandbox cannot run here (no ``bwrap``, no user namespaces, or a protection missing)."""


@dataclass
class Launch:
    """One sandboxed command, ready to start: what to run, with what, and what to clean up after.

    Attributes:
        argv: the ``bwrap`` command line.
        env: the clean environment to start it with.
        pass_fds: descriptors the command must inherit (the seccomp program).
        supervisor_options: options for the supervisor (``_reaper``): resource limits and the
            cgroup to hold the command.
        placeholders: mount points made for protected entries that did not exist.
        links: symlinks on the way to protected entries, with their targets: a read-only bind
            lands on a link's target, and the link itself stays in the writable folder, so it is
            put back after the command if the command changed it (``restore_links``).
        restored: what ``restore_links`` found and put back: (link, where the command's
            replacement was moved, or None when there was nothing there).
    """

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    supervisor_options: list[str] = field(default_factory=list)
    placeholders: list[Path] = field(default_factory=list)
    cgroup: Path | None = None
    links: list[tuple[Path, str]] = field(default_factory=list)
    restored: list[tuple[Path, Path | None]] = field(default_factory=list)

    def restore_links(self) -> list[tuple[Path, Path | None]]:
        """Puts back every protected symlink the command removed or re-pointed; what the command
        left in its place is moved aside (never deleted). Called once the command and everything
        it started have ended, so nothing inside can race it. Returns what it put back."""
        done: list[tuple[Path, Path | None]] = []
        for link, target in self.links:
            try:
                if link.is_symlink() and os.readlink(link) == target:
                    continue
                aside: Path | None = None
                if os.path.lexists(link):
                    aside = _free_name(link)
                    os.rename(link, aside)
                os.symlink(target, link)
            except OSError:
                continue
            done.append((link, aside))
        self.links = []
        self.restored += done
        return done

    def close(self) -> None:
        """Puts back protected symlinks, closes the descriptors, removes placeholders the command
        left as they were made, and the cgroup (the supervisor removes it too, unless it was killed)."""
        self.restore_links()
        if self.cgroup is not None:
            _remove_cgroup(self.cgroup)
        for fd in self.pass_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        for path in self.placeholders:
            try:
                path.rmdir()  # only an empty folder: a placeholder is read-only, never written
            except OSError:
                pass


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How ``bash`` commands are confined.

    Attributes:
        network: give commands the host's network (default: none, not even loopback).
        writable: more paths, besides the working directory, that commands may write.
        hidden: paths (relative ones are under the home directory) seen empty inside.
        env: more environment variables (names or globs like ``"PIP_*"``) passed in, besides
            ``ENV_ALLOWED``; every other variable, API keys included, stays outside.
        protected: entries of each writable folder kept read-only, besides ``ALWAYS_PROTECTED``
            (paths relative to the folder).
        max_processes: processes and threads the command may have at once (None: no limit).
        max_memory: bytes of address space per process (None: no limit).
        max_cpu_seconds: seconds of CPU time per process (None: no limit).
        max_tmp: bytes each of the sandbox's private ``/tmp``, ``/var/tmp`` and ``/dev/shm`` may
            hold (None: no limit but the host's, half its memory). Their files are memory that
            ``max_memory`` does not count.
        allow_weaker: names from ``PROTECTIONS`` the person accepts running without, where this
            machine cannot provide them; by default a missing protection stops the command.

    Example:
        >>> Sandbox(network=False, env=("PIP_INDEX_URL",)).network
        False
    """

    network: bool = False
    writable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = HIDDEN
    env: tuple[str, ...] = ()
    protected: tuple[str, ...] = PROTECTED
    max_processes: int | None = 512
    max_memory: int | None = 8 * _GiB
    max_cpu_seconds: int | None = 600
    max_tmp: int | None = 2 * _GiB
    allow_weaker: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("writable", "hidden", "env", "protected", "allow_weaker"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(item, str) for item in value):
                raise UserError(f"Sandbox({name}={value!r}): give a tuple of strings, e.g. {name}=({value!r},).")
            object.__setattr__(self, name, tuple(value))
        unknown = [name for name in self.allow_weaker if name not in PROTECTIONS]
        if unknown:
            raise UserError(f"Sandbox(allow_weaker={self.allow_weaker!r}): unknown protection {unknown[0]!r}. "
                            f"Known: {', '.join(PROTECTIONS)}.")
        for name in ("max_processes", "max_memory", "max_cpu_seconds", "max_tmp"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise UserError(f"Sandbox({name}={value!r}): give a positive whole number, or None for no limit.")
        for entry in self.protected:
            if not entry.strip("/") or os.path.isabs(entry) or ".." in Path(entry).parts:
                raise UserError(f"Sandbox(protected=...): {entry!r} is not a path inside the working directory; "
                                "give relative names like '.venv/' or '.envrc'.")

    def _tmpfs_size(self) -> list[str]:
        return [] if self.max_tmp is None else ["--size", str(self.max_tmp)]

    def settings(self) -> dict[str, Any]:
        """This sandbox as JSON values (for a journal's header); ``sandbox_from`` rebuilds it."""
        return {f.name: list(value) if isinstance(value, tuple) else value
                for f in dataclasses.fields(self) for value in [getattr(self, f.name)]}

    # -- what the command sees -------------------------------------------------------------------

    def environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The variables of ``environ`` a sandboxed command may see (``ENV_ALLOWED`` and ``env``)."""
        patterns = (*ENV_ALLOWED, *self.env)
        kept = {name: value for name, value in environ.items() if any(fnmatch.fnmatchcase(name, p) for p in patterns)}
        kept["TMPDIR"] = "/tmp"  # the sandbox's own /tmp
        return kept

    def masked_paths(self, environ: Mapping[str, str]) -> list[Path]:
        """Host paths replaced by empty ones inside: runtime folders and sockets ``environ`` names."""
        found: list[Path] = []
        candidates: list[str] = [*_RUNTIME_DIRS, "/tmp/.X11-unix"]
        for name in ("XDG_RUNTIME_DIR", "GNUPGHOME", "JUPYTER_RUNTIME_DIR"):
            if environ.get(name):
                candidates.append(environ[name])
        for name, below in (("JUPYTER_DATA_DIR", "runtime"), ("XDG_DATA_HOME", "jupyter/runtime")):
            if environ.get(name):
                candidates.append(os.path.join(environ[name], below))
        for value in environ.values():
            for path in _PATH_IN_VALUE.findall(value):
                try:
                    if stat.S_ISSOCK(os.stat(path).st_mode):
                        candidates.append(path)  # a socket named in the environment, wherever it is
                except (OSError, ValueError):
                    continue
        for candidate in candidates:
            path = Path(os.path.realpath(candidate))
            if path.exists() and path != Path("/") and path not in found:
                found.append(path)
        # A path inside another masked folder is out of sight already.
        return [p for p in found if not any(p != q and p.is_relative_to(q) and q.is_dir() for q in found)]

    def protected_paths(self, root: Path, environ: Mapping[str, str] | None = None) -> list[Path]:
        """The entries of the writable folder ``root`` kept read-only: the named ones, and those
        that run later outside because of where they are (``runs_later``).

        Raises:
            SandboxUnavailable: ``root`` itself is such a place (see ``runs_later``).
        """
        named = [root / entry.strip("/") for entry in (*ALWAYS_PROTECTED, *self.protected)]
        return [*named, *(p for p in runs_later(root, os.environ if environ is None else environ) if p not in named)]

    def wrap(
        self,
        argv: list[str],
        workdir: Path,
        *,
        bwrap: str = "bwrap",
        environ: Mapping[str, str] | None = None,
        seccomp_fd: int | None = None,
        placeholders: list[Path] | None = None,
        keep: Iterable[Path] = (),
        links: list[tuple[Path, str]] | None = None,
    ) -> list[str]:
        """The ``bwrap`` command line that runs ``argv`` in ``workdir`` inside this sandbox.

        Args:
            environ: the host environment the runtime sockets are read from (default: this process's).
            seccomp_fd: an inherited descriptor holding the unix-socket filter, if one is loaded.
            placeholders: filled with the mount points made for protected entries that did not exist.
            keep: more files kept read-only, wherever they are (the run's journal).
            links: filled with the symlinks on the way to protected entries (see ``Launch.links``).

        Raises:
            SandboxUnavailable: a writable folder is, or holds, the home folder, whose startup
                files (``.bashrc``, ``.gitconfig``, ``.local/lib/.../*.pth``) run later outside.
        """
        environ = os.environ if environ is None else environ
        work = Path(workdir).resolve()
        roots = [work, *(Path(p).expanduser().resolve() for p in self.writable)]
        home = Path.home().resolve()
        for root in roots:
            if home.is_relative_to(root) and home != Path("/"):
                raise SandboxUnavailable(
                    f"the writable folder {root} is (or holds) the home folder {home}, where shell, git and Python "
                    "startup files (.bashrc, .gitconfig, .local/...) run later outside the sandbox. Run the agent in "
                    "a project folder (working_dir=...), not in the home folder."
                )
        # Every tmpfs has a size: its files are the host's memory, which RLIMIT_AS does not count.
        sized = self._tmpfs_size()
        args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", *sized, "--tmpfs", "/dev/shm", "--proc", "/proc",
                *sized, "--tmpfs", "/tmp"]
        if os.path.isdir("/var/tmp"):
            args += [*sized, "--tmpfs", "/var/tmp"]
        # /tmp and /var/tmp are private already: a socket there is out of sight unless a writable
        # folder brings it back.
        private = (Path("/tmp"), Path("/var/tmp"))
        # The Python running the agent stays runnable (read-only) when it lives under one of them,
        # as a virtualenv in a temporary checkout does: commands name it (sys.executable).
        args += [arg for prefix in _interpreter_prefixes() if any(prefix.is_relative_to(p) for p in private)
                 for arg in ("--ro-bind", str(prefix), str(prefix))]
        masks = [m for m in self.masked_paths(environ)
                 if not any(m.is_relative_to(p) for p in private) or any(m.is_relative_to(r) for r in roots)]
        # A runtime folder that holds a writable folder is emptied first, so the bind below brings
        # that one folder back; every other mask comes after the binds, so that a writable folder
        # cannot mount a masked socket back into view.
        before = [m for m in masks if any(r == m or r.is_relative_to(m) for r in roots)]
        args += _mask_args(before)
        for root in roots:
            args += ["--bind", str(root), str(root)]
        kept = [Path(p) for p in keep]
        protected = {root: self.protected_paths(root, environ) for root in roots}
        guarded = [*(p for root in roots for p in protected[root]), *kept]
        # The key that signs journal headers, always: with it a command could forge a session.
        hidden = [path for entry in (*self.hidden, str(key_path().parent))
                  for path in [(Path(entry) if os.path.isabs(entry) else home / entry).resolve()]
                  if path.exists() and work != path and not work.is_relative_to(path)]
        # A read-only bind stops writes to the entry, not the rename of a folder above it (``mv logs
        # logs.old; mkdir logs``, then a file of the command's own where the entry was): each
        # folder between a writable root and a guarded entry is bound onto itself, which makes it
        # a mount point, and a mount point cannot be renamed or removed.
        args += _pin_args([*guarded, *hidden], roots)  # a hidden key's folder, swapped, would be a key of the command's
        for path in guarded:
            if links is not None:
                links += _links_on_the_way(path, roots)
        key_folder = key_path().parent.resolve()
        for root in roots:
            # A key folder not made yet, inside a writable folder: held, or a command could make a
            # key of its own there before this install makes the real one.
            missing_key = [key_folder] if not key_folder.exists() and key_folder.is_relative_to(root) else []
            args += _protect_args([*protected[root], *missing_key], root, roots, placeholders)
        for path in kept:
            path = path.resolve()
            if path.exists() and any(path.is_relative_to(r) for r in roots):
                args += ["--ro-bind", str(path), str(path)]
        # Masks and hidden paths last: every bind takes its source from the host, so one made
        # after them over a folder holding them would bring them back into view.
        args += _mask_args([m for m in masks if m not in before])
        resolv = Path(os.path.realpath("/etc/resolv.conf"))
        if self.network and resolv.is_file() and any(resolv.is_relative_to(m) for m in masks):
            args += ["--ro-bind", str(resolv), str(resolv)]  # a resolver file kept under /run
        for path in hidden:
            # An empty folder over a folder, /dev/null over a file: the secret is not readable.
            args += [*_EMPTY, "--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
        # No capabilities, even for root: with CAP_SYS_ADMIN in the sandbox's user namespace a
        # command could unmount the read-only binds above (``umount .git``) and write beneath them.
        # /dev is bubblewrap's own tmpfs, which takes no size: read-only, so only /dev/shm (sized
        # above) holds files.
        args += ["--remount-ro", "/dev", "--unshare-all", "--cap-drop", "ALL"]
        if self.network:
            args += ["--share-net"]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        args += ["--die-with-parent", "--new-session", "--chdir", str(work), "--setenv", "TMPDIR", "/tmp", "--"]
        if self.max_processes is not None:
            # Set inside the sandbox's user namespace, where the kernel counts the sandbox's own
            # processes; set before bwrap it would count every process of the user on the host.
            limit = _within_hard_limit(resource.RLIMIT_NPROC, self.max_processes)
            args += [shutil.which("bash") or "/bin/bash", "-c", 'ulimit -u "$1" || exit 126; shift; exec "$@"', "sandbox", str(limit)]
        return [*args, *argv]

    # -- what this machine can provide -----------------------------------------------------------

    def missing(self) -> dict[str, str]:
        """The protections of ``PROTECTIONS`` this machine cannot provide, each with the reason."""
        missing = {}
        why = _seccomp_problem(check())
        if why is not None:
            missing["unix_sockets"] = why
        if self.max_processes is not None and os.geteuid() == 0 and _pids_cgroup_parent() is None:
            missing["process_limit"] = (
                "the kernel does not apply the process limit (RLIMIT_NPROC) to root, and no pids cgroup "
                "can be made here (none writable under /sys/fs/cgroup)"
            )
        return missing

    def verify(self) -> None:
        """Checks that this machine provides every protection not in ``allow_weaker``.

        Raises:
            SandboxUnavailable: naming each missing protection, why it is missing, and the opt-in.
        """
        lacking = {name: why for name, why in self.missing().items() if name not in self.allow_weaker}
        if lacking:
            what = "; ".join(f"{PROTECTIONS[name]}: not here, because {why}" for name, why in lacking.items())
            names = ", ".join(repr(name) for name in lacking)
            raise SandboxUnavailable(
                f"The sandbox cannot give every protection it promises. {what}. Commands are not run with "
                f"less; to accept that, pass Sandbox(allow_weaker=({names},)) (in a dict: {{'allow_weaker': [{names}]}})."
            )

    def launch(
        self, argv: list[str], workdir: Path, *, bwrap: str, environ: Mapping[str, str] | None = None, keep: Iterable[Path] = ()
    ) -> Launch:
        """Everything needed to run ``argv`` sandboxed: see ``Launch``; ``close()`` it afterwards.
        ``keep`` names more files kept read-only (the run's journal, wherever it is).

        Raises:
            SandboxUnavailable: a protection not allowed to be weaker is missing (see ``verify``).
        """
        self.verify()
        environ = os.environ if environ is None else environ
        fds: list[int] = []
        if "unix_sockets" not in self.missing():
            fds.append(_program_fd())
        placeholders: list[Path] = []
        links: list[tuple[Path, str]] = []
        launch = Launch([], self.environment(environ), tuple(fds), placeholders=placeholders, links=links)
        try:
            launch.argv = self.wrap(argv, workdir, bwrap=bwrap, environ=environ, seccomp_fd=fds[0] if fds else None,
                                    placeholders=placeholders, keep=keep, links=links)
        except BaseException:
            launch.close()
            raise
        if self.max_memory is not None:
            launch.supervisor_options += ["--rlimit-as", str(self.max_memory)]
        if self.max_cpu_seconds is not None:
            launch.supervisor_options += ["--rlimit-cpu", str(self.max_cpu_seconds)]
        if self.max_processes is not None and os.geteuid() == 0:
            parent = _pids_cgroup_parent()
            if parent is not None:
                launch.cgroup = parent / f"agent_kernel-{os.getpid()}-{next(_launches)}"
                launch.supervisor_options += ["--pids-cgroup", str(launch.cgroup), "--pids-max", str(self.max_processes)]
        return launch


def runs_later(root: Path, environ: Mapping[str, str]) -> list[Path]:
    """Folders in ``root`` whose programs run later outside the sandbox, whatever their names:
    Python environments (a folder, or one folder deeper, holding ``pyvenv.cfg`` or ``conda-meta``:
    ``venv``, ``env``, ``.tox/py311``; a ``.pth`` file in one runs at every start of its Python),
    the environment and site folders of the Python running the agent, and the folders of
    ``PATH`` (a program there runs when anyone outside types its name; a relative entry is read
    from ``root``).

    Raises:
        SandboxUnavailable: ``root`` itself is one of them (``PATH`` holds ``.`` or the working
            directory): no part of it could be written safely.
    """
    import site
    import sys

    found: list[Path] = []
    for folder in _folders(root, depth=2):
        if (folder / "pyvenv.cfg").is_file() or (folder / "conda-meta").is_dir():
            found.append(folder)
    places = [("the Python running the agent", p) for p in (sys.prefix, sys.exec_prefix, os.path.dirname(sys.executable))]
    try:
        places += [("the Python running the agent", p) for p in (*site.getsitepackages(), site.getusersitepackages())]
    except AttributeError:  # pragma: no cover  # an embedded Python without site's helpers
        pass
    places += [("PATH", entry or ".") for entry in environ.get("PATH", "").split(os.pathsep)]  # "" is the current folder
    for what, place in places:
        path = Path(os.path.realpath(os.path.join(root, place)))  # a relative entry is read from root
        if path == root:
            raise SandboxUnavailable(
                f"{what} is the writable folder {root} ({place!r}), so a program written there would run later "
                "outside the sandbox. " + ("Remove that entry from PATH" if what == "PATH" else
                                           "Use a Python environment outside it") + ", or run the agent in another folder."
            )
        if path.is_relative_to(root) and path not in found:
            found.append(path)
    return found


def _folders(root: Path, depth: int, *, wide: int = 64) -> list[Path]:
    """The folders in ``root`` down to ``depth`` levels (links not followed; unreadable ones
    skipped). Below the top, only folders with at most ``wide`` subfolders are entered: an
    environment sits in a small folder (``.tox``, ``envs``), and this runs before every command."""
    found: list[Path] = []
    level = [root]
    for step in range(depth):
        below: list[Path] = []
        for folder in level:
            try:
                with os.scandir(folder) as entries:
                    inside = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            if step == 0 or len(inside) <= wide:
                below += inside
        found += below
        level = below
    return found


def _remove_cgroup(folder: Path) -> None:
    """Removes an emptied cgroup; its last tasks may take a moment to go after a SIGKILL."""
    for _ in range(200):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            try:
                if not folder.joinpath("cgroup.procs").read_text().strip():
                    continue  # empty now: try again at once
            except OSError:
                return
            time.sleep(0.005)


def _free_name(path: Path) -> Path:
    """A name beside ``path`` that nothing uses yet: ``NAME.sandbox-1``, ``NAME.sandbox-2``, ..."""
    for n in itertools.count(1):
        candidate = path.with_name(f"{path.name}.sandbox-{n}")
        if not os.path.lexists(candidate):
            return candidate
    raise AssertionError("unreachable")  # pragma: no cover


def _within(path: Path, roots: list[Path]) -> Path | None:
    return next((r for r in roots if path != r and path.is_relative_to(r)), None)


def _pin_args(paths: Iterable[Path], roots: list[Path]) -> list[str]:
    """Binds onto itself every existing folder between a writable root and each of ``paths``
    (where the read-only bind really lands: links followed), so none of them can be renamed."""
    pinned: set[Path] = set()
    for path in paths:
        for where in {Path(os.path.realpath(path)), Path(os.path.abspath(path))}:
            root = _within(where, roots)
            if root is None:
                continue
            folder = where.parent
            while folder != root and folder.is_relative_to(root):
                real = Path(os.path.realpath(folder))
                if real.is_dir() and _within(real, roots) is not None:
                    pinned.add(real)
                folder = folder.parent
    # Outer folders first: a bind over an outer folder must not hide the binds below it.
    ordered: list[str] = []
    for real in sorted(pinned, key=lambda p: len(p.parts)):
        ordered += ["--bind", str(real), str(real)]
    return ordered


def _links_on_the_way(path: Path, roots: list[Path]) -> list[tuple[Path, str]]:
    """The symlinks, inside the writable ``roots``, among ``path`` and the folders above it."""
    found: list[tuple[Path, str]] = []
    current = Path(os.path.abspath(path))
    while _within(current, roots) is not None:
        if current.is_symlink():
            try:
                found.append((current, os.readlink(current)))
            except OSError:
                pass
        current = current.parent
    return found[::-1]  # outermost first: a link below is put back through its restored parents


def _interpreter_prefixes() -> list[Path]:
    """The folders of the Python running the agent: its environment and the installation under it."""
    import sys

    folders = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    return sorted({Path(os.path.realpath(f)) for f in folders if f and os.path.isdir(f)})


def _mask_args(paths: Iterable[Path]) -> list[str]:
    args: list[str] = []
    for path in paths:
        args += [*_EMPTY, "--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    return args


def _protect_args(paths: list[Path], root: Path, roots: list[Path], placeholders: list[Path] | None) -> list[str]:
    """Read-only binds over the protected entries of ``root``; placeholders for missing ones that
    a command could create (inside one of the writable ``roots``)."""
    args: list[str] = []
    for path in paths:
        if root == path or root.is_relative_to(path):
            continue  # the working directory is itself inside a protected folder: the person chose it
        # A symlink is followed (bubblewrap mounts on its target): protect what it points at, so a
        # dangling one cannot be completed by creating its target either.
        target = path.resolve() if path.is_symlink() else path
        if target.exists():
            args += ["--ro-bind", str(target), str(target)]
            continue
        missing = target
        while not missing.parent.exists():
            missing = missing.parent  # the first missing folder on the way: holding it holds the rest
        if missing.parent.is_dir() and any(missing.is_relative_to(r) for r in roots):
            # Missing: an empty read-only folder holds the name, so the command cannot create it
            # either (a folder, even for a file's name: git does not list an empty folder).
            if placeholders is not None:
                placeholders.append(missing)
            args += [*_EMPTY, "--tmpfs", str(missing), "--remount-ro", str(missing)]
    return args


def _within_hard_limit(which: int, wanted: int) -> int:
    _soft, hard = resource.getrlimit(which)
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


def _program_fd() -> int:
    """A fresh descriptor holding the unix-socket filter, at offset 0, for ``bwrap --seccomp``."""
    fd = os.memfd_create("agent_kernel_seccomp")  # close-on-exec: only a command given it in pass_fds inherits it
    try:
        os.write(fd, unix_socket_filter())
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


@functools.lru_cache(maxsize=1)
def _seccomp_problem(bwrap: str) -> str | None:
    """Why ``bwrap`` cannot load the unix-socket filter here (None: it can; checked once)."""
    try:
        unix_socket_filter()
    except SeccompUnavailable as exc:
        return str(exc)
    if not hasattr(os, "memfd_create"):
        return "this system has no memfd_create to hand the filter to bubblewrap"
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return "/proc/self/status cannot be read to see whether the kernel supports seccomp"
    if "Seccomp:" not in status:
        return "the kernel was built without seccomp filters (no 'Seccomp:' in /proc/self/status)"
    fd = _program_fd()
    try:
        done = subprocess.run([bwrap, "--ro-bind", "/", "/", "--unshare-all", "--seccomp", str(fd), "--", "true"],
                              check=False, capture_output=True, text=True, timeout=30, pass_fds=(fd,), stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not be started to load it ({exc})"
    finally:
        os.close(fd)
    if done.returncode != 0:
        return f"bubblewrap could not load it: {done.stderr.strip() or f'exit code {done.returncode}'}"
    return None


@functools.lru_cache(maxsize=1)
def _pids_cgroup_parent() -> Path | None:
    """A cgroup folder (v1 ``pids`` hierarchy or v2 with the pids controller) this process may
    make children in, to hold a command under ``pids.max``; None when there is none."""
    try:
        membership = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    candidates: list[Path] = []
    for line in mounts:
        fields = line.split()
        if " - " not in line:
            continue
        mountpoint = fields[4]
        fstype, _source, options = line.split(" - ", 1)[1].split()[:3]
        for entry in membership:
            number, controllers, path = entry.split(":", 2)
            if fstype == "cgroup" and "pids" in options.split(",") and "pids" in controllers.split(","):
                candidates.append(Path(mountpoint) / path.lstrip("/"))
            elif fstype == "cgroup2" and number == "0" and controllers == "":
                folder = Path(mountpoint) / path.lstrip("/")
                try:
                    if "pids" in (folder / "cgroup.subtree_control").read_text().split():
                        candidates.append(folder)
                except OSError:
                    pass
    for folder in candidates:
        probe = folder / f"agent_kernel-probe-{os.getpid()}"
        try:
            probe.mkdir()
            ok = (probe / "pids.max").exists()
            probe.rmdir()
        except OSError:
            continue
        if ok:
            return folder
    return None


def restored_note(restored: list[tuple[Path, Path | None]]) -> str | None:
    """A line saying which protected symlinks a command changed and were put back, or None."""
    if not restored:
        return None
    parts = [f"{link.name} (what the command put there is now {aside.name})" if aside is not None else link.name
             for link, aside in restored]
    return (f"[sandbox: the command removed or re-pointed {', '.join(parts)}, kept read-only because what is there runs "
            "or is read later outside the sandbox; the link was put back as it was.]")


def protected_note(output: str, sandbox: Sandbox, workdir: Path) -> str | None:
    """A line explaining a failed write to a protected entry, when ``output`` shows one."""
    refusals = ("Read-only file system", "Permission denied", "Device or resource busy", "Is a directory")
    refused = "\n".join(line for line in output.splitlines() if any(refusal in line for refusal in refusals))
    names = [entry.strip("/") for entry in (*ALWAYS_PROTECTED, *sandbox.protected)]
    hit = [name for name in names if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", refused)]
    if not hit:
        return None
    fixed = [name for name in hit if name in ALWAYS_PROTECTED]
    if len(fixed) == len(hit):
        how = "the sandbox always keeps these; make that change yourself, outside the agent"
    else:
        how = "to let commands change them, leave them out of Sandbox(protected=...)"
        how += f" ({', '.join(fixed)} always stay read-only)" if fixed else ""
    return (f"[sandbox: {', '.join(hit)} in {workdir} {'is' if len(hit) == 1 else 'are'} read-only inside the sandbox, "
            f"because what is written there runs or is read later outside it; {how}.]")


def limit_note(output: str, exit_code: int, sandbox: Sandbox) -> str | None:
    """A line saying which of the sandbox's limits a command reached, when it shows one."""
    if exit_code == 128 + signal.SIGXCPU and sandbox.max_cpu_seconds is not None:
        return f"[sandbox: a process used up its CPU time (Sandbox(max_cpu_seconds={sandbox.max_cpu_seconds})) and was stopped.]"
    if sandbox.max_processes is not None and re.search(r"fork|Cannot fork", output) and "Resource temporarily unavailable" in output:
        return f"[sandbox: the command reached the process limit (Sandbox(max_processes={sandbox.max_processes})).]"
    return None


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
        known = ("network", "writable", "hidden", "env", "protected", "max_processes", "max_memory", "max_cpu_seconds", "max_tmp",
                 "allow_weaker")
        unknown = set(spec) - set(known)
        if unknown:
            raise UserError(
                f"sandbox={dict(spec)!r}: unknown key(s) {', '.join(sorted(map(str, unknown)))}. "
                f"Known: {', '.join(known)}."
            )
        network = spec.get("network", False)
        if not isinstance(network, bool):
            raise UserError(
                f"sandbox network={network!r} is not supported: the sandbox gives a command the host's network "
                "(network=True) or none (network=False); per-host allow lists are not available with bubblewrap."
            )
        fields: dict[str, Any] = {"network": network}
        for name in ("writable", "hidden", "env", "protected", "allow_weaker"):
            if name in spec:
                value = spec[name]
                fields[name] = (value,) if isinstance(value, str) else tuple(str(p) for p in value)
        for name in ("max_processes", "max_memory", "max_cpu_seconds", "max_tmp"):
            if name in spec:
                fields[name] = spec[name]
        return Sandbox(**fields)
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
    probe = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent", "--", "true"]
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
