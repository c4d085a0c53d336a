"""Exit status: an `argv:`/`shell:` tool declares which statuses are a success (`ok_exit`, default `[0]`); any other
is an error result that keeps the output. The built-in bash tool states the status and never makes it an error."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_helpers import run

from toolrt import Runtime

Factory = Callable[..., Path]

TOOL = """\
id: {id}
description: Runs a fixed command for the exit status tests and returns what it printed.
parameters: {{type: object, properties: {{}}}}
handler:
  {handler}
"""


def _tool(tool_id: str, handler: str) -> str:
    return TOOL.format(id=tool_id, handler=handler)


def test_a_status_outside_ok_exit_is_an_error_result_that_keeps_the_output(make_project: Factory) -> None:
    root = make_project(
        {
            "fails": _tool("fails", "argv: [sh, -c, 'echo partial work; exit 3']"),
            "shell_fails": _tool("shell_fails", "shell: 'echo from the shell; exit 2'"),
            "passes": _tool("passes", "argv: [sh, -c, 'echo nothing found; exit 1']\n  ok_exit: [0, 1]"),
        },
        permissions="permission:\n  '*': allow\n",
    )
    rt = Runtime.load(root)
    failed = rt.call_sync("fails", {})
    assert failed.error is not None and failed.error.startswith("partial work\n")
    assert "exited with status 3, which the fails tool counts as a failure (success: 0)" in failed.error
    assert failed.output == failed.error and failed.metadata["exit"] == 3
    shell = rt.call_sync("shell_fails", {})
    assert shell.error is not None and "from the shell" in shell.error and "status 2" in shell.error
    passed = rt.call_sync("passes", {})
    assert passed.error is None and passed.output.startswith("nothing found\n")
    assert "exited with status 1, which the passes tool counts as success (success: 0, 1)" in passed.output
    code, out, _ = run("call", "fails", "{}", "--root", str(root), "--json")
    assert code == 1 and "partial work" in json.loads(out)["error"]
    assert run("call", "passes", "{}", "--root", str(root))[0] == 0


def test_bash_states_the_status_and_keeps_it_a_result(make_project: Factory) -> None:
    root = make_project(
        settings="builtin_tools: [bash]\n", permissions="permission:\n  bash: allow\n", builtin_tools=True
    )
    result = Runtime.load(root).call_sync("bash", {"command": "echo here; exit 4", "description": "Exit with 4"})
    assert result.error is None and "here" in result.output and "exited with status 4" in result.output


@pytest.mark.parametrize(
    ("argv", "warned"),
    [
        ("argv: [grep, -rn, TODO, .]", "grep exits 1 when it finds nothing"),
        ("argv: [/usr/bin/diff, a, b]", "diff exits 1 when it finds differences"),
        ("argv: [rg, TODO]\n  ok_exit: [0, 1]", None),
        ("argv: [grep, -q, x, y]\n  ok_exit: [0]", None),
        ("argv: [ls]", None),
    ],
)
def test_validate_hints_ok_exit_for_programs_whose_status_1_is_an_answer(
    make_project: Factory, argv: str, warned: str | None
) -> None:
    root = make_project({"search": _tool("search", argv)})
    code, out, _ = run("validate", "--root", str(root), "--format", "json")
    warnings = [w for w in json.loads(out)["warnings"] if "ok_exit" in w["message"]]
    if warned is None:
        assert warnings == []
        return
    ((warning,),) = (warnings,)
    assert warned in warning["message"] and "add `ok_exit: [0, 1]` to the handler" in warning["message"]
    assert warning["file"].endswith("tools.d/search.yaml") and (warning["line"], warning["pointer"]) == (
        5,
        "/handler/argv/0",
    )


@pytest.mark.parametrize(
    ("handler", "message"),
    [
        ("python: 'mod:fn'\n  ok_exit: [0]", "ok_exit"),
        ("argv: [ls]\n  ok_exit: []", "ok_exit"),
        ("argv: [ls]\n  ok_exit: [0, 256]", "256"),
    ],
)
def test_the_schema_takes_ok_exit_only_on_process_handlers(make_project: Factory, handler: str, message: str) -> None:
    root = make_project({"bad": _tool("bad", handler)})
    code, out, _ = run("validate", "--root", str(root), "--format", "json")
    assert code == 1
    assert any(message in error["message"] for error in json.loads(out)["errors"]), out
