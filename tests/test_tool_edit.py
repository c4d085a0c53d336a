"""The `edit` tool: read-first rule, replacers through the handler, CRLF, and hostile targets."""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import tool_helpers

from toolrt.builtin.edit import MAX_EDIT_BYTES, edit
from toolrt.builtin.read import read
from toolrt.builtin.replacers import MULTIPLE_MATCHES, NOT_FOUND, SAME_STRINGS
from toolrt.errors import DeniedError, ToolFailure
from toolrt.permissions.model import PermissionRequest

REPO = Path(__file__).resolve().parent.parent


make_ctx = functools.partial(tool_helpers.make_ctx, tool="edit")
call = tool_helpers.call


def read_then_edit(root: Path, name: str, data: bytes, **args: Any) -> dict[str, Any]:
    (root / name).write_bytes(data)
    ctx = make_ctx(root)
    call(read, {"filePath": name}, ctx)
    return call(edit, {"filePath": name, **args}, ctx)


@pytest.mark.parametrize(
    ("before", "args", "after"),
    [
        (b"a = 1\nb = 2\n", {"oldString": "b = 2", "newString": "b = 3"}, b"a = 1\nb = 3\n"),
        (b"x\ny\nx\n", {"oldString": "x", "newString": "z", "replaceAll": True}, b"z\ny\nz\n"),
        (
            b"def f():\n    return 1\n",
            {"oldString": "def f():\nreturn 1", "newString": "def f():\n    return 2"},
            b"def f():\n    return 2\n",
        ),
        (b"a\r\nb\r\nc\r\n", {"oldString": "a\nb", "newString": "x\ny"}, b"x\r\ny\r\nc\r\n"),
        (b"a\r\nb\r\nc\r\n", {"oldString": "b\r\n", "newString": "B\n"}, b"a\r\nB\r\nc\r\n"),
        (b"caf\xe9\nline2\n", {"oldString": "line2", "newString": "LINE2"}, b"caf\xe9\nLINE2\n"),
    ],
)
def test_edit_applies_the_replacement(root: Path, before: bytes, args: dict[str, Any], after: bytes) -> None:
    result = read_then_edit(root, "f.txt", before, **args)
    assert (root / "f.txt").read_bytes() == after
    assert result["output"] == "Edit applied successfully."
    assert result["title"] == "f.txt"
    assert result["metadata"]["filepath"] == str(root / "f.txt")


def test_metadata_diff_is_unified_and_uses_lf(root: Path) -> None:
    diff = read_then_edit(root, "f.txt", b"one\r\ntwo\r\n", oldString="two", newString="2")["metadata"]["diff"]
    path = root / "f.txt"
    assert diff == (f"Index: {path}\n{'=' * 67}\n--- {path}\n+++ {path}\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n")


@pytest.mark.parametrize(
    ("before", "args", "message"),
    [
        (b"a\nb\na\n", {"oldString": "a", "newString": "c"}, MULTIPLE_MATCHES),
        (b"a\nb\n", {"oldString": "zzz", "newString": "c"}, NOT_FOUND),
        (b"a\nb\n", {"oldString": "a", "newString": "a"}, SAME_STRINGS),
    ],
)
def test_replace_errors_reach_the_model_unchanged(
    root: Path, before: bytes, args: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolFailure, match=f"^{re.escape(message)}$"):
        read_then_edit(root, "f.txt", before, **args)
    assert (root / "f.txt").read_bytes() == before


def test_an_unread_file_is_refused(root: Path) -> None:
    (root / "f.txt").write_text("a\n")
    message = f"You must read the file {root / 'f.txt'} before overwriting it. Use the read tool first."
    with pytest.raises(ToolFailure, match=f"^{re.escape(message)}$"):
        call(edit, {"filePath": "f.txt", "oldString": "a", "newString": "b"}, make_ctx(root))
    assert (root / "f.txt").read_text() == "a\n"


def test_a_file_changed_since_it_was_read_is_refused(root: Path) -> None:
    target = root / "f.txt"
    target.write_text("a\n")
    ctx = make_ctx(root)
    call(read, {"filePath": "f.txt"}, ctx)
    target.write_text("a\nb\n")
    with pytest.raises(
        ToolFailure, match=r"has been modified since it was last read\.\nLast modification: .*Z\n"
    ) as info:
        call(edit, {"filePath": "f.txt", "oldString": "a", "newString": "c"}, ctx)
    assert str(info.value).endswith("\n\nPlease read the file again before modifying it.")
    assert target.read_text() == "a\nb\n"


def test_a_change_within_the_same_mtime_is_still_caught(root: Path) -> None:
    target = root / "f.txt"
    target.write_text("aaaa\n")
    ctx = make_ctx(root)
    call(read, {"filePath": "f.txt"}, ctx)
    stamp = os.stat(target)
    target.write_text("bbbbbbbb\n")
    os.utime(target, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    with pytest.raises(ToolFailure, match="has been modified since it was last read"):
        call(edit, {"filePath": "f.txt", "oldString": "b", "newString": "c"}, ctx)


def test_successive_edits_need_only_one_read(root: Path) -> None:
    (root / "f.txt").write_text("a\nb\n")
    ctx = make_ctx(root)
    call(read, {"filePath": "f.txt"}, ctx)
    call(edit, {"filePath": "f.txt", "oldString": "a", "newString": "A"}, ctx)
    call(edit, {"filePath": "f.txt", "oldString": "b", "newString": "B"}, ctx)
    assert (root / "f.txt").read_text() == "A\nB\n"


def test_read_stamps_survive_a_json_round_trip_of_session_state(root: Path) -> None:
    # A host that persists session state between processes (`toolrt call --session`) stores JSON.
    (root / "f.txt").write_text("a\n")
    first = make_ctx(root)
    call(read, {"filePath": "f.txt"}, first)
    second = make_ctx(root)
    second.session_state.update(json.loads(json.dumps(first.session_state)))
    call(edit, {"filePath": "f.txt", "oldString": "a", "newString": "b"}, second)
    assert (root / "f.txt").read_text() == "b\n"


def test_empty_old_string_creates_the_file_and_its_directories(root: Path) -> None:
    ctx = make_ctx(root)
    result = call(edit, {"filePath": "new/dir/f.py", "oldString": "", "newString": "VALUE = 1\n"}, ctx)
    assert (root / "new" / "dir" / "f.py").read_text() == "VALUE = 1\n"
    assert "+VALUE = 1" in result["metadata"]["diff"]
    call(edit, {"filePath": "new/dir/f.py", "oldString": "1", "newString": "2"}, ctx)
    assert (root / "new" / "dir" / "f.py").read_text() == "VALUE = 2\n"


def test_empty_old_string_over_an_unread_file_is_refused(root: Path) -> None:
    (root / "f.txt").write_text("precious\n")
    with pytest.raises(ToolFailure, match="^You must read the file"):
        call(edit, {"filePath": "f.txt", "oldString": "", "newString": "gone"}, make_ctx(root))
    assert (root / "f.txt").read_text() == "precious\n"


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (lambda root: None, "^File {path} not found$"),
        (lambda root: (root / "t").mkdir(), "^Path is a directory, not a file: {path}$"),
        (lambda root: os.mkfifo(root / "t"), r"^Cannot edit {path}: it is a FIFO \(named pipe\), not a regular file\."),
    ],
)
def test_targets_that_are_not_files(root: Path, prepare: Callable[[Path], object], message: str) -> None:
    prepare(root)
    with pytest.raises(ToolFailure, match=message.format(path=re.escape(str(root / "t")))):
        call(edit, {"filePath": "t", "oldString": "a", "newString": "b"}, make_ctx(root))


def test_an_empty_file_path_is_refused(root: Path) -> None:
    with pytest.raises(ToolFailure, match="^filePath is required$"):
        call(edit, {"filePath": "", "oldString": "a", "newString": "b"}, make_ctx(root))


def test_a_huge_file_is_refused_after_reading(root: Path) -> None:
    big = root / "big.txt"
    with big.open("wb") as handle:
        handle.write(b"needle\n" + b"filler text\n" * (MAX_EDIT_BYTES // 12 + 1))
    ctx = make_ctx(root)
    call(read, {"filePath": "big.txt", "limit": 1}, ctx)
    with pytest.raises(ToolFailure, match=r"over the 10485760 byte limit of the edit tool\. Use bash"):
        call(edit, {"filePath": "big.txt", "oldString": "needle", "newString": "pin"}, ctx)


def test_dotdot_outside_the_root_asks_and_a_denial_changes_nothing(root: Path) -> None:
    outside = root.parent / "outside.txt"
    outside.write_text("a\n")
    asked: list[PermissionRequest] = []
    with pytest.raises(DeniedError, match="external_directory denied"):
        call(
            edit,
            {"filePath": "../outside.txt", "oldString": "", "newString": "pwned"},
            make_ctx(root, asked, deny="external_directory"),
        )
    assert [request.patterns for request in asked] == [(f"{root.parent}/*",)]
    assert outside.read_text() == "a\n"


def test_a_symlink_out_of_the_root_asks_for_the_target_directory(root: Path) -> None:
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (outside / "real.txt").write_text("a\n")
    (root / "link.txt").symlink_to(outside / "real.txt")
    asked: list[PermissionRequest] = []
    ctx = make_ctx(root, asked)
    call(read, {"filePath": "link.txt"}, ctx)
    call(edit, {"filePath": "link.txt", "oldString": "a", "newString": "b"}, ctx)
    assert (outside / "real.txt").read_text() == "b\n"
    assert (root / "link.txt").is_symlink()
    # external_directory for the target's directory; `read` asks for the target itself too.
    assert {request.patterns for request in asked} == {(f"{outside}/*",), (str(outside / "real.txt"),)}
    with pytest.raises(DeniedError):
        call(
            edit,
            {"filePath": "link.txt", "oldString": "b", "newString": "c"},
            make_ctx(root, deny="external_directory"),
        )
    assert (outside / "real.txt").read_text() == "b\n"


def test_a_lone_surrogate_cannot_be_written(root: Path) -> None:
    with pytest.raises(ToolFailure, match=r"a lone surrogate that UTF-8 cannot encode"):
        read_then_edit(root, "f.txt", b"a\n", oldString="a", newString="\ud800")
    assert (root / "f.txt").read_bytes() == b"a\n"


def load_definition() -> dict[str, Any]:
    return tool_helpers.load_definition("edit")


def test_yaml_handler_resolves_and_examples_validate() -> None:
    definition = tool_helpers.check_definition("edit", edit)
    assert definition["permission"] == {
        "key": "edit",
        "patterns": ["{{ filePath | relpath }}", "{{ filePath | realrelpath }}"],
        "always": ["*"],
        "paths": ["filePath"],
        "preview": "toolrt.builtin.preview:edit_diff",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"oldString": "a", "newString": "b"}, "'filePath' is a required property"),
        ({"filePath": "f", "newString": "b"}, "'oldString' is a required property"),
        ({"filePath": "", "oldString": "a", "newString": "b"}, "should be non-empty"),
        ({"filePath": "f", "oldString": None, "newString": "b"}, "None is not of type 'string'"),
        (
            {"filePath": "f", "oldString": "a", "newString": "b", "replaceAll": "true"},
            "'true' is not of type 'boolean'",
        ),
    ],
)
def test_schema_rejects_bad_arguments(args: dict[str, Any], message: str) -> None:
    with pytest.raises(jsonschema.ValidationError, match=re.escape(message)):
        jsonschema.validate(args, load_definition()["parameters"])
