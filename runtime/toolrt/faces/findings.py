"""The kind of each `toolrt validate` finding: SARIF's rule ids, one per kind, and stable fingerprints.

Findings are `Problem`s, made in many places with a message written for people; their kind is read
from the message by the table below, first match wins. A message no entry knows falls back to the
generic `toolrt/config-error` or `toolrt/config-warning`, so a new message is never lost, only filed
generically until it gets a line here.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ..errors import Problem

__all__ = ["KINDS", "Kind", "fingerprint", "kind_of"]


@dataclass(frozen=True, slots=True)
class Kind:
    id: str
    """The SARIF rule id, `toolrt/…`."""
    description: str
    pattern: re.Pattern[str] | None
    """What a message of this kind matches (None: the generic fallbacks)."""


def _kind(name: str, description: str, pattern: str | None) -> Kind:
    return Kind(f"toolrt/{name}", description, re.compile(pattern) if pattern is not None else None)


KINDS: tuple[Kind, ...] = (
    _kind("yaml-syntax", "A file is not valid YAML or UTF-8.", r"YAML syntax error|not valid UTF-8|duplicate key"),
    _kind("unknown-key", "A key no schema knows (usually a misspelling).", r"^unknown key "),
    _kind("permission-test", "A `tests:` entry of permissions.yaml fails or cannot run.", r"^permission test "),
    _kind(
        "unreachable-rule",
        "A permission rule a later rule of the same scope covers: it never decides.",
        r"can never decide: it is covered by|duplicates the later rule",
    ),
    _kind("unmatchable-pattern", "A permission pattern no request of its permission can take.", r" never matches: "),
    _kind("unused-permission", "A permission key that no tool asks.", r"is not used by any tool"),
    _kind(
        "loosened-agent-rule", "A project rule that loosens a built-in agent's restriction.", r"loosens the built-in"
    ),
    _kind(
        "handler",
        "A handler, analyzer, preview or formatter that cannot be imported or called.",
        r"cannot be imported|is not callable|cannot be called|is not of the form 'package\.module:function'",
    ),
    _kind("template", "A template that does not compile or names what it may not.", r"template|\{\{ \}\}"),
    _kind("unknown-flag", "A flag that is not declared.", r"unknown flag"),
    _kind("tool-id", "A tool id that is invalid or defined twice.", r"valid tool id|duplicate tool id"),
    _kind("example", "An `examples:` entry that contradicts the parameters schema.", r"example"),
    _kind(
        "provider-rewrite",
        "A schema keyword a provider's format drops or rewrites.",
        r"\[[a-z-]+(, [a-z-]+)*: [A-Za-z$]+\]$",
    ),
    _kind("schema-copy", "A `$schema` modeline pointing at a missing or outdated schema copy.", r"^\$schema points at"),
    _kind(
        "json-schema", "A `parameters` schema that is not a valid JSON Schema.", r"JSON Schema|the root of 'parameters'"
    ),
    _kind("sandbox", "The OS sandbox settings, or what the sandbox can do on this machine.", r"[Ss]andbox"),
    _kind("language-server", "A language server declared in `lsp:`.", r"language server|\blsp\b"),
    _kind("schema", "A value of the wrong type or shape for its key.", r"^expected |required|is not one of|must be"),
    _kind("config-error", "The config is invalid: toolrt refuses or cannot build it.", None),
    _kind("config-warning", "The config loads, but something in it is likely a mistake.", None),
)
_FALLBACK = {"error": len(KINDS) - 2, "warning": len(KINDS) - 1}


def kind_of(problem: Problem) -> int:
    """The index in `KINDS` of the problem's kind."""
    for index, kind in enumerate(KINDS):
        if kind.pattern is not None and kind.pattern.search(problem.message):
            return index
    return _FALLBACK.get(problem.severity, _FALLBACK["warning"])


_NUMBERS = re.compile(r"\d+")


def fingerprint(problem: Problem, kind: Kind) -> str:
    """A fingerprint that survives lines moving: the kind, the file, the JSON pointer and the message
    with its numbers (line references) left out."""
    text = "\0".join((kind.id, problem.file, problem.pointer, _NUMBERS.sub("#", problem.message)))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
