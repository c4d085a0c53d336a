"""Unified diffs for the metadata of the file tools (what the person reviewing an edit sees).

The format follows jsdiff's `createTwoFilesPatch`, which OpenCode uses: an `Index:` header, `---`/
`+++` lines naming the file, hunks with 4 lines of context, and `\\ No newline at end of file`
markers. `trim_diff` removes the indentation every changed line shares, as OpenCode does.
"""

from __future__ import annotations

import difflib

__all__ = ["MAX_DIFF_CHARS", "count_changes", "omitted_diff", "trim_diff", "unified_diff"]

MAX_DIFF_CHARS = 1024 * 1024
"""Above this size (either side) the diff is not computed: difflib is quadratic in the worst case."""

_CONTEXT = 4
_NO_NEWLINE = "\\ No newline at end of file"


def _header(path: str) -> str:
    return f"Index: {path}\n{'=' * 67}\n--- {path}\n+++ {path}\n"


def omitted_diff(path: str) -> str:
    """The diff headers with a note in place of hunks, for a file too large to compare."""
    return f"{_header(path)}(diff omitted: the file is larger than {MAX_DIFF_CHARS} characters)\n"


def unified_diff(path: str, old: str, new: str) -> str:
    """A unified diff of `old` → `new` labelled with `path` (`omitted_diff` when either side is too large)."""
    if len(old) > MAX_DIFF_CHARS or len(new) > MAX_DIFF_CHARS:
        return omitted_diff(path)
    header = _header(path)
    body: list[str] = []
    hunks = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), n=_CONTEXT)
    for line in hunks:
        if line.startswith(("---", "+++")):
            continue
        if line.endswith("\n"):
            body.append(line)
        else:
            body.append(f"{line}\n{_NO_NEWLINE}\n")
    return header + "".join(body)


def count_changes(diff: str) -> tuple[int, int]:
    """(additions, deletions): the `+` and `-` lines of a diff made by `unified_diff`."""
    additions = deletions = 0
    for line in diff.split("\n"):
        if line.startswith("+") and not line.startswith("+++"):
            additions += 1
        elif line.startswith("-") and not line.startswith("---"):
            deletions += 1
    return additions, deletions


def _is_content(line: str) -> bool:
    return line.startswith(("+", "-", " ")) and not line.startswith(("---", "+++"))


def trim_diff(diff: str) -> str:
    """The diff with the leading indentation shared by all its non-blank content lines removed."""
    lines = diff.split("\n")
    indents = [len(body) - len(body.lstrip()) for line in lines if _is_content(line) and (body := line[1:]).strip()]
    shift = min(indents, default=0)
    if shift == 0:
        return diff
    return "\n".join(line[0] + line[1 + shift :] if _is_content(line) else line for line in lines)
