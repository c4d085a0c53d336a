"""A minimal `/dev` for the sandbox's mount namespace: no block device is reachable, even by uid 0;
and a `/proc` that lists only the process's own tree (`own_proc`).

A read-only tmpfs covers `/dev`; only what programs need is bound back in from the host: `null`,
`zero`, `full`, `random`, `urandom`, `tty`, the `shm` directory, and the `fd`, `stdin`, `stdout`,
`stderr` links. A disk (`/dev/vda`), `kmsg`, `kvm`, `loop*` and every other node is simply
not there. The host's nodes are opened before the tmpfs hides them and bound from their descriptors
(`/proc/self/fd/N`). `pts` is a devpts of its own (each devpts mount is a new instance) and `ptmx` a
link to its `pts/ptmx`: the host's terminals are not there, so a program can neither read what the
person types into one nor write to it, and the terminals it opens are its own.

Standard library only, like `kernel`: the fork server imports it under `python -I -S`.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["DEVICES", "DIRECTORIES", "minimal_dev", "own_proc", "own_terminals"]

DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DIRECTORIES = ("shm",)
_PTS_OPTIONS = "mode=0620,ptmxmode=0666"
_LINKS = {
    "ptmx": "pts/ptmx",
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}

_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_PTS_FLAGS = _MS_RDONLY | _MS_NOSUID | _MS_NOEXEC
"""Read-only, like the procfs (`own_proc`): a terminal opens for writing all the same (a device node is no
file of its mount), while a mode change on the root or `ptmx` is refused. Landlock does not govern a mode
change, and a sandboxed root owns both: `chmod 000 /dev/pts` would otherwise last as long as the mount
(and a procfs's, as long as every namespace copied from its base: the processes after it)."""

_PROC_OPTIONS = "hidepid=invisible,gid=2147483646"
"""Only processes the reader may trace are listed; `gid` names a group no one is in (by default root's
group, whose members see every process). Mounted read-only: Landlock refuses a write to it anyway, and the
mount's flag refuses a mode change on its root too (see `_PTS_FLAGS`)."""

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)


def _mount(source: str | None, target: str, flags: int, fstype: str | None = None, data: str | None = None) -> None:
    encoded = [None if v is None else os.fsencode(v) for v in (source, target, fstype, data)]
    if _libc.mount(encoded[0], encoded[1], encoded[2], ctypes.c_ulong(flags), encoded[3]) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {target}: {os.strerror(code)}")


def minimal_dev() -> None:
    """In a fresh private mount namespace: replace `/dev` by the minimal one (see the module)."""
    kept: dict[str, int] = {}
    try:
        for name in (*DEVICES, *DIRECTORIES):
            try:
                kept[name] = os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a machine without it: the sandbox has none either
        _mount("toolrt-dev", "/dev", _MS_NOSUID | _MS_NOEXEC, "tmpfs", "mode=0755,size=64k")
        for name, fd in kept.items():
            target = f"/dev/{name}"
            if name in DIRECTORIES:
                os.mkdir(target, 0o755)
            else:
                os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
            _mount(f"/proc/self/fd/{fd}", target, _MS_BIND | _MS_REC)
        os.mkdir("/dev/pts", 0o755)
        try:  # no host terminal: when no devpts can be made here, programs get no terminal at all
            _mount("devpts", "/dev/pts", _PTS_FLAGS, "devpts", _PTS_OPTIONS)
        except OSError:
            pass
        for name, link in _LINKS.items():
            os.symlink(link, f"/dev/{name}")
        _mount(None, "/dev", _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NOEXEC)
    finally:
        for fd in kept.values():
            os.close(fd)


def own_terminals() -> None:
    """In a mount namespace made for ONE process, copied from one with a minimal `/dev`: a new devpts on
    `/dev/pts`, over the instance the namespace was copied with, which every process copied from the
    same kept namespace shares. Its terminals (a `script` session of another call) are then out of this
    process's reach, and its own out of theirs. Raises OSError when none can be mounted over an instance
    that holds terminals: the shared one would stay in reach."""
    try:
        _mount("devpts", "/dev/pts", _PTS_FLAGS, "devpts", _PTS_OPTIONS)
    except OSError:
        if os.path.exists("/dev/pts/ptmx"):
            raise


def own_proc() -> bool:
    """In a fresh private mount namespace: cover `/proc` with a procfs of its own that lists only the
    processes the reader may trace (`hidepid=invisible`), which under Landlock's ptrace scoping are
    the process's own tree. Whether it was mounted (False: this namespace's owner may not mount a
    procfs of the host's PID namespace, as in the fork server's user namespace)."""
    try:
        _mount("proc", "/proc", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "proc", _PROC_OPTIONS)
    except OSError:  # EPERM in a user namespace: the host's /proc stays (its processes' files still need ptrace)
        return False
    return True
