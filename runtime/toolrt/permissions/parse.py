"""One validated permissions.yaml document → its rules, agents and tests, each with its file:line.

The document has already passed `schemas/permissions.schema.json`, so shapes are trusted here;
what this module adds is order (the user's key order is the rule order) and location.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from ..config.document import Document, child_pointer
from ..errors import Problem, Severity
from .model import Action, Rule
from .principals import PrincipalRule, principal_rules
from .wildcard import expand_pattern

__all__ = ["AgentMode", "AgentSpec", "FileSpec", "LayerRule", "Location", "PermissionTest", "parse_document"]

AgentMode = Literal["primary", "subagent", "all"]


@dataclass(frozen=True, slots=True)
class Location:
    """Where a value was written: file, 1-based line and column, JSON pointer."""

    file: str
    line: int
    column: int
    pointer: str

    @classmethod
    def of(cls, document: Document, pointer: str) -> Location:
        line, column = document.locate(pointer)
        return cls(document.name, line, column, pointer)

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}"

    def problem(self, message: str, severity: Severity = "error") -> Problem:
        return Problem(self.file, self.line, self.column, self.pointer, message, severity)


@dataclass(frozen=True, slots=True)
class LayerRule:
    """A rule as written in one file scope, with its location (for lint)."""

    rule: Rule
    location: Location


@dataclass(frozen=True, slots=True)
class PermissionTest:
    """One `tests:` entry: a (permission, pattern) or a (tool, args) call and the action expected."""

    expect: Action
    location: Location
    agent: str | None = None
    permission: str | None = None
    pattern: str | None = None
    tool: str | None = None
    args: Mapping[str, Any] | None = None

    @property
    def source(self) -> str:
        return self.location.source

    def describe(self) -> str:
        """`edit "src/a.py"` or `bash call {"command": "ls"}`, for messages."""
        if self.tool is not None:
            return f"{self.tool} call {dict(self.args or {})}"
        return f'{self.permission} "{self.pattern}"'


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """An `agents:` entry of one file."""

    name: str
    location: Location
    mode: AgentMode | None
    description: str | None
    disable: bool
    rules: tuple[LayerRule, ...]


@dataclass(frozen=True, slots=True)
class FileSpec:
    """Everything one permissions.yaml says, in file order."""

    file: str
    scope: str
    """`builtin`, `project` or `locked`: the layer its global rules belong to."""
    inherit: bool | None
    default_agent: tuple[str, Location] | None
    rules: tuple[LayerRule, ...]
    agents: tuple[AgentSpec, ...]
    tests: tuple[PermissionTest, ...]
    extra_keys: tuple[tuple[str, Location], ...]
    """Top-level keys present, for scope checks (`inherit` only in a project file, …)."""
    protected: tuple[str, ...] = ()
    """The file's `protected:` path patterns, `~` expanded."""
    denied_tools: tuple[str, ...] = ()
    """`tools: {deny: [...]}`: tool id wildcards (the locked file only)."""
    denied_handlers: tuple[str, ...] = ()
    """`handlers: {deny: [...]}`: handler kinds (the locked file only)."""
    principals: tuple[PrincipalRule, ...] = ()
    """`principals:`: token claims → agent (the locked file only, see `permissions.principals`)."""
    principals_location: Location | None = None


class _RuleReader:
    def __init__(self, document: Document, *, home: str, data_dir: str) -> None:
        self._document = document
        self._home = home
        self._data_dir = data_dir

    def _rule(self, permission: str, pattern: str, action: Any, pointer: str, layer: str) -> LayerRule:
        location = Location.of(self._document, pointer)
        expanded = expand_pattern(pattern, home=self._home, data_dir=self._data_dir)
        return LayerRule(Rule(permission, expanded, cast(Action, action), location.source, layer), location)

    def permission_block(self, value: Any, pointer: str, layer: str) -> list[LayerRule]:
        """OpenCode's `fromConfig`: an action string means `{"*": action}`; keys in the user's order."""
        if isinstance(value, str):
            return [self._rule("*", "*", value, pointer, layer)]
        rules: list[LayerRule] = []
        for key, item in value.items():
            key_pointer = child_pointer(pointer, key)
            if isinstance(item, str):
                rules.append(self._rule(key, "*", item, key_pointer, layer))
                continue
            for pattern, action in item.items():
                rules.append(self._rule(key, pattern, action, child_pointer(key_pointer, pattern), layer))
        return rules

    def rule_list(self, items: Any, pointer: str, layer: str) -> list[LayerRule]:
        return [
            self._rule(item["permission"], item.get("pattern", "*"), item["action"], child_pointer(pointer, i), layer)
            for i, item in enumerate(items)
        ]

    def scope(self, data: Mapping[str, Any], pointer: str, layer: str) -> tuple[LayerRule, ...]:
        """`permission:` then `rules:` of one scope (the file's top level or one agent)."""
        rules: list[LayerRule] = []
        if "permission" in data:
            rules += self.permission_block(data["permission"], child_pointer(pointer, "permission"), layer)
        if "rules" in data:
            rules += self.rule_list(data["rules"], child_pointer(pointer, "rules"), layer)
        return tuple(rules)


def _tests(document: Document, items: Any) -> tuple[PermissionTest, ...]:
    tests: list[PermissionTest] = []
    for index, item in enumerate(items):
        tests.append(
            PermissionTest(
                expect=item["expect"],
                location=Location.of(document, child_pointer("/tests", index)),
                agent=item.get("agent"),
                permission=item.get("permission"),
                pattern=item.get("pattern"),
                tool=item.get("tool"),
                args=item.get("args"),
            )
        )
    return tuple(tests)


def parse_document(document: Document, *, scope: str, home: str, data_dir: str) -> FileSpec:
    """Read a schema-valid permissions document; patterns are expanded (`~`, `$HOME`, `$TOOLRT_DATA`)."""
    data: Mapping[str, Any] = document.data or {}
    reader = _RuleReader(document, home=home, data_dir=data_dir)
    agents: list[AgentSpec] = []
    for name, body in (data.get("agents") or {}).items():
        pointer = child_pointer("/agents", name)
        agents.append(
            AgentSpec(
                name=name,
                location=Location.of(document, pointer),
                mode=body.get("mode"),
                description=body.get("description"),
                disable=bool(body.get("disable", False)),
                rules=reader.scope(body, pointer, f"agent:{name}"),
            )
        )
    default = data.get("default_agent")
    return FileSpec(
        file=document.name,
        scope=scope,
        inherit=data.get("inherit"),
        default_agent=(default, Location.of(document, "/default_agent")) if default is not None else None,
        rules=reader.scope(data, "", scope),
        agents=tuple(agents),
        tests=_tests(document, data.get("tests") or ()),
        extra_keys=tuple((key, Location.of(document, child_pointer("", key))) for key in data),
        protected=tuple(
            home + pattern[1:] if pattern == "~" or pattern.startswith("~/") else pattern
            for pattern in data.get("protected") or ()
        ),
        denied_tools=tuple((data.get("tools") or {}).get("deny") or ()),
        denied_handlers=tuple((data.get("handlers") or {}).get("deny") or ()),
        principals=principal_rules(data.get("principals") or ()),
        principals_location=Location.of(document, "/principals") if "principals" in data else None,
    )
