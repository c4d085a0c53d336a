"""OpenCode's nine edit replacers and the `replace` loop that applies the first unique match.

Each replacer turns (content, find) into candidate substrings *of content* that the model probably
meant by `find`, from the strictest reading (the exact text) to the loosest (every occurrence).
`replace` walks the replacers in order and replaces the first candidate that occurs exactly once
(or every occurrence with `replace_all`). Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from ..errors import ToolFailure

__all__ = [
    "MULTIPLE_MATCHES",
    "NOT_FOUND",
    "REPLACERS",
    "SAME_STRINGS",
    "Replacer",
    "block_anchor",
    "context_aware",
    "escape_normalized",
    "indentation_flexible",
    "levenshtein",
    "line_trimmed",
    "multi_occurrence",
    "replace",
    "simple",
    "trimmed_boundary",
    "whitespace_normalized",
]

Replacer = Callable[[str, str], Iterator[str]]

NOT_FOUND = (
    "oldString not found in content. Read the file again and copy the exact text to replace, with its "
    "whitespace and indentation and without the line-number prefixes read shows."
)
MULTIPLE_MATCHES = (
    "Found multiple matches for oldString. Provide more surrounding lines in oldString to identify the correct match."
)
SAME_STRINGS = "oldString and newString must be different"

# BlockAnchor: a lone candidate is accepted whatever its middle lines say; among several, the
# best one must be at least this similar (average per middle line, 0..1).
_MULTIPLE_CANDIDATES_THRESHOLD = 0.3

_WHITESPACE = re.compile(r"\s+")
_ESCAPE = re.compile(r"\\(n|t|r|'|\"|`|\\|\n|\$)")
_UNESCAPED = {"n": "\n", "t": "\t", "r": "\r", "'": "'", '"': '"', "`": "`", "\\": "\\", "\n": "\n", "$": "$"}


def levenshtein(a: str, b: str) -> int:
    """Edit distance between two strings (insert, delete, substitute each cost 1)."""
    # Common affixes never change the distance; stripping them keeps long, similar lines cheap.
    start = 0
    limit = min(len(a), len(b))
    while start < limit and a[start] == b[start]:
        start += 1
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a -= 1
        end_b -= 1
    a, b = a[start:end_a], b[start:end_b]
    if not a or not b:
        return max(len(a), len(b))
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def _span(lines: list[str], first: int, last: int) -> str:
    """The text of lines[first..last] inclusive, joined as they were in the content."""
    return "\n".join(lines[first : last + 1])


def _drop_trailing_empty(lines: list[str]) -> list[str]:
    return lines[:-1] if lines and lines[-1] == "" else lines


def simple(content: str, find: str) -> Iterator[str]:
    """The text exactly as given."""
    yield find


def line_trimmed(content: str, find: str) -> Iterator[str]:
    """Line windows equal to the search lines once each line is stripped of surrounding whitespace."""
    lines = content.split("\n")
    search = _drop_trailing_empty(find.split("\n"))
    wanted = [line.strip() for line in search]
    for i in range(len(lines) - len(search) + 1):
        if all(lines[i + j].strip() == wanted[j] for j in range(len(search))):
            yield _span(lines, i, i + len(search) - 1)


def _middle_similarity(lines: list[str], search: list[str], first: int, last: int) -> float:
    """Average Levenshtein similarity of the lines between the two anchors (1.0 when there are none)."""
    to_check = min(len(search) - 2, last - first - 1)
    if to_check <= 0:
        return 1.0
    total = 0.0
    for j in range(1, min(len(search) - 1, last - first)):
        original, wanted = lines[first + j].strip(), search[j].strip()
        longest = max(len(original), len(wanted))
        if longest:
            total += 1 - levenshtein(original, wanted) / longest
    return total / to_check


def block_anchor(content: str, find: str) -> Iterator[str]:
    """Blocks of 3+ lines whose first and last lines match the search's (trimmed) anchors."""
    search = find.split("\n")
    if len(search) < 3:
        return
    search = _drop_trailing_empty(search)
    lines = content.split("\n")
    first_anchor, last_anchor = search[0].strip(), search[-1].strip()
    candidates: list[tuple[int, int]] = []
    for i, line in enumerate(lines):
        if line.strip() != first_anchor:
            continue
        for j in range(i + 2, len(lines)):
            if lines[j].strip() == last_anchor:
                candidates.append((i, j))
                break
    if len(candidates) == 1:
        # OpenCode's single-candidate threshold is 0.0, which any similarity meets: accept it unscored.
        yield _span(lines, *candidates[0])
        return
    best: tuple[int, int] | None = None
    best_score = -1.0
    for first, last in candidates:
        score = _middle_similarity(lines, search, first, last)
        if score > best_score:
            best, best_score = (first, last), score
    if best is not None and best_score >= _MULTIPLE_CANDIDATES_THRESHOLD:
        yield _span(lines, *best)


def _normalize_whitespace(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def whitespace_normalized(content: str, find: str) -> Iterator[str]:
    """Whole lines, in-line runs or multi-line blocks equal to the search once whitespace runs are collapsed."""
    wanted = _normalize_whitespace(find)
    lines = content.split("\n")
    words = _WHITESPACE.split(find.strip())
    in_line = re.compile(r"\s+".join(re.escape(word) for word in words))
    for line in lines:
        normalized = _normalize_whitespace(line)
        if normalized == wanted:
            yield line
        elif wanted in normalized:
            match = in_line.search(line)
            if match:
                yield match.group(0)
    find_lines = find.split("\n")
    if len(find_lines) > 1:
        for i in range(len(lines) - len(find_lines) + 1):
            block = _span(lines, i, i + len(find_lines) - 1)
            if _normalize_whitespace(block) == wanted:
                yield block


def _remove_indentation(text: str) -> str:
    lines = text.split("\n")
    indents = [len(line) - len(line.lstrip()) for line in lines if line.strip()]
    if not indents:
        return text
    shift = min(indents)
    return "\n".join(line[shift:] if line.strip() else line for line in lines)


def indentation_flexible(content: str, find: str) -> Iterator[str]:
    """Blocks equal to the search once both lose their common leading indentation."""
    wanted = _remove_indentation(find)
    lines = content.split("\n")
    size = len(find.split("\n"))
    for i in range(len(lines) - size + 1):
        block = _span(lines, i, i + size - 1)
        if _remove_indentation(block) == wanted:
            yield block


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda match: _UNESCAPED[match.group(1)], text)


def escape_normalized(content: str, find: str) -> Iterator[str]:
    """The search with its backslash escapes (`\\n`, `\\t`, `\\"`, ...) turned into the characters they name."""
    wanted = _unescape(find)
    if wanted in content:
        yield wanted
    lines = content.split("\n")
    size = len(wanted.split("\n"))
    for i in range(len(lines) - size + 1):
        block = _span(lines, i, i + size - 1)
        if _unescape(block) == wanted:
            yield block


def trimmed_boundary(content: str, find: str) -> Iterator[str]:
    """The search without its leading/trailing whitespace, or blocks that equal it once trimmed."""
    trimmed = find.strip()
    if trimmed == find:
        return
    if trimmed in content:
        yield trimmed
    lines = content.split("\n")
    size = len(find.split("\n"))
    for i in range(len(lines) - size + 1):
        block = _span(lines, i, i + size - 1)
        if block.strip() == trimmed:
            yield block


def context_aware(content: str, find: str) -> Iterator[str]:
    """Blocks of the same line count with matching anchors and at least half the middle lines equal."""
    search = find.split("\n")
    if len(search) < 3:
        return
    search = _drop_trailing_empty(search)
    lines = content.split("\n")
    first_anchor, last_anchor = search[0].strip(), search[-1].strip()
    for i, line in enumerate(lines):
        if line.strip() != first_anchor:
            continue
        for j in range(i + 2, len(lines)):
            if lines[j].strip() != last_anchor:
                continue
            block = lines[i : j + 1]
            if len(block) == len(search):
                compared = matching = 0
                for k in range(1, len(block) - 1):
                    mine, wanted = block[k].strip(), search[k].strip()
                    if mine or wanted:
                        compared += 1
                        matching += mine == wanted
                if compared == 0 or matching / compared >= 0.5:
                    yield "\n".join(block)
                    break
            # Only the nearest closing anchor is considered for each opening one.
            break


def multi_occurrence(content: str, find: str) -> Iterator[str]:
    """The exact text once per occurrence, so `replace_all` can take every one."""
    if not find:
        return
    start = content.find(find)
    while start != -1:
        yield find
        start = content.find(find, start + len(find))


REPLACERS: tuple[Replacer, ...] = (
    simple,
    line_trimmed,
    block_anchor,
    whitespace_normalized,
    indentation_flexible,
    escape_normalized,
    trimmed_boundary,
    context_aware,
    multi_occurrence,
)
"""OpenCode's order: Simple, LineTrimmed, BlockAnchor, WhitespaceNormalized, IndentationFlexible,
EscapeNormalized, TrimmedBoundary, ContextAware, MultiOccurrence."""


def replace(content: str, old: str, new: str, replace_all: bool = False) -> str:
    """`content` with the text the model meant by `old` replaced by `new`.

    The first candidate (in replacer order) that occurs in `content` exactly once is replaced; with
    `replace_all`, every occurrence of the first candidate found is. Replacement text is literal.

    Raises:
        ToolFailure: `old == new`, no candidate occurs at all, or every candidate occurs several times.
    """
    if old == new:
        raise ToolFailure(SAME_STRINGS)
    found = False
    for replacer in REPLACERS:
        for candidate in replacer(content, old):
            # An empty candidate "occurs" everywhere; replacing it would splice `new` between characters.
            if not candidate:
                continue
            index = content.find(candidate)
            if index == -1:
                continue
            found = True
            if replace_all:
                return content.replace(candidate, new)
            if content.rfind(candidate) != index:
                continue
            return content[:index] + new + content[index + len(candidate) :]
    raise ToolFailure(MULTIPLE_MATCHES if found else NOT_FOUND)
