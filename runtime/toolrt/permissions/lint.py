"""Lint of permission rules: a rule that a later rule of the same file scope makes unreachable.

With "the last matching rule wins", `bash: {"rm *": deny, "*": allow}` never denies anything: the
later `*` matches every command `rm *` matches (anomalyco/opencode#11218). `covers` decides that
exactly for two wildcards, and `lint` reports each such pair as an error naming both lines.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from functools import lru_cache
from typing import NamedTuple

from ..errors import Problem
from .config import PermissionConfig, RuleLayer
from .parse import LayerRule
from .rules import Ruleset
from .shapes import never_matches
from .wildcard import fold, match

__all__ = ["BUILTIN_PERMISSIONS", "covers", "lint"]

BUILTIN_PERMISSIONS = frozenset({"doom_loop", "external_directory"})
"""Permissions the runtime itself asks, whatever tools exist."""

_ANY = "\0any"
_OPTIONAL_TAIL = " *"


class _Glob(NamedTuple):
    """A wildcard as an NFA: state i = i tokens consumed; accepting states listed."""

    tokens: tuple[str, ...]
    """Each token is one literal character, or `*` / `?` (the wildcard tokens are never literal)."""
    accept: frozenset[int]

    def closure(self, states: Iterable[int]) -> frozenset[int]:
        # A `*` may match nothing, so reaching its position also reaches the next one.
        result: set[int] = set()
        for state in states:
            while True:
                result.add(state)
                if state < len(self.tokens) and self.tokens[state] == "*":
                    state += 1
                    continue
                break
        return frozenset(result)

    def step(self, states: frozenset[int], char: str) -> frozenset[int]:
        nxt: set[int] = set()
        for state in states:
            if state >= len(self.tokens):
                continue
            token = self.tokens[state]
            if token == "*":
                nxt.add(state)
            elif token == "?" or token == char:
                nxt.add(state + 1)
        return self.closure(nxt)


def _glob(pattern: str) -> _Glob:
    text = fold(pattern)
    # A trailing ` *` is optional: the pattern also accepts where its stem ends.
    optional = text.endswith(_OPTIONAL_TAIL)
    tokens = tuple(text)
    accept = {len(tokens)}
    if optional:
        accept.add(len(tokens) - len(_OPTIONAL_TAIL))
    return _Glob(tokens, frozenset(accept))


def _literal(token: str) -> bool:
    return token not in ("*", "?")


@lru_cache(maxsize=4096)
def covers(later: str, earlier: str) -> bool:
    """True when every string the `earlier` wildcard matches is also matched by `later`.

    Exact: both patterns become NFAs over their positions, and a search over (position in
    `earlier`, set of positions in `later`) looks for a string `earlier` accepts and `later` does
    not. Characters that appear in neither pattern behave alike, so one stand-in represents them.
    """
    small, big = _glob(earlier), _glob(later)
    alphabet = {t for t in small.tokens + big.tokens if _literal(t)}
    alphabet.add(_ANY)
    start_big = big.closure({0})
    todo = [(state, start_big) for state in small.closure({0})]
    seen = set(todo)
    while todo:
        state, states = todo.pop()
        if state in small.accept and not states & big.accept:
            return False
        for char in alphabet:
            targets = small.step(frozenset({state}), char)
            if not targets:
                continue
            after = big.step(states, char)
            for target in targets:
                pair = (target, after)
                if pair not in seen:
                    seen.add(pair)
                    todo.append(pair)
    return True


def _shadow(earlier: LayerRule, later: LayerRule, layer: RuleLayer) -> Problem:
    a, b = earlier.rule, later.rule
    identical = (a.permission, a.pattern, a.action) == (b.permission, b.pattern, b.action)
    what = "duplicates" if identical else "can never decide: it is covered by"
    message = (
        f'rule {a.permission}: "{a.pattern}": {a.action} (line {earlier.location.line}) {what} the later rule '
        f'{b.permission}: "{b.pattern}": {b.action} (line {later.location.line}) in {layer.name}; the last matching '
        "rule wins, so put the broader rule first or remove one of them"
    )
    return earlier.location.problem(message)


def _wild(text: str) -> bool:
    return "*" in text or "?" in text


def _unreachable(layer: RuleLayer) -> list[Problem]:
    problems: list[Problem] = []
    entries = layer.rules
    # A rule that is one literal string is covered exactly when a later rule matches that string,
    # which the compiled index answers without comparing the rule against every later one.
    position = {id(entry.rule): index for index, entry in enumerate(entries)}
    ruleset = Ruleset(entry.rule for entry in entries)
    for index, earlier in enumerate(entries):
        rule = earlier.rule
        if not _wild(rule.permission) and not _wild(rule.pattern):
            last = ruleset.evaluate(rule.permission, rule.pattern)
            if last is not None and position[id(last)] > index:
                problems.append(_shadow(earlier, entries[position[id(last)]], layer))
            continue
        for later in reversed(entries[index + 1 :]):
            key = later.rule.permission
            if key != rule.permission and not _wild(key):
                continue
            if covers(key, rule.permission) and covers(later.rule.pattern, rule.pattern):
                problems.append(_shadow(earlier, later, layer))
                break
    return problems


def _unused(layer: RuleLayer, known: Collection[str]) -> list[Problem]:
    problems: list[Problem] = []
    reported: set[str] = set()
    for entry in layer.rules:
        key = entry.rule.permission
        if key in reported or any(match(name, key) for name in known):
            continue
        reported.add(key)
        problems.append(
            entry.location.problem(f'permission "{key}" is not used by any tool; check the spelling', "warning")
        )
    return problems


def _unmatchable(layer: RuleLayer) -> list[Problem]:
    """A warning, with the pattern to write, for each rule no request of its permission can match."""
    problems: list[Problem] = []
    for entry in layer.rules:
        why = never_matches(entry.rule.permission, entry.rule.pattern)
        if why is not None:
            rule = entry.rule
            message = f'rule {rule.permission}: "{rule.pattern}": {rule.action} never matches: {why}'
            problems.append(entry.location.problem(message, "warning"))
    return problems


_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}


def _overlap(first: str, second: str) -> bool:
    return covers(first, second) or covers(second, first)


def _weakened(config: PermissionConfig) -> list[Problem]:
    """A warning for each project-wide rule that loosens a built-in agent's own restriction.

    Agent rules come before the project's global rules in each agent's chain, so a project `edit: ask`
    silently turns the plan agent's `edit: deny` into an ask; the warning names both lines. Only rules
    that name a permission count on both sides (the `"*"` fallbacks are the usual first lines of a file),
    and only agent restrictions that no later rule of the same agent covers.
    """
    project = [layer for layer in config.layers if layer.scope == "project" and layer.name == "project"]
    if not project:
        return []
    problems: list[Problem] = []
    for layer in config.layers:
        agent = layer.name.removeprefix("agent:")
        if layer.scope != "builtin" or agent == layer.name or agent not in config.agents:
            continue
        own = [entry.rule for entry in layer.rules]
        restated = [
            entry.rule
            for other in config.layers
            if other.scope == "project" and other.name == layer.name
            for entry in other.rules
        ]
        restrictions = [
            rule
            for index, rule in enumerate(own)
            if rule.action != "allow"
            and _wild(rule.permission) is False
            and not any(
                covers(later.pattern, rule.pattern) for later in own[index + 1 :] if later.permission == rule.permission
            )
        ]
        for entry in project[0].rules:
            rule = entry.rule
            if _wild(rule.permission):
                continue
            for restriction in restrictions:
                if _STRICTNESS[rule.action] >= _STRICTNESS[restriction.action]:
                    continue
                if any(
                    again.permission == restriction.permission
                    and covers(again.pattern, restriction.pattern)
                    and _STRICTNESS[again.action] >= _STRICTNESS[restriction.action]
                    for again in restated
                ):
                    continue  # the project says the restriction again for this agent
                if _overlap(rule.permission, restriction.permission) and _overlap(rule.pattern, restriction.pattern):
                    message = (
                        f"{rule.describe()} loosens the built-in {agent} agent's {restriction.describe()}: project "
                        f"rules come after agent rules, so for {agent} this one wins. If that is meant, say it under "
                        f"agents: {{{agent}: {{permission: ...}}}}; otherwise narrow this rule"
                    )
                    problems.append(entry.location.problem(message, "warning"))
                    break
    return problems


def lint(config: PermissionConfig, *, known_permissions: Collection[str] | None = None) -> list[Problem]:
    """Errors for unreachable and duplicate rules, per file scope (a file's global rules, or one agent's).

    Warnings for each rule of a project or locked file whose pattern no request of its permission can
    take (`permissions.shapes`); with `known_permissions` (the permission keys the tools ask), also for
    each key of such a file that matches none of them (a typo such as `bsah`).
    """
    problems: list[Problem] = []
    known = None if known_permissions is None else frozenset(known_permissions) | BUILTIN_PERMISSIONS
    for layer in config.layers:
        problems += _unreachable(layer)
        if layer.scope != "builtin":
            problems += _unmatchable(layer)
            if known is not None:
                problems += _unused(layer, known)
    problems += _weakened(config)
    return problems
