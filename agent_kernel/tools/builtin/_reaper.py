"""tools.builtin.reaper — runs one command as a child subreaper and stops every process it started.

The ``bash`` tool runs ``python -I -S reaper.py ARGV...`` on Linux. This small supervisor marks
itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so every process the command
starts stays its descendant even after double-forking or ``setsid``: an orphan is re-parented to
the supervisor, not to init. It then runs ARGV and exits with its status, but only after stopping
everything ARGV left behind (SIGTERM, a grace period, then SIGKILL until none is left). On SIGTERM,
SIGINT or SIGHUP (the run was cancelled or timed out), or when its parent dies, it does the same
at once. A process group or a session alone cannot do this: ``setsid`` leaves both.

With the sandbox it also applies the limits it is given before running ARGV, so they hold for
everything ARGV starts: ``--rlimit-as BYTES`` and ``--rlimit-cpu SECONDS`` (``setrlimit`` in the
child, before ``exec``), and ``--pids-cgroup DIR --pids-max N``: a new cgroup DIR whose
``pids.max`` is N, which the child joins before ``exec`` (the kernel does not apply
``RLIMIT_NPROC`` to root). A limit that cannot be set stops the command before it starts (exit
126 and a line saying which), never running it with less. The cgroup is removed at the end.

If the supervisor itself is killed (SIGKILL cannot be caught), a sandboxed command dies with it:
bubblewrap's ``--die-with-parent`` kills the sandbox's PID namespace, and every process in it.

It is run as a script, never imported, so it starts in a few milliseconds with nothing but the
standard library; ``-I -S`` keeps the user's environment and site packages out of it. For the
same reason it uses the C modules behind ``signal`` and ``ctypes`` (``_signal``, ``_ctypes``),
which load in a fraction of the time, falling back to ``ctypes`` where ``_ctypes`` differs.
"""

from __future__ import annotations

import _signal as signal  # type: ignore[import-not-found]  # the C module behind signal
import os
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 1.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Stop(Exception):
    pass


# Only while waiting for the command may a signal interrupt: during clean-up it is just noted.
_waiting = [False]


def _on_signal(signum: int, frame: object) -> None:
    if _waiting[0]:
        _waiting[0] = False
        raise _Stop


def _descendants(root: int) -> tuple[list[int], bool]:
    """Every descendant of ``root`` (found through /proc), and whether any of them is not a zombie."""
    children: dict[int, list[int]] = {}
    zombies: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[1].split()
        pid = int(entry)
        children.setdefault(int(fields[1]), []).append(pid)
        if fields[0] in (b"Z", b"X"):
            zombies.add(pid)
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found, any(pid not in zombies for pid in found)


def _reap() -> None:
    """Collects every child that has exited, without blocking."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stop_everything() -> None:
    """SIGTERM every descendant, wait a grace period, then SIGKILL until none is left."""
    me = os.getpid()
    pids, live = _descendants(me)
    if live:
        _signal_all(pids, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline:
            _reap()
            pids, live = _descendants(me)
            if not live:
                break
            time.sleep(0.01)
    while True:
        _reap()
        pids, live = _descendants(me)
        if not pids:
            return
        _signal_all(pids, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)  # wakes when a child (or a re-parented orphan) has died
        except ChildProcessError:
            time.sleep(0.001)  # the rest are grandchildren whose parent is being killed


def _prctl(option: int, value: int) -> int:
    """Calls ``prctl(option, value, 0, 0, 0)`` in libc; returns its result (0 on success)."""
    try:
        import _ctypes

        function = _ctypes.dlsym(_ctypes.dlopen(None), "prctl")  # type: ignore[arg-type]  # None: this process
        return int(_ctypes.call_function(function, (option, value, 0, 0, 0)))
    except (ImportError, AttributeError, OSError, TypeError):
        import ctypes

        return int(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0))


_OPTIONS = ("--rlimit-as", "--rlimit-cpu", "--pids-cgroup", "--pids-max")


def _parse(args: list[str]) -> tuple[dict[str, str], list[str]]:
    """The options before ``--`` (when the first word is one of ``_OPTIONS``) and the command."""
    options: dict[str, str] = {}
    if not args or args[0] not in (*_OPTIONS, "--"):
        return options, args
    while args and args[0] != "--":
        if args[0] not in _OPTIONS or len(args) < 2:
            raise ValueError(f"unknown option or missing value: {args[0]}")
        options[args[0]] = args[1]
        args = args[2:]
    return options, args[1:]


def _make_cgroup(folder: str, pids_max: str) -> str:
    """The new cgroup ``folder``, allowing ``pids_max`` tasks; returns it."""
    os.mkdir(folder)
    try:
        with open(os.path.join(folder, "pids.max"), "w") as f:
            f.write(pids_max)
    except OSError:
        os.rmdir(folder)
        raise
    return folder


def _remove_cgroup(folder: str) -> None:
    """Removes the cgroup once its last task is gone (an exiting task may linger a moment)."""
    for _ in range(1000):
        try:
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.001)


def _limit_child(options: dict[str, str], cgroup: str | None) -> None:
    """In the child, before ``exec``: the resource limits, then the cgroup. Raises OSError."""
    if cgroup is not None:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    for option, which in (("--rlimit-as", "RLIMIT_AS"), ("--rlimit-cpu", "RLIMIT_CPU")):
        if option in options:
            import resource  # only when a limit is asked for: the supervisor starts in milliseconds

            value = int(options[option])
            limit = getattr(resource, which)
            _soft, hard = resource.getrlimit(limit)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            # For CPU time the hard limit is one second later: SIGXCPU at the soft one says why the
            # command stopped (the shell prints "CPU time limit exceeded"), SIGKILL follows.
            hard_value = value + 1 if option == "--rlimit-cpu" and (hard == resource.RLIM_INFINITY or value < hard) else value
            resource.setrlimit(limit, (value, hard_value))


def main(argv: list[str]) -> int:
    """Runs ``argv`` and stops whatever it leaves; returns its exit status (128+N for signal N)."""
    try:
        options, argv = _parse(argv)
    except ValueError as exc:
        print(f"reaper: {exc}", file=sys.stderr)
        return 2
    if not argv:
        print("reaper: no command given", file=sys.stderr)
        return 2
    cgroup = None
    if "--pids-cgroup" in options:
        try:
            cgroup = _make_cgroup(options["--pids-cgroup"], options.get("--pids-max", "max"))
        except OSError as exc:
            print(f"sandbox: not run: the process limit cannot be set (cgroup {options['--pids-cgroup']}: {exc})", file=sys.stderr)
            return 126
    try:
        return _supervise(argv, options, cgroup)
    finally:
        if cgroup is not None:
            _remove_cgroup(cgroup)


def _supervise(argv: list[str], options: dict[str, str], cgroup: str | None) -> int:
    parent = os.getppid()
    if _prctl(PR_SET_CHILD_SUBREAPER, 1) != 0:
        print("reaper: prctl(PR_SET_CHILD_SUBREAPER) failed", file=sys.stderr)
        return 126
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    # Signals stay blocked until the handlers are in place, so a cancel can never be lost.
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _on_signal)
    if os.getppid() != parent:  # the parent died before PDEATHSIG was armed
        return 143
    supervisor = os.getpid()
    child = os.fork()
    if child == 0:
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        # The command dies with the supervisor, even when the supervisor is killed outright.
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != supervisor:  # it died before the signal was armed
            os._exit(137)
        try:
            _limit_child(options, cgroup)
        except (OSError, ValueError) as exc:
            print(f"sandbox: not run: a resource limit cannot be set ({exc})", file=sys.stderr)
            os._exit(126)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            print(f"reaper: cannot run {argv[0]}: {exc}", file=sys.stderr)
        os._exit(127)
    code = 143
    _waiting[0] = True
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == child:
                _waiting[0] = False
                exit_code = os.waitstatus_to_exitcode(status)
                code = exit_code if exit_code >= 0 else 128 - exit_code
                break
    except _Stop:
        pass
    _waiting[0] = False
    _stop_everything()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
