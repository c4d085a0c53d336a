"""The `read` rules of one call as the test the OS sandbox masks paths by (`toolrt.sandbox.masks`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .evaluate import decide
from .model import PermissionRequest
from .paths import path_forms
from .rules import Ruleset
from .wildcard import Matcher, fold

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
    deny = ruleset.deny_patterns("read") + locked.deny_patterns("read")
    if not deny:
        return None
    return ReadDenies(ruleset, locked, approved, deny)
