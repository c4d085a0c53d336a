"""The `write` tool: create, overwrite after a read, diff metadata, and hostile targets."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import tool_helpers

from toolrt.builtin.read import read
from toolrt.builtin.write import write
from toolrt.errors import DeniedError, ToolFailure
from toolrt.permissions.model import PermissionRequest

REPO = Path(__file__).resolve().parent.parent


make_ctx = functools.partial(tool_helpers.make_ctx, tool="write")
call = tool_helpers.call


def test_write_creates_the_file_and_its_directories(root: Path) -> None:
    result = call(write, {"filePath": "a/b/new.py", "content": "print('hi')\n"}, make_ctx(root))
    target = root / "a" / "b" / "new.py"
    assert target.read_text() == "print('hi')\n"
    assert result["output"] == "Wrote file successfully."
    assert result["title"] == "a/b/new.py"
    assert result["metadata"]["exists"] is False
    assert result["metadata"]["filepath"] == str(target)
    assert result["metadata"]["diff"] == (
        f"Index: {target}\n{'=' * 67}\n--- {target}\n+++ {target}\n@@ -0,0 +1 @@\n+print('hi')\n"
    )


@pytest.mark.parametrize("content", ["", "no newline at end", "crlf\r\nkept\r\n", "ünïcödé ✓\n"])
def test_content_is_written_byte_for_byte(root: Path, content: str) -> None:
    call(write, {"filePath": "f.txt", "content": content}, make_ctx(root))
    assert (root / "f.txt").read_bytes() == content.encode("utf-8")


def test_overwriting_needs_a_read_first(root: Path) -> None:
    target = root / "f.txt"
    target.write_text("old\n")
    ctx = make_ctx(root)
    message = f"You must read the file {target} before overwriting it. Use the read tool first."
    with pytest.raises(ToolFailure, match=f"^{re.escape(message)}$"):
        call(write, {"filePath": "f.txt", "content": "new\n"}, ctx)
    assert target.read_text() == "old\n"
    call(read, {"filePath": "f.txt"}, ctx)
    result = call(write, {"filePath": "f.txt", "content": "new\n"}, ctx)
    assert target.read_text() == "new\n"
    assert result["metadata"]["exists"] is True
    assert "-old\n+new\n" in result["metadata"]["diff"]


def test_a_file_changed_since_it_was_read_is_refused(root: Path) -> None:
    target = root / "f.txt"
    target.write_text("old\n")
    ctx = make_ctx(root)
    call(read, {"filePath": "f.txt"}, ctx)
    target.write_text("someone else\n")
    with pytest.raises(ToolFailure, match="has been modified since it was last read"):
        call(write, {"filePath": "f.txt", "content": "mine\n"}, ctx)
    assert target.read_text() == "someone else\n"


def test_a_file_the_session_wrote_can_be_written_again(root: Path) -> None:
    ctx = make_ctx(root)
    call(write, {"filePath": "f.txt", "content": "1\n"}, ctx)
    call(write, {"filePath": "f.txt", "content": "2\n"}, ctx)
    assert (root / "f.txt").read_text() == "2\n"


def test_sessions_do_not_share_read_stamps(root: Path) -> None:
    (root / "f.txt").write_text("x\n")
    call(read, {"filePath": "f.txt"}, make_ctx(root))
    with pytest.raises(ToolFailure, match="^You must read the file"):
        call(write, {"filePath": "f.txt", "content": "y\n"}, make_ctx(root))


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (lambda root: (root / "t").mkdir(), "^Path is a directory, not a file: {path}$"),
        (
            lambda root: os.mkfifo(root / "t"),
            r"^Cannot write {path}: it is a FIFO \(named pipe\), not a regular file\.",
        ),
        (
            lambda root: (root / "t").write_text("file"),
            "^Cannot create the directories for {path}/x: a parent path exists",
        ),
    ],
)
def test_targets_that_cannot_be_written(root: Path, prepare: Callable[[Path], object], message: str) -> None:
    prepare(root)
    name = "t/x" if "directories" in message else "t"
    with pytest.raises(ToolFailure, match=message.format(path=re.escape(str(root / "t")))):
        call(write, {"filePath": name, "content": "data"}, make_ctx(root))


def test_dev_null_is_refused_after_asking(root: Path) -> None:
    asked: list[PermissionRequest] = []
    with pytest.raises(ToolFailure, match=r"^Cannot write /dev/null: it is a character device"):
        call(write, {"filePath": "/dev/null", "content": "x"}, make_ctx(root, asked))
    assert [request.patterns for request in asked] == [("/dev/*",)]


def test_dotdot_outside_the_root_asks_and_a_denial_writes_nothing(root: Path) -> None:
    asked: list[PermissionRequest] = []
    with pytest.raises(DeniedError, match="external_directory denied"):
        call(
            write,
            {"filePath": "../../escape.txt", "content": "x"},
            make_ctx(root, asked, deny="external_directory"),
        )
    assert [request.permission for request in asked] == ["external_directory"]
    assert not (root.parent.parent / "escape.txt").exists()


def test_a_symlinked_directory_out_of_the_root_asks(root: Path) -> None:
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (root / "linked").symlink_to(outside, target_is_directory=True)
    asked: list[PermissionRequest] = []
    call(write, {"filePath": "linked/new.txt", "content": "x"}, make_ctx(root, asked))
    assert (outside / "new.txt").read_text() == "x"
    assert [request.patterns for request in asked] == [(f"{outside}/*",)]
    with pytest.raises(DeniedError):
        call(write, {"filePath": "linked/other.txt", "content": "x"}, make_ctx(root, deny="external_directory"))
    assert not (outside / "other.txt").exists()


def test_a_lone_surrogate_is_refused(root: Path) -> None:
    with pytest.raises(ToolFailure, match="a lone surrogate that UTF-8 cannot encode"):
        call(write, {"filePath": "f.txt", "content": "bad \udfff"}, make_ctx(root))
    assert not (root / "f.txt").exists()


def load_definition() -> dict[str, Any]:
    return tool_helpers.load_definition("write")


def test_yaml_handler_resolves_and_examples_validate() -> None:
    definition = tool_helpers.check_definition("write", write)
    assert definition["permission"]["key"] == "edit"
    assert definition["permission"]["patterns"] == ["{{ filePath | relpath }}", "{{ filePath | realrelpath }}"]
    assert definition["permission"]["preview"] == "toolrt.builtin.preview:write_diff"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"content": "x"}, "'filePath' is a required property"),
        ({"filePath": "f"}, "'content' is a required property"),
        ({"filePath": "", "content": "x"}, "should be non-empty"),
        ({"filePath": "f", "content": ["x"]}, "['x'] is not of type 'string'"),
    ],
)
def test_schema_rejects_bad_arguments(args: dict[str, Any], message: str) -> None:
    with pytest.raises(jsonschema.ValidationError, match=re.escape(message)):
        jsonschema.validate(args, load_definition()["parameters"])
