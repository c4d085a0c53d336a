"""`toolrt validate` never passes what it did not check: outside a project, with broken files, under --strict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_helpers import run

TOOL = """\
id: {id}
description: Count the words of a text and return the number; the validate tests' sample tool.
{parameters}:
  type: object
  properties: {{text: {{type: string}}}}
handler: {{python: "{handler}"}}
"""


def _broken_project(project: Path) -> None:
    """A YAML error in the rules, a misspelt key in one tool, a handler module that does not exist in another."""
    (project / "tools.d").mkdir(parents=True)
    (project / "permissions.yaml").write_text("permission:\n  bash: [ask\n", encoding="utf-8")
    (project / "tools.d" / "a.yaml").write_text(
        TOOL.format(id="a", parameters="paramters", handler="os.path:join"), encoding="utf-8"
    )
    (project / "tools.d" / "b.yaml").write_text(
        TOOL.format(id="b", parameters="parameters", handler="no_such_module_q:run"), encoding="utf-8"
    )


def test_a_directory_that_is_no_project_is_a_usage_error_naming_the_one_below(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broken_project(tmp_path / "agent")
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    code, out, err = run("validate", "--strict")
    assert (code, out) == (2, "")
    assert err == "toolrt: .: not a toolrt project (found one in agent/: use --root agent)\n"
    (tmp_path / "tools" / "bot").mkdir(parents=True)
    (tmp_path / "tools" / "bot" / "toolrt.yaml").write_text("{}\n", encoding="utf-8")
    code, _, err = run("validate")
    assert code == 2 and "(found 2 in agent/, tools/bot/: use --root agent)" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run("validate", "--root", "empty")
    assert code == 2
    assert "empty: not a toolrt project (no tools.d/, permissions.yaml or toolrt.yaml in it or below it)" in err
    # only validate: the other commands keep serving the built-in tools anywhere
    monkeypatch.chdir(empty)
    code, out, _ = run("check", "read", "notes.txt")
    assert code == 0 and "allow" in out


def test_every_file_is_checked_in_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _broken_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("validate")
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("permissions.yaml:2:9: YAML syntax error")
    assert lines[1] == "tools.d/a.yaml:3:1: unknown key 'paramters'; did you mean 'parameters'?"
    assert lines[2].startswith("tools.d/b.yaml:6:11: handler 'no_such_module_q:run' cannot be imported")
    assert lines[3:] == [".: invalid (3 error(s), 0 warning(s))"]


def test_pre_commit_keeps_the_named_files_warnings_while_an_error_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _broken_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    lossy = TOOL.format(id="c", parameters="parameters", handler="os.path:join").replace(
        "{type: string}", "{type: string, minLength: 1}"
    )
    (tmp_path / "tools.d" / "c.yaml").write_text(lossy, encoding="utf-8")
    code, out, _ = run("validate", "permissions.yaml", "tools.d/c.yaml")
    assert code == 1
    assert "permissions.yaml:2:9: YAML syntax error" in out
    assert re.search(r"^tools.d/c.yaml:5:\d+: warning: OpenAI strict mode does not support 'minLength'", out, re.M)


def test_a_fresh_init_project_passes_all_strict(tmp_path: Path) -> None:
    assert run("init", str(tmp_path / "p"))[0] == 0
    code, out, _ = run("validate", "--all", "--strict", "--root", str(tmp_path / "p"))
    assert code == 0, out
    assert re.search(r"tools.d/bash.yaml:\d+:\d+: note: OpenAI strict mode does not support 'minLength'", out)
    code, out, _ = run("validate", "--strict", "--root", str(tmp_path / "p"))
    assert (code, out) == (0, f"{tmp_path / 'p'}: valid (0 error(s), 0 warning(s))\n")


def test_strict_says_in_every_format_that_warnings_failed_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "permissions.yaml").write_text("permission:\n  bahs: ask\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("validate", "--strict")
    assert code == 1 and out.splitlines()[-1] == ".: invalid (0 error(s), 1 warning(s); --strict: warnings fail)"
    code, out, _ = run("validate", "--strict", "--format", "github")
    assert code == 1
    assert out.splitlines()[-1] == (
        "::error title=toolrt validate --strict::1 warning(s) fail the run under --strict (no errors)"
    )
    assert "--strict" not in run("validate", "--format", "github")[1]
