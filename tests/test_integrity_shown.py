"""What a person is shown when a call asks: control characters in the model's text cannot hide anything."""

from __future__ import annotations

import builtins
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt import Runtime
from toolrt.permissions.ask import AskRequest, Reply
from toolrt.permissions.model import PatternDecision
from toolrt.permissions.shown import ask_lines, escape_controls

# What the terminal would show for this command: "ls" over the start of the line.
HIDDEN = "rm -rf ~/important\rls -la  \x1b[2K\u202eyrtne"


def test_a_carriage_return_cannot_hide_the_start_of_a_command_at_the_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolrt.faces.prompts import terminal_asker

    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n", encoding="utf-8")
    (tmp_path / "permissions.yaml").write_text("permission:\n  bash: ask\n", encoding="utf-8")
    answers = iter(["r", ""])
    monkeypatch.setattr(builtins, "input", lambda prompt="": next(answers))

    async def main() -> Any:
        rt = Runtime.load(tmp_path)
        return await rt.call("bash", {"command": HIDDEN, "description": "tidy"}, ask=terminal_asker(sys.stdout))

    result = anyio.run(main)
    assert result.error is not None and "rejected" in result.error
    shown = capsys.readouterr().err
    assert not any(char in shown for char in "\r\x1b\u202e")
    assert "rm -rf ~/important\\rls -la  \\x1b[2K\\u202eyrtne" in shown


def _request(pattern: str, *, title: str | None = None, message: str | None = None) -> AskRequest:
    pending = (PatternDecision("bash", pattern, "ask", None),)
    return AskRequest("1", "s", "bash", "c", pending, (), title=title, message=message)


def test_the_mcp_elicitation_text_escapes_control_characters() -> None:
    from toolrt.faces.serve_ask import ask_text, question_schema

    text = ask_text(_request(HIDDEN, title="Run\rsafe", message="line one\nline\x07two"))
    assert text.splitlines() == [
        "Run\\rsafe",
        "line one",
        "line\\x07two",
        "bash: rm -rf ~/important\\rls -la  \\x1b[2K\\u202eyrtne",
    ]
    schema = question_schema({"question": "Pick\rone", "options": [{"label": "a"}]})
    assert schema["properties"]["answer"]["title"] == "Pick\\rone"


def test_escaping_is_unambiguous_and_leaves_ordinary_text_alone() -> None:
    assert escape_controls("git status && ls 'a b' ünïcode") == "git status && ls 'a b' ünïcode"
    assert escape_controls("a\\rb") == "a\\rb"  # a typed backslash-r stays as typed
    assert escape_controls("a\\\rb") == "a\\\\\\rb"  # a backslash before a real CR is doubled
    assert escape_controls("zero\u200bwidth\u2028sep\x7f") == "zero\\u200bwidth\\u2028sep\\x7f"
    assert ask_lines(_request("x\ny"), indent="  ") == ["bash asks for permission", "  bash: x\\ny"]


def test_replies_still_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolrt.faces.prompts import terminal_asker

    monkeypatch.setattr(builtins, "input", lambda prompt="": "o")
    reply = anyio.run(terminal_asker(sys.stdout), _request("echo hi"))
    assert reply == Reply("once")
