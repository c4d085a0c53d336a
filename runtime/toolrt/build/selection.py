"""Which tools a model sees: `when` filters, flags, clients, overrides, tool sets, permission-disabled tools.

`select()` is pure: a snapshot plus who is asking gives the visible tools (under the names they are
offered as) and, for every hidden tool, the reason it is hidden.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from ..config.model import HostHandler, Selector, When
from ..errors import UsageError
from ..permissions.evaluate import disabled
from ..permissions.wildcard import match
from ..scope import DEFAULT_SCOPE, CallScope
from .compiled import OFFERED_MARK, CompiledTool
from .locked_tools import locked_denial
from .snapshot import Snapshot

__all__ = ["Hidden", "Offered", "ToolSet", "describe_offered", "display_title", "select", "spec_of", "unavailable"]


@functools.lru_cache(maxsize=512)
def _description_template(description: str) -> Any:
    import jinja2
    import jinja2.sandbox

    env = jinja2.sandbox.SandboxedEnvironment(
        autoescape=False, keep_trailing_newline=True, undefined=jinja2.StrictUndefined
    )
    return env.from_string(description)


def describe_offered(description: str, tools: Sequence[str]) -> str:
    """`description` as the model reads it beside `tools`: a description written as a template
    (`{% if "task" in tools %}…{% endif %}`) names only tools the model was given.

    Raises:
        jinja2.TemplateError: the description is not a valid template (the loader reports it first).
    """
    if OFFERED_MARK not in description:
        return description
    return str(_description_template(description).render(tools=tuple(tools)))


class Offered(NamedTuple):
    """A tool as the model sees it (a tuple: selections build one per tool, so it must be cheap)."""

    name: str
    """The name the model sees (the base tool's name for an override)."""
    tool: CompiledTool


@dataclass(frozen=True, slots=True)
class Hidden:
    id: str
    reason: str


@dataclass(frozen=True)
class ToolSet:
    """The tools one selection offers, indexed by name, with its provider specs compiled on first use.

    A ToolSet is built once per (snapshot, selection) and cached with it, so the per-call work is a
    dictionary lookup whatever the number of tools, and each format's specs are compiled once.
    """

    offered: tuple[Offered, ...]
    hidden: tuple[Hidden, ...]
    _by_name: Mapping[str, Offered] = field(init=False, repr=False, compare=False)
    _names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _specs: dict[str, tuple[Mapping[str, Any], ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", MappingProxyType({o.name: o for o in self.offered}))
        object.__setattr__(self, "_names", tuple(o.name for o in self.offered))
        object.__setattr__(self, "_specs", {})

    def names(self) -> tuple[str, ...]:
        """The offered names, in definition order (computed once)."""
        return self._names

    def get(self, name: str) -> Offered | None:
        return self._by_name.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def specs(self, format: str) -> tuple[Mapping[str, Any], ...]:
        """Every offered tool's spec in `format`, compiled once per ToolSet and shared: never mutate them.

        Raises:
            UsageError: `format` is unknown.
        """
        found = self._specs.get(format)
        if found is None:
            from ..specs import FORMATS, SERVED_FORMATS

            if format not in SERVED_FORMATS:
                raise UsageError(f"unknown spec format {format!r}; expected one of: {', '.join(FORMATS)}")
            found = self._specs[format] = tuple(spec_of(offered, format, self._names) for offered in self.offered)
        return found

    def spec(self, name: str, format: str) -> Mapping[str, Any] | None:
        """One offered tool's spec in `format` (shared: never mutate it); None when `name` is not offered."""
        offered = self._by_name.get(name)
        return None if offered is None else spec_of(offered, format, self._names)


def unavailable(snapshot: Snapshot, name: str) -> str | None:
    """What a call of `name` answers when its tool file is broken (`snapshot.withheld`), rather than
    pretend the tool never existed; None when it is not withheld."""
    problems = snapshot.withheld.get(name)
    if not problems:
        return None
    listed = "; ".join(str(problem) for problem in problems)
    return f"The {name} tool is unavailable until its definition is fixed: {listed}"


def display_title(name: str, title: str | None) -> str:
    """The tool's name for people (MCP's `title`): its title, or the words before a templated title's
    first placeholder (`Read {{ filePath }}` → `Read`), or its name in words (`apply_patch` → `Apply patch`)."""
    if title and "{" not in title:
        return title
    lead = (title or "").split("{", 1)[0].strip()
    if lead:
        return lead
    words = name.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:] if words else name


def spec_of(offered: Offered, format: str, tools: tuple[str, ...] = ()) -> Mapping[str, Any]:
    """The spec of one tool under its offered name, compiled once per (tool, format, name), and per
    offered tool set when its description names tools conditionally (`{% if "task" in tools %}`).

    The cache lives on the compiled tool, so a reload that keeps a tool file unchanged keeps its specs.
    """
    description = offered.tool.description
    key: tuple[Any, ...] = (format, offered.name)
    if OFFERED_MARK in description:
        key = (format, offered.name, tools)
    cache = offered.tool.spec_cache()
    found = cache.get(key)
    if found is None:
        from ..specs import compile_spec

        definition = offered.tool.definition
        found = cache[key] = compile_spec(
            format,
            name=offered.name,
            description=describe_offered(description, tools),
            parameters=definition.parameters,
            title=display_title(offered.name, definition.title),
            annotations=definition.annotations,
            output=definition.output,
        ).spec
    return found


def _selector_matches(selector: Selector, scope: CallScope, groups: Mapping[str, tuple[Selector, ...]]) -> bool:
    if selector.model is not None and (scope.model is None or not match(scope.model, selector.model)):
        return False
    if selector.provider is not None and (scope.provider is None or not match(scope.provider, selector.provider)):
        return False
    if selector.group is not None and not any(
        _selector_matches(s, scope, groups) for s in groups.get(selector.group, ())
    ):
        return False
    return not any(_selector_matches(s, scope, groups) for s in selector.not_)


def _when_reason(
    when: When, scope: CallScope, flags: Mapping[str, bool], groups: Mapping[str, tuple[Selector, ...]]
) -> str | None:
    """None when every filter holds, else why the tool is not available."""
    selectors = (
        when.models if when.models is not None else (groups.get(when.models_group, ()) if when.models_group else None)
    )
    if selectors is not None and not any(_selector_matches(s, scope, groups) for s in selectors):
        wanted = when.models_group or "its model selectors"
        return f"model {scope.model or '(none given)'} does not match {wanted}"
    if when.providers is not None and not (scope.provider and any(match(scope.provider, p) for p in when.providers)):
        return f"provider {scope.provider or '(none given)'} is not one of: {', '.join(when.providers)}"
    for flag in when.flags:
        wanted_on = not flag.startswith("!")
        name = flag.lstrip("!")
        if flags.get(name, False) != wanted_on:
            return f"flag {name} is {'off' if wanted_on else 'on'}"
    if when.clients is not None and scope.client not in when.clients:
        return f"client {scope.client or '(none given)'} is not one of: {', '.join(when.clients)}"
    if when.any_:
        reasons = [_when_reason(alternative, scope, flags, groups) for alternative in when.any_]
        if None not in reasons:
            return f"none of its alternatives holds ({'; '.join(r for r in reasons if r)})"
    return None


def select(
    snapshot: Snapshot,
    scope: CallScope = DEFAULT_SCOPE,
    *,
    flags: Mapping[str, bool] | None = None,
    host_handlers: Collection[str] = (),
) -> ToolSet:
    """The tools offered for `scope`, in definition order, and every hidden tool with its reason.

    `flags` are the resolved flag values (missing flags take their declared default); without them,
    the scope's own flags over the declared defaults.
    """
    values = {name: flag.default for name, flag in snapshot.settings.flags.items()}
    values.update((scope.flags or {}) if flags is None else flags)
    hidden: dict[str, str] = {}
    available = _available(snapshot, scope, values, host_handlers, hidden)
    _hide_denied(snapshot, scope, available, hidden)
    offered = _with_overrides(available, hidden)
    if scope.toolset is not None:
        _keep_toolset(snapshot, scope.toolset, offered, hidden)
    for tool_id, problems in snapshot.withheld.items():
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        hidden[tool_id] = f"left out, its file is invalid: {problems[0]}{more}"
    return ToolSet(
        offered=tuple(offered.values()),
        hidden=tuple(Hidden(tool_id, reason) for tool_id, reason in sorted(hidden.items())),
    )


def _available(
    snapshot: Snapshot,
    scope: CallScope,
    flags: Mapping[str, bool],
    host_handlers: Collection[str],
    hidden: dict[str, str],
) -> dict[str, CompiledTool]:
    """The tools whose `when`, host handler and the locked file let `scope` have them; the others hidden."""
    groups = snapshot.settings.model_groups
    available: dict[str, CompiledTool] = {}
    for tool_id, tool in snapshot.tools.items():
        reason = _unavailable(tool, snapshot, scope, flags, groups, host_handlers)
        if reason is None:
            available[tool_id] = tool
        else:
            hidden[tool_id] = reason
    return available


def _unavailable(
    tool: CompiledTool,
    snapshot: Snapshot,
    scope: CallScope,
    flags: Mapping[str, bool],
    groups: Mapping[str, tuple[Selector, ...]],
    host_handlers: Collection[str],
) -> str | None:
    """Why `scope` may not have `tool`, or None."""
    definition = tool.definition
    if definition.internal:
        return "internal: never offered to the model (repair target)"
    reason = _when_reason(definition.when, scope, flags, groups)
    if reason is not None:
        return reason
    if isinstance(definition.handler, HostHandler) and definition.handler.name not in host_handlers:
        return f"no host handler registered for '{definition.handler.name}'"
    denial = locked_denial(tool, snapshot)
    return denial.reason if denial is not None else None


def _hide_denied(
    snapshot: Snapshot, scope: CallScope, available: dict[str, CompiledTool], hidden: dict[str, str]
) -> None:
    """Moves the tools whose permission the agent's rules or the locked file deny outright to `hidden`."""
    ruleset = snapshot.permissions.ruleset(scope.agent)
    agent = scope.agent or snapshot.permissions.default_agent
    keys = {tool_id: tool.permission_key for tool_id, tool in available.items()}
    locked = snapshot.permissions.locked
    for tool_id in disabled(keys, ruleset) | disabled(keys, locked):
        key = available[tool_id].permission_key
        rule = locked.last_rule_for_permission(key) or ruleset.last_rule_for_permission(key)
        where = f" ({rule.source})" if rule is not None and rule.source else ""
        hidden[tool_id] = f"permission '{available.pop(tool_id).permission_key}' is denied for agent {agent}{where}"


def _with_overrides(available: Mapping[str, CompiledTool], hidden: dict[str, str]) -> dict[str, Offered]:
    """The available tools by offered name: an override takes its base's name and hides the base."""
    offered: dict[str, Offered] = {tool_id: Offered(tool_id, tool) for tool_id, tool in available.items()}
    for tool_id, tool in available.items():
        base = tool.definition.overrides
        if base is None:
            continue
        del offered[tool_id]
        if base in offered or base in available:
            offered[base] = Offered(base, tool)
            hidden[base] = f"overridden by '{tool_id}' for this model"
        else:
            hidden[tool_id] = f"overrides '{base}', which is not available here"
    return offered


def _keep_toolset(snapshot: Snapshot, toolset: str, offered: dict[str, Offered], hidden: dict[str, str]) -> None:
    """Hides the offered tools that are not in tool set `toolset`.

    Raises:
        UsageError: no such tool set.
    """
    members = snapshot.settings.toolsets.get(toolset)
    if members is None:
        known = ", ".join(sorted(snapshot.settings.toolsets)) or "none declared"
        raise UsageError(f"unknown tool set '{toolset}' (tool sets: {known})")
    for name in list(offered):
        if name not in members:
            hidden[offered.pop(name).tool.id] = f"not in tool set '{toolset}'"
