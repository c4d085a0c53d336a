"""glob, grep and list: ripgrep-backed search tools, driven through their handlers with hostile inputs."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt.builtin import ripgrep
from toolrt.builtin.glob import TRUNCATED_NOTE, glob
from toolrt.builtin.grep import FileMatches, grep, render_matches
from toolrt.builtin.ls import list_directory, render_tree
from toolrt.call.context import ToolContext
from toolrt.call.detached import DetachedCall
from toolrt.errors import ToolFailure
from toolrt.permissions.model import PermissionRequest

Handler = Callable[[Mapping[str, Any], ToolContext], Awaitable[dict[str, Any]]]


async def allow(requests: Sequence[PermissionRequest]) -> None:
    """An asker double that approves every request (the rules are tested elsewhere)."""


def make_ctx(root: Path) -> ToolContext:
    return ToolContext(
        DetachedCall(
            tool_id="search", root=root, data_dir=root / ".data", ask=allow, permits=lambda permission, pattern: True
        )
    )


def call(handler: Handler, args: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """The handler's result, its metadata without `sandbox` after checking that it names the sandbox rg ran in."""

    async def main() -> dict[str, Any]:
        ctx = make_ctx(root)
        with anyio.fail_after(20):
            result = await handler(args, ctx)
        plan = ctx.sandbox_plan()
        assert result["metadata"].pop("sandbox") == (plan.description if plan is not None else "none")
        return result

    return anyio.run(main)


def write(path: Path, text: str, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the project root holding a secret that no search may reveal."""
    directory = tmp_path_factory.mktemp("outside")
    write(directory / "secret.txt", "needle: the secret outside the root\n")
    return directory


@pytest.fixture
def root(tmp_path: Path, outside: Path) -> Path:
    project = tmp_path / "project"
    write(project / "src" / "old.py", "def needle():\n    return 1\n", mtime=1_000_000)
    write(project / "src" / "new.py", "needle = 2\n", mtime=3_000_000)
    write(project / "README.md", "about the needle\n", mtime=2_000_000)
    (project / "linked_dir").symlink_to(outside, target_is_directory=True)
    (project / "linked_file.txt").symlink_to(outside / "secret.txt")
    return project


# ---------------------------------------------------------------- glob


def test_glob_lists_absolute_paths_newest_first(root: Path) -> None:
    result = call(glob, {"pattern": "**/*"}, root)
    assert result["output"].splitlines() == [
        str(root / "src" / "new.py"),
        str(root / "README.md"),
        str(root / "src" / "old.py"),
    ]
    assert result["metadata"] == {"count": 3, "truncated": False}
    assert result["title"] == "."


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.py", None, ["src/new.py", "src/old.py"]),
        ("src/*.py", None, ["src/new.py", "src/old.py"]),
        ("*.md", None, ["README.md"]),
        ("old.*", "src", ["src/old.py"]),
        ("*.py", "./src/../src", ["src/new.py", "src/old.py"]),
        ("--files", None, []),
    ],
)
def test_glob_patterns(root: Path, pattern: str, path: str | None, expected: list[str]) -> None:
    args = {"pattern": pattern} if path is None else {"pattern": pattern, "path": path}
    output = call(glob, args, root)["output"]
    assert output == ("\n".join(str(root / item) for item in expected) or "No files found")


def test_glob_does_not_follow_symlinks_out_of_the_root(root: Path, outside: Path) -> None:
    output = call(glob, {"pattern": "**/*.txt"}, root)["output"]
    assert output == "No files found"
    assert str(outside) not in output


def test_glob_caps_at_100_with_the_note(tmp_path: Path) -> None:
    for index in range(150):
        write(tmp_path / "many" / f"f{index:03}.txt", "x", mtime=1_000_000 + index)
    result = call(glob, {"pattern": "*.txt"}, tmp_path)
    lines = result["output"].split("\n")
    assert lines[:2] == [str(tmp_path / "many" / "f149.txt"), str(tmp_path / "many" / "f148.txt")]
    assert lines[100:] == ["", TRUNCATED_NOTE]
    assert len(lines[:100]) == 100
    assert result["metadata"] == {"count": 100, "truncated": True}


def test_glob_skips_git_and_gitignored_directories_but_includes_hidden_files(tmp_path: Path) -> None:
    write(tmp_path / ".git" / "config.txt", "[core]\n")
    write(tmp_path / ".gitignore", "build/\nignored.txt\n")
    write(tmp_path / "build" / "out.txt", "x")
    write(tmp_path / ".hidden.txt", "x")
    write(tmp_path / "kept.txt", "x")
    # As in ripgrep (and OpenCode): a glob that names a file overrides .gitignore for that file.
    write(tmp_path / "ignored.txt", "x")
    names = sorted(Path(line).name for line in call(glob, {"pattern": "**/*.txt"}, tmp_path)["output"].splitlines())
    assert names == [".hidden.txt", "ignored.txt", "kept.txt"]


def test_glob_searches_an_absolute_path_outside_the_root(root: Path, outside: Path) -> None:
    # The external_directory decision is dispatch's (the YAML declares `path` a directory path);
    # once allowed, the handler searches there and reports absolute paths.
    result = call(glob, {"pattern": "*.txt", "path": str(outside)}, root)
    assert result["output"] == str(outside / "secret.txt")
    assert result["title"] == os.path.relpath(outside, root)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"pattern": ""}, r"The pattern is empty\. Give a glob such as `\*\*/\*\.py`"),
        ({"pattern": "*.py", "path": "missing"}, r"missing does not exist\. Give an existing directory"),
        ({"pattern": "*.py", "path": "README.md"}, r"README\.md is not a directory\."),
        ({"pattern": "["}, r"ripgrep could not use this glob:\n.*error parsing glob '\['"),
    ],
)
def test_glob_rejects(root: Path, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolFailure, match=message):
        call(glob, args, root)


# ---------------------------------------------------------------- grep


def test_grep_output_groups_by_file_newest_first(root: Path) -> None:
    result = call(grep, {"pattern": "needle"}, root)
    assert result["output"] == "\n".join(
        [
            "Found 3 matches",
            f"{root / 'src' / 'new.py'}:",
            "  Line 1: needle = 2",
            "",
            f"{root / 'README.md'}:",
            "  Line 1: about the needle",
            "",
            f"{root / 'src' / 'old.py'}:",
            "  Line 1: def needle():",
        ]
    )
    assert result["metadata"] == {"matches": 3, "truncated": False}
    assert result["title"] == "needle"


def test_grep_no_match_is_no_files_found(root: Path) -> None:
    # OpenCode grep.test.ts: "no matches returns correct output"
    result = call(grep, {"pattern": "xyznonexistentpatternxyz123"}, root)
    assert result["output"] == "No files found"
    assert result["metadata"] == {"matches": 0, "truncated": False}


def test_grep_handles_crlf_line_endings(tmp_path: Path) -> None:
    # OpenCode grep.test.ts: "handles CRLF line endings in output"
    (tmp_path / "test.txt").write_bytes(b"line1\r\nline2\r\nline3")
    result = call(grep, {"pattern": "line"}, tmp_path)
    assert result["metadata"]["matches"] == 3
    assert result["output"].splitlines()[1:] == [
        f"{tmp_path / 'test.txt'}:",
        *[f"  Line {n}: line{n}" for n in (1, 2, 3)],
    ]


@pytest.mark.parametrize(
    ("args", "expected_files"),
    [
        ({"pattern": "needle", "include": "*.py"}, ["src/new.py", "src/old.py"]),
        ({"pattern": "needle", "path": "src"}, ["src/new.py", "src/old.py"]),
        ({"pattern": "needle", "path": "README.md"}, ["README.md"]),
        ({"pattern": r"def \w+\(\)"}, ["src/old.py"]),
        ({"pattern": "NEEDLE"}, []),
    ],
)
def test_grep_scopes(root: Path, args: dict[str, Any], expected_files: list[str]) -> None:
    output = call(grep, args, root)["output"]
    shown = [line[:-1] for line in output.splitlines() if line.endswith(":") and line.startswith("/")]
    assert shown == [str(root / item) for item in expected_files]


def test_grep_pattern_that_looks_like_a_flag_is_a_regex(tmp_path: Path) -> None:
    write(tmp_path / "flags.txt", "run with --files please\n")
    output = call(grep, {"pattern": "--files"}, tmp_path)["output"]
    assert output.endswith("  Line 1: run with --files please")


def test_grep_hostile_include_is_only_a_glob(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "needle\n")
    marker = tmp_path / "pwned"
    result = call(grep, {"pattern": "needle", "include": f"--pre=touch {marker}"}, tmp_path)
    assert result["output"] == "No files found"
    assert not marker.exists()


def test_grep_does_not_search_through_symlinks_out_of_the_root(root: Path, outside: Path) -> None:
    output = call(grep, {"pattern": "secret"}, root)["output"]
    assert output == "No files found"


def test_grep_keeps_pipes_in_paths_and_text(tmp_path: Path) -> None:
    write(tmp_path / "we|ird.txt", "a|b|needle|c\n")
    output = call(grep, {"pattern": "needle"}, tmp_path)["output"]
    assert output.splitlines()[1:] == [f"{tmp_path / 'we|ird.txt'}:", "  Line 1: a|b|needle|c"]


@pytest.mark.parametrize("length", [2001, 5000, 200_000])
def test_grep_cuts_long_lines_at_2000_chars(tmp_path: Path, length: int) -> None:
    write(tmp_path / "long.txt", "needle" + "x" * (length - 6) + "\n")
    line = call(grep, {"pattern": "needle"}, tmp_path)["output"].splitlines()[2]
    assert line == "  Line 1: needle" + "x" * 1994 + "..."


def test_grep_caps_at_100_matches_with_the_notes(tmp_path: Path) -> None:
    write(tmp_path / "older.txt", "".join(f"needle {n}\n" for n in range(1, 91)), mtime=2_000_000)
    write(tmp_path / "newer.txt", "".join(f"needle {n}\n" for n in range(1, 61)), mtime=3_000_000)
    result = call(grep, {"pattern": "needle"}, tmp_path)
    lines = result["output"].split("\n")
    assert lines[0] == "Found 150 matches (showing first 100)"
    assert lines[1] == f"{tmp_path / 'newer.txt'}:"
    assert lines[62:64] == ["", f"{tmp_path / 'older.txt'}:"]
    assert lines[-3] == "  Line 40: needle 40"
    assert lines[-2:] == [
        "",
        "(Results truncated: showing 100 of 150 matches (50 hidden). Consider using a more specific path or pattern.)",
    ]
    assert sum(line.startswith("  Line ") for line in lines) == 100
    assert result["metadata"] == {"matches": 150, "truncated": True}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"pattern": ""}, r"The pattern is empty\."),
        ({"pattern": "a("}, r"ripgrep could not run this search:\nrg: regex parse error:(.|\n)*unclosed group"),
        ({"pattern": "x{2,1}"}, r"ripgrep could not run this search:\n.*regex parse error"),
        ({"pattern": "a", "include": "["}, r"error parsing glob '\['"),
        ({"pattern": "a", "path": "nope/../../nope"}, r"Path not found: .*nope\. Give an existing directory or file"),
    ],
)
def test_grep_rejects(root: Path, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolFailure, match=message):
        call(grep, args, root)


def test_grep_skips_fifos_while_walking(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "needle\n")
    os.mkfifo(tmp_path / "pipe")
    assert call(grep, {"pattern": "needle"}, tmp_path)["metadata"]["matches"] == 1


def test_grep_abort_kills_a_blocked_search(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # rg blocks opening a FIFO named explicitly: only the abort can end this search
    ctx = make_ctx(tmp_path)
    failures: list[ToolFailure] = []

    async def search() -> None:
        try:
            await grep({"pattern": "x", "path": str(fifo)}, ctx)
        except ToolFailure as error:
            failures.append(error)

    async def main() -> None:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                group.start_soon(search)
                ctx.abort.set()

    anyio.run(main)
    assert [str(error) for error in failures] == ["The search was aborted before it finished."]


@pytest.mark.parametrize(
    ("inaccessible", "tail"),
    [(False, "  Line 3: b"), (True, "  Line 3: b\n\n(Some paths were inaccessible and skipped)")],
)
def test_render_matches_notes(inaccessible: bool, tail: str) -> None:
    groups = [FileMatches("/p/x.py", [(1, "a"), (3, "b")], 2)]
    text, total = render_matches(groups, inaccessible=inaccessible)
    assert total == 2
    assert text == f"Found 2 matches\n/p/x.py:\n  Line 1: a\n{tail}"


def test_render_matches_empty_is_no_files_found() -> None:
    assert render_matches([], inaccessible=True) == ("No files found", 0)


# ---------------------------------------------------------------- ripgrep binary


@pytest.mark.parametrize(
    ("beside", "on_path", "expected"),
    [(True, True, "beside"), (False, True, "on_path"), (True, False, "beside")],
)
def test_ripgrep_binary_prefers_the_one_beside_the_interpreter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, beside: bool, on_path: bool, expected: str
) -> None:
    locations = {"beside": str(tmp_path / "rg"), "on_path": "/somewhere/bin/rg"}
    if beside:
        (tmp_path / "rg").write_bytes(b"")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr("shutil.which", lambda name: locations["on_path"] if on_path else None)
    assert ripgrep.find_ripgrep() == locations[expected]


def test_missing_ripgrep_is_a_clear_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(ToolFailure, match=r"ripgrep \(`rg`\) is not installed.*pip install ripgrep"):
        ripgrep.find_ripgrep()


# ---------------------------------------------------------------- list


def test_list_renders_a_tree_directories_first(root: Path) -> None:
    write(root / "src" / "pkg" / "deep.py", "")
    write(root / "node_modules" / "lib" / "index.js", "")
    write(root / "src" / "__pycache__" / "old.cpython-311.pyc", "")
    write(root / ".venv" / "bin" / "python", "")
    result = call(list_directory, {}, root)
    tree = [f"{root}/", "  src/", "    pkg/", "      deep.py", "    new.py", "    old.py", "  README.md"]
    assert result["output"] == "".join(f"{line}\n" for line in tree)
    assert result["metadata"] == {"count": 4, "truncated": False}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"path": "src"}, "  new.py\n  old.py\n"),
        ({"ignore": ["*.md", "src/"]}, "No files found\n"),
        ({"ignore": ["old.py"], "path": "src"}, "  new.py\n"),
    ],
)
def test_list_scopes(root: Path, args: dict[str, Any], expected: str) -> None:
    output = call(list_directory, args, root)["output"]
    assert output == f"{root / args.get('path', '.')}/\n{expected}".replace("/./", "/")


def test_list_caps_at_100_files(tmp_path: Path) -> None:
    for index in range(150):
        write(tmp_path / f"f{index:03}.txt", "")
    result = call(list_directory, {}, tmp_path)
    lines = result["output"].splitlines()
    assert lines[1:3] == ["  f000.txt", "  f001.txt"]
    assert lines[100] == "  f099.txt"
    assert lines[-1] == "(Showing the first 100 files. List a subdirectory, or add `ignore` globs, to see the rest.)"
    assert result["metadata"] == {"count": 100, "truncated": True}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"path": "missing"}, r"missing does not exist\."),
        ({"path": "README.md"}, r"README\.md is not a directory\."),
        ({"ignore": "*.md"}, r"`ignore` must be a list of non-empty glob strings.*got '\*\.md'"),
        ({"ignore": [""]}, r"`ignore` must be a list of non-empty glob strings"),
    ],
)
def test_list_rejects(root: Path, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolFailure, match=message):
        call(list_directory, args, root)


@pytest.mark.parametrize(
    ("files", "tree"),
    [
        ([], ""),
        (["b.txt", "a.txt"], "  a.txt\n  b.txt\n"),
        (["z/y/x.txt", "a.txt"], "  z/\n    y/\n      x.txt\n  a.txt\n"),
        (["b/1", "a/2", "c"], "  a/\n    2\n  b/\n    1\n  c\n"),
    ],
)
def test_render_tree(files: list[str], tree: str) -> None:
    assert render_tree(files) == tree
