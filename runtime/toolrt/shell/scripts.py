"""Script files the model wrote: found through the attribution journal, read beneath the project root.

A line that runs a file (`bash FILE`, `sh FILE`, `source FILE`, `. FILE`, `./FILE`, `python3 FILE`)
runs whatever the file holds. When the journal says the file's current content is the model's and the
person has not approved it (`toolrt.attribution`), the analyzer reads it: bash text is analysed as if
typed on the line, anything else is opaque. A file the person wrote keeps being a command under its
own rules. Nothing here runs unless a line runs a file: the hot path does no I/O.

The file is opened by descriptor, one component at a time from the project root with `O_NOFOLLOW`
(its symlinks resolved first, and the resolved path must stay beneath the root), `O_NONBLOCK` so a FIFO
cannot stall the analysis, and read up to the analyzer's input budget.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..beneath import is_within, steady_realpath
from . import limits

if TYPE_CHECKING:
    from ..attribution import Journal

__all__ = ["BASH_SHEBANGS", "ModelScript", "model_script", "shebang"]

BASH_SHEBANGS = frozenset(("bash", "sh", "dash", "ash"))
"""Interpreters whose scripts are read as bash text (never weaker than POSIX sh: see wrappers.yaml)."""
_SHELL_FLAGS = re.compile(r"-[A-Za-z]+")
_BINARY = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, slots=True)
class ModelScript:
    """A file the model wrote or changed and the person has not approved, as a line runs it."""

    path: str
    """Its real path."""
    text: str | None
    """Its content as text, or None when it cannot be read as bash text (see `problem`)."""
    problem: str | None = None
    """Why its content cannot be read (too large, binary, unreadable, outside the root), or None."""
    call_id: str | None = None
    """The call that wrote it ("" when not known); None when who wrote it could not be told (the file
    is missing, unreadable, or outside the root)."""


def model_script(journal: Journal, root_real: str, absolute: str) -> ModelScript | None:
    """The model's script at the absolute path `absolute`, or None when the person wrote it (or
    approved it), or when nothing runnable is there (no file, a directory). A file whose author cannot
    be told, or the model's that cannot be read as text, is a `ModelScript` with a problem."""
    real = steady_realpath(absolute)
    shown = posixpath.basename(absolute) or absolute
    if not is_within(real, root_real):
        # A link out of the project (a virtual environment's `bin/python`): not read (what a reason
        # quotes reaches the model), only whether the model wrote what it leads to.
        hold = journal.hold(Path(real), Path(root_real)) if os.path.isfile(real) else None
        if hold is None:
            return None
        return ModelScript(
            real, None, f"{shown} leads outside the project ({real}), where it is not read", hold.call_id
        )
    try:
        data, size = _read_beneath(root_real, real)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        # Nothing to run now, so nobody wrote it; what the line itself writes there before running it
        # is caught by the caller as far as the writes are seen (redirections, written operands).
        return None
    except _NotAFile:
        return ModelScript(real, None, f"{shown} is not a regular file (a FIFO, socket or device)")
    except OSError as error:
        return ModelScript(real, None, f"{shown} cannot be read ({error.strerror or error})")
    if data is None:  # over the budget: the journal reads it whole to tell whose it is
        hold = journal.hold(Path(real), Path(root_real))
        if hold is None:
            return None
        problem = f"{shown} is larger than {limits.MAX_INPUT_BYTES} bytes ({size}), too large to analyse"
        return ModelScript(real, None, problem, hold.call_id)
    hold = journal.hold(Path(real), Path(root_real), data=data)
    if hold is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ModelScript(real, None, f"{shown} is not text (a program or binary data)", hold.call_id)
    if _BINARY.search(text):
        return ModelScript(real, None, f"{shown} is not text (a program or binary data)", hold.call_id)
    return ModelScript(real, text, None, hold.call_id)


def shebang(text: str) -> str | None:
    """The interpreter a `#!` line names (`/usr/bin/env python3` → `python3`, `/bin/bash -e` → `bash`),
    "" when there is no `#!` line (bash then runs the file itself), None when the line names an
    interpreter with arguments this module does not read (`env -S …`, `bash --rcfile x`)."""
    if not text.startswith("#!"):
        return ""
    words = text[2:].partition("\n")[0].split()
    if not words:
        return None
    program, arguments = posixpath.basename(words[0]), words[1:]
    if program == "env":
        if not arguments or arguments[0].startswith("-") or "=" in arguments[0]:
            return None
        program, arguments = posixpath.basename(arguments[0]), arguments[1:]
    if program in BASH_SHEBANGS and not all(_SHELL_FLAGS.fullmatch(argument) for argument in arguments):
        return None
    return program


class _NotAFile(OSError):
    """The path names a directory, FIFO, socket or device."""


def _read_beneath(root_real: str, real: str) -> tuple[bytes | None, int]:
    """The content of `real` (beneath `root_real`, no symlink on the way) and its size; None for the
    content when it is over the input budget."""
    parts = [part for part in posixpath.relpath(real, root_real).split("/") if part not in ("", ".")]
    if not parts:
        raise _NotAFile(f"{real} is the project root")
    directory = os.open(root_real, _DIRECTORY_FLAGS)
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIRECTORY_FLAGS, dir_fd=directory)
            os.close(directory)
            directory = inner
        fd = os.open(parts[-1], _READ_FLAGS, dir_fd=directory)
    finally:
        os.close(directory)
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(real)
        if not stat.S_ISREG(status.st_mode):
            raise _NotAFile(real)
        if status.st_size > limits.MAX_INPUT_BYTES:
            return None, status.st_size
        chunks: list[bytes] = []
        total = 0
        while total <= limits.MAX_INPUT_BYTES:
            chunk = os.read(fd, limits.MAX_INPUT_BYTES + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limits.MAX_INPUT_BYTES:  # it grew while read
            return None, total
        return b"".join(chunks), total
    finally:
        os.close(fd)
