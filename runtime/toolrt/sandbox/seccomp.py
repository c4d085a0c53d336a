"""A seccomp filter that keeps every process toolrt starts away from host daemons' UNIX sockets.

A network namespace cuts IP and abstract UNIX sockets, not pathname sockets: `docker.sock`, a D-Bus bus,
an ssh agent are files, and whoever connects to them speaks to a daemon outside every wall. seccomp
cannot read the path a `connect` names, so by default the filter refuses making a UNIX socket at all
(`EAFNOSUPPORT`, "Address family not supported by protocol"). `socketpair` stays for the stream and
seqpacket types, so pipes between a program's own processes (asyncio, subprocess plumbing) keep
working; a datagram pair is refused like a socket, since a datagram socket can `sendto` (or
re-`connect` to) any path. Syscalls of another architecture (32-bit programs, x32) and
`io_uring_setup` are refused with `ENOSYS`: their socket calls (`socketcall`, `IORING_OP_SOCKET`)
would go around the filter.

Of the other address families only IP (`AF_INET`, `AF_INET6`) and netlink (`AF_NETLINK`: routes and
addresses, as `getaddrinfo` reads them) may be made, for `socket` and `socketpair`: each lives in the
process's network namespace, so an empty one cuts it. The rest are refused like UNIX sockets
(`EAFNOSUPPORT`) in every network mode: `AF_VSOCK` reaches the hypervisor's host (CID 2) and a
loopback transport's local listeners (CID 1) whatever the network namespace, Bluetooth and NFC ignore
it, and packet, XDP and crypto (`AF_ALG`) sockets are kernel surface no tool needs (packet and XDP need
`CAP_NET_RAW`, dropped anyway).

With a host allow-list (`supervised`), stream and seqpacket UNIX sockets may be made, and every
`connect` goes to a supervisor in toolrt (`SECCOMP_RET_USER_NOTIF`, see `supervisor`), which connects
the socket itself, to a listed socket only. Neither type can reach a new peer any other way: `sendto`
and `sendmsg` ignore or refuse an address on them, and datagram sockets stay refused.

No file gets a set-user-ID or set-group-ID bit (`EPERM`, "Operation not permitted"): a root without
capabilities owns the files it makes, in writable directories (`/tmp`, the project) whose host mounts
honour the bit, so `cp /bin/sh /tmp/x; chmod u+s /tmp/x` would leave a root shell for any user of the
machine (a person's toolrt: a shell of the person's). The filter refuses a mode with either bit to
`chmod`, `fchmod`, `fchmodat`, `fchmodat2`, `mknod`, `mknodat`, `creat`, and to `open`/`openat` when
they may create (`O_CREAT`, `O_TMPFILE`); `openat2`, whose mode seccomp cannot read, is refused with
`ENOSYS` (programs fall back to `openat`). A directory made with `mkdir -m 2775` keeps its bit (it
grants nothing); `chmod g+s` on one is refused like any.

Standard library only, like `kernel`: the fork server imports it under `python -I -S`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

__all__ = ["prepare", "refuse_unix_sockets", "supervise_unix_sockets", "supported"]

_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_SET_MODE_FILTER = 1
_FLAG_NEW_LISTENER = 1 << 3
_FLAG_WAIT_KILLABLE_RECV = 1 << 5
"""Linux 5.19: once the supervisor has a notification, only a fatal signal interrupts the caller, so a
program's timer signals (Go's preemption) do not restart its `connect` over and over."""
_RET_ALLOW = 0x7FFF0000
_RET_USER_NOTIF = 0x7FC00000
_RET_ERRNO = 0x00050000
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_NR, _ARCH, _ARG0, _ARG1, _ARG2, _ARG3 = 0, 4, 16, 24, 32, 40  # offsets in seccomp_data (args' low words, LE)
_AF_UNIX = 1
_AF_INET, _AF_INET6, _AF_NETLINK = 2, 10, 16
_SOCK_TYPE_MASK = 0xF
_SOCK_STREAM, _SOCK_SEQPACKET = 1, 5
_X32_BIT = 0x40000000
_IO_URING_SETUP = 425  # the same number on every architecture (the generic table)
_OPENAT2, _FCHMODAT2 = 437, 452  # the same on every architecture too
_SET_ID_BITS = 0o6000  # S_ISUID | S_ISGID
_MAY_CREATE = 0o100 | 0o20000000  # O_CREAT | __O_TMPFILE (the same bits on every architecture here)

# machine → (AUDIT_ARCH_*, seccomp, socket, socketpair, connect syscall numbers)
_ARCHES = {
    "x86_64": (0xC000003E, 317, 41, 53, 42),
    "aarch64": (0xC00000B7, 277, 198, 199, 203),
    "arm64": (0xC00000B7, 277, 198, 199, 203),
    "riscv64": (0xC00000F3, 277, 198, 199, 203),
}

_GENERIC_MODES = {"mode1": (52,), "mode2": (53, _FCHMODAT2, 33), "openat": (56,)}
# machine → the syscalls that set a mode, by where it is: "mode1" the second argument (chmod, fchmod,
# creat, mknod), "mode2" the third (fchmodat, fchmodat2, mknodat); "open" and "openat" read the flags
# first (the second, the third argument) and the mode after them (the third, the fourth)
_MODES = {
    "x86_64": {"mode1": (90, 91, 85, 133), "mode2": (268, _FCHMODAT2, 259), "open": (2,), "openat": (257,)},
    "aarch64": _GENERIC_MODES,
    "arm64": _GENERIC_MODES,
    "riscv64": _GENERIC_MODES,
}


class _Filter(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32))


class _Program(ctypes.Structure):
    _fields_ = (("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter)))


_libc = ctypes.CDLL(None, use_errno=True)


def supported() -> bool:
    """Whether this machine's architecture has a filter here."""
    return platform.machine() in _ARCHES


def _program(supervised: bool) -> list[tuple[int, int, int, int]]:
    """(code, jump if true, jump if false, k); a jump skips that many instructions after its own."""
    arch, _, socket_nr, socketpair_nr, connect_nr = _ARCHES[platform.machine()]
    x32 = [(_JGE, "enosys", None, _X32_BIT)] if platform.machine() == "x86_64" else []
    connect = [(_JEQ, "notify", None, connect_nr)] if supervised else []
    unix_socket = "type" if supervised else "refuse"
    labelled: list[tuple[str, list[tuple[int, str | None, str | None, int]]]] = [
        ("", [(_LD_ABS, None, None, _ARCH), (_JEQ, None, "enosys", arch), (_LD_ABS, None, None, _NR), *x32]),
        ("", [(_JEQ, "enosys", None, _IO_URING_SETUP), (_JEQ, "socket", None, socket_nr)]),
        ("", [(_JEQ, "pair", None, socketpair_nr), *connect, (_JEQ, "enosys", None, _OPENAT2)]),
        ("", [*_mode_jumps(), (_RET, None, None, _RET_ALLOW)]),
        ("socket", [(_LD_ABS, None, None, _ARG0), (_JEQ, unix_socket, "family", _AF_UNIX)]),
        ("pair", [(_LD_ABS, None, None, _ARG0), (_JEQ, "type", "family", _AF_UNIX)]),
        ("type", [(_LD_ABS, None, None, _ARG1), (_AND, None, None, _SOCK_TYPE_MASK)]),
        ("", [(_JEQ, "allow", None, _SOCK_STREAM), (_JEQ, "allow", "refuse", _SOCK_SEQPACKET)]),
        ("open", [(_LD_ABS, None, None, _ARG1), (_AND, None, None, _MAY_CREATE), (_JEQ, "allow", "mode2", 0)]),
        ("openat", [(_LD_ABS, None, None, _ARG2), (_AND, None, None, _MAY_CREATE), (_JEQ, "allow", "mode3", 0)]),
        ("mode1", [(_LD_ABS, None, None, _ARG1), (_AND, None, None, _SET_ID_BITS), (_JEQ, "allow", "eperm", 0)]),
        ("mode2", [(_LD_ABS, None, None, _ARG2), (_AND, None, None, _SET_ID_BITS), (_JEQ, "allow", "eperm", 0)]),
        ("mode3", [(_LD_ABS, None, None, _ARG3), (_AND, None, None, _SET_ID_BITS), (_JEQ, "allow", "eperm", 0)]),
        ("family", [(_JEQ, "allow", None, _AF_INET), (_JEQ, "allow", None, _AF_INET6)]),
        ("", [(_JEQ, "allow", "refuse", _AF_NETLINK)]),
        ("notify", [(_RET, None, None, _RET_USER_NOTIF)]),
        ("allow", [(_RET, None, None, _RET_ALLOW)]),
        ("enosys", [(_RET, None, None, _RET_ERRNO | errno.ENOSYS)]),
        ("refuse", [(_RET, None, None, _RET_ERRNO | errno.EAFNOSUPPORT)]),
        ("eperm", [(_RET, None, None, _RET_ERRNO | errno.EPERM)]),
    ]
    at: dict[str, int] = {}
    flat: list[tuple[int, str | None, str | None, int]] = []
    for label, instructions in labelled:
        if label:
            at[label] = len(flat)
        flat.extend(instructions)

    def offset(index: int, label: str | None) -> int:
        return 0 if label is None else at[label] - index - 1

    return [(code, offset(i, yes), offset(i, no), k) for i, (code, yes, no, k) in enumerate(flat)]


def _mode_jumps() -> list[tuple[int, str | None, str | None, int]]:
    """The jumps from the syscall number to the check of the mode it sets (`_MODES`)."""
    return [(_JEQ, where, None, nr) for where, numbers in _MODES[platform.machine()].items() for nr in numbers]


_built: dict[bool, tuple[_Program, ctypes.Array[_Filter]]] = {}
"""The filters as the kernel takes them, built once: a fork server's children inherit them built, instead
of each building one after its fork (where every object touched costs a copy-on-write page)."""


def prepare(supervised: bool = False) -> _Program:
    """Build the filter now (before forking the processes that will install it)."""
    if supervised not in _built:
        instructions = _program(supervised)
        array = (_Filter * len(instructions))(*(_Filter(*i) for i in instructions))
        _built[supervised] = (_Program(len(instructions), ctypes.cast(array, ctypes.POINTER(_Filter))), array)
    return _built[supervised][0]


def refuse_unix_sockets() -> None:
    """Install the filter on the calling thread; every process it starts inherits it (needs no_new_privs).

    Raises:
        OSError: the kernel refused the filter (the process must then not be started).
    """
    program = prepare()
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"seccomp filter: {os.strerror(code)}")


def supervise_unix_sockets() -> int:
    """Install the supervised filter on the calling thread (needs no_new_privs) and return its listener:
    the descriptor a supervisor reads each `connect` from (close-on-exec). While no supervisor holds it,
    every `connect` fails with ENOSYS.

    Raises:
        OSError: the kernel refused the filter (the process must then not be started).
    """
    program = prepare(supervised=True)
    seccomp_nr = _ARCHES[platform.machine()][1]
    for flags in (_FLAG_NEW_LISTENER | _FLAG_WAIT_KILLABLE_RECV, _FLAG_NEW_LISTENER):
        fd = int(_libc.syscall(seccomp_nr, _SECCOMP_SET_MODE_FILTER, flags, ctypes.byref(program)))
        if fd >= 0:
            return fd
        code = ctypes.get_errno()
        if code != errno.EINVAL:
            break
    raise OSError(code, f"seccomp filter: {os.strerror(code)}")
