"""Who is calling: `CallScope`, the first thing a call is, and what every step of it reads.

```python
scope = CallScope(agent="plan", model="gpt-5", session="s1", flags={"lsp_tool": True})
await rt.call("read", {"filePath": "README.md"}, scope)
rt.specs("openai", scope)                      # the same tools the calls above may use
await rt.call("read", {...}, scope, agent="build")   # keywords override single fields
```
A scope travels whole: the selection, the permission step, the handler's `ToolContext`, the audit
record and the sub-calls of `batch` all read the same value, so no step can drop a field.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypedDict

__all__ = ["DEFAULT_SCOPE", "CallScope", "Questioner", "ScopeFields", "scope_of"]

Questioner = Callable[[Sequence[Mapping[str, Any]]], Awaitable[list[list[str]]]]
"""The host's way to put questions to the person: one list of chosen labels (or typed text) per question."""


@dataclass(frozen=True, slots=True)
class CallScope:
    """Who is calling: every field optional; `None` means "not said" (the default agent, no model filter)."""

    agent: str | None = None
    model: str | None = None
    provider: str | None = None
    client: str | None = None
    session: str = "default"
    """The unit that holds "always" approvals, read-before-edit stamps, the doom-loop history and todos."""
    flags: Mapping[str, bool] | None = None
    """Flag values for this scope only, over the runtime's resolved flags."""
    toolset: str | None = None
    """A tool set declared in toolrt.yaml: only its tools are offered."""
    principal: str | None = None
    """Who is calling over authenticated HTTP (`toolrt serve` with `auth.*`: the token's subject), for the
    audit record and telemetry; the agent it maps to is `agent`. None: nobody authenticated."""
    token_scopes: frozenset[str] | None = None
    """The OAuth scopes the caller's token holds: a tool whose `scopes:` it lacks does not run (nor as a
    `batch` sub-call). None: nobody authenticated, and `scopes:` binds nothing."""

    def selection_key(self) -> tuple[Any, ...]:
        """What decides the offered tools (everything but the session), as a hashable value."""
        flags = tuple(sorted(self.flags.items())) if self.flags else None
        return (self.agent, self.model, self.provider, self.client, flags, self.toolset)

    def __hash__(self) -> int:
        return hash((self.selection_key(), self.session))


DEFAULT_SCOPE = CallScope()


class ScopeFields(TypedDict, total=False):
    """`CallScope`'s fields as keyword arguments (`rt.call(..., agent="plan")`)."""

    agent: str | None
    model: str | None
    provider: str | None
    client: str | None
    session: str
    flags: Mapping[str, bool] | None
    toolset: str | None
    principal: str | None
    token_scopes: frozenset[str] | None


_SCOPES: dict[tuple[tuple[str, Any], ...], CallScope] = {}
"""Scopes built from keyword fields alone, by those fields: a caller passing `session=` on every call gets
the same (immutable) scope back instead of a new one per call."""
_SCOPES_KEPT = 1024


def scope_of(scope: CallScope | None, fields: ScopeFields | None = None) -> CallScope:
    """`scope` (or the default one) with the keyword fields laid over it."""
    if not fields:
        return DEFAULT_SCOPE if scope is None else scope
    if scope is not None and scope is not DEFAULT_SCOPE:
        return replace(scope, **fields)
    if "flags" in fields:  # a mapping: not a key
        return CallScope(**fields)
    try:
        key = tuple(fields.items())
        found = _SCOPES.get(key)
    except TypeError:  # a value that cannot be a key (the caller's mistake, which the scope then shows)
        return CallScope(**fields)
    if found is None:
        if len(_SCOPES) >= _SCOPES_KEPT:
            _SCOPES.clear()
        found = _SCOPES[key] = CallScope(**fields)
    return found
