"""Attacks on the settings a project may not weaken, and on the exempt tool-output directory.

A hostile project tree (`toolrt.yaml` `audit: false`, a `.env` moving the data directory) under a
locked `external_directory: deny` must neither turn the audit off nor move it; a tool-output
directory that is (or passes through) a symlink exempts nothing. Real files, real symlinks, real bash.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt import Runtime
from toolrt.audit import read_records
from toolrt.permissions.ask import AskRequest, Reply
from toolrt.permissions.model import CallSite
from toolrt.shell.paths import PathScope

SECRET = "host-secret-outside-the-project"
LOCKED = "permission:\n  external_directory: deny\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "permissions.yaml").write_text("permission:\n  '*': allow\n", encoding="utf-8")
    locked = tmp_path / "admin" / "locked.yaml"
    locked.parent.mkdir()
    locked.write_text(LOCKED, encoding="utf-8")
    monkeypatch.setenv("TOOLRT_LOCKED_PERMISSIONS", str(locked))
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "secret.txt").write_text(SECRET + "\n", encoding="utf-8")
    return root


def _call(root: Path, tool: str, args: dict[str, Any]) -> tuple[Runtime, Any]:
    async def approve(request: AskRequest) -> Reply:
        return Reply("once")

    async def main() -> tuple[Runtime, Any]:
        rt = Runtime.load(root)
        with anyio.fail_after(20):
            return rt, await rt.call(tool, args, ask=approve)

    return anyio.run(main)


@pytest.mark.parametrize(
    ("file", "text", "key"),
    [
        ("toolrt.yaml", "defaults:\n  audit: false\n", "audit"),
        ("toolrt.yaml", "defaults:\n  audit: {outside}\n", "audit"),
        ("toolrt.yaml", "defaults:\n  data_dir: {elsewhere}\n", "data_dir"),
        (".env", "TOOLRT_AUDIT=false\n", "audit"),
        (".env", "TOOLRT_AUDIT={outside}\n", "audit"),
        (".env", "TOOLRT_DATA_DIR={elsewhere}\n", "data_dir"),
    ],
)
def test_a_project_cannot_turn_the_audit_off_or_move_it(
    project: Path, tmp_path: Path, _isolated_data_dir: Path, file: str, text: str, key: str
) -> None:
    outside, elsewhere = tmp_path / "host" / "audit.jsonl", tmp_path / "elsewhere"
    (project / file).write_text(text.format(outside=outside, elsewhere=elsewhere), encoding="utf-8")
    rt, result = _call(project, "glob", {"pattern": "*"})
    assert result.error is None
    assert rt.audit.path == _isolated_data_dir / "audit.jsonl"
    records, bad = read_records(rt.audit.path)
    assert [record["tool"] for record in records] == ["glob"] and bad == []
    assert not outside.exists() and not elsewhere.exists()
    warning = next(w for w in rt.snapshot.warnings if f"{key} is a host-only setting" in w.message)
    assert warning.file == file and warning.line >= 1


def _symlinked_tool_output(rt: Runtime) -> Path:
    output = rt.snapshot.truncation_dir
    output.parent.mkdir(parents=True, exist_ok=True)
    output.symlink_to("/", target_is_directory=True)
    return output


@pytest.mark.parametrize("tool", ["read", "bash"])
def test_a_tool_output_symlink_to_root_exempts_nothing(project: Path, tmp_path: Path, tool: str) -> None:
    output = _symlinked_tool_output(Runtime.load(project))
    via = f"{output}{tmp_path / 'host' / 'secret.txt'}"
    args = {"filePath": via} if tool == "read" else {"command": f"cat {via}", "description": "read"}
    _, result = _call(project, tool, args)
    assert result.error is not None and "prevents you" in result.error
    assert SECRET not in result.output


def test_a_tool_output_directory_through_a_symlink_exempts_nothing(project: Path, tmp_path: Path) -> None:
    rt = Runtime.load(project)
    real = tmp_path / "host"
    link_parent = rt.snapshot.truncation_dir.parent
    link_parent.mkdir(parents=True, exist_ok=True)
    rt.snapshot.truncation_dir.symlink_to(real, target_is_directory=True)
    _, result = _call(project, "read", {"filePath": str(real / "secret.txt")})
    assert result.error is not None and "prevents you" in result.error
    assert SECRET not in result.output


def test_the_saved_output_of_a_truncated_call_still_reads_without_asking(project: Path) -> None:
    rt = Runtime.load(project)
    rt.snapshot.truncation_dir.mkdir(parents=True)
    saved = rt.snapshot.truncation_dir / "tool_1"
    saved.write_text("the full output\n", encoding="utf-8")
    _, result = _call(project, "read", {"filePath": str(saved)})
    assert result.error is None and "the full output" in result.output


def test_the_tool_output_directory_is_one_per_project(tmp_path: Path, project: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    mine, theirs = Runtime.load(project).snapshot, Runtime.load(other).snapshot
    assert mine.data_dir == theirs.data_dir
    assert mine.truncation_dir != theirs.truncation_dir
    assert mine.truncation_dir.parent == theirs.truncation_dir.parent == mine.data_dir / "tool-output"
    assert theirs.truncation_dir not in mine.site.exempt


def test_the_bash_path_scope_sees_through_a_symlinked_exempt_directory(tmp_path: Path) -> None:
    root, output = tmp_path / "proj", tmp_path / "data" / "tool-output"
    root.mkdir()
    output.parent.mkdir()
    output.symlink_to("/", target_is_directory=True)
    scope = PathScope(CallSite(root=root, cwd=root, home=tmp_path, exempt=(output,)))
    assert scope.external(f"{output}/etc/pass*", str(root)) == [f"{output}/etc", "/etc"]
    assert scope.external("/etc/passwd", str(root)) == ["/etc"]
    assert scope.external(f"{output}/etc/passwd", str(root)) == [f"{output}/etc", "/etc"]


@pytest.mark.parametrize(
    ("file", "text"),
    [
        ("toolrt.yaml", "defaults:\n  env_allow: [PATH, HOME, TOOLRT_TEST_API_KEY]\n"),
        (".env", 'TOOLRT_ENV_ALLOW=["PATH", "TOOLRT_TEST_API_KEY"]\n'),
    ],
)
def test_a_project_cannot_hand_a_host_secret_to_its_tools(
    project: Path, monkeypatch: pytest.MonkeyPatch, file: str, text: str
) -> None:
    monkeypatch.setenv("TOOLRT_TEST_API_KEY", SECRET)
    tools = project / "tools.d"
    tools.mkdir()
    (tools / "printenv.yaml").write_text(
        "id: printenv\ndescription: Prints the environment.\nparameters: {type: object}\nhandler: {argv: [env]}\n",
        encoding="utf-8",
    )
    existing = (project / file).read_text(encoding="utf-8") if (project / file).exists() else ""
    (project / file).write_text(existing + text, encoding="utf-8")
    rt, result = _call(project, "printenv", {})
    assert result.error is None, result.error
    assert SECRET not in result.output and "PATH=" in result.output
    warning = next(w for w in rt.snapshot.warnings if "env_allow is a host-only setting" in w.message)
    assert warning.file == file


def test_a_project_env_allow_without_secrets_still_applies(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRT_TEST_LANGUAGE", "ok-value")
    (project / "tools.d").mkdir()
    (project / "tools.d" / "printenv.yaml").write_text(
        "id: printenv\ndescription: Prints the environment.\nparameters: {type: object}\nhandler: {argv: [env]}\n",
        encoding="utf-8",
    )
    (project / "toolrt.yaml").write_text("defaults:\n  env_allow: [PATH, TOOLRT_TEST_LANGUAGE]\n", encoding="utf-8")
    _, result = _call(project, "printenv", {})
    assert "TOOLRT_TEST_LANGUAGE=ok-value" in result.output
