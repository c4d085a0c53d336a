"""What the command line does differently at a terminal: colour, and a call's output as it is produced.

Colour (`--color auto|always|never`, default auto): `auto` colours a stream that is a terminal, unless the
`NO_COLOR` environment variable is set and not empty (no-color.org) or `TERM` is `dumb`; `always` and `never`
beat both. Decisions are green (allow), yellow (ask) and red (deny); errors red, warnings yellow.

`LiveOutput` writes a running call's output as it arrives (the same events MCP clients get as progress):
the delta an `argv:`/`shell:` process emits, or the growing `metadata.output` of the bash tool. When the call
ends, `rest` gives only what the result adds (its notes, a truncation hint), or the whole result when it is
not a continuation of what was shown.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ..call.events import CallEvent

__all__ = ["COLOR_CHOICES", "LiveOutput", "PaintedLines", "Painter", "paint_problem_line", "painter"]

COLOR_CHOICES = ("auto", "always", "never")

_CODES = {"allow": "32", "ask": "33", "deny": "31", "error": "31", "warning": "33", "ok": "32", "dim": "2"}


class Painter:
    """Wraps text in ANSI colour when colour is on; returns it unchanged otherwise."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, kind: str) -> str:
        code = _CODES.get(kind)
        if not self.on or code is None or not text:
            return text
        return f"\033[{code}m{text}\033[0m"


def painter(choice: str, stream: TextIO, environ: Mapping[str, str] | None = None) -> Painter:
    """The painter for `stream` under `--color choice` (see the module docstring)."""
    if choice == "always":
        return Painter(True)
    if choice == "never":
        return Painter(False)
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return Painter(False)
    isatty = getattr(stream, "isatty", None)
    return Painter(bool(isatty and isatty()))


_LOCATED = re.compile(r"^(?P<where>\S+:\d+(?::\d+)?): (?P<warning>warning: )?")


def paint_problem_line(line: str, paint: Painter) -> str:
    """A `FILE:LINE:COL: message` line of `toolrt validate` with its location coloured by severity."""
    found = _LOCATED.match(line)
    if found is None or not paint.on:
        return line
    kind = "warning" if found.group("warning") else "error"
    return paint(found.group("where"), kind) + line[len(found.group("where")) :]


class PaintedLines:
    """A text stream that colours each whole `FILE:LINE` problem line written through it."""

    def __init__(self, out: TextIO, paint: Painter) -> None:
        self._out = out
        self._paint = paint
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._out.write(paint_problem_line(line, self._paint) + "\n")
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self._pending:
            self._out.write(paint_problem_line(self._pending, self._paint))
            self._pending = ""
        self._out.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


class LiveOutput:
    """A call's output written as it runs (`listen` is a `Runtime.subscribe` listener)."""

    def __init__(self, out: TextIO, call_id: str) -> None:
        self._out = out
        self._call_id = call_id
        self.shown = ""

    def listen(self, event: CallEvent) -> None:
        if event.call_id != self._call_id or event.kind != "metadata":
            return
        data = event.data
        delta = data.get("output")
        if isinstance(delta, str):  # an argv/shell process: each event is what it just wrote
            self._show(delta)
            return
        metadata = data.get("metadata")
        grown = metadata.get("output") if isinstance(metadata, Mapping) else None
        if isinstance(grown, str) and grown.startswith(self.shown):  # the bash tool: the output so far
            self._show(grown[len(self.shown) :])

    def _show(self, text: str) -> None:
        if text:
            self.shown += text
            self._out.write(text)
            self._out.flush()

    def rest(self, text: str) -> str:
        """What `text` (the result the model gets) adds to what was shown: all of it when it does not
        continue what was shown (cut or rewritten), after a line break."""
        if not self.shown:
            return text
        if text.startswith(self.shown):
            return text[len(self.shown) :]
        return text if self.shown.endswith("\n") else "\n" + text
