"""Diagnostics as the model reads them after an edit: OpenCode's blocks, its limits and its words.

```
Edit applied successfully.

LSP errors detected in this file, please fix:
<diagnostics file="/abs/src/app.py">
ERROR [3:12] undefined name 'nme'
</diagnostics>
```
Only errors (severity 1) are shown, 1-based `LINE:COL`, at most `MAX_PER_FILE` per file with
`... and N more`; `write` adds other files' errors (at most `MAX_OTHER_FILES` files) and
`apply_patch` one block per changed file, named by its path relative to the project.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MAX_OTHER_FILES",
    "MAX_PER_FILE",
    "Diagnostic",
    "edit_report",
    "patch_report",
    "pretty",
    "write_report",
]

MAX_PER_FILE = 20
MAX_OTHER_FILES = 5
_SEVERITY = {1: "ERROR", 2: "WARN", 3: "INFO", 4: "HINT"}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One diagnostic of one file, positions 0-based as the protocol sends them."""

    line: int
    character: int
    message: str
    severity: int = 1
    source: str = ""


def pretty(diagnostic: Diagnostic) -> str:
    """`ERROR [LINE:COL] message`, 1-based."""
    label = _SEVERITY.get(diagnostic.severity, "ERROR")
    return f"{label} [{diagnostic.line + 1}:{diagnostic.character + 1}] {diagnostic.message}"


def _block(path: Path, diagnostics: Sequence[Diagnostic]) -> str | None:
    errors = [d for d in diagnostics if d.severity == 1]
    if not errors:
        return None
    lines = "\n".join(pretty(d) for d in errors[:MAX_PER_FILE])
    more = f"\n... and {len(errors) - MAX_PER_FILE} more" if len(errors) > MAX_PER_FILE else ""
    return f'<diagnostics file="{path}">\n{lines}{more}\n</diagnostics>'


def edit_report(path: Path, found: Mapping[Path, Sequence[Diagnostic]]) -> str:
    """What `edit` appends: the edited file's errors, or nothing."""
    block = _block(path, found.get(path, ()))
    return f"\n\nLSP errors detected in this file, please fix:\n{block}" if block else ""


def write_report(path: Path, found: Mapping[Path, Sequence[Diagnostic]]) -> str:
    """What `write` appends: the written file's errors, then other files' (at most `MAX_OTHER_FILES`)."""
    text = edit_report(path, found)
    others = 0
    for other, diagnostics in found.items():
        if other == path or others >= MAX_OTHER_FILES:
            continue
        block = _block(other, diagnostics)
        if block:
            others += 1
            text += f"\n\nLSP errors detected in other files:\n{block}"
    return text


def patch_report(paths: Iterable[Path], root: Path, found: Mapping[Path, Sequence[Diagnostic]]) -> str:
    """What `apply_patch` appends: one block per changed (not deleted) file with errors."""
    text = ""
    for path in paths:
        block = _block(path, found.get(path, ()))
        if block:
            try:
                shown = path.relative_to(root).as_posix()
            except ValueError:
                shown = str(path)
            text += f"\n\nLSP errors detected in {shown}, please fix:\n{block}"
    return text
