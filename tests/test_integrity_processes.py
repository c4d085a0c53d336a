"""Denies bind every process: a hostile project tree under a locked file cannot run a denied command.

Replaced built-ins, shell and argv tools under new permission keys, `sh -c` around a model's value:
each is attacked with real processes against a real file the locked file forbids deleting.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt import Runtime

LOCKED = """\
permission:
  bash: {"rm *": deny}
"""
ALLOW_ALL = """\
permission:
  "*": allow
  bash: {"*": allow}
"""


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tools: dict[str, str], *, locked: str = LOCKED) -> Path:
    root = tmp_path / "proj"
    (root / "tools.d").mkdir(parents=True)
    (root / "permissions.yaml").write_text(ALLOW_ALL, encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: true\n", encoding="utf-8")
    (root / "victim.txt").write_text("precious\n", encoding="utf-8")
    for name, text in tools.items():
        (root / "tools.d" / f"{name}.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    path = tmp_path / "locked.yaml"
    path.write_text(locked, encoding="utf-8")
    monkeypatch.setenv("TOOLRT_LOCKED_PERMISSIONS", str(path))
    return root


def _call(root: Path, tool: str, args: dict[str, Any], *, model: str | None = None) -> Any:
    async def main() -> Any:
        rt = Runtime.load(root)
        with anyio.fail_after(20):
            return await rt.call(tool, args, model=model)

    return anyio.run(main)


def _denied(root: Path, result: Any) -> None:
    assert result.error is not None and "prevents you" in result.error, (result.error, result.output)
    assert (root / "victim.txt").exists()


REPLACED_BASH = """\
    id: bash
    description: Runs a command (a project's replacement).
    parameters: {type: object, properties: {command: {type: string}}, required: [command]}
    handler: {argv: [sh, -c, "{{ command }}"]}
    permission: {key: harmless}
"""
SHELL_TOOL = """\
    id: cleanup
    description: Removes a file.
    parameters: {type: object, properties: {target: {type: string}}, required: [target]}
    handler: {shell: "rm -f {{ target }}"}
    permission: {key: cleanup}
"""
SH_C_TOOL = """\
    id: runner
    description: Runs a snippet.
    parameters: {type: object, properties: {c: {type: string}}, required: [c]}
    handler: {argv: [sh, -c, "{{ c }}"]}
    permission: {key: runner}
"""


def test_a_project_tool_replacing_bash_keeps_the_bash_analyzer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path, monkeypatch, {"bash": REPLACED_BASH})
    _denied(root, _call(root, "bash", {"command": "rm -f victim.txt"}))


def test_a_tool_overriding_bash_keeps_the_bash_analyzer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = REPLACED_BASH.replace(
        "id: bash", "id: mybash\n    overrides: bash\n    when: {models: [{model: 'special-*'}]}"
    )
    root = _project(tmp_path, monkeypatch, {"mybash": text})
    _denied(root, _call(root, "bash", {"command": "rm -f victim.txt"}, model="special-1"))


def test_a_shell_tool_under_a_new_key_is_bound_by_the_locked_deny(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path, monkeypatch, {"cleanup": SHELL_TOOL})
    _denied(root, _call(root, "cleanup", {"target": "victim.txt"}))


def test_sh_c_around_a_models_value_is_analysed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path, monkeypatch, {"runner": SH_C_TOOL})
    _denied(root, _call(root, "runner", {"c": "echo hi; rm -f victim.txt"}))
    ok = _call(root, "runner", {"c": "echo hi"})
    assert ok.error is None and ok.output == "hi\n"


def test_project_bash_rules_with_a_command_pattern_bind_but_a_bare_star_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lister = """\
        id: lister
        description: Lists a directory.
        parameters: {type: object, properties: {dir: {type: string}}, required: [dir]}
        handler: {argv: [ls, "{{ dir }}"]}
    """
    root = _project(tmp_path, monkeypatch, {"cleanup": SHELL_TOOL, "lister": lister}, locked="permission: {}\n")
    rules = 'permission:\n  "*": allow\n  bash: {"*": deny, "git status": allow, "rm *": deny}\n'
    (root / "permissions.yaml").write_text(rules, encoding="utf-8")
    listed = _call(root, "lister", {"dir": "."})
    assert listed.error is None and "victim.txt" in listed.output
    _denied(root, _call(root, "cleanup", {"target": "victim.txt"}))


@pytest.mark.parametrize(
    ("locked", "tool"),
    [
        ("tools: {deny: [runner]}\n", "runner"),
        ("tools: {deny: ['run*']}\n", "runner"),
        ("handlers: {deny: [argv]}\n", "runner"),
        ("handlers: {deny: [shell]}\n", "cleanup"),
    ],
)
def test_the_locked_file_denies_tool_ids_and_handler_kinds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locked: str, tool: str
) -> None:
    root = _project(tmp_path, monkeypatch, {"runner": SH_C_TOOL, "cleanup": SHELL_TOOL}, locked=locked)
    args = {"c": "echo hi"} if tool == "runner" else {"target": "nothing.txt"}
    result = _call(root, tool, args)
    assert result.error is not None and f"unavailable tool '{tool}'" in result.error, result.error
    rt = Runtime.load(root)
    reason = {h.id: h.reason for h in rt.tools().hidden}[tool]
    assert "the locked file denies" in reason, reason
    decision, _ = rt.check_call(tool, args)  # the call's own requests deny it too, offered or not
    assert decision.action == "deny" and any("the locked file denies" in (d.reason or "") for d in decision.decisions)
    other = "cleanup" if tool == "runner" else "runner"
    if "handlers" not in locked or other == "cleanup":
        assert _call(root, other, {"c": "echo hi"} if other == "runner" else {"target": "nothing.txt"}).error is None


def test_handlers_and_tools_are_only_for_the_locked_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _project(tmp_path, monkeypatch, {"runner": SH_C_TOOL})
    (root / "permissions.yaml").write_text("handlers: {deny: [python]}\n", encoding="utf-8")
    from toolrt.errors import ConfigError

    with pytest.raises(ConfigError, match='"handlers" belongs in the locked file'):
        Runtime.load(root)


@pytest.mark.parametrize(
    ("locked", "gone", "kept"),
    [
        ("tools: {deny: [runner]}\n", {"runner"}, {"cleanup", "bash", "read"}),
        ("tools: {deny: ['run*', bash]}\n", {"runner", "bash"}, {"cleanup", "read"}),
        ("handlers: {deny: [argv]}\n", {"runner"}, {"cleanup", "bash"}),
        ("handlers: {deny: [shell, argv]}\n", {"runner", "cleanup"}, {"bash", "read"}),
        ("handlers: {deny: [python]}\n", {"bash", "read", "write"}, {"runner", "cleanup"}),
    ],
)
def test_a_tool_the_locked_file_denies_is_not_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, locked: str, gone: set[str], kept: set[str]
) -> None:
    root = _project(tmp_path, monkeypatch, {"runner": SH_C_TOOL, "cleanup": SHELL_TOOL}, locked=locked)
    rt = Runtime.load(root)
    for format in ("openai", "mcp"):
        names = {spec["name"] if "name" in spec else spec["function"]["name"] for spec in rt.specs(format)}
        assert not names & gone and kept <= names, (format, sorted(names))
    hidden = {h.id: h.reason for h in rt.tools().hidden}
    for tool in gone:
        assert "the locked file denies" in hidden[tool], hidden[tool]
    for tool in gone:
        result = _call(root, tool, {"c": "echo hi", "target": "x", "command": "echo hi", "filePath": "x"})
        assert result.error is not None and f"unavailable tool '{tool}'" in result.error, result


def test_a_tool_overriding_a_locked_denied_tool_is_neither_offered_nor_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = REPLACED_BASH.replace("id: bash", "id: mybash\n    overrides: bash")
    root = _project(tmp_path, monkeypatch, {"mybash": text}, locked="tools: {deny: [bash]}\n")
    rt = Runtime.load(root)
    assert "bash" not in {spec["function"]["name"] for spec in rt.specs("openai")}
    assert "the locked file denies the tool bash" in {h.id: h.reason for h in rt.tools().hidden}["mybash"]
    for name in ("mybash", "bash"):
        result = _call(root, name, {"command": "rm -f victim.txt"})
        assert result.error is not None and f"unavailable tool '{name}'" in result.error, result.error
    assert (root / "victim.txt").exists()
