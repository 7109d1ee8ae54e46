"""seccomp — the classic-BPF program the sandbox loads to stop commands opening unix sockets.

A read-only mount does not stop ``connect(2)`` on a unix socket, and a socket can also live in
the abstract namespace, outside any file system. So the sandbox gives ``bwrap --seccomp FD`` the
program built here, which the kernel runs on every system call the sandboxed command makes:

- a call from another ABI than the one the program was built for (32-bit ``int 0x80`` on
  x86_64, where ``socketcall`` would reach ``socket`` under another number) kills the process;
- on x86_64, every x32 call (numbers with bit 30 set) fails with ``ENOSYS``, as on a kernel
  built without x32, so ``socket`` cannot be reached under its x32 number either;
- ``socket(AF_UNIX, ...)`` fails with ``EPERM``; other families (``AF_INET`` when the sandbox
  has the network) and ``socketpair`` (a connected pair that reaches nothing outside) are allowed;
- ``io_uring_setup`` fails with ``EPERM``: an io_uring can create and connect sockets without
  the ``socket`` system call ever being made;
- everything else is allowed.

The program is built by hand rather than with a seccomp library: the ones on PyPI either bind
libseccomp (a system library) or are young and compare a whole 64-bit argument, which a caller
passing ``AF_UNIX`` with junk in the upper half would slip past (the kernel reads the family as a
32-bit ``int``). It is a dozen instructions; ``program_for`` refuses an architecture it does not
know rather than guess its numbers.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
_OFFSET_NR = 0
_OFFSET_ARCH = 4
_OFFSET_ARG0_LOW = 16  # the low 32 bits of args[0] on a little-endian machine

# Classic BPF opcodes (linux/bpf_common.h).
_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS: A = 32-bit word at offset k
_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K: jump if A == k
_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K: jump if A >= k (unsigned)
_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K: return k

# Seccomp return values (linux/seccomp.h).
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

_AF_UNIX = 1
_X32_SYSCALL_BIT = 0x40000000


@dataclass(frozen=True)
class _Arch:
    """What the program needs to know of one architecture: its audit tag and two call numbers."""

    audit_arch: int  # AUDIT_ARCH_* (linux/audit.h); the little-endian 64-bit variants only
    socket: int
    io_uring_setup: int
    has_x32: bool


#: The architectures the filter can be built for, by ``platform.machine()`` name.
ARCHITECTURES: dict[str, _Arch] = {
    "x86_64": _Arch(audit_arch=0xC000003E, socket=41, io_uring_setup=425, has_x32=True),
    "aarch64": _Arch(audit_arch=0xC00000B7, socket=198, io_uring_setup=425, has_x32=False),
}
ARCHITECTURES["amd64"] = ARCHITECTURES["x86_64"]
ARCHITECTURES["arm64"] = ARCHITECTURES["aarch64"]


class SeccompUnavailable(Exception):
    """No filter can be built for this machine (an architecture whose call numbers are not known)."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    """One ``struct sock_filter`` {u16 code; u8 jt; u8 jf; u32 k} in the machine's byte order."""
    return struct.pack("=HBBI", code, jt, jf, k)


def program_for(machine: str) -> bytes:
    """The filter for ``machine`` (a ``platform.machine()`` name), as bytes for ``bwrap --seccomp``.

    Raises:
        SeccompUnavailable: ``machine`` is not one of ``ARCHITECTURES``.
    """
    arch = ARCHITECTURES.get(machine.lower())
    if arch is None:
        raise SeccompUnavailable(
            f"the unix-socket filter has no system call numbers for this architecture ({machine}); "
            f"it knows {', '.join(sorted({'x86_64', 'aarch64'}))}"
        )
    eperm = _RET_ERRNO | errno.EPERM
    # Each jump offset counts the instructions to skip; the layout is written out flat so that
    # every offset can be checked by eye against the comments.
    program = [
        _insn(_LD_W_ABS, _OFFSET_ARCH),  # 0: A = arch
        _insn(_JEQ_K, arch.audit_arch, jt=1, jf=0),  # 1: native ABI → 3
        _insn(_RET_K, _RET_KILL_PROCESS),  # 2: another ABI: kill
        _insn(_LD_W_ABS, _OFFSET_NR),  # 3: A = system call number
    ]
    if arch.has_x32:
        program += [
            _insn(_JGE_K, _X32_SYSCALL_BIT, jt=0, jf=1),  # x32 call → next, else skip it
            _insn(_RET_K, _RET_ERRNO | errno.ENOSYS),  # every x32 call fails
        ]
    program += [
        _insn(_JEQ_K, arch.io_uring_setup, jt=0, jf=1),  # io_uring_setup → next, else skip it
        _insn(_RET_K, eperm),
        _insn(_JEQ_K, arch.socket, jt=0, jf=3),  # socket → next, else → allow
        _insn(_LD_W_ABS, _OFFSET_ARG0_LOW),  # A = family (the kernel reads an int: the low word)
        _insn(_JEQ_K, _AF_UNIX, jt=0, jf=1),  # AF_UNIX → next, else → allow
        _insn(_RET_K, eperm),
        _insn(_RET_K, _RET_ALLOW),
    ]
    return b"".join(program)


def unix_socket_filter() -> bytes:
    """The filter for this machine (see the module docstring).

    Raises:
        SeccompUnavailable: this machine is big-endian or its architecture is not known.
    """
    import sys

    if sys.byteorder != "little":
        raise SeccompUnavailable("the unix-socket filter is built for little-endian machines only")
    return program_for(platform.machine())
