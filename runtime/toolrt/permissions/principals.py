"""The locked file's `principals:`: which agent (and so which ruleset and tool set) an authenticated
caller of `toolrt serve` acts as, from its token's claims.

```yaml
principals:
  - {match: {groups: admins}, agent: build}     # a claim equal to, or a list claim holding, the value
  - {match: {sub: [alice, bob]}, agent: build}  # any of several values
  - {match: {}, agent: readonly}                # every token: the default
```
Entries are tried in order and the first whose every claim matches decides; a token no entry matches
is refused (list `{match: {}}` last to give everyone else a default agent). Without `principals:`
every token acts as the agent `toolrt serve` was started with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

__all__ = ["PrincipalRule", "agent_for", "principal_rules"]


@dataclass(frozen=True, slots=True)
class PrincipalRule:
    """One `principals:` entry of the locked file: the token claims that map to an agent."""

    match: Mapping[str, tuple[str, ...]]
    """Claim name → the values one of which it must equal (or, for a list claim, hold)."""
    agent: str

    def matches(self, claims: Mapping[str, Any]) -> bool:
        return all(_claim_matches(claims.get(name), wanted) for name, wanted in self.match.items())


def _claim_matches(value: Any, wanted: tuple[str, ...]) -> bool:
    if isinstance(value, (list, tuple)):
        return any(str(item) in wanted for item in value if isinstance(item, (str, int)))
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value) in wanted
    return False


def principal_rules(entries: Sequence[Mapping[str, Any]]) -> tuple[PrincipalRule, ...]:
    """The locked file's `principals:` entries (already schema-valid)."""
    rules = []
    for entry in entries:
        match = {
            str(name): tuple(str(v) for v in value) if isinstance(value, list) else (str(value),)
            for name, value in (entry.get("match") or {}).items()
        }
        rules.append(PrincipalRule(MappingProxyType(match), str(entry["agent"])))
    return tuple(rules)


def agent_for(rules: Sequence[PrincipalRule], claims: Mapping[str, Any]) -> str | None:
    """The agent of the first entry `claims` match; None: no entry does (the caller is refused)."""
    for rule in rules:
        if rule.matches(claims):
            return rule.agent
    return None
