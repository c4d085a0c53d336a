"""Permission rules, requests and decisions (OpenCode's PermissionNext, with its traps fixed).

Modules, bottom up: `model` (value types), `wildcard` (matching), `rules` (`Ruleset`, compiled and
indexed), `evaluate` (`decide`, `check`, `disabled`, model-facing texts), `parse` + `config`
(permissions.yaml documents → per-agent rulesets), `ask` (`PermissionBroker`: replies and
session approvals), `lint` (unreachable rules), `tests` (the `tests:` self-checks).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .ask import Asker, AskRequest, PermissionBroker, Reply
    from .config import AgentInfo, PermissionConfig, RuleLayer, build_permission_config
    from .evaluate import approval_required_message, check, decide, denied_message, disabled
    from .lint import covers, lint
    from .model import ACTIONS, Action, CallSite, Decision, PatternDecision, PermissionRequest, Rule, strictest
    from .parse import PermissionTest
    from .rules import Ruleset
    from .selftests import run_permission_tests
    from .wildcard import compile_pattern, expand_pattern, match

# Names load on first use: `import toolrt.permissions.model` (every module's value types) does not
# import the broker, the parser or the self-tests.
_LAZY = {
    "ACTIONS": "model",
    "Action": "model",
    "AgentInfo": "config",
    "AskRequest": "ask",
    "Asker": "ask",
    "CallSite": "model",
    "Decision": "model",
    "RuleLayer": "config",
    "PatternDecision": "model",
    "PermissionBroker": "ask",
    "PermissionConfig": "config",
    "PermissionRequest": "model",
    "PermissionTest": "parse",
    "Reply": "ask",
    "Rule": "model",
    "Ruleset": "rules",
    "approval_required_message": "evaluate",
    "build_permission_config": "config",
    "check": "evaluate",
    "compile_pattern": "wildcard",
    "covers": "lint",
    "decide": "evaluate",
    "denied_message": "evaluate",
    "disabled": "evaluate",
    "expand_pattern": "wildcard",
    "lint": "lint",
    "match": "wildcard",
    "run_permission_tests": "selftests",
    "strictest": "model",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "ACTIONS",
    "Action",
    "AgentInfo",
    "AskRequest",
    "Asker",
    "CallSite",
    "Decision",
    "RuleLayer",
    "PatternDecision",
    "PermissionBroker",
    "PermissionConfig",
    "PermissionRequest",
    "PermissionTest",
    "Reply",
    "Rule",
    "Ruleset",
    "approval_required_message",
    "build_permission_config",
    "check",
    "compile_pattern",
    "covers",
    "decide",
    "denied_message",
    "disabled",
    "expand_pattern",
    "lint",
    "match",
    "run_permission_tests",
    "strictest",
]
