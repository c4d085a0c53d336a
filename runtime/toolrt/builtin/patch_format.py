"""The `*** Begin Patch` format of `apply_patch`: parse it, and compute a file's new text from its chunks.

```
*** Begin Patch
*** Add File: path            then `+line` for every line of the new file
*** Delete File: path
*** Update File: path
*** Move to: new/path         optional, right after Update File
@@ optional context line      seeks forward to this line before the chunk
 context line                 ` ` kept, `-` removed, `+` added
*** End of File               optional: the chunk's lines are at the end of the file
*** End Patch
```
A heredoc wrapper (`cat <<'EOF' ... EOF`) around the patch is accepted. Chunk lines are located
with four passes, each stricter reading first: exact, trailing whitespace ignored, surrounding
whitespace ignored, and Unicode punctuation (curly quotes, dashes, ellipsis, no-break space)
folded to ASCII. Pure functions, no I/O; errors are `PatchError` with a message for the model.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "AddFile",
    "Chunk",
    "DeleteFile",
    "Hunk",
    "PatchError",
    "UpdateFile",
    "apply_chunks",
    "is_empty_patch",
    "parse_patch",
    "seek_sequence",
]

BEGIN = "*** Begin Patch"
END = "*** End Patch"
_ADD = "*** Add File:"
_DELETE = "*** Delete File:"
_UPDATE = "*** Update File:"
_MOVE = "*** Move to:"
_END_OF_FILE = "*** End of File"
_HEREDOC = re.compile(r"^(?:cat\s+)?<<['\"]?(\w+)['\"]?\s*\n(.*?)\n\1\s*$", re.DOTALL)
_PUNCTUATION = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2026": "...",
        "\u00a0": " ",
    }
)


class PatchError(ValueError):
    """The patch cannot be parsed or does not fit the file; `str()` is the text for the model."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One `@@` section of an Update File hunk."""

    old_lines: tuple[str, ...]
    new_lines: tuple[str, ...]
    context: str | None = None
    """The text after `@@`: the chunk is searched for after the first line matching it."""
    end_of_file: bool = False


@dataclass(frozen=True, slots=True)
class AddFile:
    path: str
    contents: str
    """The new file's text, without a final newline (the tool adds one)."""


@dataclass(frozen=True, slots=True)
class DeleteFile:
    path: str


@dataclass(frozen=True, slots=True)
class UpdateFile:
    path: str
    chunks: tuple[Chunk, ...]
    move_to: str | None = None


Hunk = AddFile | DeleteFile | UpdateFile


def _normalize(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    heredoc = _HEREDOC.match(text)
    return heredoc.group(2) if heredoc else text


def is_empty_patch(text: str) -> bool:
    """Whether the text is exactly an empty `*** Begin Patch` / `*** End Patch` pair."""
    return _normalize(text) == f"{BEGIN}\n{END}"


def _header_path(line: str, marker: str, number: int) -> str:
    path = line[len(marker) :].strip()
    if not path:
        raise PatchError(f"line {number}: '{marker}' needs a file path after it")
    return path


def _parse_add(lines: Sequence[str], start: int, end: int) -> tuple[str, int]:
    content: list[str] = []
    index = start
    while index < end and not lines[index].startswith("***"):
        if lines[index].startswith("+"):
            content.append(lines[index][1:])
        index += 1
    return "\n".join(content), index


def _parse_chunk(lines: Sequence[str], start: int, end: int, context: str | None) -> tuple[Chunk, int]:
    old: list[str] = []
    new: list[str] = []
    index = start
    end_of_file = False
    bare_blanks = 0
    while index < end and not lines[index].startswith(("@@", "***")):
        line = lines[index]
        index += 1
        bare_blanks = bare_blanks + 1 if line == "" else 0
        if line.startswith(" ") or line == "":
            # An empty line is a blank context line whose leading space was lost (as Codex reads it).
            old.append(line[1:])
            new.append(line[1:])
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
    if bare_blanks:
        # Empty lines between a chunk and the next header separate them; they are not context.
        del old[-bare_blanks:], new[-bare_blanks:]
    if index < end and lines[index] == _END_OF_FILE:
        end_of_file = True
        index += 1
    return Chunk(tuple(old), tuple(new), context, end_of_file), index


def _parse_update(lines: Sequence[str], start: int, end: int, path: str) -> tuple[tuple[Chunk, ...], int]:
    chunks: list[Chunk] = []
    index = start
    while index < end and not (lines[index].startswith("***") and lines[index] != _END_OF_FILE):
        line = lines[index]
        if line.startswith("@@"):
            chunk, index = _parse_chunk(lines, index + 1, end, line[2:].strip() or None)
        elif line.startswith((" ", "-", "+")) and not chunks:
            # The first chunk may omit its `@@` line (the Codex format allows it).
            chunk, index = _parse_chunk(lines, index, end, None)
        else:
            index += 1
            continue
        chunks.append(chunk)
    if not any(chunk.old_lines or chunk.new_lines for chunk in chunks):
        raise PatchError(f"'{_UPDATE} {path}' has no changes: give `@@` chunks with ' ', '-' and '+' lines")
    return tuple(chunks), index


def parse_patch(text: str) -> tuple[Hunk, ...]:
    """The hunks of a patch, in order (empty for an empty patch).

    Raises:
        PatchError: missing markers, an unknown `***` header, a header without a path, an empty update.
    """
    lines = _normalize(text).split("\n")
    stripped = [line.strip() for line in lines]
    begin = stripped.index(BEGIN) if BEGIN in stripped else -1
    end = stripped.index(END) if END in stripped else -1
    if begin == -1 or end == -1 or begin >= end:
        raise PatchError(f"Invalid patch format: missing Begin/End markers ('{BEGIN}' ... '{END}')")
    hunks: list[Hunk] = []
    index = begin + 1
    while index < end:
        line = lines[index]
        number = index + 1
        if line.startswith(_ADD):
            path = _header_path(line, _ADD, number)
            contents, index = _parse_add(lines, index + 1, end)
            hunks.append(AddFile(path, contents))
        elif line.startswith(_DELETE):
            hunks.append(DeleteFile(_header_path(line, _DELETE, number)))
            index += 1
        elif line.startswith(_UPDATE):
            path = _header_path(line, _UPDATE, number)
            index += 1
            move_to = None
            if index < end and lines[index].startswith(_MOVE):
                move_to = _header_path(lines[index], _MOVE, index + 1)
                index += 1
            chunks, index = _parse_update(lines, index, end, path)
            hunks.append(UpdateFile(path, chunks, move_to))
        elif line.startswith("***"):
            raise PatchError(
                f"line {number}: unknown header {line!r}; expected '{_ADD}', '{_DELETE}', '{_UPDATE}' or '{END}'"
            )
        else:
            index += 1
    return tuple(hunks)


Comparator = Callable[[str, str], bool]

_PASSES: tuple[Comparator, ...] = (
    lambda a, b: a == b,
    lambda a, b: a.rstrip() == b.rstrip(),
    lambda a, b: a.strip() == b.strip(),
    lambda a, b: a.strip().translate(_PUNCTUATION) == b.strip().translate(_PUNCTUATION),
)


def _match_at(lines: Sequence[str], pattern: Sequence[str], start: int, same: Comparator) -> bool:
    return all(same(lines[start + j], pattern[j]) for j in range(len(pattern)))


def seek_sequence(lines: Sequence[str], pattern: Sequence[str], start: int, end_of_file: bool = False) -> int:
    """Index of the first run of `lines` at or after `start` matching `pattern`, or -1.

    Each pass (exact, rstrip, strip, punctuation-folded) scans the whole range before the next,
    looser one is tried; with `end_of_file` each pass first tries the run ending at the last line.
    """
    if not pattern:
        return -1
    last_start = len(lines) - len(pattern)
    for same in _PASSES:
        if end_of_file and last_start >= start and _match_at(lines, pattern, last_start, same):
            return last_start
        for index in range(start, last_start + 1):
            if _match_at(lines, pattern, index, same):
                return index
    return -1


def _replacements(lines: Sequence[str], path: str, chunks: Sequence[Chunk]) -> list[tuple[int, int, Sequence[str]]]:
    found: list[tuple[int, int, Sequence[str]]] = []
    cursor = 0
    for chunk in chunks:
        if chunk.context is not None:
            at = seek_sequence(lines, [chunk.context], cursor)
            if at == -1:
                raise PatchError(f"Failed to find context '{chunk.context}' in {path}")
            cursor = at + 1
        if not chunk.old_lines:
            # A pure addition goes at the end of the file.
            found.append((len(lines), 0, chunk.new_lines))
            continue
        pattern: Sequence[str] = chunk.old_lines
        replacement: Sequence[str] = chunk.new_lines
        at = seek_sequence(lines, pattern, cursor, chunk.end_of_file)
        if at == -1 and pattern[-1] == "":
            # A trailing blank line in the patch often stands for the file's final newline.
            pattern = pattern[:-1]
            if replacement and replacement[-1] == "":
                replacement = replacement[:-1]
            at = seek_sequence(lines, pattern, cursor, chunk.end_of_file)
        if at == -1:
            expected = "\n".join(chunk.old_lines)
            raise PatchError(
                f"Failed to find expected lines in {path}:\n{expected}\n"
                f"Read {path} again and copy the lines to change exactly (indentation included) into the "
                "chunk's ' ' and '-' lines."
            )
        found.append((at, len(pattern), replacement))
        cursor = at + len(pattern)
    return sorted(found, key=lambda item: item[0])


def apply_chunks(original: str, path: str, chunks: Sequence[Chunk]) -> str:
    """The new text of a file (`\\n` line endings) after applying `chunks`; it always ends with a newline.

    Raises:
        PatchError: a context line or a chunk's old lines cannot be found (`path` names the file).
    """
    lines = original.split("\n")
    trailing_newline = lines[-1] == ""
    if trailing_newline:
        lines.pop()
    result = list(lines)
    for start, length, replacement in reversed(_replacements(lines, path, chunks)):
        result[start : start + length] = replacement
    # A final blank line of a file that had no final newline becomes that newline.
    if trailing_newline or not result or result[-1] != "":
        result.append("")
    return "\n".join(result)
