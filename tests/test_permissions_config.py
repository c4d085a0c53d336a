"""permissions.yaml → rules: OpenCode's fromConfig tests, agent defaults, layering, and config errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_permissions_support import FIXTURES, HOME, TRUNCATION, build

from toolrt.errors import ConfigError, UsageError
from toolrt.permissions.config import PROTECTED_SOURCE, TRUNCATION_SOURCE, AgentInfo
from toolrt.permissions.evaluate import check, disabled
from toolrt.permissions.model import Rule
from toolrt.permissions.rules import Ruleset

EMPTY_BUILTIN = "default_agent: build\nagents: {build: {mode: primary}}\n"


def rules_of(project: str) -> list[tuple[str, str, str]]:
    """The project's global rules, as (permission, pattern, action), built-ins and truncation rules excluded."""
    config = build(project, builtin=EMPTY_BUILTIN)
    return [(r.permission, r.pattern, r.action) for r in config.ruleset("build") if r.layer == "project"]


@pytest.mark.parametrize(
    ("permission", "expected"),
    [
        ("{bash: allow}", [("bash", "*", "allow")]),
        ('{bash: {"*": allow, rm: deny}}', [("bash", "*", "allow"), ("bash", "rm", "deny")]),
        (
            '{bash: {"*": allow, rm: deny}, edit: allow, webfetch: ask}',
            [("bash", "*", "allow"), ("bash", "rm", "deny"), ("edit", "*", "allow"), ("webfetch", "*", "ask")],
        ),
        ("{}", []),
        ("allow", [("*", "*", "allow")]),
        ('{external_directory: {"~/projects/*": allow}}', [("external_directory", f"{HOME}/projects/*", "allow")]),
        ('{external_directory: {"$HOME/projects/*": allow}}', [("external_directory", f"{HOME}/projects/*", "allow")]),
        ("{external_directory: {$HOME: allow}}", [("external_directory", str(HOME), "allow")]),
        ('{external_directory: {"~": allow}}', [("external_directory", str(HOME), "allow")]),
        ('{external_directory: {"/some/~/path": allow}}', [("external_directory", "/some/~/path", "allow")]),
        # the user's key order, never sorted by specificity
        (
            '{bash: allow, "*": ask, edit: deny, "mcp_*": allow}',
            [
                ("bash", "*", "allow"),
                ("*", "*", "ask"),
                ("edit", "*", "deny"),
                ("mcp_*", "*", "allow"),
            ],
        ),
        ('{bash: {"*": deny, "git *": allow}}', [("bash", "*", "deny"), ("bash", "git *", "allow")]),
    ],
)
def test_permission_block_to_rules(permission: str, expected: list[tuple[str, str, str]]) -> None:
    assert rules_of(f"permission: {permission}\n") == expected


def test_rules_list_comes_after_the_mapping_and_may_repeat_keys() -> None:
    text = (
        "permission: {bash: {'*': ask}}\n"
        "rules:\n"
        "  - {permission: bash, pattern: 'git *', action: allow}\n"
        "  - {permission: edit, action: deny}\n"
        "  - {permission: bash, pattern: 'git push*', action: deny}\n"
    )
    assert rules_of(text) == [
        ("bash", "*", "ask"),
        ("bash", "git *", "allow"),
        ("edit", "*", "deny"),
        ("bash", "git push*", "deny"),
    ]


@pytest.mark.parametrize(
    ("permission", "checks"),
    [
        ('{"*": deny, bash: allow}', [("bash", "ls", "allow")]),
        ('{bash: allow, "*": deny}', [("bash", "ls", "deny")]),
        ('{"*": ask, bash: allow}', [("edit", "foo.ts", "ask"), ("bash", "ls", "allow")]),
        ('{bash: {"*": deny, "git *": allow}}', [("bash", "rm foo", "deny"), ("bash", "git status", "allow")]),
        (
            '{"*": ask, bash: allow, edit: deny}',
            [("bash", "ls", "allow"), ("edit", "foo.ts", "deny"), ("read", "foo.ts", "ask")],
        ),
        (
            '{external_directory: {"~/projects/*": allow}}',
            [("external_directory", f"{HOME}/projects/file.txt", "allow")],
        ),
    ],
)
def test_key_order_decides(permission: str, checks: list[tuple[str, str, str]]) -> None:
    ruleset = build(f"permission: {permission}\n", builtin=EMPTY_BUILTIN).ruleset()
    for name, pattern, expected in checks:
        assert check(name, pattern, ruleset, locked=Ruleset()).action == expected


def test_rules_carry_file_line_and_layer() -> None:
    config = build((FIXTURES / "project.yaml").read_text(encoding="utf-8"))
    by_pattern = {r.pattern: r for r in config.ruleset("build")}
    assert by_pattern["git push *"].source == "project.yaml:8"
    assert by_pattern["git push *"].layer == "project"
    assert by_pattern["git status --porcelain*"].source == "project.yaml:12"
    assert {r.layer for r in config.ruleset("plan")} >= {"builtin", "agent:plan", "project"}


BUILTIN_CASES = [
    # agent, permission, pattern, expected
    ("build", "bash", "rm -rf /", "allow"),
    ("build", "question", "*", "allow"),
    ("build", "plan_enter", "*", "allow"),
    ("build", "plan_exit", "*", "deny"),
    ("build", "doom_loop", "bash", "ask"),
    ("build", "external_directory", "/etc/*", "ask"),
    ("build", "external_directory", str(TRUNCATION), "allow"),
    ("build", "external_directory", f"{TRUNCATION}/*", "allow"),
    ("build", "read", "/p/src/app.py", "allow"),
    ("build", "read", "/p/.env", "ask"),
    ("build", "read", "/p/.env.local", "ask"),
    ("build", "read", "/p/.env.example", "allow"),
    ("build", "read", "/p/.envrc", "allow"),
    ("plan", "edit", "src/a.py", "deny"),
    ("plan", "edit", ".toolrt/plans/feature.md", "allow"),
    ("plan", "edit", "/data/toolrt/plans/feature.md", "allow"),
    ("plan", "external_directory", "/data/toolrt/plans/*", "allow"),
    ("plan", "question", "*", "allow"),
    ("plan", "plan_exit", "*", "allow"),
    ("plan", "plan_enter", "*", "deny"),
    ("general", "todoread", "*", "deny"),
    ("general", "todowrite", "*", "deny"),
    ("general", "question", "*", "deny"),
    ("general", "edit", "src/a.py", "allow"),
    ("explore", "edit", "src/a.py", "deny"),
    ("explore", "write", "src/a.py", "deny"),
    ("explore", "task", "general", "deny"),
    ("explore", "todowrite", "*", "deny"),
    ("explore", "read", "/p/.env", "allow"),
    ("explore", "bash", "ls", "allow"),
    ("explore", "grep", "*", "allow"),
    ("explore", "glob", "*", "allow"),
    ("explore", "list", "*", "allow"),
    ("explore", "webfetch", "https://x", "allow"),
    ("explore", "websearch", "q", "allow"),
    ("explore", "codesearch", "q", "allow"),
    ("explore", "external_directory", "/etc/*", "ask"),
    ("explore", "external_directory", f"{TRUNCATION}/*", "allow"),
]


@pytest.mark.parametrize(("agent", "permission", "pattern", "expected"), BUILTIN_CASES)
def test_builtin_agent_defaults(agent: str, permission: str, pattern: str, expected: str) -> None:
    config = build()
    assert check(permission, pattern, config.ruleset(agent), locked=config.locked).action == expected


def test_builtin_agents_and_default() -> None:
    config = build()
    assert config.default_agent == "build"
    assert config.ruleset() is config.ruleset("build")
    assert [(a.name, a.mode) for a in config.agents.values()] == [
        ("build", "primary"),
        ("plan", "primary"),
        ("general", "subagent"),
        ("explore", "subagent"),
    ]
    assert all(isinstance(a, AgentInfo) and a.description for a in config.agents.values())


def test_explore_hides_edit_tools_and_plan_keeps_edit_visible() -> None:
    config = build()
    tools = {"edit": "edit", "write": "edit", "apply_patch": "edit", "read": "read", "todowrite": "todowrite"}
    assert disabled(tools, config.ruleset("explore")) == {"edit", "write", "apply_patch", "todowrite"}
    assert disabled(tools, config.ruleset("plan")) == frozenset()
    assert disabled(tools, config.ruleset("general")) == {"todowrite"}


def test_project_rules_follow_builtin_and_agent_rules_follow_global() -> None:
    config = build((FIXTURES / "project.yaml").read_text(encoding="utf-8"))
    build_rules = config.ruleset("build")
    assert check("bash", "git status", build_rules, locked=config.locked).action == "allow"
    assert check("bash", "git status --porcelain", build_rules, locked=config.locked).action == "ask"
    assert check("bash", "git push origin main", build_rules, locked=config.locked).action == "deny"
    assert check("bash", "make", build_rules, locked=config.locked).action == "ask"
    assert check("edit", f"{HOME}/notes/today.md", build_rules, locked=config.locked).action == "allow"
    plan = config.ruleset("plan")
    # project global rules come after the built-in plan rules: `edit ~/notes/*` applies to plan too
    assert check("edit", f"{HOME}/notes/today.md", plan, locked=config.locked).action == "allow"
    assert check("edit", "docs/plans/x.md", plan, locked=config.locked).action == "allow"
    assert check("edit", "src/a.py", plan, locked=config.locked).action == "deny"
    assert config.agents["plan"] == AgentInfo("plan", "primary", "Plan, with the project's own plan folder.")


def test_project_agent_gets_builtin_global_project_global_and_its_own() -> None:
    config = build((FIXTURES / "project.yaml").read_text(encoding="utf-8"))
    review = config.ruleset("review")
    assert config.agents["review"] == AgentInfo("review", "primary", "Reviews diffs; never edits.")
    assert check("read", "/p/.env", review, locked=config.locked).action == "ask"
    assert check("bash", "git status", review, locked=config.locked).action == "allow"
    assert check("edit", "src/a.py", review, locked=config.locked).action == "deny"
    assert check("question", "*", review, locked=config.locked).action == "deny"


def test_new_agent_without_mode_is_all() -> None:
    config = build("agents: {helper: {description: helps}}\n")
    assert config.agents["helper"] == AgentInfo("helper", "all", "helps")


def test_inherit_false_drops_builtin_rules_but_keeps_agents() -> None:
    config = build("inherit: false\npermission: {bash: allow}\n")
    assert set(config.agents) == {"build", "plan", "general", "explore"}
    plan = config.ruleset("plan")
    assert [r.layer for r in plan] == ["project", "builtin", "builtin", "builtin"]
    assert [r.source for r in plan][1:] == [TRUNCATION_SOURCE] * 2 + [PROTECTED_SOURCE]
    assert check("edit", "src/a.py", plan, locked=config.locked).action == "ask"
    # `read` no rule matches is allowed (the bash analyzer asks `read` for every path a line names)
    assert check("read", "/p/.env", plan, locked=config.locked).action == "allow"


@pytest.mark.parametrize(
    ("project", "expected"),
    [
        ("permission: {external_directory: {'/data/toolrt/tool-output': deny}}", 0),
        ("permission: {external_directory: {'/data/toolrt/tool-output/*': deny}}", 0),
        ("permission: {external_directory: {'/data/toolrt/tool-output/x': deny}}", 2),
        ("permission: {external_directory: {'/data/toolrt/tool-output': ask}}", 2),
    ],
)
def test_truncation_rules_unless_explicitly_denied(project: str, expected: int) -> None:
    ruleset = build(project + "\n").ruleset()
    assert sum(1 for r in ruleset if r.source == TRUNCATION_SOURCE) == expected


def test_truncation_rules_then_the_protected_ask_come_last() -> None:
    rules = build("permission: {external_directory: deny, protected: allow}\n").ruleset().rules
    assert rules[-3:] == (
        Rule("external_directory", str(TRUNCATION), "allow", TRUNCATION_SOURCE, "builtin"),
        Rule("external_directory", f"{TRUNCATION}/*", "allow", TRUNCATION_SOURCE, "builtin"),
        Rule("protected", "*", "ask", PROTECTED_SOURCE, "builtin"),
    )


def test_disable_removes_an_agent() -> None:
    config = build("agents: {general: {disable: true}}\n")
    assert "general" not in config.agents
    with pytest.raises(UsageError, match=r'unknown agent "general"; agents: build, explore, plan$'):
        config.ruleset("general")


def test_unknown_agent_lists_the_agents() -> None:
    with pytest.raises(UsageError, match=r'^unknown agent "buidl"; agents: build, explore, general, plan$'):
        build().ruleset("buidl")


def test_locked_layer_is_apart_from_agent_rulesets() -> None:
    config = build(locked=(FIXTURES / "locked.yaml").read_text(encoding="utf-8"))
    assert all(r.layer != "locked" for r in config.ruleset())
    assert [(r.pattern, r.layer, r.source) for r in config.locked] == [
        ("curl *", "locked", "locked.yaml:4"),
        ("git push*", "locked", "locked.yaml:5"),
    ]
    assert check("bash", "curl x | sh", config.ruleset(), locked=config.locked).action == "deny"


TWO_PRIMARIES = "default_agent: build\nagents: {build: {mode: primary}, x: {mode: primary}}\n"


@pytest.mark.parametrize(
    ("builtin", "project", "locked", "messages"),
    [
        (
            None,
            "default_agent: nobody\n",
            None,
            ['project.yaml:1:1: default_agent "nobody" is not an agent; agents: build, explore, general, plan'],
        ),
        (
            None,
            "default_agent: explore\n",
            None,
            ['project.yaml:1:1: default_agent "explore" is a subagent; the default must be a primary agent'],
        ),
        (
            TWO_PRIMARIES,
            "agents: {build: {disable: true}}\n",
            None,
            ['builtin.yaml:1:1: default_agent "build" is not an agent; agents: x'],
        ),
        (
            None,
            "tests:\n  - {permission: edit, pattern: a, expect: deny}\n"
            "  - {agent: planner, permission: edit, pattern: a, expect: deny}\n",
            None,
            ['project.yaml:3:5: test names unknown agent "planner"; agents: build, explore, general, plan'],
        ),
        (
            None,
            None,
            "agents: {x: {}}\ndefault_agent: build\n",
            [
                'locked.yaml:1:1: "agents" is not allowed in the locked file: it holds only permission, rules, '
                "tests, sandbox, protected, tools, handlers, settings and principals",
                'locked.yaml:2:1: "default_agent" is not allowed in the locked file: it holds only permission, rules, '
                "tests, sandbox, protected, tools, handlers, settings and principals",
            ],
        ),
        (
            "inherit: true\nagents: {b: {mode: primary}}\n",
            None,
            None,
            ['builtin.yaml:1:1: "inherit" belongs in a project permissions.yaml, not the built-in one'],
        ),
    ],
)
def test_semantic_errors_are_located(
    builtin: str | None, project: str | None, locked: str | None, messages: list[str]
) -> None:
    with pytest.raises(ConfigError, match=re.escape(messages[0])) as caught:
        build(project, locked, builtin=builtin)
    assert [str(problem) for problem in caught.value.problems] == messages


def test_without_default_agent_the_first_primary_is_chosen() -> None:
    config = build(builtin="agents: {helper: {mode: subagent}, lead: {mode: primary}}\n")
    assert config.default_agent == "lead"


def test_without_any_primary_agent_it_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"no primary agent exists to be the default; agents: helper"):
        build(builtin="agents: {helper: {mode: subagent}}\n")


def test_builtin_tests_run_only_without_a_project_file() -> None:
    assert len(build().tests) == 14
    project = build((FIXTURES / "project.yaml").read_text(encoding="utf-8"))
    assert [t.source for t in project.tests] == [f"project.yaml:{n}" for n in (24, 25, 26, 27)]


def test_home_and_data_dirs_are_paths() -> None:
    config = build('permission: {external_directory: {"$TOOLRT_DATA/cache/*": allow}}\n')
    assert (
        check("external_directory", str(Path("/data/toolrt/cache/x")), config.ruleset(), locked=config.locked).action
        == "allow"
    )
