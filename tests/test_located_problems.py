"""Every config and handler mistake is a located problem (`FILE:LINE:COL: message`), never a traceback."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from cli_helpers import run
from conftest import ProjectFactory

TOOL = """\
id: t
description: A test tool that echoes its text.
parameters:
  type: object
  properties:
    text: {{type: string}}
handler: {handler}
"""


def _validate(root: Path) -> tuple[int, list[str]]:
    code, out, err = run("validate", "--root", str(root))
    assert "Traceback" not in out + err
    assert ":0:0" not in out + err
    return code, out.splitlines()


def _problem(lines: list[str], location: str, message: str) -> str:
    found = [line for line in lines if re.search(rf"(^|/){re.escape(location)}", line) and re.search(message, line)]
    assert found, f"no problem at {location} matching {message!r} in:\n" + "\n".join(lines)
    return found[0]


@pytest.mark.parametrize(
    ("handler", "location", "message"),
    [
        ('{argv: [echo, "{{ text | joinn }}"]}', "tools.d/t.yaml:7:24", r"unknown filter 'joinn'.*did you mean 'join'"),
        (
            '{argv: [echo, "{{ 1 if text is strng else 2 }}"]}',
            "tools.d/t.yaml:7:24",
            r"unknown test 'strng'.*did you mean 'string'",
        ),
        ('{shell: "echo {{ text | uper }}"}', "tools.d/t.yaml:7:11", r"unknown filter 'uper'.*did you mean 'upper'"),
        ('{argv: [echo, "{% set %}"]}', "tools.d/t.yaml:7:24", r"template syntax error"),
    ],
)
def test_template_mistakes_are_located(make_project: ProjectFactory, handler: str, location: str, message: str) -> None:
    root = make_project({"t": TOOL.format(handler=handler)})
    code, lines = _validate(root)
    assert code == 1
    _problem(lines, location, message)
    # `list` and `call` of other tools do not print a traceback either
    code, out, err = run("list", "--root", str(root))
    assert "Traceback" not in out + err


def test_unknown_filter_in_a_permission_pattern(make_project: ProjectFactory) -> None:
    tool = TOOL.format(handler="{argv: [echo, '{{ text }}']}") + "permission:\n  patterns: ['{{ text | lowerr }}']\n"
    code, lines = _validate(make_project({"t": tool}))
    assert code == 1
    _problem(lines, "tools.d/t.yaml:9:14", r"unknown filter 'lowerr'.*did you mean 'lower'")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def run(args, ctx:\n    return 'x'\n", r"syntax error: .*handlers_mod\.py, line 1"),
        ("raise RuntimeError('no config here')\n", r"raised RuntimeError: no config here"),
        ("import sys\nsys.exit(3)\n", r"raised SystemExit: 3"),
        ("def other(args, ctx):\n    return 'x'\n", r"has no attribute 'run'"),
        ("def run(args):\n    return 'x'\n", r"it takes \(args\), but is called as handler\(args, ctx\)"),
        ("run = 3\n", r"'handlers_mod:run' is not callable"),
    ],
    ids=["syntax", "raises", "exits", "missing", "arity", "not_callable"],
)
def test_handler_failures_are_located(make_project: ProjectFactory, source: str, message: str) -> None:
    root = make_project({"t": TOOL.format(handler="{python: 'handlers_mod:run'}")}, modules={"handlers_mod": source})
    code, lines = _validate(root)
    assert code == 1
    _problem(lines, "tools.d/t.yaml:7:11", message)


def test_handler_that_accepts_args_and_ctx_passes(make_project: ProjectFactory) -> None:
    root = make_project(
        {"t": TOOL.format(handler="{python: 'handlers_mod:run'}")},
        modules={"handlers_mod": "def run(args, ctx=None, *rest):\n    return 'x'\n"},
    )
    assert _validate(root)[0] == 0


def test_unknown_schema_keyword_is_a_warning_with_a_suggestion(make_project: ProjectFactory) -> None:
    tool = """\
    id: t
    description: A test tool that echoes its text.
    parameters:
      type: object
      properties:
        text: {type: string, minLenght: 1, x-widget: big, deprecated: false}
      requird: [text]
    handler: {argv: [echo, '{{ text }}']}
    """
    code, lines = _validate(make_project({"t": tool}))
    assert code == 0
    _problem(lines, "tools.d/t.yaml:7:3", r"warning: unknown JSON Schema keyword 'requird'.*did you mean 'required'")
    _problem(lines, "tools.d/t.yaml:6:26", r"warning: unknown JSON Schema keyword 'minLenght'.*'minLength'")
    assert not [line for line in lines if "x-widget" in line and "unknown JSON Schema keyword" in line]
    assert not [line for line in lines if "'deprecated'" in line and "unknown JSON Schema keyword" in line]


@pytest.mark.parametrize(
    ("permissions", "location", "message"),
    [
        ("permission:\n  bash: aks\n", "permissions.yaml:2:3", r"'allow' or 'ask' or 'deny'.*did you mean 'ask'"),
        (
            'permission:\n  read: {"*": alow}\n',
            "permissions.yaml:2:10",
            r"not one of: allow, ask, deny; did you mean 'allow'",
        ),
        (
            "permission:\n  read: allow\n  bash: dny\n  edit: {'*': akk}\n",
            "permissions.yaml:3:3",
            r"did you mean 'deny'",
        ),
    ],
)
def test_action_typos_list_the_actions(
    make_project: ProjectFactory, permissions: str, location: str, message: str
) -> None:
    code, lines = _validate(make_project({"t": TOOL.format(handler="{argv: [echo]}")}, permissions=permissions))
    assert code == 1
    _problem(lines, location, message)


def test_every_action_typo_is_reported(make_project: ProjectFactory) -> None:
    permissions = "permission:\n  read: allow\n  bash: dny\n  edit: {'*': akk}\n"
    code, lines = _validate(make_project({"t": TOOL.format(handler="{argv: [echo]}")}, permissions=permissions))
    _problem(lines, "permissions.yaml:3:3", r"did you mean 'deny'")
    _problem(lines, "permissions.yaml:4:10", r"\('akk'\) is not one of: allow, ask, deny; did you mean 'ask'")


@pytest.mark.parametrize(
    ("text", "location", "message"),
    [
        ("id: t\ndescription: x\n\tparameters: {}\n", "tools.d/t.yaml:3:1", r"a tab character; YAML indents"),
        (
            'id: t\ndescription: "an unclosed\nhandler: {argv: [echo]}\n',
            "tools.d/t.yaml:2:14",
            r"the quote opened here is never closed \(the parser reached line 4",
        ),
        ("id: t\ndescription: 'oops\n", "tools.d/t.yaml:2:14", r"the quote opened here is never closed"),
        ("id: t\nhandler: {argv: [echo\n", "tools.d/t.yaml:2:17", r"the '\[' opened here is never closed"),
    ],
    ids=["tab", "double_quote", "single_quote", "bracket"],
)
def test_yaml_mistakes_point_where_they_are(tmp_path: Path, text: str, location: str, message: str) -> None:
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "tools.d" / "t.yaml").write_text(text, encoding="utf-8")
    code, lines = _validate(tmp_path)
    assert code == 1
    _problem(lines, location, message)


def test_tool_set_naming_an_unknown_tool_names_its_line(make_project: ProjectFactory) -> None:
    root = make_project({"t": TOOL.format(handler="{argv: [echo]}")}, settings="toolsets:\n  readonly: [t, nope]\n")
    code, lines = _validate(root)
    assert code == 1
    _problem(lines, "toolrt.yaml:3:", r"tool set 'readonly' names unknown tool 'nope'")


@pytest.mark.parametrize("layout", ["empty", "missing"])
def test_a_project_without_tool_files_is_valid(tmp_path: Path, layout: str) -> None:
    if layout == "empty":
        (tmp_path / "tools.d").mkdir()
    (tmp_path / "permissions.yaml").write_text("permission:\n  bash: deny\n", encoding="utf-8")
    code, lines = _validate(tmp_path)
    assert code == 0, lines


COMPOSED = {
    "allOf": """\
      type: object
      allOf:
        - properties:
            files: {type: array, items: {type: string}, default: ["a.txt"]}
        - required: [files]
    """,
    "ref": """\
      type: object
      $ref: "#/$defs/args"
      $defs:
        args:
          properties:
            files: {$ref: "#/$defs/paths"}
        paths: {type: array, items: {type: string}, default: ["a.txt"]}
    """,
    "anyOf": """\
      type: object
      anyOf:
        - properties:
            files: {type: array, items: {type: string}, default: ["a.txt"]}
        - properties:
            other: {type: string}
    """,
}


@pytest.mark.parametrize("kind", sorted(COMPOSED))
def test_composed_properties_are_seen(make_project: ProjectFactory, kind: str) -> None:
    from toolrt import Runtime

    tool = (
        "id: count\ndescription: Count the lines of files.\nparameters:\n"
        + textwrap.indent(textwrap.dedent(COMPOSED[kind]), "  ")
        + "handler: {argv: [wc, -l, '{{ files }}']}\npermission: {paths: [files]}\n"
    )
    root = make_project({"count": tool})
    (root / "a.txt").write_text("1\n2\n", encoding="utf-8")
    code, lines = _validate(root)
    assert code == 0, "\n".join(lines)
    rt = Runtime.load(root)
    assert rt.snapshot.tools["count"].parameter_names >= {"files"}
    assert rt.snapshot.tools["count"].defaults == {"files": ["a.txt"]}
    result = rt.call_sync("count", {})
    assert result.error is None and result.output.split() == ["2", "a.txt"]
    for format in ("openai", "anthropic", "gemini", "mcp"):
        assert "files" in str(rt.specs(format)), format


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ("{type: integer}", r"path argument 'p' must be declared as a string or an array of strings \(found integer\)"),
        ("{}", r"path argument 'p' must be declared as a string or an array of strings \(found no type\)"),
        ("{type: array, items: {type: object}}", r"array whose items are not declared as strings"),
        ("{type: object}", r"\(found object\)"),
    ],
)
def test_paths_must_name_strings_or_arrays_of_strings(
    make_project: ProjectFactory, declared: str, message: str
) -> None:
    tool = f"""\
    id: t
    description: A test tool that reads a path.
    parameters:
      type: object
      properties:
        p: {declared}
    handler: {{argv: [cat]}}
    permission:
      paths: [p]
    """
    code, lines = _validate(make_project({"t": tool}))
    assert code == 1
    _problem(lines, "tools.d/t.yaml:9:", message)


def test_paths_naming_an_undeclared_parameter(make_project: ProjectFactory) -> None:
    tool = TOOL.format(handler="{argv: [cat]}") + "permission:\n  paths: [{arg: pth, kind: directory}]\n"
    code, lines = _validate(make_project({"t": tool}))
    assert code == 1
    _problem(lines, "tools.d/t.yaml:9:", r"path argument 'pth' is not a declared parameter \(declared: text\)")
