"""The host's socket allow-list (`sandbox.sockets`): a supervisor that connects UNIX sockets for the
sandboxed process, to a listed socket only.

With a list, each sandboxed process runs under the supervised seccomp filter (`seccomp`): every
`connect` stops in the kernel and is handed to a thread of toolrt holding the filter's listener
(`SECCOMP_RET_USER_NOTIF`). The thread takes the process's socket (`pidfd_getfd`: the same open socket,
not a copy), reads the address from the process's memory once, and decides on that copy:

- a UNIX address must be an absolute path equal to a listed one (no abstract name, no relative path).
  The listed path is opened in the process's own view (`/proc/PID/root`, its mount namespace) with no
  symlink anywhere on the way (openat2 `RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS`), must be a socket, and
  must be the same file (device, inode) toolrt found there first (`pin`): a name swapped for a link or
  renamed over is refused. The supervisor then connects the socket itself, through that very
  descriptor (`/proc/self/fd/N`), so what it checked is what is reached; a daemon with no room in its
  backlog is waited for in a thread of its own, only while the caller lives;
- an IP address is connected the same way on the copy (the network namespace of the socket decides
  where it goes, as for the process), or refused with EACCES when the network is off, as Landlock's
  TCP rules refuse it; so is a netlink address naming the kernel. Any other `connect` is refused: the
  supervisor holds toolrt's capabilities, and a connect whose kernel checks the caller's (a netlink
  multicast group) would borrow them.

Everything else gets EACCES ("Permission denied"). The process never makes the connection itself, so
no later rewrite of its memory or descriptor table changes what was checked. The notification id is
checked after the process's descriptors were opened (`SECCOMP_IOCTL_NOTIF_ID_VALID`), so a pid reused
by another process is never read from. With no list, none of this runs: the filter refuses UNIX sockets
outright and no thread is started.
"""

from __future__ import annotations

import _thread
import ctypes
import errno
import math
import os
import select
import socket
import stat
import struct
import threading
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from . import kernel

if TYPE_CHECKING:
    from ..attribution import Journal

__all__ = ["NOT_A_SOCKET", "pin", "refusal", "supervise"]

NOT_A_SOCKET = "is not a UNIX socket now (or is a symlink)"
"""Why a listed socket path is refused when it cannot be opened as a socket without following a link."""

_NOTIF_RECV = 0xC0502100  # _IOWR('!', 0, struct seccomp_notif)
_NOTIF_SEND = 0xC0182101  # _IOWR('!', 1, struct seccomp_notif_resp)
_NOTIF_ID_VALID = 0x40082102  # _IOW('!', 2, __u64)
_PIDFD_GETFD = 438  # the same number on every architecture (the generic table)
_PIDFD_THREAD = os.O_EXCL  # pidfd_open: a thread's pidfd, not only a thread-group leader's
_SOL_SOCKET, _SO_DOMAIN, _SO_SNDTIMEO = 1, 39, 21
_TIMEVAL = struct.Struct("=qq")  # struct timeval: seconds, microseconds (64-bit machines only, as `seccomp`)
_FIRST_SECONDS = 0.001  # the first attempt, in the serving thread: a daemon with room answers at once
_SLICE_SECONDS = 0.2  # then, in a thread of its own, how often a waiting connect looks for its caller
_NETLINK_ADDRESS = struct.Struct("=HHII")  # struct sockaddr_nl: family, pad, port id, groups
_MAX_ADDRESS = 128  # sizeof(struct sockaddr_storage): the kernel refuses longer with EINVAL

_libc = ctypes.CDLL(None, use_errno=True)


class _Data(ctypes.Structure):
    _fields_ = (
        ("nr", ctypes.c_int32),
        ("arch", ctypes.c_uint32),
        ("ip", ctypes.c_uint64),
        ("args", ctypes.c_uint64 * 6),
    )


class _Notification(ctypes.Structure):
    _fields_ = (("id", ctypes.c_uint64), ("pid", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("data", _Data))


class _Response(ctypes.Structure):
    _fields_ = (("id", ctypes.c_uint64), ("val", ctypes.c_int64), ("error", ctypes.c_int32), ("flags", ctypes.c_uint32))


_pins: dict[str, tuple[int, int]] = {}
_pins_lock = threading.Lock()


def pin(paths: Iterable[str], journal: Journal | None = None) -> tuple[tuple[str, int, int], ...]:
    """(path, device, inode) of each listed path that is a socket now, reached with no symlink on the way.

    The first file found at a path is kept for the life of this process (toolrt looks when it reads
    the settings, before any tool ran): a socket the sandbox later renames over it, or a link put in
    its place, is another file and is refused. A daemon that re-creates its socket needs toolrt
    restarted. A path with no socket yet is pinned the first time one is found there; a socket with a
    second name (a hard link: `bind` makes one name) never is, nor (with the attribution `journal`) one
    whose `st_ctime` falls inside the span of a process a tool started, at a place it could write: a
    rename sets the ctime, so another daemon's socket renamed where a listed one was missing is refused
    (`refusal` says why). A daemon that binds its socket while such a process runs is refused too, until
    toolrt restarts after that process ended. The next toolrt pins afresh: in the sandbox a pinned socket
    is a mount point (see `plan`), so no process moves another one in its place."""
    found = []
    for path in paths:
        with _pins_lock:
            kept = _pins.get(path)
        if kept is None:
            looked = _look(path, journal)
            if isinstance(looked, str):
                continue
            with _pins_lock:
                kept = _pins.setdefault(path, looked)
        found.append((path, *kept))
    return tuple(found)


def refusal(path: str, journal: Journal | None = None) -> str | None:
    """Why `pin` leaves `path` out (None: it pins it)."""
    with _pins_lock:
        if path in _pins:
            return None
    looked = _look(path, journal)
    return looked if isinstance(looked, str) else None


def _look(path: str, journal: Journal | None) -> tuple[int, int] | str:
    """The identity (device, inode) of the socket at `path`, or why it is not to be pinned."""
    if not os.path.isabs(path):
        return "is not an absolute path"
    root = os.open("/", os.O_PATH | os.O_CLOEXEC)
    try:
        fd = kernel.open_in_root(root, path)
    except OSError:
        return NOT_A_SOCKET
    finally:
        os.close(root)
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISSOCK(info.st_mode):
        return NOT_A_SOCKET
    if info.st_nlink != 1:  # a daemon's socket has one name: a second is a link a process may have made
        return "is a socket with a second name (a hard link a process may have made)"
    call = journal.span_at(path, info.st_ctime_ns) if journal is not None else None
    if call is not None:
        return (
            f"was put there or changed while a process a tool started ran (call {call}): it may be another "
            "daemon's socket moved into its place. Restart the daemon, then toolrt"
        )
    return (info.st_dev, info.st_ino)


def supervise(listener: int, sockets: Iterable[tuple[str, int, int]], *, network: bool) -> None:
    """Answer every `connect` of the processes under `listener` in a thread of its own, which closes the
    listener and ends when the last of them has exited."""
    allowed = {path: (device, inode) for path, device, inode in sockets}
    _thread.start_new_thread(_serve, (listener, allowed, network))


def _serve(listener: int, allowed: Mapping[str, tuple[int, int]], network: bool) -> None:
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    try:
        while True:
            events = poller.poll()
            if any(event & select.POLLIN for _, event in events):
                notification = _Notification()
                if _libc.ioctl(listener, ctypes.c_ulong(_NOTIF_RECV), ctypes.byref(notification)) < 0:
                    continue  # the caller was interrupted or died meanwhile: nothing to answer
                try:
                    _answer(listener, notification, allowed, network)
                except Exception:  # never leave the process stopped in its connect: refuse it
                    _respond(listener, notification.id, errno.EACCES)
            elif events:  # POLLHUP: no process is left under the filter
                return
    finally:
        os.close(listener)


def _answer(listener: int, notification: _Notification, allowed: Mapping[str, tuple[int, int]], network: bool) -> None:
    fds: list[int] = []
    try:
        pid = notification.pid
        fds.append(_pidfd(pid))
        fds.append(os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC))
        fds.append(os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        if not _valid(listener, notification.id):
            return  # the process is gone: its pid, and what was just opened, may be another's
        pidfd, memory, root = fds
        args = notification.data.args
        target = int(_libc.syscall(_PIDFD_GETFD, pidfd, ctypes.c_int32(args[0] & 0xFFFFFFFF).value, 0))
        if target < 0:
            _respond(listener, notification.id, ctypes.get_errno())
            return
        fds.append(target)
        length = args[2] & 0xFFFFFFFF
        if not 2 <= length <= _MAX_ADDRESS:
            _respond(listener, notification.id, errno.EINVAL)
            return
        address = os.pread(memory, length, args[1])
        domain = ctypes.c_int(0)
        size = ctypes.c_uint32(ctypes.sizeof(domain))
        if _libc.getsockopt(target, _SOL_SOCKET, _SO_DOMAIN, ctypes.byref(domain), ctypes.byref(size)) < 0:
            _respond(listener, notification.id, ctypes.get_errno())
            return
        if domain.value != socket.AF_UNIX:
            if not network or not _needs_no_privilege(domain.value, address):
                _respond(listener, notification.id, errno.EACCES)
                return
            fds.remove(target)  # the thread owns it now: a TCP connect may take long
            _thread.start_new_thread(_connect_and_answer, (os.dup(listener), notification.id, target, address))
            return
        code, found = _open_listed(address, root, allowed)
        if found is None:
            _respond(listener, notification.id, code)
            return
        fds.append(found)
        through = struct.pack("=H", socket.AF_UNIX) + f"/proc/self/fd/{found}\0".encode()
        if not os.get_blocking(target):
            _respond(listener, notification.id, _connect(target, through))
            return
        code, budget = _attempt(target, through, _FIRST_SECONDS)
        if code != errno.EAGAIN:
            _respond(listener, notification.id, code)
            return
        # The daemon's backlog is full: wait in a thread of its own (the thread closes these copies).
        owned = (os.dup(listener), notification.id, os.dup(target), os.dup(found), budget)
        _thread.start_new_thread(_wait_listed, owned)
    except OSError as error:  # the process died, or its memory cannot be read (EFAULT/EIO)
        _respond(listener, notification.id, errno.EFAULT if error.errno == errno.EIO else error.errno or errno.EACCES)
    finally:
        for fd in fds:
            os.close(fd)


def _needs_no_privilege(family: int, address: bytes) -> bool:
    """Whether the kernel's `connect` for this family and address checks nothing of the caller, so the
    supervisor (toolrt, with its capabilities, outside every Landlock domain) may make it for the
    process: IP, and netlink to the kernel itself. A netlink `connect` to a multicast group or to another
    process needs CAP_NET_ADMIN, which root in the sandbox has dropped (with it, a forged uevent reached
    every listener of the host's network namespace); other families are refused."""
    if family in (socket.AF_INET, socket.AF_INET6):
        return True
    if family == socket.AF_NETLINK and len(address) >= _NETLINK_ADDRESS.size:
        _, _, portid, groups = _NETLINK_ADDRESS.unpack_from(address)
        return bool(portid == 0 and groups == 0)
    return False


def _open_listed(address: bytes, root: int, allowed: Mapping[str, tuple[int, int]]) -> tuple[int, int | None]:
    """An O_PATH descriptor of the listed socket `address` names, as the process's root sees it, or the
    errno to answer with."""
    if struct.unpack("=H", address[:2])[0] != socket.AF_UNIX:
        return errno.EINVAL, None
    name = address[2:].split(b"\0", 1)[0]
    if not name.startswith(b"/"):  # abstract (a leading NUL), unnamed or relative
        return errno.EACCES, None
    path = os.path.normpath(os.fsdecode(name))
    expected = allowed.get(path)
    if expected is None:
        return errno.EACCES, None
    try:
        found = kernel.open_in_root(root, path)
    except OSError as error:
        return (errno.ENOENT if error.errno == errno.ENOENT else errno.EACCES), None
    info = os.fstat(found)
    if not stat.S_ISSOCK(info.st_mode) or (info.st_dev, info.st_ino) != expected:
        os.close(found)
        return errno.EACCES, None
    return 0, found


def _attempt(target: int, address: bytes, seconds: float) -> tuple[int, float]:
    """connect(2) with the socket's send timeout (how long an AF_UNIX `connect` waits for a place in the
    daemon's backlog) set to `seconds` meanwhile; 0 or the errno (EAGAIN: still full), and the process's
    own timeout (0: none), which is put back."""
    kept = ctypes.create_string_buffer(_TIMEVAL.size)
    size = ctypes.c_uint32(_TIMEVAL.size)
    if _libc.getsockopt(target, _SOL_SOCKET, _SO_SNDTIMEO, kept, ctypes.byref(size)) < 0:
        return ctypes.get_errno(), 0.0
    whole, micros = _TIMEVAL.unpack(kept.raw)
    own = whole + micros / 1e6
    wait = min(seconds, own) if own else seconds
    meanwhile = _TIMEVAL.pack(int(wait), max(int(wait % 1 * 1e6), 1))
    _libc.setsockopt(target, _SOL_SOCKET, _SO_SNDTIMEO, meanwhile, len(meanwhile))
    try:
        return _connect(target, address), own
    finally:
        _libc.setsockopt(target, _SOL_SOCKET, _SO_SNDTIMEO, kept, len(kept.raw))


def _wait_listed(listener: int, notification_id: int, target: int, found: int, own: float) -> None:
    """Keep connecting `target` through `found`, a slice at a time while the caller lives (and within its
    own send timeout `own`, when it set one), and answer: a daemon that never accepts keeps neither the
    process's other connects nor this thread past the process."""
    code = errno.EAGAIN  # what the kernel says when the process's own timeout runs out
    try:
        through = struct.pack("=H", socket.AF_UNIX) + f"/proc/self/fd/{found}\0".encode()
        left = own - _FIRST_SECONDS if own else math.inf
        while left > 0 and _valid(listener, notification_id):
            code, _ = _attempt(target, through, min(left, _SLICE_SECONDS))
            left -= _SLICE_SECONDS
            if code != errno.EAGAIN:
                break
        _respond(listener, notification_id, code)
    except Exception:  # never leave the process stopped in its connect: refuse it
        _respond(listener, notification_id, errno.EACCES)
    finally:
        os.close(found)
        os.close(target)
        os.close(listener)


def _connect_and_answer(listener: int, notification_id: int, target: int, address: bytes) -> None:
    try:
        _respond(listener, notification_id, _connect(target, address))
    finally:
        os.close(target)
        os.close(listener)  # its own copy: the serving thread closes its own when the processes are gone


def _connect(fd: int, address: bytes) -> int:
    """connect(2) on `fd` with these raw address bytes; 0 or the errno."""
    if _libc.connect(fd, address, len(address)) == 0:
        return 0
    return ctypes.get_errno()


def _pidfd(tid: int) -> int:
    """A pidfd of the thread that called `connect` (the notification names the thread, and a program's
    other threads connect too: Go's, a thread pool's); `PIDFD_THREAD` is Linux 6.9, before which only a
    process's main thread can be reached (another one's `connect` is refused)."""
    try:
        return os.pidfd_open(tid, _PIDFD_THREAD)
    except OSError as error:
        if error.errno != errno.EINVAL:
            raise
        return os.pidfd_open(tid)


def _valid(listener: int, notification_id: int) -> bool:
    found = int(_libc.ioctl(listener, ctypes.c_ulong(_NOTIF_ID_VALID), ctypes.byref(ctypes.c_uint64(notification_id))))
    return found == 0


def _respond(listener: int, notification_id: int, code: int) -> None:
    """Answer the stopped `connect`: 0 is success, anything else its errno (ENOENT from the kernel here
    only says the caller went away meanwhile)."""
    response = _Response(notification_id, 0, -code if code else 0, 0)
    _libc.ioctl(listener, ctypes.c_ulong(_NOTIF_SEND), ctypes.byref(response))
