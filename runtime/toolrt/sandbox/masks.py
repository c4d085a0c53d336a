"""The files inside the project root that the `read` rules deny, to be masked in the OS sandbox.

The bash analyzer asks `read` only for the paths a command line names; `grep -r KEY .`, `tar -c .`
or `python3 -c 'open(".e"+"nv")'` reach a denied file by walking the tree or by a name built at run
time. So where a process runs in a mount namespace, every file the rules deny (and every directory
whose own path they deny) is covered by an empty read-only file (an empty read-only directory): the
process reads nothing, whichever way it gets there.

Only `deny` is masked. A process cannot ask mid-run, and masking what the rules `ask` for would
break `cat .env` after the person approved it; an `ask` path keeps the analyzer's question.

The walk does not read ignore files (a `.env` is usually git-ignored, and hidden from the search
tools for that reason, but `cat */*` does not care), skips `.git` (git's object store is not
masked: a committed secret stays reachable through `git show`) and follows no symlink. It is kept
per root and rules and reused while no directory it listed has changed (one `stat` per directory
per call); a root with more than `MAX_MASKS` denied paths, or more than `MAX_WALK` entries, refuses
to run processes rather than run them unmasked.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import ToolFailure

__all__ = ["MAX_MASKS", "MAX_WALK", "NO_MASKS", "DenyTest", "Masks", "denied_paths", "empty_file", "remove_at_exit"]

MAX_MASKS = 256
"""At most this many masks per root (each costs two mounts when a mount namespace is made)."""
MAX_WALK = 200_000
"""At most this many directory entries are looked at; a bigger tree refuses (fail closed)."""
_KEPT_WALKS = 16


@dataclass(frozen=True, slots=True)
class Masks:
    """What to hide in one process's mount namespace (absolute paths)."""

    files: tuple[str, ...] = ()
    directories: tuple[str, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()
    """(file of `files`, the read-only file bound over it instead of the empty one): a masked credential
    file's placeholder (see `credentials.masked_files`)."""

    def __bool__(self) -> bool:
        return bool(self.files or self.directories)

    def __len__(self) -> int:
        return len(self.files) + len(self.directories)


NO_MASKS = Masks()


class DenyTest(Protocol):
    """Which paths to mask: hashable (walks are kept per root and test), e.g.
    `toolrt.permissions.denied_reads.DenyTest`."""

    def __hash__(self) -> int: ...

    def denies(self, path: str) -> bool: ...


_lock = threading.Lock()
_walks: OrderedDict[tuple[str, DenyTest], tuple[tuple[tuple[str, int], ...], Masks]] = OrderedDict()
"""(root, rules) → (each listed directory's mtime, the masks found): reused while no directory changed."""


def denied_paths(root: Path, rules: DenyTest | None) -> Masks:
    """The paths inside `root` that `rules` deny (None: none), as masks.

    Raises:
        ToolFailure: more than `MAX_MASKS` denied paths, or a tree bigger than `MAX_WALK` entries.
    """
    if rules is None:
        return NO_MASKS
    key = (os.path.realpath(root), rules)
    with _lock:
        kept = _walks.get(key)
    if kept is not None and _unchanged(kept[0]):
        return kept[1]
    listed, masks = _walk(key[0], rules)
    with _lock:
        _walks[key] = (listed, masks)
        _walks.move_to_end(key)
        while len(_walks) > _KEPT_WALKS:
            _walks.popitem(last=False)
    return masks


def _unchanged(listed: tuple[tuple[str, int], ...]) -> bool:
    try:
        return all(os.lstat(directory).st_mtime_ns == mtime for directory, mtime in listed)
    except OSError:
        return False


def _walk(root: str, rules: DenyTest) -> tuple[tuple[tuple[str, int], ...], Masks]:
    listed: list[tuple[str, int]] = []
    files: list[str] = []
    directories: list[str] = []
    pending = [root]
    seen = 0
    while pending:
        directory = pending.pop()
        try:
            mtime = os.lstat(directory).st_mtime_ns
            entries = list(os.scandir(directory))
        except OSError:
            continue  # unreadable here is unreadable in the sandbox too
        listed.append((directory, mtime))
        seen += len(entries)
        if seen > MAX_WALK:
            raise ToolFailure(
                f"The read rules deny some files, and the project at {root} has more than {MAX_WALK} entries "
                "to look through for them, so the sandbox cannot hide them from this process. Nothing was run. "
                "Run it with the sandbox off on the host, or narrow the project root."
            )
        for entry in entries:
            # The entry's type as the directory listing gave it (lstat only where the file system
            # does not say); a symlink is neither a directory nor a regular file here.
            if entry.is_dir(follow_symlinks=False):
                if entry.name == ".git":
                    continue
                if rules.denies(entry.path):
                    directories.append(entry.path)
                else:
                    pending.append(entry.path)
            elif entry.is_file(follow_symlinks=False) and rules.denies(entry.path):
                files.append(entry.path)
        if len(files) + len(directories) > MAX_MASKS:
            raise ToolFailure(
                f"The read rules deny more than {MAX_MASKS} files in the project at {root}; the sandbox hides "
                f"at most {MAX_MASKS} from a process, so nothing was run. Deny a directory instead of the files "
                "in it, or keep fewer denied files in the project."
            )
    return tuple(listed), Masks(tuple(sorted(files)), tuple(sorted(directories)))


_empty_lock = threading.Lock()
_empty: list[str] = []


def empty_file() -> str:
    """An empty, read-only regular file of this process (bind-mounted over each masked file)."""
    with _empty_lock:
        if _empty and os.path.isfile(_empty[0]) and os.path.getsize(_empty[0]) == 0:
            return _empty[0]
        directory = tempfile.mkdtemp(prefix="toolrt-mask-")
        path = os.path.join(directory, "empty")
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444))
        os.chmod(directory, 0o555)
        _empty[:] = [path]
        remove_at_exit(directory)
        return path


def remove_at_exit(directory: str) -> None:
    """Remove `directory` (a read-only one of toolrt's, such as the empty file's) when the interpreter exits."""
    atexit.register(_remove, directory)


def _remove(directory: str) -> None:
    try:
        os.chmod(directory, 0o700)
    except OSError:
        return
    shutil.rmtree(directory, ignore_errors=True)
