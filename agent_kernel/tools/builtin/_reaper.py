"""tools.builtin.reaper — runs one command as a child subreaper and stops every process it started.

The ``bash`` tool runs ``python -I -S reaper.py ARGV...`` on Linux. This small supervisor marks
itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), so every process the command
starts stays its descendant even after double-forking or ``setsid``: an orphan is re-parented to
the supervisor, not to init. It then runs ARGV and exits with its status, but only after stopping
everything ARGV left behind (SIGTERM, a grace period, then SIGKILL until none is left). On SIGTERM,
SIGINT or SIGHUP (the run was cancelled or timed out), or when its parent dies, it does the same
at once. A process group or a session alone cannot do this: ``setsid`` leaves both.

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


def main(argv: list[str]) -> int:
    """Runs ``argv`` and stops whatever it leaves; returns its exit status (128+N for signal N)."""
    if not argv:
        print("reaper: no command given", file=sys.stderr)
        return 2
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
    child = os.fork()
    if child == 0:
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
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
