"""Path patterns mean what they say: a rule of `read`, `edit`, `external_directory` or `protected` matches a
request in its project-relative or its absolute form, on every route (the tools, bash, `check`, `tests:`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_helpers import run

from toolrt.permissions.model import Rule
from toolrt.permissions.rules import Ruleset
from toolrt.permissions.shapes import never_matches

SECRET = "TOPSECRET-7f3a"


def _project(root: Path, rules: str) -> Path:
    (root / "secrets").mkdir()
    (root / "secrets" / "key.txt").write_text(SECRET + "\n")
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("x = 1\n")
    (root / "permissions.yaml").write_text(rules)
    return root


ISSUE_RULES = """\
permission:
  read: {"secrets/*": deny}
tests:
  - {permission: read, pattern: secrets/key.txt, expect: deny}
  - {tool: bash, args: {command: "cat secrets/key.txt", description: "x"}, expect: deny}
"""


def test_the_issue_scenario_denies_on_every_route(tmp_path: Path) -> None:
    root = str(_project(tmp_path, ISSUE_RULES))
    absolute = f"{root}/secrets/key.txt"

    code, out, _ = run("validate", "--strict", "--root", root)
    assert code == 0, out

    code, out, _ = run("check", "read", "secrets/key.txt", "--root", root, "--json")
    verdict = json.loads(out)
    assert verdict["action"] == "deny"
    # normalised as the read tool's call is: the absolute path, decided by the relative rule
    assert verdict["requests"][0]["pattern"] == absolute
    assert verdict["requests"][0]["rule"]["pattern"] == "secrets/*"

    for tool, args in (
        ("read", {"filePath": "secrets/key.txt"}),
        ("read", {"filePath": absolute}),
        ("bash", {"command": "cat secrets/key.txt", "description": "x"}),
        ("bash", {"command": f"cat {absolute}", "description": "x"}),
    ):
        code, out, err = run("call", tool, json.dumps(args), "--root", root, "--yes", "--json")
        result = json.loads(out)
        assert code == 1, (tool, args, result)
        assert SECRET not in out + err
        assert 'read: "secrets/*": deny (permissions.yaml:2)' in result["error"]


def test_a_test_entry_is_evaluated_as_the_call_would_be(tmp_path: Path) -> None:
    rules = ISSUE_RULES + "  - {permission: read, pattern: ./secrets//key.txt, expect: allow}\n"
    root = str(_project(tmp_path, rules))
    code, out, _ = run("validate", "--root", root)
    assert code == 1
    assert re.search(
        rf'permissions.yaml:6:5: permission test failed: read "./secrets//key.txt" .*expected allow, got deny '
        rf'\(read "{re.escape(root)}/secrets/key.txt" → rule read: "secrets/\*": deny',
        out,
    ), out


def test_a_process_reads_nothing_the_relative_rule_denies(tmp_path: Path) -> None:
    root = str(_project(tmp_path, ISSUE_RULES))
    args = {"command": "grep -r TOPSECRET . ; echo done", "description": "x"}
    code, out, _ = run("call", "bash", json.dumps(args), "--root", root, "--yes", "--json")
    assert code == 0, out
    output = json.loads(out)["output"]
    assert "done" in output and SECRET not in output


def test_an_absolute_edit_rule_binds_the_relative_edit_request(tmp_path: Path) -> None:
    root = tmp_path.resolve()
    _project(root, f'permission:\n  edit: {{"{root}/src/*": deny}}\n')
    args = {"filePath": "src/a.py", "oldString": "x = 1", "newString": "x = 2"}
    code, out, _ = run("call", "edit", json.dumps(args), "--root", str(root), "--yes", "--json")
    assert code == 1
    assert f'edit: "{root}/src/*": deny' in json.loads(out)["error"]
    assert (root / "src" / "a.py").read_text() == "x = 1\n"
    code, out, _ = run("check", "edit", f"{root}/src/a.py", "--root", str(root), "--json")
    assert json.loads(out)["requests"][0]["pattern"] == "src/a.py"
    assert json.loads(out)["action"] == "deny"


def test_a_locked_absolute_deny_keeps_denying_and_a_locked_relative_deny_binds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    root = root.resolve()
    _project(root, 'permission:\n  read: {"*": allow}\n')
    locked = tmp_path / "locked.yaml"
    locked.write_text(f'permission:\n  read: {{"{root}/secrets/*": deny, "src/*": deny}}\n')
    monkeypatch.setenv("TOOLRT_LOCKED_PERMISSIONS", str(locked))
    for path in ("secrets/key.txt", "src/a.py"):
        code, out, _ = run("call", "read", json.dumps({"filePath": path}), "--root", str(root), "--yes", "--json")
        assert code == 1, out
        assert "deny (" in json.loads(out)["error"] and "locked.yaml:2)" in json.loads(out)["error"]


def test_the_newest_rule_matching_either_form_wins() -> None:
    root = "/srv/app"

    def decided(*rules: tuple[str, str]) -> str | None:
        ruleset = Ruleset((Rule("read", pattern, action) for pattern, action in rules), root=root)  # type: ignore[arg-type]
        rule = ruleset.evaluate("read", "/srv/app/secrets/public/a.txt")
        return None if rule is None else rule.action

    assert decided(("/srv/app/secrets/*", "deny"), ("secrets/public/*", "allow")) == "allow"
    assert decided(("secrets/public/*", "allow"), ("/srv/app/secrets/*", "deny")) == "deny"
    assert decided(("secrets/*", "deny")) == "deny"
    assert decided(("app/secrets/*", "deny")) is None  # a relative pattern is anchored at the root
    # a ruleset that knows no root, and permissions that are not paths, match the request as asked
    assert Ruleset([Rule("read", "secrets/*", "deny")]).evaluate("read", "/srv/app/secrets/a") is None
    ruleset = Ruleset([Rule("bash", "secrets/*", "deny")], root=root)
    assert ruleset.evaluate("bash", "/srv/app/secrets/a") is None
    # external_directory: its `DIR/*` pattern, relative to the root when written so
    ruleset = Ruleset([Rule("external_directory", "../shared/*", "allow")], root=root)
    assert ruleset.evaluate("external_directory", "/srv/shared/*") is not None


@pytest.mark.parametrize(
    ("permission", "pattern", "fix"),
    [
        ("webfetch", "docs.python.org/*", '"https://docs.python.org/*"'),
        ("webfetch", "ftp://example.com/*", '"https://example.com/*"'),
        ("read", "./secrets/*", '"secrets/*"'),
        ("edit", "src//a.py", '"src/a.py"'),
        ("read", "secrets/", '"secrets/*"'),
        ("protected", "deploy/./keys", '"deploy/keys"'),
        ("read", "a/../b", "without them"),
        ("external_directory", "/home/me/notes", '"/home/me/notes/*"'),
    ],
)
def test_a_pattern_no_request_can_take_is_named_with_the_fix(permission: str, pattern: str, fix: str) -> None:
    why = never_matches(permission, pattern)
    assert why is not None
    assert why.startswith(permission) and (f"write {fix}" in why or fix == "without them" and why.endswith(fix))


@pytest.mark.parametrize(
    ("permission", "pattern"),
    [
        ("webfetch", "https://docs.python.org/*"),
        ("webfetch", "*"),
        ("webfetch", "http*"),
        ("webfetch", "*.example.com/*"),
        ("read", "secrets/*"),
        ("read", "../shared/*"),
        ("read", "/"),
        ("external_directory", "/tmp/*"),
        ("bash", "./run.sh"),
        ("deploy", "./x"),
    ],
)
def test_a_pattern_a_request_can_take_is_not_named(permission: str, pattern: str) -> None:
    assert never_matches(permission, pattern) is None


def test_validate_warns_on_rules_that_never_match(tmp_path: Path) -> None:
    rules = 'permission:\n  webfetch: {"*": ask, "docs.python.org/*": allow}\n  read: {"./secrets/*": deny}\n'
    root = str(_project(tmp_path, rules))
    code, out, _ = run("validate", "--root", root)
    assert code == 0, out
    assert (
        'permissions.yaml:2:24: warning: rule webfetch: "docs.python.org/*": allow never matches: webfetch asks '
        'with the full http:// or https:// URL; write "https://docs.python.org/*"'
    ) in out
    assert 'permissions.yaml:3:10: warning: rule read: "./secrets/*": deny never matches' in out
    assert run("validate", "--strict", "--root", root)[0] == 1
