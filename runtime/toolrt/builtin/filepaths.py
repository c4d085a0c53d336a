"""Where a file tool's path really leads, and opening it without ever blocking on a special file.

Dispatch asks `external_directory` for the path arguments a tool declares under `permission.paths`.
The handlers check again against the path they are about to touch, symlinks resolved, because a
symlink inside the root may point outside it and a path can change between dispatch and the
handler: nothing outside the root is read or written without an `external_directory` decision, and a
real path inside the root that the call's rules were not checked on (a name swapped for a symlink
since) is refused. Everything after `guard` opens that real path as `beneath` does: no symlink
followed, the descriptor's own path compared.

Files are opened with `O_NONBLOCK` and checked with `fstat` on the open descriptor, so a FIFO or a
device put where a regular file was expected is refused instead of hanging the call.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from pathlib import Path
from typing import BinaryIO, Literal

from ..attribution import journal_for
from ..beneath import changed, is_within, open_checked, open_parent, stat_checked, steady_realpath
from ..call.context import ToolContext
from ..errors import PathChanged, ToolFailure
from ..permissions.model import usable_exempt
from ..truncate import tool_output_dir

__all__ = [
    "attribute_writes",
    "Kind",
    "describe_mode",
    "is_a_directory",
    "not_regular",
    "exempt_directories",
    "external_patterns",
    "checked_real",
    "guard",
    "guard_read",
    "left_out_note",
    "readable",
    "decode_text",
    "encode_text",
    "make_parents",
    "open_regular",
    "read_regular",
    "relative",
    "remove_directory",
    "stat_or_none",
    "steady_realpath",
    "write_regular",
]

Kind = Literal["file", "directory"]

_NONBLOCK = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def relative(path: Path, root: Path) -> str:
    """`path` relative to `root` with `/` separators (`../x` when outside), as edit permissions match it."""
    return os.path.relpath(path, root).replace(os.sep, "/")


def external_patterns(path: Path, root: Path, kind: Kind = "file", exempt: tuple[Path, ...] = ()) -> tuple[str, ...]:
    """The `<dir>/*` patterns `external_directory` must allow before `path` is touched (empty inside the root).

    Both the path as written and its real target (symlinks resolved) are checked, each against the
    root in the same form, so neither `../x` nor a symlink out of the root slips through. A path
    inside one of the `exempt` directories never asks; those compare lexically, and one that is or
    passes through a symlink exempts nothing (`usable_exempt`).

    Raises:
        ToolFailure: the path contains a NUL byte (no filesystem call accepts it).
    """
    if "\x00" in str(path):
        raise ToolFailure(f"Invalid path {str(path)!r}: it contains a NUL byte. Give a plain file path.")
    patterns: list[str] = []
    lexical_root = os.path.normpath(root)
    allowed = usable_exempt(exempt) if exempt else ()
    for candidate, base in (
        (os.path.normpath(path), lexical_root),
        (steady_realpath(path), steady_realpath(root)),
    ):
        if is_within(candidate, base) or any(is_within(candidate, directory) for directory in allowed):
            continue
        directory = candidate if kind == "directory" else os.path.dirname(candidate)
        pattern = os.path.join(directory, "*").replace(os.sep, "/")
        if pattern not in patterns:
            patterns.append(pattern)
    return tuple(patterns)


def exempt_directories(ctx: ToolContext) -> tuple[Path, ...]:
    """Directories outside the root that never ask: the project's tool-output directory (the snapshot's CallSite)."""
    return (tool_output_dir(ctx.data_dir, ctx.root),)


async def guard(ctx: ToolContext, path: Path, kind: Kind = "file", *, writes: bool = False) -> Path:
    """Ask `external_directory` if `path` or its target lies outside the root; return the real path,
    which the rules of this call were checked on (open it with `beneath`, never by `path` again).

    Raises:
        PermissionBlocked: the ask was denied or rejected.
        PathChanged: the real path is not one the call's rules were checked on (a name on the way
            became a symlink after the permission step).
    """
    patterns = external_patterns(path, ctx.root, kind, exempt_directories(ctx))
    if patterns:
        await ctx.ask(
            "external_directory",
            patterns,
            always=patterns,
            metadata={"filepath": str(path), "parentDir": patterns[0][:-2]},
        )
    return checked_real(ctx, path, kind, patterns, writes=writes)


def checked_real(ctx: ToolContext, path: Path, kind: Kind, asked: Collection[str], *, writes: bool = False) -> Path:
    """The real path of `path`, when the call's rules were checked on it: the path as named (no symlink
    on the way), a root-relative or absolute pattern the call was granted (and, for `writes`, not a
    protected path the call was not allowed), or a directory outside the root among the `asked`
    `external_directory` patterns.

    Raises:
        PathChanged: none of these (a name on the way became a symlink after the permission step).
    """
    real = Path(steady_realpath(path))
    if real == Path(os.path.normpath(path)):
        return real  # no symlink on the way: the path as named is what dispatch checked
    real_root = steady_realpath(ctx.root)
    if is_within(str(real), real_root):
        granted = {pattern for _, pattern in ctx.granted}
        if relative(real, Path(real_root)) not in granted and str(real) not in granted:
            raise changed(path)
        if writes and not ctx.permits("protected", str(real)):
            raise changed(path)  # the edit rule saw the target, the protected check saw another
    elif not set(external_patterns(real, ctx.root, kind, exempt_directories(ctx))) <= set(asked):
        raise changed(path)  # the target moved out of the root after the external check
    return real


def attribute_writes(ctx: ToolContext, paths: Collection[Path], via: str) -> None:
    """Journal what a built-in file tool just wrote (see `toolrt.attribution`): the model's content, or
    the person's where this call's `protected` ask for that file was approved. A file gone already
    (a later step of the same patch moved it) has nothing to record."""
    journal = journal_for(ctx.data_dir)
    approved = {pattern for permission, pattern in ctx.granted if permission == "protected"}
    for path in paths:
        try:  # the checked real path's own descriptor: a name swapped for a link since records nothing of its target
            fd = open_checked(path, os.O_RDONLY | _NONBLOCK)
        except (OSError, PathChanged):
            continue  # whoever moved it since is a process, whose span attributes what it did
        with os.fdopen(fd, "rb") as stream:
            status = os.fstat(stream.fileno())
            if not stat.S_ISREG(status.st_mode):
                continue
            data = stream.read()
        if relative(path, ctx.root) in approved or str(path) in approved:
            journal.approve(path, data, via="protected ask")
        else:
            journal.wrote(path, data, call_id=ctx.call_id, via=via, identity=(status.st_dev, status.st_ino))


def readable(ctx: ToolContext, path: str) -> bool:
    """Whether the `read` rules allow the absolute `path` outright, both as named and as its real target.

    The search tools show only such files: a file `read` would ask for (or deny) is left out, so
    neither a glob, a grep `include`, nor a symlink to it brings its name or content to the model.
    """
    if not ctx.permits("read", path):
        return False
    real = steady_realpath(path)
    return real == path or ctx.permits("read", real)


class ReadableNames:
    """Collects ripgrep's file records (relative to `directory`) that `readable` allows, counting the
    rest; as a `consume` callback it stops the search once it holds one name past `limit`."""

    def __init__(self, ctx: ToolContext, directory: Path, limit: int) -> None:
        self.ctx, self.directory, self.limit = ctx, directory, limit
        self.found: list[str] = []
        self.left_out = 0

    def __call__(self, record: bytes) -> bool:
        if record:
            name = os.fsdecode(record)
            if readable(self.ctx, str(self.directory / name)):
                self.found.append(name)
            else:
                self.left_out += 1
        return len(self.found) <= self.limit  # one past the limit proves there are more


def left_out_note(count: int) -> str:
    """What a search tool says about the files it left out (empty when none were)."""
    if not count:
        return ""
    files = "1 file" if count == 1 else f"{count} files"
    return (
        f"({files} left out: the read rules do not allow {'it' if count == 1 else 'them'} without asking. "
        "Read a file by its path to ask for it.)"
    )


async def guard_read(ctx: ToolContext, path: Path) -> None:
    """Ask `read` for `path` as named and as its real target (a search tool's `path` argument)."""
    patterns = list(dict.fromkeys((str(path), steady_realpath(path))))
    await ctx.ask("read", patterns, always=["*"])


def stat_or_none(path: Path, display: str) -> os.stat_result | None:
    """`os.stat(path)` following symlinks, or None when nothing is there.

    Raises:
        ToolFailure: the path cannot be examined (permission on a parent, a NUL byte, a name too long).
    """
    try:
        return stat_checked(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PathChanged:
        raise
    except ValueError as error:
        raise ToolFailure(f"Invalid path {display!r}: {error}. Give a plain file path.") from error
    except OSError as error:
        raise ToolFailure(f"Cannot access {display}: {error.strerror}.") from error


def is_a_directory(display: str) -> ToolFailure:
    """The refusal to read, write or edit a directory as a file."""
    return ToolFailure(f"Path is a directory, not a file: {display}")


def not_regular(display: str, mode: int) -> ToolFailure:
    """The refusal to write over what is not a regular file (a FIFO, a device, a socket)."""
    return ToolFailure(
        f"Cannot write {display}: it is {describe_mode(mode)}, not a regular file. "
        "Choose a path that is a regular file or does not exist yet."
    )


def describe_mode(mode: int) -> str:
    """What kind of filesystem object a `st_mode` describes, with an article ("a FIFO (named pipe)")."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def open_regular(path: Path, display: str) -> tuple[BinaryIO, os.stat_result]:
    """Open a regular file for reading without blocking; return the stream and its `fstat`.

    Raises:
        ToolFailure: the file is not readable, or it is not a regular file (FIFO, device, socket, directory).
    """
    try:
        fd = open_checked(path, os.O_RDONLY | _NONBLOCK)
    except PathChanged:
        raise
    except PermissionError as error:
        raise ToolFailure(
            f"Cannot read {display}: permission denied. The file's permissions do not allow reading it; "
            "ask the user to change them, or read a different file."
        ) from error
    except OSError as error:
        raise ToolFailure(f"Cannot read {display}: {error.strerror}.") from error
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        raise ToolFailure(
            f"Cannot read {display}: it is {describe_mode(status.st_mode)}, not a regular file. "
            "Only regular files and directories can be read."
        )
    return os.fdopen(fd, "rb"), status


def decode_text(data: bytes) -> str:
    """File bytes as text; bytes that are not UTF-8 survive as surrogate escapes and are written back unchanged."""
    return data.decode("utf-8", errors="surrogateescape")


def encode_text(text: str, display: str) -> bytes:
    """Text as the bytes to write (the inverse of `decode_text`).

    Raises:
        ToolFailure: the text holds a lone surrogate, which no UTF-8 file can contain.
    """
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError as error:
        raise ToolFailure(
            f"Cannot write {display}: the new text contains {error.object[error.start : error.end]!r}, "
            "a lone surrogate that UTF-8 cannot encode. Remove it or use the character it was meant to be."
        ) from error


def read_regular(path: Path, display: str) -> tuple[str, os.stat_result]:
    """The whole text of the regular file `path` (see `decode_text`) and the `fstat` taken before reading.

    Raises:
        ToolFailure: as `open_regular`, or a read error.
    """
    stream, status = open_regular(path, display)
    with stream:
        try:
            data = stream.read()
        except OSError as error:
            raise ToolFailure(f"Cannot read {display}: {error.strerror}.") from error
    return decode_text(data), status


def make_parents(path: Path, display: str, created: list[Path] | None = None) -> None:
    """Create the missing parent directories of the real `path`, each with `mkdirat` beneath the one
    before (see `beneath.open_parent`); each one made is appended to `created`.

    Raises:
        ToolFailure: a parent exists as a file, or a directory cannot be created.
        PathChanged: a parent is a symlink now.
    """
    try:
        with open_parent(path, create=True, created=created):
            pass
    except PathChanged:
        raise
    except (FileExistsError, NotADirectoryError) as error:
        raise ToolFailure(
            f"Cannot create the directories for {display}: a parent path exists and is not a directory."
        ) from error
    except OSError as error:
        raise ToolFailure(f"Cannot create the directories for {display}: {error.strerror}.") from error


def remove_directory(directory: Path) -> None:
    try:
        with open_parent(directory) as parent:
            os.rmdir(directory.name, dir_fd=parent)
    except OSError:
        pass  # not empty (something else put a file there) or gone: left as it is


def write_regular(path: Path, data: bytes, display: str) -> os.stat_result:
    """Create or overwrite the regular file `path` with `data` (parents created); return its new `fstat`.

    Raises:
        ToolFailure: the target is not a regular file, or it cannot be written.
    """
    created: list[Path] = []
    make_parents(path, display, created)
    try:
        fd = open_checked(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | _NONBLOCK, 0o666)
    except (PathChanged, OSError) as error:
        for directory in reversed(created):  # a refused write leaves no new directory behind
            remove_directory(directory)
        if isinstance(error, PathChanged):
            raise
        if isinstance(error, PermissionError):
            raise ToolFailure(
                f"Cannot write {display}: permission denied. Ask the user to change the file's permissions."
            ) from error
        raise ToolFailure(f"Cannot write {display}: {error.strerror}.") from error
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise not_regular(display, status.st_mode)
        # Only now that the target is known to be a regular file is it safe to drop its old content.
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        return os.fstat(fd)
    except OSError as error:
        raise ToolFailure(f"Cannot write {display}: {error.strerror}.") from error
    finally:
        os.close(fd)
