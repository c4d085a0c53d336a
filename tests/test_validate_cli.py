"""`toolrt validate` and the other read-only commands, as CI and a newcomer use them."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from cli_helpers import run

FIXTURES = Path(__file__).parent / "fixtures" / "broken"
REPO = Path(__file__).resolve().parent.parent


BROKEN = [
    ("malformed_yaml", "tools.d/tool.yaml:2:14", r"YAML syntax error: the '\[' opened here is never closed"),
    ("scalar_for_mapping", "tools.d/tool.yaml:3:1", r"expected a mapping, found a string \('m:f'\)"),
    ("unknown_key", "tools.d/tool.yaml:4:1", r"unknown key 'paramters'; did you mean 'parameters'\?"),
    ("bad_json_schema", "tools.d/tool.yaml:7:9", r"not a valid JSON Schema: 'integr' is not a JSON Schema type"),
    ("required_missing", "tools.d/tool.yaml:8:17", r"required names 'b', which is not a property \(properties: a\)"),
    ("root_not_object", "tools.d/tool.yaml:5:3", r"the root of 'parameters' must be 'type: object'"),
    ("duplicate_id", "tools.d/b.yaml:1:1", r"duplicate tool id 't' \(also defined in tools.d/a.yaml:1\)"),
    ("bad_id", "tools.d/tool.yaml:1:1", r"'read.file' is not a valid tool id"),
    ("empty_description", "tools.d/tool.yaml:2:1", r"'description' is empty"),
    ("handler_without_function", "tools.d/tool.yaml:3:11", r"'mymodule' is not of the form 'package.module:function'"),
    ("template_syntax", "tools.d/tool.yaml:7:24", r"template syntax error: unexpected end of template"),
    (
        "template_unknown_param",
        "tools.d/tool.yaml:7:11",
        r"template uses 'nmae', which is not a declared parameter \(declared: name\)",
    ),
    (
        "unknown_flag",
        "tools.d/tool.yaml:4:16",
        r"unknown flag 'turbo_mode' \(declared flags: batch_tool, exa, list_tool, lsp_tool, plan_mode, todoread_tool\)",
    ),
    ("not_utf8", "tools.d/tool.yaml: ", r"file is not valid UTF-8"),
    ("handler_not_importable", "tools.d/tool.yaml:3:11", r"handler 'no_such_module_xyz:run' cannot be imported"),
    ("preview_not_importable", "tools.d/tool.yaml:5:29", r"handler 'no_such_module_xyz:diff' cannot be imported"),
    ("shell_in_quotes", "tools.d/tool.yaml:7:11", r"\{\{ \}\} inside single quotes"),
    ("example_fails", "tools.d/tool.yaml:10:11", r"valid example does not pass the parameters schema"),
    (
        "unreachable_rule",
        "permissions.yaml:3:5",
        r'rule bash: "rm \*": deny \(line 3\) can never decide: '
        r'it is covered by the later rule bash: "\*": allow \(line 4\)',
    ),
    (
        "failing_permission_test",
        "permissions.yaml:4:5",
        r"permission test failed: t \"x\" for agent build: expected allow, got deny",
    ),
]


@pytest.mark.parametrize(("fixture", "location", "message"), BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_fixture_fails_with_location(
    fixture: str, location: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(FIXTURES / fixture)
    code, out, err = run("validate")
    assert code == 1, out + err
    line = next((text for text in out.splitlines() if text.startswith(location)), None)
    assert line is not None, f"no problem at {location} in:\n{out}"
    assert re.search(message, line), line
    assert "Traceback" not in out + err


def test_every_broken_fixture_is_covered() -> None:
    assert sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()) == sorted(b[0] for b in BROKEN)


def test_unreadable_file(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode bits")
    shutil.copytree(FIXTURES / "unknown_key", tmp_path / "p")
    (tmp_path / "p" / "tools.d" / "tool.yaml").chmod(0)
    code, out, _ = run("validate", "--root", str(tmp_path / "p"))
    assert code == 1
    assert re.search(r"tools.d/tool.yaml: cannot read file: Permission denied", out)


def test_repository_root_is_valid() -> None:
    code, out, _ = run("validate", "--root", str(REPO))
    assert code == 0, out
    assert out.rstrip().endswith("warning(s))")
    assert re.search(r": valid \(0 error\(s\)", out)


def test_init_output_is_valid(tmp_path: Path) -> None:
    code, out, _ = run("init", str(tmp_path / "new"))
    assert code == 0
    assert "wrote" in out
    code, out, _ = run("validate", "--root", str(tmp_path / "new"))
    assert code == 0, out
    assert (tmp_path / "new" / "tools.d" / "word_count.yaml").read_text().startswith("# yaml-language-server: $schema=")
    code, _, err = run("init", str(tmp_path / "new"))
    assert code == 2 and "refusing to overwrite" in err


def test_validate_json_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # paths are relative to the working directory
    code, out, _ = run("validate", "--root", str(FIXTURES / "unknown_key"), "--format", "json")
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False
    [error] = [e for e in report["errors"] if "paramters" in e["message"]]
    assert error == {
        "file": "tests/fixtures/broken/unknown_key/tools.d/tool.yaml",
        "line": 4,
        "column": 1,
        "pointer": "/paramters",
        "message": "unknown key 'paramters'; did you mean 'parameters'?",
        "severity": "error",
    }


def test_validate_github_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # GitHub attaches annotations by paths relative to the repository root
    code, out, _ = run("validate", "--root", "tests/fixtures/broken/duplicate_id", "--format", "github")
    assert code == 1
    assert "::error file=tests/fixtures/broken/duplicate_id/tools.d/b.yaml,line=1,col=1::duplicate tool id 't'" in out


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run("validate", "--root", str(tmp_path / "missing"))[0] == 2
    assert run("validate", "--format", "xml")[0] == 2
    code, _, err = run("specs", "--root", str(REPO), "--format", "openai", "--flag", "warp_drive")
    assert code == 2 and "unknown flag 'warp_drive'" in err
    code, _, err = run("check", "--root", str(REPO), "bash", "ls", "--agent", "nobody")
    assert code == 2 and re.search(r'unknown agent "nobody"; agents: build, explore, general, plan', err)


def test_specs_prints_only_json(tmp_path: Path) -> None:
    code, out, _ = run("specs", "--root", str(tmp_path), "--format", "openai", "--model", "claude-sonnet-4")
    assert code == 0
    names = [spec["function"]["name"] for spec in json.loads(out)]
    assert {"read", "edit", "write", "glob", "grep", "bash"} <= set(names)
    assert "apply_patch" not in names and "invalid" not in names


@pytest.mark.parametrize("format", ["openai", "openai-responses", "anthropic", "gemini", "mcp"])
def test_specs_every_format(tmp_path: Path, format: str) -> None:
    code, out, _ = run("specs", "--root", str(tmp_path), "--format", format, "--model", "gpt-5")
    assert code == 0
    specs = json.loads(out)
    assert specs and all(isinstance(s, dict) for s in specs)


def test_list_shows_hidden_reasons(tmp_path: Path) -> None:
    code, out, _ = run("list", "--root", str(tmp_path), "--model", "gpt-5", "--json")
    assert code == 0
    listing = json.loads(out)
    hidden = {h["id"]: h["reason"] for h in listing["hidden"]}
    assert hidden["edit"] == "model gpt-5 does not match its model selectors"
    assert hidden["batch"] == "flag batch_tool is off"
    code, out, _ = run("list", "--root", str(tmp_path), "--flag", "batch_tool", "--json")
    assert "batch" in [t["name"] for t in json.loads(out)["tools"]]


def test_check_pattern_and_tool(tmp_path: Path) -> None:
    code, out, _ = run("check", "--root", str(tmp_path), "read", "/x/.env", "--json")
    assert code == 0
    decision = json.loads(out)
    assert decision["action"] == "ask"
    assert decision["requests"][0]["rule"]["pattern"] == "*.env"
    assert decision["requests"][0]["rule"]["source"].startswith("<builtin>/permissions.yaml:")
    code, out, _ = run(
        "check",
        "--root",
        str(tmp_path),
        "--tool",
        "bash",
        "--args",
        '{"command": "git status && rm -rf /", "description": "x"}',
        "--json",
    )
    assert code == 0
    decision = json.loads(out)
    patterns = {(r["permission"], r["pattern"]) for r in decision["requests"]}
    assert ("bash", "rm -rf /") in patterns
    assert ("external_directory", "/*") in patterns
    code, out, _ = run("check", "--root", str(tmp_path), "edit", "src/a.py", "--agent", "plan")
    assert code == 0 and "decision: deny" in out and "permissions.yaml:" in out


def test_call_exit_codes_and_json(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    code, out, _ = run("call", "--root", str(tmp_path), "read", '{"filePath": "a.txt"}')
    assert code == 0 and "00001| one" in out
    code, out, _ = run("call", "--root", str(tmp_path), "read", '{"filePath": "missing.txt"}', "--json")
    assert code == 1
    assert json.loads(out)["error"].startswith("File not found:")
    code, _, err = run("call", "--root", str(tmp_path), "read", "not json")
    assert code == 1 and "The read tool was called with invalid arguments" in err
    code, _, err = run("call", "--root", str(tmp_path), "read", '{"filePath": "/etc/hostname"}', "--no")
    assert code == 1 and "The user rejected permission to use this specific tool call." in err
    code, out, _ = run("call", "--root", str(tmp_path), "read", '{"filePath": "/etc/hostname"}', "--yes")
    assert code == 0 and "<file>" in out


def test_schema_command() -> None:
    code, out, _ = run("schema", "tool")
    assert code == 0
    assert json.loads(out)["$id"] == "https://toolrt.dev/schemas/tool.schema.json"


EDIT_TOOLS = ["bash", "read", "glob", "grep", "edit", "write", "webfetch", "todowrite", "skill"]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4", EDIT_TOOLS),
        ("gpt-4o", EDIT_TOOLS),
        ("gpt-5", ["bash", "read", "glob", "grep", "webfetch", "todowrite", "skill", "apply_patch"]),
    ],
)
@pytest.mark.parametrize("format", ["openai", "anthropic"])
def test_default_specs_are_opencodes_tool_set(tmp_path: Path, model: str, expected: list[str], format: str) -> None:
    # OpenCode §3 for a client without `question`, no `task` host handler, and no web search provider, in
    # its registry order; `list` and `todoread` are off by default, as OpenCode registers neither.
    code, out, _ = run("specs", "--root", str(tmp_path), "--format", format, "--model", model)
    assert code == 0
    specs = json.loads(out)
    names = [spec["function"]["name"] if format == "openai" else spec["name"] for spec in specs]
    assert names == expected
    code, out, _ = run("specs", "--root", str(tmp_path), "--format", format, "--model", model, "--flag", "list_tool")
    names = [spec["function"]["name"] if format == "openai" else spec["name"] for spec in json.loads(out)]
    assert names == [*expected, "list"]


@pytest.mark.parametrize(
    ("reply", "multiple", "chosen"),
    [
        ("2", False, ["SQLite"]),
        ("1, 2", True, ["Postgres", "SQLite"]),
        ("9", False, ["9"]),  # not an option number: the person's own words
        ("whatever is simplest", False, ["whatever is simplest"]),
        ("", False, []),
    ],
)
def test_terminal_answers_pick_options_or_keep_words(reply: str, multiple: bool, chosen: list[str]) -> None:
    from toolrt.faces.prompts import _chosen

    assert _chosen(reply, ["Postgres", "SQLite"], multiple=multiple) == chosen


def test_terminal_questioner_asks_each_question(monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio

    from toolrt.faces.prompts import terminal_questioner

    replies = iter(["1", "tabs"])
    monkeypatch.setattr("builtins.input", lambda prompt: next(replies))
    questions = [
        {"question": "Which database?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]},
        {"question": "Indentation?", "options": [{"label": "spaces"}]},
    ]
    assert anyio.run(terminal_questioner(), questions) == [["Postgres"], ["tabs"]]
