"""`toolrt validate` in CI: the project's own problems, paths from the working directory, file arguments, SARIF."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import jsonschema
import pytest
from cli_helpers import run

from toolrt.faces.validate_report import find_project

SARIF_SCHEMA = Path(__file__).parent / "fixtures" / "sarif" / "sarif-schema-2.1.0.json"

TOOL = """\
id: {id}
description: Say hello to someone by name and return the greeting; the CI tests' sample tool.
parameters: {{type: object, properties: {{name: {{type: string{extra}}}}}, required: [name]}}
handler: {{argv: [echo, "hello {{{{ name }}}}"]}}
"""


def sample_repo(repo: Path, *, typo: bool = True, lossy: bool = False) -> Path:
    """A git repository whose toolrt project sits in `agent/`: one tool, rules with a misspelt key."""
    project = repo / "agent"
    (project / "tools.d").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    extra = ", minLength: 1" if lossy else ""
    (project / "tools.d" / "hello.yaml").write_text(TOOL.format(id="hello", extra=extra), encoding="utf-8")
    rules = "permission:\n  hello: allow\n" + ("  bahs: ask\n" if typo else "")
    (project / "permissions.yaml").write_text(rules, encoding="utf-8")
    return project


def test_default_scope_is_the_projects_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sample_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("validate", "--root", "agent")
    assert code == 0
    lines = out.splitlines()
    assert (
        lines[0] == 'agent/permissions.yaml:3:3: warning: permission "bahs" is not used by any tool; check the spelling'
    )
    assert not any("<builtin>" in line for line in lines), out
    assert lines[1:] == ["agent: valid (0 error(s), 1 warning(s))"]  # no line about the sandbox or hidden notes
    code, out, _ = run("validate", "--root", "agent", "--all")
    assert code == 0
    assert re.search(
        r"^<builtin>/tools.d/write.yaml:\d+:\d+: note: OpenAI strict mode does not support .minLength.", out, re.M
    )
    assert "agent: sandbox: " in out
    assert re.fullmatch(
        r"agent: valid \(0 error\(s\), 1 warning\(s\), \d+ note\(s\) about built-in or plugin files\)",
        out.splitlines()[-1],
    )


def test_strict_makes_warnings_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sample_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("validate", "--root", "agent", "--strict")
    assert code == 1
    assert out.splitlines()[-1] == "agent: invalid (0 error(s), 1 warning(s); --strict: warnings fail)"
    code, out, _ = run("validate", "--root", "agent", "--strict", "--format", "json")
    assert code == 1 and json.loads(out)["ok"] is False
    (tmp_path / "agent" / "permissions.yaml").write_text("permission:\n  hello: allow\n", encoding="utf-8")
    assert run("validate", "--root", "agent", "--strict")[0] == 0  # built-in warnings never fail a project


def test_github_annotations_are_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample_repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("validate", "--root", "agent", "--format", "github")
    assert code == 0
    assert out == (
        "::warning file=agent/permissions.yaml,line=3,col=3::"
        'permission "bahs" is not used by any tool; check the spelling\n'
    )
    (tmp_path / "agent" / "tools.d" / "broken.yaml").write_text("id: broken\ndescriptoin: x\n", encoding="utf-8")
    code, out, _ = run("validate", "--root", "agent", "--format", "github")
    assert code == 1
    lines = out.splitlines()
    assert any(
        line.startswith("::error file=agent/tools.d/broken.yaml,line=2,col=1::unknown key 'descriptoin'")
        for line in lines
    ), out
    (tmp_path / "agent" / "tools.d" / "broken.yaml").unlink()
    code, out, _ = run("validate", "--root", "agent", "--format", "github", "--all")
    builtin = [line for line in out.splitlines() if "<builtin>" in line]
    assert builtin and all(line.startswith("::notice title=<builtin>/") and "file=" not in line for line in builtin)


def test_find_project_walks_up_to_the_vcs_root(tmp_path: Path) -> None:
    project = sample_repo(tmp_path / "repo")
    assert find_project(project / "tools.d" / "hello.yaml") == project
    assert find_project(project / "permissions.yaml") == project
    (project / "docs").mkdir()
    (project / "docs" / "x.md").write_text("", encoding="utf-8")
    assert find_project(project / "docs" / "x.md") == project
    (tmp_path / "toolrt.yaml").write_text("", encoding="utf-8")  # above the repository: never reached
    (tmp_path / "repo" / "notes").mkdir()
    (tmp_path / "repo" / "notes" / "a.yaml").write_text("", encoding="utf-8")
    assert find_project(tmp_path / "repo" / "notes" / "a.yaml") is None


def test_file_arguments_as_pre_commit_passes_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sample_repo(tmp_path, lossy=True)
    monkeypatch.chdir(tmp_path)
    # Only the named file's warnings…
    code, out, _ = run("validate", "agent/tools.d/hello.yaml")
    assert code == 0
    assert "agent/tools.d/hello.yaml:3:" in out and "minLength" in out
    assert "bahs" not in out
    code, out, _ = run("validate", "agent/permissions.yaml", "agent/tools.d/hello.yaml", "--strict")
    assert code == 1 and "bahs" in out and "minLength" in out
    # …but every error the change causes, in whichever file it shows.
    (tmp_path / "agent" / "toolrt.yaml").write_text(
        "flags:\n  - {name: fancy, description: A new way to greet.}\n", encoding="utf-8"
    )
    hello = (tmp_path / "agent" / "tools.d" / "hello.yaml").read_text(encoding="utf-8")
    (tmp_path / "agent" / "tools.d" / "hello.yaml").write_text(hello + "when: {flags: [fancy]}\n", encoding="utf-8")
    assert run("validate", "agent/toolrt.yaml")[0] == 0
    (tmp_path / "agent" / "toolrt.yaml").write_text("flags: []\n", encoding="utf-8")
    code, out, _ = run("validate", "agent/toolrt.yaml")
    assert code == 1
    assert "agent/tools.d/hello.yaml:5:" in out and "unknown flag 'fancy'" in out
    code, _, err = run("validate", "README.md")
    assert code == 2 and "README.md: no such file" in err
    (tmp_path / "README.md").write_text("", encoding="utf-8")
    code, _, err = run("validate", "README.md")
    assert code == 2 and "README.md: not in a toolrt project" in err
    code, _, err = run("validate", "--root", "agent", "agent/toolrt.yaml")
    assert code == 2 and "not both" in err


def test_sarif_is_valid_sarif_2_1_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sample_repo(tmp_path, lossy=True)
    (tmp_path / "agent" / "tools.d" / "two words.yaml").write_text(
        TOOL.format(id="hi", extra=", minLength: 1"), encoding="utf-8"
    )
    with (tmp_path / "agent" / "permissions.yaml").open("a", encoding="utf-8") as rules:
        rules.write("tests:\n  - {permission: hello, pattern: '*', expect: deny}\n")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("validate", "--root", "agent", "--format", "sarif", "--all")
    assert code == 1
    log = json.loads(out)
    schema = json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(log)
    [result_run] = log["runs"]
    assert result_run["tool"]["driver"]["name"] == "toolrt"
    by_uri = {
        (r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], r["level"]): r for r in result_run["results"]
    }
    typo = by_uri[("agent/permissions.yaml", "warning")]
    assert typo["locations"][0]["physicalLocation"]["region"] == {"startLine": 3, "startColumn": 3}
    assert typo["message"]["text"] == 'permission "bahs" is not used by any tool; check the spelling'
    assert typo["ruleId"] == "toolrt/unused-permission"
    failed = by_uri[("agent/permissions.yaml", "error")]
    assert failed["ruleId"] == "toolrt/permission-test" and "permission test failed" in failed["message"]["text"]
    lossy = by_uri[("agent/tools.d/two%20words.yaml", "warning")]
    assert lossy["ruleId"] == "toolrt/provider-rewrite"
    # one rule per kind, each result pointing at its own
    rules = result_run["tool"]["driver"]["rules"]
    assert len({rule["id"] for rule in rules}) == len(rules) > 10
    for result in result_run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert re.fullmatch(r"[0-9a-f]{32}", result["partialFingerprints"]["toolrtFinding/v1"])
    builtin = [
        r["locations"][0]["physicalLocation"]["artifactLocation"]
        for r in result_run["results"]
        if r["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "toolrt-builtin"
    ]
    assert builtin and all(a["uri"].startswith("tools.d/") for a in builtin)
    assert {r["level"] for r in result_run["results"] if r["ruleId"] == "toolrt/provider-rewrite"} == {
        "warning",
        "note",
    }
    # no path of the machine that ran it, anywhere in the log
    assert str(tmp_path) not in out and "file://" not in out
    # the same finding keeps its fingerprint when lines move
    rules_file = tmp_path / "agent" / "permissions.yaml"
    rules_file.write_text("# moved\n" + rules_file.read_text(encoding="utf-8"), encoding="utf-8")
    moved = json.loads(run("validate", "--root", "agent", "--format", "sarif")[1])["runs"][0]["results"]
    [again] = [r for r in moved if r["ruleId"] == "toolrt/unused-permission"]
    assert again["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    assert again["partialFingerprints"] == typo["partialFingerprints"]


def test_runtime_permissions_are_not_reported_as_unused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "permissions.yaml").write_text(
        "permission:\n  protected: ask\n  private_network: ask\n  external_directory: ask\n  bahs: ask\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("validate", "--strict")
    assert code == 1
    assert [line for line in out.splitlines() if "not used by any tool" in line] == [
        'permissions.yaml:5:3: warning: permission "bahs" is not used by any tool; check the spelling'
    ]
