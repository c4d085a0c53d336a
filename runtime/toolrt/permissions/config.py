"""permissions.yaml documents → one compiled ruleset per agent, the locked layer, and the self-tests.

Per agent, in this order (OpenCode's `merge(defaults, agent, user)` plus toolrt's project layer):
built-in global rules, built-in agent rules, project global rules, project agent rules, then allow
rules for the truncation output directory (`DIR` and `DIR/*`) unless the chain already denies
exactly one of them. `inherit: false` in the project file drops both built-in parts; the built-in
agents still exist by name. A project may define new agents (built-in global + project global +
their own rules) and disable built-in ones. The locked file only holds global rules and tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from ..config.document import Document
from ..errors import ConfigError, Problem, UsageError
from .model import Rule
from .parse import AgentMode, AgentSpec, FileSpec, LayerRule, Location, PermissionTest, parse_document
from .principals import PrincipalRule
from .rules import Ruleset

__all__ = ["AgentInfo", "RuleLayer", "PermissionConfig", "build_permission_config"]

TRUNCATION_SOURCE = "built-in: truncation output directory"
PROTECTED_SOURCE = "built-in: protected paths"
PROTECTED_RULE = Rule("protected", "*", "ask", PROTECTED_SOURCE, "builtin")
"""Ends every agent's chain: no project rule can allow a write to a protected path; a session approval
("always") still can, and the locked file can deny one."""
_LOCKED_KEYS = frozenset(
    {"permission", "rules", "tests", "sandbox", "protected", "tools", "handlers", "settings", "principals"}
)
_LOCKED_ONLY = frozenset({"tools", "handlers", "settings", "principals"})


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """An agent that exists after all files are merged (disabled agents do not)."""

    name: str
    mode: AgentMode
    description: str


@dataclass(frozen=True, slots=True)
class RuleLayer:
    """The rules one file scope wrote, in order: the unit lint checks for unreachable rules."""

    name: str
    """`builtin`, `project`, `locked` (a file's global rules) or `agent:NAME`."""
    scope: str
    """The file it comes from: `builtin`, `project` or `locked`."""
    file: str
    rules: tuple[LayerRule, ...]


@dataclass(frozen=True, slots=True)
class PermissionConfig:
    """The compiled permission side of a snapshot. Immutable; rulesets are built once here."""

    default_agent: str
    agents: Mapping[str, AgentInfo]
    locked: Ruleset
    tests: tuple[PermissionTest, ...]
    layers: tuple[RuleLayer, ...]
    rulesets: Mapping[str, Ruleset]
    protected: tuple[str, ...] = ()
    """Protected path patterns of every file (built-in, project, locked), see `permissions.protected`."""
    denied_tools: tuple[str, ...] = ()
    """Tool id wildcards the locked file denies, whatever their permission key."""
    denied_handlers: tuple[str, ...] = ()
    """Handler kinds (python, argv, shell, host) the locked file denies."""
    principals: tuple[PrincipalRule, ...] | None = None
    """The locked file's `principals:` (token claims → agent, `permissions.principals`); None: it has none,
    and every authenticated caller acts as the agent `toolrt serve` was started with."""

    def ruleset(self, agent: str | None = None) -> Ruleset:
        """The agent's full chain (None → the default agent); an unknown name → `UsageError`."""
        name = self.default_agent if agent is None else agent
        ruleset = self.rulesets.get(name)
        if ruleset is None:
            raise UsageError(f'unknown agent "{name}"; agents: {", ".join(sorted(self.agents))}')
        return ruleset


def _truncation_rules(chain: list[Rule], truncation_dir: Path) -> list[Rule]:
    directory = str(truncation_dir)
    patterns = (directory, f"{directory.rstrip('/')}/*")
    explicit_deny = any(
        rule.permission == "external_directory" and rule.action == "deny" and rule.pattern in patterns for rule in chain
    )
    if explicit_deny:
        return []
    return [Rule("external_directory", pattern, "allow", TRUNCATION_SOURCE, "builtin") for pattern in patterns]


def _scope_problems(spec: FileSpec) -> list[Problem]:
    problems: list[Problem] = []
    for key, location in spec.extra_keys:
        if spec.scope == "locked" and key not in _LOCKED_KEYS:
            problems.append(
                location.problem(
                    f'"{key}" is not allowed in the locked file: '
                    "it holds only permission, rules, tests, sandbox, protected, tools, handlers, settings "
                    "and principals"
                )
            )
        elif spec.scope != "locked" and key in _LOCKED_ONLY:
            problems.append(location.problem(f'"{key}" belongs in the locked file, not in permissions.yaml'))
        elif spec.scope != "locked" and key == "sandbox":
            problems.append(
                location.problem(
                    '"sandbox" belongs in toolrt.yaml (tighten only) or in the locked file, not in permissions.yaml'
                )
            )
        elif spec.scope == "builtin" and key == "inherit":
            problems.append(location.problem('"inherit" belongs in a project permissions.yaml, not the built-in one'))
    return problems


def _merge_agents(specs: list[FileSpec]) -> tuple[dict[str, AgentInfo], dict[str, dict[str, AgentSpec]]]:
    """Agent name → merged info (later files override mode/description), and per file scope → its spec."""
    merged: dict[str, AgentInfo] = {}
    disabled: set[str] = set()
    by_scope: dict[str, dict[str, AgentSpec]] = {}
    for spec in specs:
        by_scope[spec.scope] = {agent.name: agent for agent in spec.agents}
        for agent in spec.agents:
            previous = merged.get(agent.name)
            merged[agent.name] = AgentInfo(
                agent.name,
                agent.mode or (previous.mode if previous else "all"),
                agent.description if agent.description is not None else (previous.description if previous else ""),
            )
            if agent.disable:
                disabled.add(agent.name)
            else:
                disabled.discard(agent.name)
    return {name: info for name, info in merged.items() if name not in disabled}, by_scope


def _default_agent(specs: list[FileSpec], agents: Mapping[str, AgentInfo]) -> tuple[str | None, list[Problem]]:
    chosen: tuple[str, Location] | None = None
    for spec in specs:
        if spec.default_agent is not None:
            chosen = spec.default_agent
    names = ", ".join(sorted(agents)) or "none"
    if chosen is None:
        for info in agents.values():
            if info.mode != "subagent":
                return info.name, []
        problem = Problem(specs[-1].file, 0, 0, "", f"no primary agent exists to be the default; agents: {names}")
        return None, [problem]
    name, location = chosen
    if name not in agents:
        return None, [location.problem(f'default_agent "{name}" is not an agent; agents: {names}')]
    if agents[name].mode == "subagent":
        return None, [location.problem(f'default_agent "{name}" is a subagent; the default must be a primary agent')]
    return name, []


def build_permission_config(
    builtin: Document,
    project: Document | None,
    locked: Document | None,
    *,
    home: Path,
    data_dir: Path,
    truncation_dir: Path,
    root: Path | None = None,
) -> PermissionConfig:
    """Merge the built-in, project and locked documents (already schema-valid) into rulesets.

    With `root`, the rulesets match path permissions' patterns in both the project-relative and the
    absolute form of a request's path (`permissions.paths`).

    Raises `ConfigError` with file:line problems for what the schema cannot see: a default agent
    that does not exist or is a subagent, a test naming an unknown agent, keys in the wrong file.
    """
    expand = {"home": str(home), "data_dir": str(data_dir)}
    base = parse_document(builtin, scope="builtin", **expand)
    user = parse_document(project, scope="project", **expand) if project is not None else None
    admin = parse_document(locked, scope="locked", **expand) if locked is not None else None
    specs = [spec for spec in (base, user) if spec is not None]
    problems = [p for spec in (base, user, admin) if spec is not None for p in _scope_problems(spec)]

    inherit = user is None or user.inherit is not False
    agents, by_scope = _merge_agents(specs)
    default_agent, default_problems = _default_agent(specs, agents)
    problems += default_problems

    anchor = str(root) if root is not None else None
    rulesets: dict[str, Ruleset] = {}
    for name in agents:
        chain: list[Rule] = []
        for spec in specs:
            if spec.scope == "builtin" and not inherit:
                continue
            chain += [entry.rule for entry in spec.rules]
            agent = by_scope[spec.scope].get(name)
            if agent is not None:
                chain += [entry.rule for entry in agent.rules]
        chain += _truncation_rules(chain, truncation_dir)
        chain.append(PROTECTED_RULE)
        rulesets[name] = Ruleset(chain, root=anchor)

    layers: list[RuleLayer] = []
    for scoped in [spec for spec in (base, user, admin) if spec is not None]:
        layers.append(RuleLayer(scoped.scope, scoped.scope, scoped.file, scoped.rules))
        layers += [RuleLayer(f"agent:{a.name}", scoped.scope, scoped.file, a.rules) for a in scoped.agents]

    # The built-in file's own tests describe the built-in defaults; a project changes those, so
    # they only run when there is no project file (validating toolrt's own permissions.yaml).
    test_specs = [spec for spec in ((base if user is None else None), user, admin) if spec is not None]
    tests = tuple(test for spec in test_specs for test in spec.tests)
    agent_names = ", ".join(sorted(agents))
    for test in tests:
        if test.agent is not None and test.agent not in agents:
            problems.append(test.location.problem(f'test names unknown agent "{test.agent}"; agents: {agent_names}'))

    if admin is not None and admin.principals_location is not None:
        for rule in admin.principals:
            if rule.agent not in agents:
                message = f'principals: unknown agent "{rule.agent}"; agents: {agent_names}'
                problems.append(admin.principals_location.problem(message))

    if problems or default_agent is None:
        raise ConfigError(problems)
    return PermissionConfig(
        default_agent=default_agent,
        agents=MappingProxyType(agents),
        locked=Ruleset((entry.rule for entry in admin.rules), root=anchor) if admin is not None else Ruleset(),
        tests=tests,
        layers=tuple(layers),
        rulesets=MappingProxyType(rulesets),
        protected=tuple(dict.fromkeys(p for spec in (base, user, admin) if spec is not None for p in spec.protected)),
        denied_tools=admin.denied_tools if admin is not None else (),
        denied_handlers=admin.denied_handlers if admin is not None else (),
        principals=admin.principals if admin is not None and admin.principals_location is not None else None,
    )
