"""A seccomp filter that refuses `socket(AF_UNIX, ...)`: no process toolrt starts can reach a host daemon.

A network namespace cuts IP and abstract UNIX sockets, not pathname sockets: `docker.sock`, a D-Bus bus,
an ssh agent are files, and whoever connects to them speaks to a daemon outside every wall. seccomp
cannot read the path a `connect` names, so the filter refuses making a UNIX socket at all
(`EAFNOSUPPORT`, "Address family not supported by protocol"); `socketpair` stays, so pipes between a
program's own processes (asyncio, subprocess plumbing) keep working. Syscalls of another architecture
(32-bit programs, x32) and `io_uring_setup` are refused with `ENOSYS`: their socket calls (`socketcall`,
`IORING_OP_SOCKET`) would go around the filter.

Standard library only, like `kernel`: the fork server imports it under `python -I -S`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

__all__ = ["prepare", "refuse_unix_sockets", "supported"]

_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args[0]'s low word, little-endian)
_AF_UNIX = 1
_X32_BIT = 0x40000000
_IO_URING_SETUP = 425  # the same number on every architecture (the generic table)

# machine → (AUDIT_ARCH_*, socket's syscall number)
_ARCHES = {
    "x86_64": (0xC000003E, 41),
    "aarch64": (0xC00000B7, 198),
    "arm64": (0xC00000B7, 198),
    "riscv64": (0xC00000F3, 198),
}


class _Filter(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32))


class _Program(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter)))


_libc = ctypes.CDLL(None, use_errno=True)


def supported() -> bool:
    """Whether this machine's architecture has a filter here."""
    return platform.machine() in _ARCHES


def _program() -> list[tuple[int, int, int, int]]:
    """(code, jump if true, jump if false, k); a jump skips that many instructions after its own."""
    arch, socket_nr = _ARCHES[platform.machine()]
    x32 = (_JGE, 5, 0, _X32_BIT) if platform.machine() == "x86_64" else (_JGE, 0, 0, 0)
    return [
        (_LD_ABS, 0, 0, _ARCH),  # 0
        (_JEQ, 0, 7, arch),  # 1: another architecture → 9
        (_LD_ABS, 0, 0, _NR),  # 2
        x32,  # 3: an x32 syscall → 9
        (_JEQ, 4, 0, _IO_URING_SETUP),  # 4: io_uring (its IORING_OP_SOCKET goes around socket()) → 9
        (_JEQ, 0, 2, socket_nr),  # 5: not socket() → 8
        (_LD_ABS, 0, 0, _ARG0),  # 6: the domain
        (_JEQ, 2, 0, _AF_UNIX),  # 7: AF_UNIX → 10
        (_RET, 0, 0, _RET_ALLOW),  # 8
        (_RET, 0, 0, _RET_ERRNO | errno.ENOSYS),  # 9
        (_RET, 0, 0, _RET_ERRNO | errno.EAFNOSUPPORT),  # 10
    ]


_built: list[tuple[_Program, ctypes.Array[_Filter]]] = []
"""The filter as the kernel takes it, built once: a fork server's children inherit it built, instead of
each building it after its fork (where every object touched costs a copy-on-write page)."""


def prepare() -> None:
    """Build the filter now (before forking the processes that will install it)."""
    if not _built:
        instructions = _program()
        array = (_Filter * len(instructions))(*(_Filter(*i) for i in instructions))
        _built.append((_Program(len(instructions), ctypes.cast(array, ctypes.POINTER(_Filter))), array))


def refuse_unix_sockets() -> None:
    """Install the filter on the calling thread; every process it starts inherits it (needs no_new_privs).

    Raises:
        OSError: the kernel refused the filter (the process must then not be started).
    """
    prepare()
    program = _built[0][0]
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"seccomp filter: {os.strerror(code)}")
