"""The `read` rules of one call as the test the OS sandbox masks paths by (`toolrt.sandbox.masks`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .evaluate import decide
from .model import PermissionRequest
from .rules import Ruleset
from .wildcard import compile_matcher, fold

__all__ = ["ReadDenies", "read_denies"]


@dataclass(frozen=True, slots=True)
class ReadDenies:
    """The rules that decide `read` for one call: the agent's, the locked file's, the session's approvals."""

    ruleset: Ruleset
    locked: Ruleset
    approved: Ruleset | None = None

    def denies(self, path: str) -> bool:
        request = (PermissionRequest("read", (path,)),)
        return decide(request, self.ruleset, locked=self.locked, approved=self.approved).action == "deny"


def read_denies(ruleset: Ruleset, locked: Ruleset, approved: Ruleset | None = None) -> ReadDenies | None:
    """The `read` rules as a `ReadDenies`, or None when no rule could deny a read (nothing to walk)."""
    if not (_may_deny_read(ruleset) or _may_deny_read(locked)):
        return None
    return ReadDenies(ruleset, locked, approved)


@functools.lru_cache(maxsize=64)
def _may_deny_read(ruleset: Ruleset) -> bool:
    read = fold("read")
    return any(rule.action == "deny" and compile_matcher(rule.permission)(read) for rule in ruleset)
