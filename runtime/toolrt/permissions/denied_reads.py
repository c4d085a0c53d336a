"""The `read` rules of one call as the test the OS sandbox masks paths by (`toolrt.sandbox.masks`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from .evaluate import decide
from .model import PermissionRequest
from .paths import path_forms
from .rules import Ruleset
from .wildcard import Matcher, compile_matcher, fold

__all__ = ["ReadDenies", "read_denies"]


@dataclass(frozen=True, slots=True)
class ReadDenies:
    """The rules that decide `read` for one call: the agent's, the locked file's, the session's approvals."""

    ruleset: Ruleset
    locked: Ruleset
    approved: Ruleset | None = None
    deny: tuple[Matcher, ...] = field(default=(), compare=False)
    """The patterns of the `deny` rules for `read` in both: only a path one matches can be denied."""

    def denies(self, path: str) -> bool:
        root = self.ruleset.root or self.locked.root
        forms = path_forms(path, root) if root is not None else (fold(path),)
        if not any(matches(form) for form in forms for matches in self.deny):
            return False
        request = (PermissionRequest("read", (path,)),)
        return decide(request, self.ruleset, locked=self.locked, approved=self.approved).action == "deny"


def read_denies(ruleset: Ruleset, locked: Ruleset, approved: Ruleset | None = None) -> ReadDenies | None:
    """The `read` rules as a `ReadDenies`, or None when no rule could deny a read (nothing to walk)."""
    deny = _deny_matchers(ruleset) + _deny_matchers(locked)
    if not deny:
        return None
    return ReadDenies(ruleset, locked, approved, deny)


@functools.lru_cache(maxsize=64)
def _deny_matchers(ruleset: Ruleset) -> tuple[Matcher, ...]:
    """The patterns of the `deny` rules that apply to `read`."""
    read = fold("read")
    return tuple(
        compile_matcher(rule.pattern)
        for rule in ruleset
        if rule.action == "deny" and compile_matcher(rule.permission)(read)
    )
