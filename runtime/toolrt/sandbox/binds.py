"""Bind mounts that look each name up once: the read-only paths and pinned directories of a sandbox's
mount namespace (`bind_read_only`).

`mount(2)` names its target by path, and making a bind mount read-only takes a second call on that
path: a name swapped between the two (a process left running that puts a symlink in the place of a
listed socket, and back) sends the second call to another file, which is no mount point, and the setup
fails. So each name is opened once, and the mount is made with the descriptor API (Linux 5.12):
`open_tree` clones the tree at the descriptor, `mount_setattr` makes the clone read-only while it is
still detached, `move_mount` attaches it onto that same descriptor. Where those calls are refused (a
container's seccomp filter, an older kernel) the two path-based calls are made instead, the second
through a descriptor opened at the name after the first and checked to be what was bound. A mount is
attached to the file opened, wherever it is by then: a file renamed over between the open and the
attach, or renamed aside (another put at its name), is no longer at its name; its mount is taken off
where it landed and the name is opened again, a few times.
A directory to bind writable is opened without following a symlink: a link put in its place (to `.git`)
is not bound, where `mount` would have made what it points to writable.

Standard library only, like `kernel`: the fork server imports it under `python -I -S`.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Iterable

__all__ = [
    "RESOLVE_IN_ROOT",
    "RESOLVE_NO_MAGICLINKS",
    "RESOLVE_NO_SYMLINKS",
    "bind_read_only",
    "open_directory",
    "openat2",
    "read_only_elsewhere",
]

_MS_RDONLY = 1
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MNT_DETACH = 2
_KEPT_FLAGS = os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC | os.ST_NOATIME | os.ST_NODIRATIME | os.ST_RELATIME

_OPEN_TREE, _MOVE_MOUNT, _MOUNT_SETATTR = 428, 429, 442  # the same numbers on every architecture (the generic table)
_OPEN_TREE_CLONE = 1
_AT_EMPTY_PATH = 0x1000
_AT_RECURSIVE = 0x8000
_AT_FDCWD = -100
_MOVE_MOUNT_F_EMPTY_PATH = 0x04
_MOVE_MOUNT_T_EMPTY_PATH = 0x40
_MOUNT_ATTR_RDONLY = 0x1
_OPENAT2 = 437  # the same number on every architecture (the generic table)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_IN_ROOT = 0x10
_EMPTY = b""
_ATTEMPTS = 8  # a name renamed over again and again (a swapper racing the setup) fails it after this many


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p)
_libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)
_READ_ONLY = _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
_WRITABLE = _MountAttr(0, _MOUNT_ATTR_RDONLY, 0, 0)  # a clone beneath a read-only mount is read-only too
_descriptor_api: bool | None = None  # whether the descriptor calls work here; None until known


def bind_read_only(paths: Iterable[str], pinned: Iterable[str] = (), beneath: str | None = None) -> None:
    """Bind-mount each existing path of `paths` onto itself, read-only, and each existing directory of
    `pinned` onto itself, writable (in a private mount namespace), the shallowest first, so a deeper
    mount lands on the one above it. A mount point can be neither renamed nor removed (EBUSY): pinning
    the directories above a read-only path keeps it where toolrt looks for it, and a pinned directory
    beneath a read-only one (the tool-output directory in toolrt's data directory) stays writable.
    A read-only path that is a symlink when it is opened is followed, as `mount` follows it: the file it
    names is the one made read-only. A pinned one that is a symlink is not bound: a writable mount never
    lands where a link points.

    `beneath`: a covered root (`kernel.covered_mounts`), whose real directory, under the overlay, is the
    working directory: a path strictly beneath it is bound from the real tree, not from the overlay, so
    nothing looked up below it (the whole of `.git`) pays the overlay's first lookup of each name."""
    read_only = set(paths)
    prefix = beneath.rstrip("/") + "/" if beneath else None
    for path in sorted(read_only | set(pinned), key=lambda p: (p.rstrip("/").count("/"), p)):
        source = path[len(prefix) :] if prefix and path.startswith(prefix) and path != prefix else path
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                _bind_existing(source, path, path in read_only)
                break
            except _NameMoved:
                if attempt == _ATTEMPTS:
                    raise


class _NameMoved(OSError):
    """The file opened at a name was no longer at it (renamed over, or aside) once its mount was made."""


def _bind_existing(source: str, target: str, read_only: bool) -> None:
    """Bind what `source` names now onto `target`, if it exists. A read-only path is followed when it is
    a symlink (what it names is made read-only); a pinned one is bound only when it is a directory at
    its own name: a writable mount never lands where a link put in its place points."""
    flags = _open_flags(read_only)
    try:
        source_fd = os.open(source, flags)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        target_fd = source_fd if source == target else os.open(target, flags)
        try:
            _bind(source_fd, target_fd, target, read_only)
        finally:
            if target_fd != source_fd:
                os.close(target_fd)
    finally:
        os.close(source_fd)


def _bind(source_fd: int, target_fd: int, target: str, read_only: bool) -> None:
    """Bind the file open at `source_fd` onto the one open at `target_fd`, read-only or writable."""
    if _descriptor_api is not False:
        tree = _open_tree(source_fd)
        if tree is not None and _attach(tree, source_fd, target_fd, target, read_only):
            return
    # The path-based calls: the bind goes through the descriptors; the remount goes through one opened
    # at the name after the bind, which must lead to what was bound (a remount elsewhere could make
    # another mount writable), and is the mount remounted: a name swapped again after the check (a link
    # to `.git`) is not looked up a second time.
    kept = os.fstatvfs(source_fd).f_flag & _KEPT_FLAGS
    _mount(f"/proc/self/fd/{source_fd}".encode(), f"/proc/self/fd/{target_fd}".encode(), _MS_BIND | _MS_REC)
    try:
        bound_fd = _opened_again(source_fd, target, read_only)
    except _NameMoved:  # the bind went with the file renamed aside: taken off there (the top mount on that file)
        _mount_detach(target_fd, target)
        raise
    try:
        _mount(
            None, f"/proc/self/fd/{bound_fd}".encode(), _MS_REMOUNT | _MS_BIND | (_MS_RDONLY if read_only else 0) | kept
        )
    finally:
        os.close(bound_fd)


def _opened_again(source_fd: int, target: str, read_only: bool) -> int:
    """A descriptor opened at `target` now, which must lead to the file open at `source_fd`."""
    try:
        bound_fd = os.open(target, _open_flags(read_only))
    except (FileNotFoundError, NotADirectoryError):
        raise _NameMoved(errno.ENOENT, f"mount {target}: renamed while it was being mounted") from None
    try:
        _same_file(source_fd, os.fstat(bound_fd), target)
    except _NameMoved:
        os.close(bound_fd)
        raise
    return bound_fd


def _open_flags(read_only: bool) -> int:
    """A read-only path is followed when it is a link; a pinned one must be a directory at its own name."""
    return os.O_PATH | os.O_CLOEXEC | (0 if read_only else os.O_NOFOLLOW | os.O_DIRECTORY)


def _same_file(source_fd: int, now: os.stat_result, target: str) -> None:
    bound = os.fstat(source_fd)
    if (now.st_dev, now.st_ino) != (bound.st_dev, bound.st_ino):
        raise _NameMoved(errno.ENOENT, f"mount {target}: renamed while it was being mounted")


def _open_tree(fd: int) -> int | None:
    """A detached clone of the mount tree at `fd`, or None where the descriptor API is refused."""
    flags = _OPEN_TREE_CLONE | _AT_RECURSIVE | _AT_EMPTY_PATH | os.O_CLOEXEC
    tree = int(_libc.syscall(_OPEN_TREE, ctypes.c_int(fd), _EMPTY, ctypes.c_uint(flags)))
    if tree >= 0:
        return tree
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EPERM) and _descriptor_api is None:
        _descriptor_api_works(False)
        return None
    raise _fail("open_tree", code)


def _attach(tree: int, source_fd: int, target_fd: int, target: str, read_only: bool) -> bool:
    """Make the detached `tree` (cloned from `source_fd`) read-only or writable (its top mount, as a
    remount would), then attach it onto `target_fd`, and detach it again unless `target` still leads to
    it. False: `mount_setattr` is refused here (open_tree without it: the path-based calls)."""
    try:
        attr = _READ_ONLY if read_only else _WRITABLE
        size = ctypes.c_size_t(ctypes.sizeof(attr))
        if _libc.syscall(_MOUNT_SETATTR, tree, _EMPTY, _AT_EMPTY_PATH, ctypes.byref(attr), size):
            code = ctypes.get_errno()
            if code in (errno.ENOSYS, errno.EPERM) and _descriptor_api is None:
                _descriptor_api_works(False)
                return False
            raise _fail(f"mount_setattr {target}", code)
        flags = _MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH
        if _libc.syscall(_MOVE_MOUNT, tree, _EMPTY, ctypes.c_int(target_fd), _EMPTY, ctypes.c_uint(flags)):
            code = ctypes.get_errno()
            if code == errno.ENOENT:  # the file opened is no longer at its name: another took its place
                raise _NameMoved(code, f"move_mount {target}: renamed over while it was being mounted")
            raise _fail(f"move_mount {target}", code)
        _descriptor_api_works(True)
        try:  # a mount goes with the file opened, wherever it is: one renamed aside took it from its name
            os.close(_opened_again(source_fd, target, read_only))
        except _NameMoved:  # taken off where it landed (a pinned one is writable)
            _mount_detach(tree, target)
            raise
        return True
    finally:
        os.close(tree)


def _descriptor_api_works(works: bool) -> None:
    global _descriptor_api
    _descriptor_api = works


def _mount_detach(fd: int, target: str) -> None:
    """Unmount the top mount at the file open at `fd` (the root of an attached `open_tree` clone, or the
    file a bind was made onto), wherever that file is: the setup's thread alone mounts in the namespace."""
    if _libc.umount2(f"/proc/self/fd/{fd}".encode(), ctypes.c_int(_MNT_DETACH)) != 0:
        raise _fail(f"umount {target} (renamed while it was being mounted)", ctypes.get_errno())


def _mount(source: bytes | None, target: bytes, flags: int) -> None:
    if _libc.mount(source, target, None, ctypes.c_ulong(flags), None) != 0:
        raise _fail(f"mount {target.decode(errors='replace')}", ctypes.get_errno())


def _fail(what: str, code: int) -> OSError:
    return OSError(code, f"{what}: {os.strerror(code)}")


def read_only_elsewhere(writable: Iterable[str]) -> bool:
    """In a private mount namespace: make every mount read-only but the directories of `writable`, which keep
    the mounts beneath them and their flags as they are. Landlock governs writes, not a change of mode,
    owner or times, which the owner of a file may make: a sandboxed root (no capability, but the owner of
    every system file) could `chmod u+s` a binary of root's or `chmod 666 /etc/shadow`. On a read-only
    mount it cannot (EROFS), while a file in a writable directory changes as before.

    Each outermost writable directory's mounts are cloned (`open_tree`, detached: the clone keeps their
    flags), every mount of the namespace is made read-only (`mount_setattr` recursive on `/`), and each
    clone is attached back onto its directory, opened again without following a link and checked to be
    the one cloned. A directory is opened without following a link anywhere on its path (`open_directory`):
    one with a link on the way is left read-only, as Landlock leaves its rule out. Returns False, having
    changed nothing, where those calls are refused (Linux before 5.12, a container's seccomp filter): the
    rest of the tree then keeps its flags.

    Raises:
        OSError: a directory was no longer the one cloned when its clone was to be attached back (the
            namespace is not used).
    """
    clones: list[tuple[str, int, tuple[int, int]]] = []
    try:
        for path in _outermost(writable):
            try:
                fd = open_directory(path)
            except OSError:
                continue  # gone, no directory at its name now, or a link on the way: nothing of it is writable
            try:
                info = os.fstat(fd)
                flags = _OPEN_TREE_CLONE | _AT_RECURSIVE | _AT_EMPTY_PATH | os.O_CLOEXEC
                tree = int(_libc.syscall(_OPEN_TREE, ctypes.c_int(fd), _EMPTY, ctypes.c_uint(flags)))
            finally:
                os.close(fd)
            if tree < 0:
                code = ctypes.get_errno()
                if code in (errno.ENOSYS, errno.EPERM) and not clones:
                    return False
                raise _fail(f"open_tree {path}", code)
            clones.append((path, tree, (info.st_dev, info.st_ino)))
        size = ctypes.c_size_t(ctypes.sizeof(_READ_ONLY))
        everything = ctypes.c_uint(_AT_RECURSIVE)
        if _libc.syscall(_MOUNT_SETATTR, ctypes.c_int(_AT_FDCWD), b"/", everything, ctypes.byref(_READ_ONLY), size):
            code = ctypes.get_errno()
            if code in (errno.ENOSYS, errno.EPERM):
                return False
            raise _fail("mount_setattr /", code)
        for path, tree, identity in clones:
            _attach_back(path, tree, identity)
        return True
    finally:
        for _, tree, _ in clones:
            os.close(tree)


def _outermost(directories: Iterable[str]) -> list[str]:
    """The directories not beneath another of them, the shallowest first."""
    found = sorted({os.path.normpath(d) for d in directories}, key=lambda d: (d.count("/"), d))
    kept: list[str] = []
    for directory in found:
        if not any(directory == k or directory.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(directory)
    return kept


def openat2(directory: int, path: str, flags: int, resolve: int) -> int:
    """`openat2(2)`: a descriptor of `path` opened relative to `directory` (`_AT_FDCWD`: the working
    directory) with `flags`, resolved under the `RESOLVE_*` bits of `resolve`.

    Raises:
        OSError: the kernel's error (ELOOP: a symlink `resolve` refuses; ENOSYS/EPERM: no openat2 here).
    """
    how = _OpenHow(flags, 0, resolve)
    encoded = os.fsencode(path)
    fd = int(_libc.syscall(_OPENAT2, directory, encoded, ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how))))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return fd


def open_directory(path: str) -> int:
    """An O_PATH descriptor of the directory `path`, opened without following a symlink anywhere on the way
    (`openat2` `RESOLVE_NO_SYMLINKS`, as Landlock's writable rules are opened: `kernel._open_rule_path`;
    where openat2 is refused, walked from `/` one name at a time): the plan resolved the path, so a link
    found on it now was put there since (a call let write `ext` puts a link to `/usr` in the place of
    `ext/a`, above a declared `ext/a/bin`), and following it would give `/usr/bin` a writable mount.

    Raises:
        OSError: ELOOP or ENOTDIR where a name on the way is a link or no directory, ENOENT where one is gone.
    """
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return openat2(_AT_FDCWD, path, flags, RESOLVE_NO_SYMLINKS)
    except OSError as error:
        if error.errno not in (errno.ENOSYS, errno.EPERM):
            raise
    fd = os.open("/", flags)
    try:
        for name in path.split("/"):
            if name:
                step = os.open(name, flags, dir_fd=fd)
                os.close(fd)
                fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def _attach_back(path: str, tree: int, identity: tuple[int, int]) -> None:
    """Attach the clone `tree` of `path`'s mounts onto `path`, which must still be the directory cloned."""
    target = open_directory(path)
    try:
        now = os.fstat(target)
        if (now.st_dev, now.st_ino) != identity:
            raise OSError(errno.ESTALE, f"mount {path}: replaced while the sandbox's mounts were made")
        flags = _MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH
        if _libc.syscall(_MOVE_MOUNT, tree, _EMPTY, ctypes.c_int(target), _EMPTY, ctypes.c_uint(flags)):
            raise _fail(f"move_mount {path}", ctypes.get_errno())
    finally:
        os.close(target)
