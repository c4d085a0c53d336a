"""What one analysis of a bash line collects, and the permission requests it turns into."""

from __future__ import annotations

import posixpath
import time
from typing import TYPE_CHECKING

from ..permissions.model import PermissionRequest, plain_request
from . import limits
from .listings import Listings
from .named import named_commands

if TYPE_CHECKING:
    from .scripts import ModelScript

__all__ = ["MAX_READ_PATHS", "Findings"]

MAX_READ_PATHS = 1_024
"""Paths named by one line that are checked against the `read` rules; past this the rest are not."""


class Findings:
    """What one analysis collected; `requests()` turns it into the call's permission requests.

    A plain slotted class rather than a dataclass: one is built per analysed line, and its
    fields are set directly (no default factories) to keep that cheap.
    """

    __slots__ = (
        "always",
        "cd_redefined",
        "deadline",
        "directories",
        "emitted",
        "expand_globs",
        "globbing",
        "line",
        "listings",
        "named",
        "patterns",
        "read",
        "scripts",
        "trapped",
        "unnamed",
        "unseen",
        "written",
    )

    def __init__(self, *, expand_globs: bool = True) -> None:
        self.patterns: dict[str, None] = {}
        self.always: dict[str, None] = {}
        self.directories: dict[str, None] = {}
        self.unseen: dict[tuple[tuple[str, ...], str], None] = {}
        """(patterns, reason) of each part that could not be seen."""
        self.line = ""
        """The whole command line: the commands it visibly names are checked against deny rules
        whenever part of it could not be seen."""
        self.named: dict[str, None] = {}
        """More commands the line may run, found another way (what a glob command name matches)."""
        self.unnamed = False
        """Some command the line may run could not be listed (a glob matching too many programs)."""
        self.expand_globs = expand_globs
        """Resolve globs against the file system; False for `check` and `tests:` patterns."""
        self.deadline = time.monotonic() + limits.TIME_BUDGET
        self.written: dict[str, None] = {}
        """Absolute paths the commands write: redirect targets and written operands (writes.yaml)."""
        self.emitted = 0
        """Commands the line runs so far, in the order bash runs them (inline Python counts as inert only
        when nothing ran before it that could have written a module it imports)."""
        self.cd_redefined = False
        """Whether the line (or a script it runs) defines a function named `cd`, `pushd` or `popd`: then
        none of them is known to change the directory (`cd() { :; }; cd sub && cat ../x` reads `../x`
        where it started)."""
        self.trapped = False
        """Whether the line (or a script it runs) sets a trap: a line's final `cd` then still counts."""
        self.globbing: str | None = None
        """What changed how later globs match (`shopt -s nocaseglob`, `GLOBIGNORE`, `bash -O`), anywhere in
        the line or the scripts it runs (`eval 'shopt -s nocaseglob'; cat [L]NK/x`)."""
        self.listings = Listings()
        """Which names the directories the line names hold, each directory listed once."""
        self.scripts: dict[str, ModelScript | None] = {}
        """Absolute path → what `scripts.model_script` found there, so a line that runs one file many times
        reads it once."""
        self.read: dict[str, None] = {}
        """Absolute paths the line names as operands or redirects (bounded by `MAX_READ_PATHS`): the bash
        tool asks `read` for them, so a rule that denies reading a file binds `cat` as it binds `read`."""

    def fail_closed(self, text: str, reason: str) -> None:
        """Text the analyzer cannot see into: judged as the ruleset's fallback, at least ask, and
        denied when the line visibly names a command a rule denies."""
        self.unseen[((text,), reason)] = None

    def unseen_command(self, patterns: tuple[str, ...], reason: str) -> None:
        """A command the analyzer parsed but whose effect it cannot see (a loader variable)."""
        self.unseen[(patterns, reason)] = None

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def requests(self) -> tuple[PermissionRequest, ...]:
        """`external_directory` first (as dispatch checks it), then `bash`, then the unseen ones."""
        if not self.directories and not self.unseen:  # the common line: its commands' patterns only
            return (plain_request("bash", tuple(self.patterns), tuple(self.always)),) if self.patterns else ()
        out: list[PermissionRequest] = []
        if self.directories:
            globs = tuple(posixpath.join(directory, "*") for directory in self.directories)
            out.append(PermissionRequest("external_directory", globs, globs))
        if self.patterns:
            out.append(PermissionRequest("bash", tuple(self.patterns), tuple(self.always)))
        named, complete = named_commands(self.line) if self.unseen else ((), True)
        complete = complete and not self.unnamed
        if self.named:
            named = tuple(dict.fromkeys((*named, *self.named)))
        for patterns, reason in self.unseen:
            if not complete:
                reason += "; the commands it may run could not all be checked against the rules"
            out.append(
                PermissionRequest(
                    "bash", patterns, (), floor=None if complete else "deny", reason=reason, opaque=True, named=named
                )
            )
        return tuple(out)
