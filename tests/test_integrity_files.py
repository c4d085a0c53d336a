"""Attacks on the file tools under a locked `read: {"*.env": deny}`: symlinks, search tools, patch moves.

Every test runs the real built-in tools through `Runtime.call` against real files and real symlinks.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt import Runtime
from toolrt.audit import read_records
from toolrt.permissions.ask import AskRequest, Reply

SECRET = "API_KEY=hunter2-secret"
LOCKED = """\
permission:
  read: {"*.env": deny}
  external_directory: deny
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with a `.env` secret and an administrator's locked file denying reads of it."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".env").write_text(SECRET + "\n", encoding="utf-8")
    (root / "notes.txt").write_text("API_KEY is read from the environment\n", encoding="utf-8")
    (root / "permissions.yaml").write_text("permission:\n  '*': allow\n  read: allow\n", encoding="utf-8")
    locked = tmp_path / "admin" / "locked.yaml"
    locked.parent.mkdir()
    locked.write_text(LOCKED, encoding="utf-8")
    monkeypatch.setenv("TOOLRT_LOCKED_PERMISSIONS", str(locked))
    return root


def _call(
    root: Path, tool: str, args: dict[str, Any], *, model: str | None = None, flags: dict[str, bool] | None = None
) -> Any:
    async def approve(request: AskRequest) -> Reply:
        return Reply("once")

    async def main() -> Any:
        rt = Runtime.load(root)
        with anyio.fail_after(20):
            return await rt.call(tool, args, ask=approve, model=model, flags=flags)

    return anyio.run(main)


def test_a_symlink_to_env_asks_read_for_the_env_file(project: Path) -> None:
    (project / "innocent.txt").symlink_to(".env")
    result = _call(project, "read", {"filePath": "innocent.txt"})
    assert result.error is not None and "prevents you" in result.error
    assert SECRET not in result.output


def test_a_symlinked_directory_does_not_hide_the_env_file(project: Path) -> None:
    (project / "alias").symlink_to(".", target_is_directory=True)
    result = _call(project, "read", {"filePath": "alias/.env"})
    assert result.error is not None and "prevents you" in result.error


def test_grep_with_path_env_is_denied_by_the_read_rule(project: Path) -> None:
    result = _call(project, "grep", {"pattern": "API_KEY", "path": ".env"})
    assert result.error is not None and "prevents you" in result.error
    assert "hunter2" not in result.output


def test_grep_leaves_out_what_read_would_not_allow(project: Path) -> None:
    result = _call(project, "grep", {"pattern": "API_KEY", "include": ".env"})
    assert result.error is None
    assert "hunter2" not in result.output
    # Where the sandbox masks the denied file, rg reads it empty: not even whether it matches shows.
    masked = "masked 1 denied path" in str(result.metadata["sandbox"])
    assert ("1 file left out" in result.output) is not masked
    # The allowed file is still found by a search over the whole project.
    everything = _call(project, "grep", {"pattern": "API_KEY"})
    assert "notes.txt" in everything.output and "hunter2" not in everything.output
    assert ("1 file left out" in everything.output) is not masked


def test_grep_through_a_symlink_to_env_is_denied(project: Path) -> None:
    (project / "innocent.txt").symlink_to(".env")
    result = _call(project, "grep", {"pattern": "hunter2", "path": "innocent.txt"})
    assert result.error is not None and "prevents you" in result.error


def test_glob_and_list_leave_out_the_env_file_and_say_so(project: Path) -> None:
    found = _call(project, "glob", {"pattern": "*"})
    assert "notes.txt" in found.output and ".env" not in found.output.replace("left out", "")
    assert "1 file left out" in found.output
    listed = _call(project, "list", {}, flags={"list_tool": True})
    assert "notes.txt" in listed.output and "  .env" not in listed.output
    assert "1 file left out" in listed.output


def _patch(body: str) -> str:
    return "*** Begin Patch\n" + textwrap.dedent(body) + "*** End Patch"


def test_apply_patch_cannot_move_env_out_of_the_read_rule(project: Path) -> None:
    patch = _patch(
        """\
        *** Update File: .env
        *** Move to: env.txt
        @@
        -API_KEY=hunter2-secret
        +API_KEY=hunter2-secret
        """
    )
    result = _call(project, "apply_patch", {"patchText": patch}, model="gpt-5")
    assert result.error is not None and "prevents you" in result.error
    assert not (project / "env.txt").exists() and (project / ".env").exists()


def test_apply_patch_delete_asks_read_for_the_source(project: Path) -> None:
    result = _call(project, "apply_patch", {"patchText": _patch("*** Delete File: .env\n")}, model="gpt-5")
    assert result.error is not None and "prevents you" in result.error
    assert (project / ".env").exists()


def test_a_description_file_outside_its_layer_is_refused(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("private text of another user", encoding="utf-8")
    (project / "tools.d").mkdir()
    (project / "tools.d" / "leak.yaml").write_text(
        textwrap.dedent(
            f"""\
            id: leak
            description_file: {os.path.relpath(outside, project / "tools.d")}
            parameters: {{type: object}}
            handler: {{argv: [echo, hi]}}
            """
        ),
        encoding="utf-8",
    )
    (project / "tools.d" / "link.md").symlink_to(outside)
    (project / "tools.d" / "viasymlink.yaml").write_text(
        "id: via\ndescription_file: link.md\nparameters: {type: object}\nhandler: {argv: [echo, hi]}\n",
        encoding="utf-8",
    )
    from toolrt.build.snapshot import build_snapshot
    from toolrt.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        build_snapshot(project)
    messages = [str(problem) for problem in caught.value.problems]
    assert any("leak.yaml" in m and "outside" in m for m in messages), messages
    assert any("viasymlink.yaml" in m and "outside" in m for m in messages), messages
    assert not any("private text" in m for m in messages)


def test_bash_ansi_c_escape_out_of_range_gives_a_result_and_a_record(project: Path) -> None:
    result = _call(project, "bash", {"command": "echo $'\\9' $'\\8x'", "description": "odd escapes"})
    assert result.error is None, result.error
    assert result.output == "\\9 \\8x\n"
    _assert_recorded("bash")


def test_webfetch_bracketed_ipv4_gives_a_result_and_a_record(project: Path) -> None:
    result = _call(project, "webfetch", {"url": "http://[127.0.0.1]/"})
    assert result.error is not None and "not a valid URL" in result.error
    _assert_recorded("webfetch")


def _assert_recorded(tool: str) -> None:
    audit = Path(os.environ["TOOLRT_DATA_DIR"]) / "audit.jsonl"
    records, bad = read_records(audit)
    assert bad == [] and records[-1]["tool"] == tool


@pytest.mark.parametrize(
    "command",
    [
        "cat .env",
        "cat ./sub/../.env",
        "cat .e*",
        "cat .[e]nv",
        "cat < .env",
        "echo $(<.env)",
        "while read -r l; do echo $l; done < .env",
        "base64 .env",
        "f=.env; cat $f",
        "cat $PWD/.env",
        "cat innocent.txt",  # a symlink to .env: its real path is asked too
        "cp .env copy.txt && cat copy.txt",
        "find . -name .env -exec cat {} +",
    ],
)
def test_bash_naming_a_locked_denied_file_is_denied(project: Path, command: str) -> None:
    (project / "sub").mkdir()
    (project / "innocent.txt").symlink_to(".env")
    result = _call(project, "bash", {"command": command, "description": "read"})
    assert result.error is not None and "prevents you" in result.error, (result.error, result.output)
    assert "hunter2" not in result.output
    assert not (project / "copy.txt").exists()


def test_bash_reading_other_files_still_runs(project: Path) -> None:
    result = _call(project, "bash", {"command": "cat notes.txt .env.example 2>/dev/null", "description": "read"})
    assert result.error is None and "API_KEY is read" in result.output, result.error


@pytest.mark.parametrize(
    "command",
    [
        "grep -R hunter .",
        "grep -rR hunter",
        "find -L . -name secret.txt -exec cat {} +",
        "tar -chf - . | tar -xOf -",
        "rg -L hunter",
        "cp -rL . ../copy && cat ../copy/lnk/secret.txt",
        "du -L -a .",
    ],
)
def test_a_walk_that_follows_a_symlink_out_of_the_project_is_denied(
    project: Path, tmp_path: Path, command: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("hunter2 outside\n", encoding="utf-8")
    (project / "sub").mkdir()
    (project / "sub" / "lnk").symlink_to(outside, target_is_directory=True)
    result = _call(project, "bash", {"command": command, "description": "walk"})
    assert result.error is not None and "prevents you" in result.error, (result.error, result.output)
    assert "outside" not in result.output


def test_a_walk_that_does_not_follow_symlinks_still_runs(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "lnk").symlink_to(outside, target_is_directory=True)
    result = _call(project, "bash", {"command": "grep -rn environment .", "description": "walk"})
    assert result.error is None and "notes.txt" in result.output, result.error
