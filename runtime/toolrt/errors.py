"""The one error hierarchy of toolrt.

```
ToolrtError                     base, never raised directly
 ├── ConfigError                config files are wrong; .problems hold file:line:column, pointer, message
 ├── UsageError                 the caller asked for something that does not exist (agent, format, tool)
 ├── StoreError                 the state store (the `store` setting) cannot be opened, read or written
 └── CallError                  one tool call failed; dispatch turns it into an error result for the model
      ├── UnknownToolError      no tool of that name is available
      ├── InvalidArgumentsError arguments are not JSON or do not satisfy the tool's schema
      ├── PermissionBlocked     the permission step stopped the call
      │    ├── DeniedError      a rule denies it (or an ask with nobody to answer)
      │    ├── RejectedError    the person rejected it
      │    └── CorrectedError   the person rejected it with feedback for the model
      └── ToolFailure           the handler failed (raised, timed out, returned garbage)
           └── LspError         a language server did not start, exited, or did not answer
```

A `ConfigError` stops validation and makes a reload keep the last good snapshot. A `CallError`
becomes a `ToolResult` whose `error` is the message, written for the model. Anything else is a
bug and propagates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "CallError",
    "ConfigError",
    "CorrectedError",
    "DeniedError",
    "InvalidArgumentsError",
    "LspError",
    "InputRequired",
    "PathChanged",
    "ProtocolError",
    "PermissionBlocked",
    "Problem",
    "RejectedError",
    "StoreError",
    "ToolFailure",
    "ToolrtError",
    "UnknownToolError",
    "UsageError",
]

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding about a config file, located as precisely as the source allows."""

    file: str
    """Path of the file, as given to the loader (relative paths stay relative)."""
    line: int
    """1-based line; 0 when the problem concerns the file as a whole."""
    column: int
    """1-based column; 0 when unknown."""
    pointer: str
    """JSON pointer inside the document (`/parameters/properties/path`), `""` for the root."""
    message: str
    severity: Severity = "error"

    @property
    def where(self) -> str:
        """`FILE:LINE:COL`, `FILE:LINE`, or `FILE` alone when no line is known (never `:0:0`)."""
        if self.line <= 0:
            return self.file
        if self.column <= 0:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.column}"

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"

    def to_json(self) -> dict[str, object]:
        """The `toolrt validate --format json` entry: file, line, column, pointer, message, severity."""
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "pointer": self.pointer,
            "message": self.message,
            "severity": self.severity,
        }


class ToolrtError(Exception):
    """Base of every error toolrt raises on purpose."""


class ConfigError(ToolrtError):
    """One or more config files are invalid."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems) or "invalid configuration")


class UsageError(ToolrtError):
    """The caller named something that does not exist or gave an option that makes no sense."""


class StoreError(ToolrtError):
    """The state store cannot be opened (unreachable, a newer schema, a bad `store` value), read or written.

    Its text never holds the store URI's password (see `toolrt.store.uri.redact`)."""


class CallError(ToolrtError):
    """A tool call failed. `str(error)` is the text the model reads."""


class UnknownToolError(CallError):
    """The model called a tool that is not available to it."""


class InvalidArgumentsError(CallError):
    """The arguments are not a JSON object or do not satisfy the tool's parameter schema."""


class PermissionBlocked(CallError):
    """The permission step stopped the call."""


class DeniedError(PermissionBlocked):
    """A rule denies the call, or it needed approval and nobody could give it."""


class RejectedError(PermissionBlocked):
    """The person rejected the call."""

    def __init__(self) -> None:
        super().__init__("The user rejected permission to use this specific tool call.")


class CorrectedError(PermissionBlocked):
    """The person rejected the call and told the model what to do instead."""

    def __init__(self, feedback: str) -> None:
        self.feedback = feedback
        super().__init__(
            f"The user rejected permission to use this specific tool call with the following feedback: {feedback}"
        )


class ToolFailure(CallError):
    """The handler could not do what was asked; the message says why and what to do next."""


class ProtocolError(CallError):
    """A handler's answer in the protocol's own terms: a JSON-RPC error over MCP (`code`, `message`,
    `data`; HTTP 400 on 2026-07-28 where the code maps to it), an error result in `rt.call`.

    `-32021` (missing client capability) is what `ctx.elicit`, `ctx.sample` and `ctx.roots` raise on a
    client that did not declare the capability, with `{"requiredCapabilities": {...}}` as data."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        self.code = code
        self.message = message
        self.data = data
        super().__init__(message)


class InputRequired(CallError):
    """The call waits for the client's answers (MCP 2026-07-28: an input-required result): it stopped
    at its first unanswered request and runs again from the start when the client answers."""


class PathChanged(ToolFailure):
    """A file tool's path changed between the permission check and the open (a name swapped for a
    symlink, a directory moved): nothing was read or written, and the message says so."""


class LspError(ToolFailure):
    """A language server could not be started, exited, or did not answer; the message names the server
    and what happened. Edits never show it (their diagnostics are left out); the `lsp` tool does."""
