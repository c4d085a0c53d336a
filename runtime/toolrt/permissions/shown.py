"""What a person is shown when a call asks: text the model wrote, with every control character made visible.

A carriage return in a command (`rm -rf ~\\rls`) would move the terminal's cursor back and hide the
start of the line; an escape sequence could repaint it; a bidi override could reverse it. Every
such character is shown as an escape (`\\r`, `\\x1b`, `\\u202e`), so the person reads what will run.
"""

from __future__ import annotations

import unicodedata

from .ask import AskRequest

__all__ = ["always_lines", "ask_lines", "diff_lines", "escape_controls"]

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _visible(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _hidden(char: str) -> bool:
    """Control characters, and format characters (bidi overrides, zero-width joiners) that reorder or hide text."""
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp")


def escape_controls(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with control and format characters escaped; a backslash before one is doubled to stay unambiguous.

    With `keep_newlines`, `\\n` stays a line break (a tool's own multi-line confirm message).
    """
    if text.isprintable() and "\\" not in text:
        return text
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "\n" and keep_newlines:
            out.append(char)
        elif char == "\\":
            following = text[index + 1 : index + 2]
            out.append("\\\\" if following and _hidden(following) else "\\")
        elif _hidden(char):
            out.append(_visible(char))
        else:
            out.append(char)
    return "".join(out)


def ask_lines(request: AskRequest, *, indent: str = "") -> list[str]:
    """The ask as lines: the title, the tool's confirm message, each `permission: pattern` still at
    ask, then the rules an "always" reply would keep."""
    lines = [escape_controls(request.title or f"{request.tool} asks for permission")]
    if request.message:
        lines.append(escape_controls(request.message, keep_newlines=True))
    lines.extend(f"{indent}{escape_controls(d.permission)}: {escape_controls(d.pattern)}" for d in request.pending)
    lines.extend(diff_lines(request, indent=indent))
    lines.extend(always_lines(request, indent=indent))
    return lines


def diff_lines(request: AskRequest, *, indent: str = "") -> list[str]:
    """The change a `protected` ask is about (the diff a file tool would apply), when it carries one.

    Split on `\\n` only, so a carriage return or a Unicode line separator inside a line is escaped,
    not taken for a line break.
    """
    if not any(d.permission == "protected" for d in request.pending):
        return []
    for item in request.requests:
        diff = item.metadata.get("diff") if item.permission == "protected" else None
        if isinstance(diff, str) and diff:
            body = diff[:-1] if diff.endswith("\n") else diff
            return [f"{indent}the change to the protected file:"] + [
                f"{indent}  {escape_controls(line)}" for line in body.split("\n")
            ]
    return []


def always_lines(request: AskRequest, *, indent: str = "") -> list[str]:
    """The exact allow rules an "always" reply would keep for the session (or that it keeps none)."""
    if not request.requests:
        return []
    kept = [
        f"{escape_controls(r.permission)}: {escape_controls(pattern)}" for r in request.requests for pattern in r.always
    ]
    if not kept:
        return [f'{indent}"always" keeps no rule for this call (it runs once)']
    return [f'{indent}"always" keeps: ' + "; ".join(dict.fromkeys(kept))]
