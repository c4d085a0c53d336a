"""Messages that name the fix: what a newcomer gets wrong first, said with what to write instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run

TOOL = """\
id: word_count
description: Count the words of a text and return the number; the hint tests' sample tool.
parameters:
  type: object
  properties:
    text:
      type: string
      minLength: 1
  additionalProperties: false
handler: {{python: "{handler}"}}
{extra}"""


def _project(root: Path, *, handler: str = "os.path:join", extra: str = "") -> str:
    (root / "tools.d").mkdir()
    (root / "tools.d" / "word_count.yaml").write_text(TOOL.format(handler=handler, extra=extra), encoding="utf-8")
    return str(root)


def test_a_bare_model_pattern_is_answered_with_the_selector_to_write(tmp_path: Path) -> None:
    root = _project(tmp_path, extra='when:\n  models: ["gpt-*"]\n')
    code, out, _ = run("validate", "--root", root)
    assert code == 1
    assert (
        "tools.d/word_count.yaml:12:12: expected a mapping, found a string ('gpt-*'); "
        'write {model: "gpt-*"} to match model ids (or {group: NAME} for a model group)'
    ) in out


def test_a_dotted_python_handler_is_answered_with_the_colon_form(tmp_path: Path) -> None:
    code, out, _ = run("validate", "--root", _project(tmp_path, handler="os.path.join"))
    assert code == 1
    assert (
        "tools.d/word_count.yaml:10:11: 'os.path.join' is not of the form 'package.module:function'; "
        "did you mean 'os.path:join'?"
    ) in out


def test_a_lossy_keyword_is_reported_at_its_own_line(tmp_path: Path) -> None:
    code, out, _ = run("validate", "--root", _project(tmp_path))
    assert code == 0
    assert "tools.d/word_count.yaml:8:7: warning: OpenAI strict mode does not support 'minLength'" in out


def test_call_of_an_unknown_tool_is_a_usage_error_with_the_closest_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(_project(tmp_path))
    code, out, err = run("call", "wordcount", '{"text": "a b"}')
    assert (code, out) == (2, "")
    assert err.startswith("toolrt: unknown tool 'wordcount'; did you mean 'word_count'? (tools: ")
    assert run("call", "Word_Count", '{"text": "a b"}')[0] != 2  # dispatch's case-insensitive match still holds


def test_check_of_a_permission_no_tool_asks_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(_project(tmp_path))
    code, out, _ = run("check", "bsh", "ls")
    assert code == 0
    assert out.splitlines()[-1] == (
        "note: no tool asks the permission 'bsh'; did you mean 'bash'? "
        "(the rules above decide it, but no call will ask it)"
    )
    code, out, _ = run("check", "bsh", "ls", "--json")
    assert "did you mean 'bash'" in json.loads(out)["note"]
    for known in ("bash", "word_count", "external_directory"):
        assert "note:" not in run("check", known, "x")[1]
