"""Permission rules, requests and decisions (OpenCode's PermissionNext, with its traps fixed).

Modules, bottom up: `model` (value types), `wildcard` (matching), `rules` (`Ruleset`, compiled and
indexed), `evaluate` (`decide`, `check`, `disabled`, model-facing texts), `parse` + `config`
(permissions.yaml documents → per-agent rulesets), `ask` (`PermissionBroker`: replies and
session approvals), `lint` (unreachable rules), `tests` (the `tests:` self-checks).
"""

from __future__ import annotations

from .ask import Asker, AskRequest, PermissionBroker, Reply
from .config import AgentInfo, Layer, PermissionConfig, build_permission_config
from .evaluate import approval_required_message, check, decide, denied_message, disabled
from .lint import covers, lint
from .model import ACTIONS, Action, CallSite, Decision, PatternDecision, PermissionRequest, Rule, strictest
from .parse import PermissionTest
from .rules import Ruleset
from .selftests import run_permission_tests
from .wildcard import compile_pattern, expand_pattern, match

__all__ = [
    "ACTIONS",
    "Action",
    "AgentInfo",
    "AskRequest",
    "Asker",
    "CallSite",
    "Decision",
    "Layer",
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
