"""`Ruleset`: rules compiled once and indexed so that evaluation never scans unrelated rules.

Evaluation is OpenCode's `findLast`: the last rule (in list order) whose permission and pattern
both match wins. Instead of walking the whole list backwards, a ruleset keeps, per permission
name, the rules that can apply to it (exact keys from a dict plus the wildcard keys that match the
name, merged in global order), bucketed by the literal prefix of their pattern. A lookup then only
tries rules whose prefix the text starts with, newest first, and stops at the first match.

A ruleset that knows the project root matches the patterns of path permissions (`paths`) in both the
project-relative and the absolute form of the request's path, the newest rule matching either winning.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from .model import Rule
from .paths import PATH_PERMISSIONS, path_forms
from .wildcard import Matcher, compile_matcher, fold, literal_prefix

__all__ = ["Ruleset"]

_PREFIX_CAP = 32
"""Longest literal prefix used as a bucket key; longer prefixes are cut (the regex still checks all).
Long enough to tell absolute path rules of one project apart (`/home/me/project/dir42/*`: at 8, every
one of them shared the bucket `/home/me` and a lookup scanned them all)."""
_VIEW_CACHE_LIMIT = 4096
"""Permission names remembered per ruleset; tools give a handful, `toolrt check` may give any."""


class _Entry(NamedTuple):
    """A rule with its position in the ruleset (the last match wins)."""

    position: int
    rule: Rule
    matches: Matcher
    prefix: str


class _PatternIndex:
    """The rules that apply to one permission name, bucketed by literal pattern prefix."""

    __slots__ = ("_buckets", "_lengths", "allows", "denies", "deny_patterns", "fallback", "last", "paths")

    def __init__(self, entries: Sequence[_Entry], *, paths: bool = False) -> None:
        self.paths = paths
        """Whether the permission's patterns are paths, matched in both forms."""
        buckets: dict[str, list[_Entry]] = {}
        for entry in entries:
            buckets.setdefault(entry.prefix, []).append(entry)
        # Newest first, so a scan can stop at the first match or at an index no newer than the best so far.
        self._buckets = {prefix: tuple(reversed(bucket)) for prefix, bucket in buckets.items()}
        self._lengths = tuple(sorted({len(prefix) for prefix in buckets}))
        self.last: Rule | None = entries[-1].rule if entries else None
        self.deny_patterns = tuple(entry.matches for entry in entries if entry.rule.action == "deny")
        """The patterns of the rules for this permission that deny: only a text one matches can be denied."""
        self.denies = bool(self.deny_patterns)
        """Whether some rule for this permission denies (so some text could be denied)."""
        self.fallback: Rule | None = None
        since = 0
        for position in range(len(entries) - 1, -1, -1):
            rule = entries[position].rule
            if rule.pattern and not rule.pattern.strip("*"):
                self.fallback, since = rule, position
                break
        self.allows = any(entry.rule.action == "allow" for entry in entries[since:])
        """Whether some rule for this permission can decide allow (one no later catch-all covers)."""

    def find(self, text: str) -> Rule | None:
        return self.find_after(text, -1)[1]

    def find_after(self, text: str, best_index: int) -> tuple[int, Rule | None]:
        """The newest rule matching `text` whose index is above `best_index`, with its index
        (`best_index` and None when there is none)."""
        best: Rule | None = None
        size = len(text)
        for length in self._lengths:
            if length > size:
                break
            bucket = self._buckets.get(text[:length])
            if bucket is None:
                continue
            for entry in bucket:
                if entry.position <= best_index:
                    break
                if entry.matches(text):
                    best, best_index = entry.rule, entry.position
                    break
        return best_index, best


class Ruleset:
    """An immutable, ordered list of rules, compiled and indexed once.

    `evaluate(permission, pattern)` returns the last matching rule or None (the caller's default is
    ask). Its cost depends on the rules that could match, not on the size of the ruleset.
    Instances are shared freely between tasks and threads; the only mutable state is a memo of
    per-permission indexes, which any thread may rebuild without harm.
    """

    __slots__ = ("_exact", "_root", "_rules", "_views", "_wild")

    def __init__(self, rules: Iterable[Rule] = (), *, root: str | None = None) -> None:
        self._rules: tuple[Rule, ...] = tuple(rules)
        self._root = root
        exact: dict[str, list[_Entry]] = {}
        wild: dict[str, list[_Entry]] = {}
        for index, rule in enumerate(self._rules):
            pattern = rule.pattern
            entry = _Entry(index, rule, compile_matcher(pattern), literal_prefix(pattern)[:_PREFIX_CAP])
            key = rule.permission
            if "*" in key or "?" in key:
                wild.setdefault(key, []).append(entry)
            else:
                exact.setdefault(fold(key), []).append(entry)
        self._exact: dict[str, tuple[_Entry, ...]] = {key: tuple(items) for key, items in exact.items()}
        self._wild: tuple[tuple[Matcher, tuple[_Entry, ...]], ...] = tuple(
            (compile_matcher(key), tuple(items)) for key, items in wild.items()
        )
        self._views: dict[str, _PatternIndex] = {}

    @classmethod
    def concat(cls, *rulesets: Ruleset) -> Ruleset:
        """OpenCode's `merge`: plain concatenation in argument order, no dedupe, no sorting (the root is
        the first one's that knows one)."""
        root = next((ruleset._root for ruleset in rulesets if ruleset._root is not None), None)
        return cls((rule for ruleset in rulesets for rule in ruleset._rules), root=root)

    @property
    def root(self) -> str | None:
        """The project root path patterns are anchored at (None: patterns match the request as asked)."""
        return self._root

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self._rules

    def __len__(self) -> int:
        return len(self._rules)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self._rules)

    def __bool__(self) -> bool:
        return bool(self._rules)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ruleset) and other._rules == self._rules and other._root == self._root

    def __hash__(self) -> int:
        return hash((self._rules, self._root))

    def __repr__(self) -> str:
        return f"Ruleset({len(self._rules)} rules)"

    def _view(self, permission: str) -> _PatternIndex:
        key = fold(permission)
        view = self._views.get(key)
        if view is None:
            sources = [self._exact.get(key, ())]
            sources.extend(entries for matches, entries in self._wild if matches(key))
            paths = self._root is not None and key in PATH_PERMISSIONS
            view = _PatternIndex(list(heapq.merge(*sources, key=lambda entry: entry.position)), paths=paths)
            if len(self._views) >= _VIEW_CACHE_LIMIT:
                self._views.clear()
            self._views[key] = view
        return view

    def deny_patterns(self, permission: str) -> tuple[Matcher, ...]:
        """The compiled patterns of the rules for `permission` that deny (built once per permission)."""
        return self._view(permission).deny_patterns

    def evaluate(self, permission: str, pattern: str) -> Rule | None:
        """The last rule whose permission matches `permission` and whose pattern matches `pattern` (for a
        path permission: the pattern's project-relative or absolute form, see `permissions.paths`)."""
        view = self._view(permission)
        if not view.paths or self._root is None:
            return view.find(fold(pattern))
        asked, other = path_forms(pattern, self._root)
        index, rule = view.find_after(asked, -1)
        later = view.find_after(other, index)[1] if other != asked else None
        return later or rule

    def fallback(self, permission: str) -> Rule | None:
        """The last rule for `permission` whose pattern matches every text (`*`): what the ruleset does
        with a command it has no specific rule for. None when there is none (the default is ask)."""
        return self._view(permission).fallback

    def can_deny(self, permission: str) -> bool:
        """Whether any rule for `permission` denies: text that could not be checked against every rule
        could be denied only then."""
        return self._view(permission).denies

    def can_allow(self, permission: str) -> bool:
        """Whether some text of `permission` could be allowed by a rule (an allow no later `*` rule covers)."""
        return self._view(permission).allows

    def last_rule_for_permission(self, permission: str) -> Rule | None:
        """The last rule whose permission matches, whatever its pattern (OpenCode's `disabled`)."""
        return self._view(permission).last
