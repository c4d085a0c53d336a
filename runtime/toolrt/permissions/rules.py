"""`Ruleset`: rules compiled once and indexed so that evaluation never scans unrelated rules.

Evaluation is OpenCode's `findLast`: the last rule (in list order) whose permission and pattern
both match wins. Instead of walking the whole list backwards, a ruleset keeps, per permission
name, the rules that can apply to it (exact keys from a dict plus the wildcard keys that match the
name, merged in global order), bucketed by the literal prefix of their pattern. A lookup then only
tries rules whose prefix the text starts with, newest first, and stops at the first match.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from .model import Rule
from .wildcard import Matcher, compile_matcher, fold, literal_prefix

__all__ = ["Ruleset"]

_PREFIX_CAP = 8
"""Longest literal prefix used as a bucket key; longer prefixes are cut (the regex still checks all)."""
_VIEW_CACHE_LIMIT = 4096
"""Permission names remembered per ruleset; tools give a handful, `toolrt check` may give any."""


@dataclass(frozen=True, slots=True)
class _Entry:
    index: int
    rule: Rule
    matches: Matcher
    prefix: str


class _PatternIndex:
    """The rules that apply to one permission name, bucketed by literal pattern prefix."""

    __slots__ = ("_buckets", "_lengths", "allows", "denies", "fallback", "last")

    def __init__(self, entries: Sequence[_Entry]) -> None:
        buckets: dict[str, list[_Entry]] = {}
        for entry in entries:
            buckets.setdefault(entry.prefix, []).append(entry)
        # Newest first, so a scan can stop at the first match or at an index no newer than the best so far.
        self._buckets = {prefix: tuple(reversed(bucket)) for prefix, bucket in buckets.items()}
        self._lengths = tuple(sorted({len(prefix) for prefix in buckets}))
        self.last: Rule | None = entries[-1].rule if entries else None
        self.denies = any(entry.rule.action == "deny" for entry in entries)
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
        best: Rule | None = None
        best_index = -1
        size = len(text)
        for length in self._lengths:
            if length > size:
                break
            bucket = self._buckets.get(text[:length])
            if bucket is None:
                continue
            for entry in bucket:
                if entry.index <= best_index:
                    break
                if entry.matches(text):
                    best, best_index = entry.rule, entry.index
                    break
        return best


class Ruleset:
    """An immutable, ordered list of rules, compiled and indexed once.

    `evaluate(permission, pattern)` returns the last matching rule or None (the caller's default is
    ask). Its cost depends on the rules that could match, not on the size of the ruleset.
    Instances are shared freely between tasks and threads; the only mutable state is a memo of
    per-permission indexes, which any thread may rebuild without harm.
    """

    __slots__ = ("_exact", "_rules", "_views", "_wild")

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self._rules: tuple[Rule, ...] = tuple(rules)
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
        """OpenCode's `merge`: plain concatenation in argument order, no dedupe, no sorting."""
        return cls(rule for ruleset in rulesets for rule in ruleset._rules)

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
        return isinstance(other, Ruleset) and other._rules == self._rules

    def __hash__(self) -> int:
        return hash(self._rules)

    def __repr__(self) -> str:
        return f"Ruleset({len(self._rules)} rules)"

    def _view(self, permission: str) -> _PatternIndex:
        key = fold(permission)
        view = self._views.get(key)
        if view is None:
            sources = [self._exact.get(key, ())]
            sources.extend(entries for matches, entries in self._wild if matches(key))
            view = _PatternIndex(list(heapq.merge(*sources, key=lambda entry: entry.index)))
            if len(self._views) >= _VIEW_CACHE_LIMIT:
                self._views.clear()
            self._views[key] = view
        return view

    def evaluate(self, permission: str, pattern: str) -> Rule | None:
        """The last rule whose permission matches `permission` and whose pattern matches `pattern`."""
        return self._view(permission).find(fold(pattern))

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
