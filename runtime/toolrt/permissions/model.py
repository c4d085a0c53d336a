"""Value types of the permission engine: rules, requests, decisions."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from ..attribution import Journal

__all__ = [
    "ACTIONS",
    "Action",
    "CallSite",
    "Decision",
    "PatternDecision",
    "PermissionRequest",
    "Protection",
    "Rule",
    "UNMATCHED_ALLOWED",
    "UNNAMED",
    "plain_request",
    "strictest",
    "unmatched_action",
    "unmatched_basis",
    "usable_exempt",
]

Action = Literal["allow", "ask", "deny"]
ACTIONS: tuple[Action, ...] = ("allow", "ask", "deny")
_STRICTNESS: Mapping[str, int] = {"allow": 0, "ask": 1, "deny": 2}

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def strictest(*actions: Action) -> Action:
    """The strictest of several actions: deny > ask > allow."""
    return max(actions, key=_STRICTNESS.__getitem__)


@dataclass(frozen=True, slots=True)
class Rule:
    """One (permission, pattern, action) rule; both fields are wildcards."""

    permission: str
    pattern: str
    action: Action
    source: str = ""
    """Where the rule was written: `file:line`, or `session approval` for an "always" reply."""
    layer: str = ""
    """`builtin`, `project`, `agent:NAME`, `locked` or `approved`."""

    def describe(self) -> str:
        """The rule as a person would write it in permissions.yaml, with its origin."""
        where = f" ({self.source})" if self.source else ""
        return f'{self.permission}: "{self.pattern}": {self.action}{where}'


UNMATCHED_ALLOWED = frozenset(("read",))
"""Permissions whose requests no rule matches are allowed rather than asked. `read` alone: the bash
analyzer asks `read` for every path a line names, so with rules that say nothing about reading
(`inherit: false` and only `bash` rules) every `cat` would ask; a request derived from a bash line
adds nothing beyond the bash decision unless a `read` rule matches, and the `read` tool follows the
same rule so both routes agree. Paths outside the project still ask `external_directory`."""


def unmatched_action(permission: str) -> Action:
    """The action of a request no rule matches: ask, but allow for `UNMATCHED_ALLOWED`."""
    return "allow" if permission in UNMATCHED_ALLOWED else "ask"


def unmatched_basis(permission: str) -> str:
    """How an explanation says that no rule matched."""
    if permission in UNMATCHED_ALLOWED:
        return f"no rule matched: {permission} is allowed unless a rule says otherwise"
    return "no rule matched: default ask"


@dataclass(frozen=True, slots=True, init=False)
class PermissionRequest:
    """What one call asks of one permission, as OpenCode's `ask({permission, patterns, always})`.

    Immutable as any frozen dataclass; its `__init__` is written out (the fields in order, the same
    defaults) to set each field through its slot rather than through `object.__setattr__` by name as
    the generated one does, which costs twice as much: the bash analyzer builds one or more per line."""

    permission: str
    patterns: tuple[str, ...]
    always: tuple[str, ...] = ()
    """Patterns that an "always" reply turns into allow rules for the rest of the session."""
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """Read-only; the shared empty mapping by default (`__init__`'s plain default: no factory call per
    request; a factory here only because Python 3.11's dataclasses refuse an unhashable default)."""
    floor: Action | None = None
    """The least strict action this request may get: `ask` means rules can never auto-allow it
    (a dynamic command name, a loader variable, an unparseable command)."""
    reason: str | None = None
    """Why the floor applies, said to the person who is asked and to the model when denied."""
    opaque: bool = False
    """An analyzer could not see everything this runs (a hidden expansion, a parse error, code it does
    not model): each pattern is judged as the ruleset's fallback for the permission (its catch-all
    `*` rule, ask when there is none) and never weaker than ask; rules on the pattern only count when
    they deny."""
    named: tuple[str, ...] = ()
    """With `opaque`: command texts the unseen part visibly names (`rm -rf x` inside a `${x:-...}`);
    a rule that denies one of them denies the request."""

    def __init__(
        self,
        permission: str,
        patterns: tuple[str, ...],
        always: tuple[str, ...] = (),
        metadata: Mapping[str, Any] = _EMPTY,
        floor: Action | None = None,
        reason: str | None = None,
        opaque: bool = False,
        named: tuple[str, ...] = (),
    ) -> None:
        _set_permission(self, permission)
        _set_patterns(self, patterns)
        _set_always(self, always)
        _set_metadata(self, metadata)
        _set_floor(self, floor)
        _set_reason(self, reason)
        _set_opaque(self, opaque)
        _set_named(self, named)


def plain_request(permission: str, patterns: tuple[str, ...], always: tuple[str, ...] = ()) -> PermissionRequest:
    """`PermissionRequest(permission, patterns, always)`, every other field at its default, made without
    calling the class (whose `__init__` binds eight arguments): the bash analyzer makes one per line."""
    request: PermissionRequest = _new(PermissionRequest)
    _set_permission(request, permission)
    _set_patterns(request, patterns)
    _set_always(request, always)
    _set_metadata(request, _EMPTY)
    _set_floor(request, None)
    _set_reason(request, None)
    _set_opaque(request, False)
    _set_named(request, ())
    return request


_new = object.__new__
# The slots of `PermissionRequest`: each descriptor's `__set__` stores one field, past the frozen guard.
_slots: Mapping[str, Any] = vars(PermissionRequest)
_set_permission = _slots["permission"].__set__
_set_patterns = _slots["patterns"].__set__
_set_always = _slots["always"].__set__
_set_metadata = _slots["metadata"].__set__
_set_floor = _slots["floor"].__set__
_set_reason = _slots["reason"].__set__
_set_opaque = _slots["opaque"].__set__
_set_named = _slots["named"].__set__


@dataclass(frozen=True, slots=True)
class PatternDecision:
    """The verdict for one (permission, pattern) pair and the rule that decided it."""

    permission: str
    pattern: str
    action: Action
    rule: Rule | None
    """The deciding rule; None when nothing matched (the default is ask, `unmatched_action`)."""
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict for a whole call: any deny denies, all allow allows, otherwise ask."""

    action: Action
    decisions: tuple[PatternDecision, ...]

    @property
    def rule(self) -> Rule | None:
        """The rule behind the overall action: the first pattern decision with that action."""
        for decision in self.decisions:
            if decision.action == self.action:
                return decision.rule
        return None


UNNAMED = "\0"
"""Ends a written path `DIR/` + UNNAMED: the command writes files under DIR whose names come from what
it reads (an archive, a patch); any of them may be protected. NUL never occurs in a path."""


class Protection(Protocol):
    """The protected paths of a snapshot (`permissions.protected.ProtectedPaths`)."""

    def request(self, paths: Iterable[str]) -> PermissionRequest | None:
        """The `protected` request for the written absolute `paths` that are protected, or None."""
        ...


@dataclass(frozen=True, slots=True)
class CallSite:
    """Where a call runs, for analyzers that turn arguments into requests (paths, bash)."""

    root: Path
    """The project root: paths outside it ask `external_directory`."""
    cwd: Path
    """The working directory of the call (the root unless the tool says otherwise)."""
    home: Path
    """What `~` and `$HOME` expand to."""
    exempt: tuple[Path, ...] = ()
    """Directories outside the root that never ask (the truncation output directory)."""
    protected: Protection | None = None
    """The snapshot's protected paths: what a call writes among them asks `protected`."""
    journal: Journal | None = field(default=None, compare=False)
    """The attribution journal: a script the model wrote is read when a line runs it (None: not looked up)."""


def usable_exempt(directories: Iterable[Path | str]) -> tuple[str, ...]:
    """The exempt `directories` that may exempt now, normalised: those that neither are nor pass
    through a symlink (checked at each use, component by component, without following links).

    Exempt directories are compared lexically only: a tool-output directory made a symlink to `/`
    (or to any other place) exempts nothing, so it can never widen `external_directory`.
    """
    usable: list[str] = []
    for directory in directories:
        lexical = os.path.normpath(os.path.abspath(directory))
        current = ""
        for part in lexical.split(os.sep)[1:]:
            current += os.sep + part
            try:
                if stat.S_ISLNK(os.lstat(current).st_mode):
                    break
            except OSError:
                continue  # not made yet: nothing in it to reach, and no link on the way
        else:
            usable.append(lexical)
    return tuple(usable)
