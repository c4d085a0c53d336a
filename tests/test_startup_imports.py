"""What a command imports at start: `toolrt --help` no module of the runtime, `toolrt validate` of a new
project neither pydantic nor Jinja2 nor a built-in handler; settings of plain types built without
pydantic; the packaged YAML tables read from their compiled copy, which a changed or broken file never
outlives; and the checks a build leaves to these tests for the installed built-ins."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from toolrt.build.compiled import OFFERED_MARK, compile_tool, description_problem
from toolrt.build.snapshot import build_snapshot
from toolrt.build.templates import compile_template
from toolrt.config import resources
from toolrt.config.resources import read_yaml
from toolrt.config.settings_values import checked_settings, plain_settings
from toolrt.errors import Problem
from toolrt.faces.project_checks import python_handler_problems, validate

REPORT = "import sys; print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in WATCHED)), file=sys.stderr)"
WATCHED = "('toolrt', 'pydantic', 'pydantic_settings', 'jinja2', 'mcp', 'ssl')"
LOSSY_TOOL = """
    id: mine
    description: Echo a name.
    parameters:
      type: object
      properties: {name: {type: string, minLength: 1}}
      required: [name]
    handler: {argv: [echo, "{{ name }}"]}
"""


def _fresh_user(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLRT_")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    return env


def _imported(command: str, cwd: Path, env: dict[str, str]) -> tuple[int, set[str]]:
    """The exit code of `toolrt <command>` run by `main`, and the watched modules imported by then."""
    code = (
        f"WATCHED = {WATCHED}\nfrom toolrt.faces.cli import main\ntry:\n    code = main({command.split()!r})\n"
        f"except SystemExit as exit:\n    code = exit.code\n{REPORT}\nraise SystemExit(code)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)
    return run.returncode, set(run.stderr.strip().splitlines()[-1].split())


def test_help_imports_no_module_of_the_runtime(tmp_path: Path) -> None:
    code, modules = _imported("--help", tmp_path, _fresh_user(tmp_path))
    assert code == 0
    assert modules == {"toolrt", "toolrt.faces", "toolrt.faces.cli"}


def test_a_usage_error_still_answers_2_with_the_errors_imported_then(tmp_path: Path) -> None:
    code, modules = _imported("list --no-such-option", tmp_path, _fresh_user(tmp_path))
    assert code == 2
    assert "toolrt.errors" in modules


def test_validate_of_a_new_project_imports_no_pydantic_and_no_builtin_handler(tmp_path: Path) -> None:
    env = _fresh_user(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run([sys.executable, "-m", "toolrt", "init"], cwd=project, env=env, check=True, capture_output=True)
    assert "timeout: 60" in (project / "toolrt.yaml").read_text()  # a setting: resolved without pydantic
    code, modules = _imported("validate", project, env)
    assert code == 0
    assert not {"pydantic", "pydantic_settings", "jinja2", "mcp"} & modules
    assert "ssl" not in modules  # only the credential proxy's authority uses it
    assert not {m for m in modules if m.startswith(("toolrt.builtin.bash", "toolrt.builtin.read", "toolrt.execute"))}
    assert not {"toolrt.call.active", "toolrt.sandbox.plan"} & modules  # a call's machinery: no call is made


@pytest.mark.parametrize(
    ("variable", "value", "shown", "adapter_built", "read_by_pydantic_settings"),
    [
        ("TOOLRT_TRUNCATE__MAX_LINES", "7", "truncate.max_lines=7", True, False),  # text to convert: pydantic checks it
        ("TOOLRT_DATA_DIR", "~/elsewhere", "data_dir=HOME/elsewhere", False, False),  # a path: what pydantic makes
        ("TOOLRT_TRUNCATE", '{"max_lines": 7}', "truncate.max_lines=7", False, True),  # a section: JSON
    ],
)
def test_a_setting_in_the_environment_is_read_by_pydantic_settings_unless_it_is_plain_text(
    tmp_path: Path, variable: str, value: str, shown: str, adapter_built: bool, read_by_pydantic_settings: bool
) -> None:
    env = {**_fresh_user(tmp_path), variable: value, "HOME": str(tmp_path)}
    code = (
        f"WATCHED = {WATCHED}\nfrom pathlib import Path\nfrom toolrt.config import settings, settings_values\n"
        "values = settings.resolve_settings(Path('.')).values\n"
        "print(f'truncate.max_lines={values.truncate.max_lines}', f'data_dir={values.data_dir}')\n"
        "print(settings_values._adapter.cache_info().currsize)\n" + REPORT
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    lines = run.stdout.split("\n")
    assert shown.replace("HOME", str(tmp_path)) in lines[0].split()
    assert lines[1] == ("1" if adapter_built else "0")
    assert ("pydantic_settings" in run.stderr) is read_by_pydantic_settings


@pytest.mark.parametrize(
    "values",
    [
        {"timeout": 60},
        {"timeout": 2.5, "truncate.max_lines": 5, "truncate.max_bytes": 9},
        {"serve.host": "localhost", "serve.port": 80, "lsp.enabled": False, "lsp.wait": 1},
        {"data_dir": Path("~/data"), "locked_permissions": Path("/etc/toolrt/locked.yaml")},
    ],
)
def test_plainly_typed_settings_are_what_pydantic_makes_of_them(values: dict[str, Any]) -> None:
    plain = plain_settings(values)
    assert plain is not None
    assert plain == checked_settings(values, {})
    assert type(plain.timeout) is float and type(plain.lsp.wait) is float


@pytest.mark.parametrize(
    "values",
    [
        {"timeout": True},  # pydantic reads a bool as a number: its rules, not a copy of them
        {"timeout": "60"},
        {"truncate.max_lines": 5.0},
        {"truncate.direction": "tail"},  # a literal
        {"data_dir": "/somewhere"},  # a path
        {"env_allow": ["HOME"]},
        {"timeout": 60, "audit": False},
    ],
)
def test_any_other_value_goes_to_pydantic(values: dict[str, Any]) -> None:
    assert plain_settings(values) is None


def _compiled_beside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`read_yaml` keeps its compiled copies under tmp_path (the package's own directory is not the test's)."""
    copies = tmp_path / "compiled"
    monkeypatch.setattr(resources, "_compiled_path", lambda path: copies / f"{path.name}.marshal")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return copies


def test_a_table_is_read_from_its_compiled_copy_until_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies = _compiled_beside(tmp_path, monkeypatch)
    table = tmp_path / "table.yaml"
    table.write_text("wrappers: {nice: {skip: 1}}\n")
    assert read_yaml(table) == {"wrappers": {"nice": {"skip": 1}}}
    assert (copies / "table.yaml.marshal").is_file()
    monkeypatch.setattr(resources, "_parse_yaml", lambda path: pytest.fail("parsed although compiled"))
    assert read_yaml(table) == {"wrappers": {"nice": {"skip": 1}}}
    monkeypatch.undo()
    copies = _compiled_beside(tmp_path, monkeypatch)
    table.write_text("wrappers: {nice: {skip: 2}, timeout: {skip: 1}}\n")
    assert read_yaml(table) == {"wrappers": {"nice": {"skip": 2}, "timeout": {"skip": 1}}}


def test_a_broken_compiled_copy_is_parsed_again_and_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copies = _compiled_beside(tmp_path, monkeypatch)
    table = tmp_path / "table.yaml"
    table.write_text("arity: {git: 2}\n")
    read_yaml(table)
    (copies / "table.yaml.marshal").write_bytes(b"\x00 torn")
    assert read_yaml(table) == {"arity": {"git": 2}}
    assert (copies / "table.yaml.marshal").read_bytes() != b"\x00 torn"


def test_no_copy_is_written_without_bytecode_or_for_values_marshal_cannot_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies = _compiled_beside(tmp_path, monkeypatch)
    table = tmp_path / "table.yaml"
    table.write_text("when: 2026-11-28\n")  # a date: marshal cannot write it
    assert str(read_yaml(table)["when"]) == "2026-11-28"
    assert not copies.exists() or not any(copies.iterdir())
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    table.write_text("plain: true\n")
    assert read_yaml(table) == {"plain": True}
    assert not copies.exists() or not any(copies.iterdir())


def test_only_the_package_s_own_files_are_compiled(tmp_path: Path) -> None:
    packaged = Path(resources.__file__).resolve().parent.parent / "shell" / "wrappers.yaml"
    assert resources._compiled_path(packaged) == packaged.parent / "__pycache__" / (
        f"wrappers.yaml.{sys.implementation.cache_tag}.marshal"
    )
    assert resources._compiled_path(tmp_path / "wrappers.yaml") is None  # a host's wrappers file


def test_the_builtin_tools_pass_every_check_a_project_s_tool_gets(make_project: Callable[..., Path]) -> None:
    """What a build and `toolrt validate` leave to the package's tests for the installed built-ins: their
    handlers import, and each compiles as a project's tool would (templated descriptions parsed, Jinja2
    templates checked and compiled at once rather than by their first render)."""
    snapshot = build_snapshot(make_project({}, builtin_tools=True))
    builtins = [tool.definition for tool in snapshot.tools.values() if tool.definition.layer == "builtin"]
    assert len(builtins) > 10
    assert python_handler_problems(snapshot, builtin=True) == []
    assert any(OFFERED_MARK in definition.description for definition in builtins)
    for definition in builtins:
        problems: list[Problem] = []
        assert compile_tool(replace(definition, layer="project"), definition.description, problems) is not None
        assert problems == [], definition.id
    assert description_problem("{% for t in tools %}{{ nope }}{% endfor %}") is not None


def test_validate_checks_the_builtins_formats_only_when_asked(make_project: Callable[..., Path]) -> None:
    """`toolrt validate` shows the built-in tools' format warnings only with `--all`, so it asks for them
    only then; the package's own tools compile for every format without an error either way."""
    root = make_project({"mine": LOSSY_TOOL}, builtin_tools=True)
    everything = validate(root)
    assert everything.errors == ()
    builtins = {p.file for p in everything.warnings if p.file.startswith("<builtin>/tools.d/")}
    assert "<builtin>/tools.d/write.yaml" in builtins  # minLength: lossy for OpenAI's strict mode
    project_only = validate(root, builtin=False)
    assert project_only.errors == ()
    assert not [p for p in project_only.warnings if p.file.startswith("<builtin>/")]
    assert [p.file for p in project_only.warnings] == [p for p in (p.file for p in everything.warnings) if "<" not in p]
    assert any(p.file == "tools.d/mine.yaml" and "minLength" in p.message for p in project_only.warnings)


def test_a_packaged_jinja_template_compiles_by_its_first_render() -> None:
    source = "{{ operation }}{% if line %}:{{ line }}{% endif %}"
    names = frozenset({"operation", "line"})
    packaged = compile_template(source, names, packaged=True)
    assert "jinja2.environment" not in repr(type(packaged))
    assert packaged.render({"operation": "hover", "line": 3}) == "hover:3"
    assert packaged.render({"operation": "hover", "line": None}) == compile_template(source, names).render(
        {"operation": "hover", "line": None}
    )
