"""`toolrt trust`: show the person each config file or module the model changed, and approve it.

Each held file (see `toolrt.attribution`) is shown as a unified diff against the content last loaded
as the person's there (the whole file when there is none), with who changed it. On a terminal each is
asked about; `--yes` approves every one shown (or the FILEs named); otherwise they are only listed,
with exit status 1 while any is held. An approved file loads on the next build (this command reloads). A FILE named
that is no config file but a script the model wrote (bash analysis reads those until approved) is
shown and approved the same way.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from ..api import Runtime
from ..attribution import Hold, journal_for
from ..permissions.shown import escape_controls

__all__ = ["change_text", "run_trust"]

_MAX_DIFF_LINES = 400


def change_text(rt: Runtime, hold: Hold) -> str:
    """What the person reviews for `hold`: where, who, and the diff (cut after 400 lines)."""
    root = rt.root
    shown = str(hold.path.relative_to(root)) if hold.path.is_relative_to(root) else str(hold.path)
    before = journal_for(rt.snapshot.data_dir).previous(hold.path)
    try:
        after = hold.path.read_bytes()
    except OSError as error:
        return f"{shown}: cannot read it: {error.strerror}\n"
    old = _lines(before.decode("utf-8", "replace")) if before is not None else []
    lines = list(
        difflib.unified_diff(
            old,
            _lines(after.decode("utf-8", "replace")),
            fromfile=f"{shown} (last approved)" if before is not None else "/dev/null",
            tofile=f"{shown} (now)",
        )
    )
    if len(lines) > _MAX_DIFF_LINES:
        lines = [*lines[:_MAX_DIFF_LINES], f"... {len(lines) - _MAX_DIFF_LINES} more diff lines not shown\n"]
    # The model wrote these lines: a carriage return or an escape sequence would repaint the terminal and
    # hide what the person approves, so every control character is shown escaped (as an ask shows it).
    body = "".join(
        escape_controls(line[:-1]) + "\n"
        if line.endswith("\n")
        else escape_controls(line) + "\n\\ No newline at end of file\n"
        for line in lines
    )
    return f"{escape_controls(shown)}: {hold.reason().split(':', 1)[0]}\n{body}"


def _lines(text: str) -> list[str]:
    """`text` split after each `\\n` only: a carriage return or a Unicode line separator inside a line is
    shown escaped, not taken for a line break."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def run_trust(
    rt: Runtime,
    files: Sequence[str],
    *,
    approve_all: bool,
    json_output: bool,
    out: TextIO,
    confirm: Callable[[str], bool] | None,
) -> int:
    """The command's body: 0 when nothing is left held, 1 otherwise."""
    holds = list(rt.held())
    if files:
        named = {Path(rt.root, name).absolute() for name in files}
        holds = [hold for hold in holds if hold.path in named]
        holds.extend(_held_scripts(rt, named - {hold.path for hold in holds}))
    approved: list[Hold] = []
    for hold in holds:
        text = change_text(rt, hold)
        if not json_output:
            out.write(text + "\n")
        if approve_all or (confirm is not None and confirm(f"Approve {hold.path.name} and load it?")):
            rt.approve(hold)
            approved.append(hold)
    left = [hold for hold in holds if hold not in approved]
    if json_output:
        json.dump(
            {
                "held": [_entry(rt, hold) for hold in left],
                "approved": [_entry(rt, hold) for hold in approved],
            },
            out,
            indent=2,
        )
        out.write("\n")
    elif not holds:
        out.write("Nothing is held: every config file and module is the person's or approved.\n")
    else:
        for hold in approved:
            out.write(f"approved: {hold.path}\n")
        if left:
            out.write(f"{len(left)} file(s) still held; approve with `toolrt trust --yes` after reviewing.\n")
    return 1 if left else 0


def _held_scripts(rt: Runtime, paths: set[Path]) -> list[Hold]:
    """Other named files the model wrote (a script a line runs, which bash analysis reads until the
    person approves it), held under their real path as the analyzer looks them up."""
    journal = journal_for(rt.snapshot.data_dir)
    root = Path(os.path.realpath(rt.root))
    found = []
    for path in sorted(paths):
        hold = journal.hold(Path(os.path.realpath(path)), root) if path.is_file() else None
        if hold is not None:
            found.append(hold)
    return found


def _entry(rt: Runtime, hold: Hold) -> dict[str, str]:
    return {
        "file": str(hold.path),
        "call": hold.call_id,
        "via": hold.via,
        "digest": hold.digest,
        "change": change_text(rt, hold),
    }


def terminal_confirm(err: TextIO = sys.stderr) -> Callable[[str], bool]:
    """A yes/no prompt on the terminal (default no)."""

    def confirm(question: str) -> bool:
        err.write(f"{question} [y/N] ")
        err.flush()
        return sys.stdin.readline().strip().lower() in ("y", "yes")

    return confirm
