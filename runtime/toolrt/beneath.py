"""Opening exactly the path the rules were checked on: no symlink followed, the descriptor's path compared.

The one helper every floor uses to touch a file a rule was checked on (the built-in file tools, the
language servers' reads, the permission step's `realpath`). `builtin.filepaths.guard` resolves a path
argument's symlinks once (`steady_realpath`) and the rules are checked on that real path.
Every open, stat, mkdir, rename and unlink of the file tools then walks that real path from a
directory descriptor with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
(component by component with `O_NOFOLLOW` where `openat2` is missing or filtered), parents are made
with `mkdirat` beneath their opened parent, and the opened descriptor's own path (`/proc/self/fd`) must
be the checked one. A name swapped for a symlink, or a directory moved, after the check is
`PathChanged` (a refusal with an audit record), never a file read or written somewhere else.

`is_within` is the one answer to "is this path inside that root" for every floor (the permission
step, the file tools, the bash analysis, the language servers' program lookup, the protected paths,
the sandbox's approved paths and cover, the config's description files, the served skills).
"""

from __future__ import annotations

import errno
import functools
import os
import posixpath
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import PathChanged

__all__ = [
    "changed",
    "descriptor_path",
    "is_within",
    "open_checked",
    "open_parent",
    "replace_checked",
    "stat_checked",
    "steady_realpath",
    "unlink_checked",
    "use_openat2",
]

_OPENAT2 = 437  # the same number on every architecture (the generic syscall table)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
_DIRECTORY = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


use_openat2 = True
"""False after the kernel refused `openat2` once (absent, or filtered by a container's seccomp); the
tests set it to exercise the `O_NOFOLLOW` walk."""


def changed(path: Path | str) -> PathChanged:
    """The refusal for a path that is no longer what the rules were checked on."""
    return PathChanged(
        f"{path} changed while the call ran (a name on the way became a symlink or was moved after the "
        "permission check), so nothing was read or written. Check what is at that path and call the tool again."
    )


def is_within(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether `path` is `root` or lies below it, compared lexically and whole component by component.

    Both sides are normalised first (`.`, `..`, repeated and trailing slashes; a leading `//` is `/`,
    as Linux reads it), so `/proj/../etc` is not within `/proj` and `/proj2` is not either. Names
    compare case-sensitively, and an absolute path is never within a relative root nor the reverse.
    No symlink is followed: a caller that must know where a path leads compares the real paths of
    both (`steady_realpath`), and one that must refuse either way checks both forms.
    """
    whole, base = _normpath(path), _normpath(root)
    if whole[:2] == "//":
        whole = whole[1:]
    if base[:2] == "//":
        base = base[1:]
    if base == "/":
        return whole[0] == "/"
    if base == ".":  # a relative root: every relative path that does not climb out of it
        return whole[0] != "/" and whole != ".." and not whole.startswith("../")
    return whole == base or whole.startswith(base + "/")


_normpath = posixpath.normpath  # takes a str or a PathLike


def steady_realpath(path: Path | str) -> str:
    """`os.path.realpath`, retried while a name on the way is being swapped (a link read as it is
    replaced raises EINVAL): the permission step's view of where a path leads, never a traceback.

    Raises:
        PathChanged: the path kept changing.
    """
    for _ in range(3):
        try:
            return os.path.realpath(path)
        except OSError as error:
            last = error
    raise changed(path) from last


def _parts(path: Path) -> list[str]:
    if not path.is_absolute():
        raise ValueError(f"not an absolute path: {path}")
    return [part for part in path.parts[1:] if part]


@functools.cache
def _syscall() -> tuple[Any, Any, Any]:
    """ctypes, libc and `struct open_how`, made at the first open: the modules that only ask `is_within`
    (the config's loaders among them, on `toolrt validate`'s start) do not import ctypes."""
    import ctypes

    class OpenHow(ctypes.Structure):
        _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))

    return ctypes, ctypes.CDLL(None, use_errno=True), OpenHow


def _openat2(directory: int, relative: str, flags: int, mode: int) -> int:
    """`openat2` with `_RESOLVE`; raises OSError (ENOSYS when this kernel or its filter refuses it)."""
    global use_openat2
    if not use_openat2:
        raise OSError(errno.ENOSYS, "openat2 not used")
    ctypes, libc, open_how = _syscall()
    how = open_how(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, _RESOLVE)
    fd = int(
        libc.syscall(_OPENAT2, directory, os.fsencode(relative), ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    )
    if fd >= 0:
        return fd
    code = ctypes.get_errno()
    if code == errno.ENOSYS:  # absent, or filtered that way: the walk from now on
        use_openat2 = False
    raise OSError(code, os.strerror(code), relative)


def _step(directory: int, name: str, path: Path) -> int:
    """One directory component opened beneath `directory`, never through a symlink."""
    fd = os.open(name, _DIRECTORY, dir_fd=directory)
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        return fd
    os.close(fd)
    if stat.S_ISLNK(mode):  # O_PATH | O_NOFOLLOW opens a link itself
        raise changed(path)
    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), name)


@contextmanager
def open_parent(path: Path, *, create: bool = False, created: list[Path] | None = None) -> Iterator[int]:
    """A descriptor of `path`'s parent directory, reached from `/` one component at a time, none a
    symlink; with `create`, missing directories are made with `mkdirat` beneath the one before (each
    appended to `created`, so a refused write can remove them again).

    Raises:
        PathChanged: a component is a symlink now.
        NotADirectoryError, FileNotFoundError, OSError: as the kernel reports them.
    """
    parts = _parts(path)
    fd = os.open("/", _DIRECTORY | os.O_DIRECTORY)
    here = Path("/")
    try:
        for name in parts[:-1]:
            here = here / name
            try:
                following = _step(fd, name, path)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o777, dir_fd=fd)
                if created is not None:
                    created.append(here)
                following = _step(fd, name, path)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise changed(path) from error
                raise
            os.close(fd)
            fd = following
        yield fd
    finally:
        os.close(fd)


def descriptor_path(fd: int) -> str | None:
    """The path the kernel has for an open descriptor (None where /proc is not mounted)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _same(fd: int, path: Path) -> bool:
    found = descriptor_path(fd)
    return found is None or found == str(path)


def open_checked(path: Path, flags: int, mode: int = 0o666) -> int:
    """Open the absolute `path` by exactly its components (see the module); the caller closes the fd.

    Raises:
        PathChanged: a component is a symlink now, or the descriptor is not at `path`.
        OSError: as the kernel reports it (FileNotFoundError, PermissionError, ...).
    """
    relative = "/".join(_parts(path)) or "."
    anchor = os.open("/", _DIRECTORY | os.O_DIRECTORY)
    try:
        fd = _openat2(anchor, relative, flags, mode)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EXDEV):
            raise changed(path) from error
        if error.errno not in (errno.ENOSYS, errno.EPERM):
            raise
        fd = _open_walking(path, flags, mode)  # EPERM: a seccomp filter, or the file's own answer again
    finally:
        os.close(anchor)
    if not _same(fd, path):
        os.close(fd)
        raise changed(path)
    return fd


def _open_walking(path: Path, flags: int, mode: int) -> int:
    """The portable fallback: each parent with `O_NOFOLLOW`, then the file with `O_NOFOLLOW`."""
    if path == Path("/"):
        return os.open("/", flags | os.O_CLOEXEC, mode)
    with open_parent(path) as parent:
        try:
            return os.open(path.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise changed(path) from error
            raise


def stat_checked(path: Path) -> os.stat_result:
    """`fstat` of `path` opened as `open_checked` opens it (a symlink at the end is `PathChanged`)."""
    fd = open_checked(path, os.O_PATH)
    try:
        status = os.fstat(fd)
    finally:
        os.close(fd)
    if stat.S_ISLNK(status.st_mode):
        raise changed(path)
    return status


def replace_checked(source: Path, target: Path) -> None:
    """Rename `source` over `target`, both names in the same directory, reached as `open_parent` does."""
    with open_parent(target) as parent:
        os.replace(source.name, target.name, src_dir_fd=parent, dst_dir_fd=parent)


def unlink_checked(path: Path) -> None:
    """Remove the name `path` (a symlink itself, not its target) in its parent reached as `open_parent` does."""
    with open_parent(path) as parent:
        try:
            os.unlink(path.name, dir_fd=parent)
        except FileNotFoundError:
            pass
