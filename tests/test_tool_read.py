"""The `read` tool: OpenCode's read tests ported, plus hostile paths and files that must never hang."""

from __future__ import annotations

import base64
import functools
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import tool_helpers
import yaml

from toolrt.builtin import filetime
from toolrt.builtin.read import MAX_ATTACHMENT_BYTES, MAX_BYTES, read
from toolrt.errors import DeniedError, ToolFailure
from toolrt.permissions.model import PermissionRequest
from toolrt.truncate import tool_output_dir

REPO = Path(__file__).resolve().parent.parent
PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


make_ctx = functools.partial(tool_helpers.make_ctx, tool="read")
call = tool_helpers.call


def lines_of(count: int) -> str:
    return "\n".join(f"line{i}" for i in range(count))


def past(total: int, offset: int) -> str:
    return (
        f"<file>\n\n\n(The file has {total} lines: offset {offset} is past its end. "
        "Use a smaller offset, or omit it to read from the start)\n</file>"
    )


FIND_IT = "\n\nUse the glob tool to find the file by name (e.g. **/NAME*), then read the path it gives."


# --- text files, windows and notes -------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "args", "expected"),
    [
        ("hello world", {}, "<file>\n00001| hello world\n\n(End of file - total 1 lines)\n</file>"),
        ("a\nb\n", {}, "<file>\n00001| a\n00002| b\n\n(End of file - total 2 lines)\n</file>"),
        ("a\r\nb\r\n", {}, "<file>\n00001| a\n00002| b\n\n(End of file - total 2 lines)\n</file>"),
        ("", {}, "<file>\n\n\n(End of file - total 0 lines)\n</file>"),
        ("\ufeffbom\n", {}, "<file>\n00001| bom\n\n(End of file - total 1 lines)\n</file>"),
        (
            lines_of(20),
            {"offset": 10, "limit": 5},
            "<file>\n00011| line10\n00012| line11\n00013| line12\n00014| line13\n00015| line14\n\n"
            "(File has more lines. Use 'offset' parameter to read beyond line 15)\n</file>",
        ),
        (lines_of(3), {"offset": 3}, past(3, 3)),
        ("a\nb", {"offset": 1}, "<file>\n00002| b\n\n(End of file - total 2 lines)\n</file>"),
        ("a\nb", {"offset": 2}, past(2, 2)),
        ("a\nb\n", {"offset": 2}, past(2, 2)),
        ("a\nb\n", {"offset": 7}, past(2, 7)),
        (lines_of(3), {"offset": 9}, past(3, 9)),
        (
            lines_of(3),
            {"offset": 1, "limit": 2},
            "<file>\n00002| line1\n00003| line2\n\n(End of file - total 3 lines)\n</file>",
        ),
    ],
)
def test_read_window_and_end_note(root: Path, content: str, args: dict[str, Any], expected: str) -> None:
    (root / "f.txt").write_bytes(content.encode("utf-8"))
    result = call(read, {"filePath": "f.txt", **args}, make_ctx(root))
    assert result["output"] == expected
    assert result["title"] == "f.txt"


def test_limit_sets_truncated_and_more_lines_note(root: Path) -> None:
    (root / "many.txt").write_text(lines_of(100))
    result = call(read, {"filePath": str(root / "many.txt"), "limit": 10}, make_ctx(root))
    assert result["metadata"]["truncated"] is True
    assert "File has more lines" in result["output"]
    assert "line9" in result["output"]
    assert "line10" not in result["output"]


def test_small_file_is_not_truncated(root: Path) -> None:
    (root / "small.txt").write_text("hello world")
    result = call(read, {"filePath": "small.txt"}, make_ctx(root))
    assert result["metadata"] == {"preview": "hello world", "truncated": False}


def test_preview_is_the_first_twenty_lines(root: Path) -> None:
    (root / "many.txt").write_text(lines_of(50))
    result = call(read, {"filePath": "many.txt"}, make_ctx(root))
    assert result["metadata"]["preview"] == lines_of(20)


def test_long_lines_are_cut_at_2000_characters(root: Path) -> None:
    (root / "long.txt").write_text("é" * 3000 + "\nshort")
    output = call(read, {"filePath": "long.txt"}, make_ctx(root))["output"]
    assert f"00001| {'é' * 2000}...\n00002| short" in output
    assert "(End of file - total 2 lines)" in output


def test_output_stops_at_the_byte_cap(root: Path) -> None:
    line = "x" * 999
    (root / "big.txt").write_text("\n".join([line] * 200))
    result = call(read, {"filePath": "big.txt"}, make_ctx(root))
    shown = re.findall(r"^\d{5}\| ", result["output"], flags=re.MULTILINE)
    # 51 lines of 999 bytes plus 50 separators fit in 51200 bytes; the 52nd would not.
    assert len(shown) == 51
    assert result["output"].endswith(
        f"(Output truncated at {MAX_BYTES} bytes. Use 'offset' parameter to read beyond line 51)\n</file>"
    )
    assert result["metadata"]["truncated"] is True


def test_non_utf8_bytes_are_replaced(root: Path) -> None:
    (root / "latin1.txt").write_bytes(b"caf\xe9 ol\xe9\n")
    output = call(read, {"filePath": "latin1.txt"}, make_ctx(root))["output"]
    assert "00001| caf\ufffd ol\ufffd" in output


def test_a_text_read_is_recorded_for_edit_and_write(root: Path) -> None:
    target = root / "f.txt"
    target.write_text("x")
    ctx = make_ctx(root)
    with pytest.raises(ToolFailure, match="You must read the file"):
        filetime.assert_fresh(ctx.session_state, target, str(target))
    call(read, {"filePath": "f.txt"}, ctx)
    filetime.assert_fresh(ctx.session_state, target, str(target))


# --- binary files, images, PDFs ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("archive.zip", b"just text, but the extension says binary"),
        ("module.pyc", b"text"),
        ("nul.txt", b"abc\x00def"),
        ("control.txt", bytes([1, 2, 3, 4, 5, 6, 7, 8, 14, 15]) * 40 + b"mostly control bytes"),
    ],
)
def test_binary_files_are_refused(root: Path, name: str, data: bytes) -> None:
    (root / name).write_bytes(data)
    with pytest.raises(ToolFailure, match=f"^Cannot read binary file: {re.escape(str(root / name))}\n\nThe read tool"):
        call(read, {"filePath": name}, make_ctx(root))


def test_a_few_control_bytes_do_not_make_a_file_binary(root: Path) -> None:
    (root / "ansi.log").write_bytes(b"\x1b[31mred\x1b[0m plain text that dominates the sample\n")
    assert "red" in call(read, {"filePath": "ansi.log"}, make_ctx(root))["output"]


@pytest.mark.parametrize(
    ("name", "data", "mime", "message"),
    [
        ("image.png", PNG_1X1, "image/png", "Image read successfully"),
        ("photo.JPG", b"\xff\xd8\xff\xe0fake", "image/jpeg", "Image read successfully"),
        ("paper.pdf", b"%PDF-1.4 fake", "application/pdf", "PDF read successfully"),
    ],
)
def test_images_and_pdfs_are_attachments(root: Path, name: str, data: bytes, mime: str, message: str) -> None:
    (root / name).write_bytes(data)
    result = call(read, {"filePath": name}, make_ctx(root))
    assert result["output"] == message
    assert result["metadata"] == {"preview": message, "truncated": False}
    assert result["attachments"] == [
        {
            "type": "file",
            "mime": mime,
            "url": f"data:{mime};base64,{base64.b64encode(data).decode()}",
            "filename": name,
        }
    ]


def test_an_oversized_image_is_refused(root: Path) -> None:
    with (root / "huge.png").open("wb") as handle:
        handle.truncate(MAX_ATTACHMENT_BYTES + 1)
    with pytest.raises(ToolFailure, match=r"^Cannot attach .*huge\.png: it is 10485761 bytes, over the"):
        call(read, {"filePath": "huge.png"}, make_ctx(root))


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("schema.fbs", "namespace MyGame;\n\ntable Monster {\n  pos:Vec3;\n}\n"),
        ("icon.svg", '<svg xmlns="http://www.w3.org/2000/svg"></svg>\n'),
    ],
)
def test_text_formats_with_image_like_types_are_read_as_text(root: Path, name: str, content: str) -> None:
    (root / name).write_text(content)
    result = call(read, {"filePath": name}, make_ctx(root))
    assert "attachments" not in result
    assert content.splitlines()[0] in result["output"]


# --- directories and missing files -------------------------------------------------------------


def test_a_directory_lists_sorted_entries(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "b.py").write_text("")
    (root / "pkg" / "a.py").write_text("")
    (root / "pkg" / "sub").mkdir()
    result = call(read, {"filePath": "pkg"}, make_ctx(root))
    assert result["output"] == "<directory>\na.py\nb.py\nsub/\n\n(End of directory - total 3 entries)\n</directory>"
    assert result["metadata"]["truncated"] is False


def test_a_directory_listing_honours_offset_and_limit(root: Path) -> None:
    for index in range(5):
        (root / f"f{index}").write_text("")
    result = call(read, {"filePath": ".", "offset": 1, "limit": 2}, make_ctx(root))
    assert result["output"] == (
        "<directory>\nf1\nf2\n\n"
        "(Directory has more entries. Use 'offset' parameter to read beyond entry 3)\n</directory>"
    )
    assert result["metadata"]["truncated"] is True


def test_missing_file_suggests_similar_names(root: Path) -> None:
    (root / "config.yaml").write_text("")
    (root / "config.yaml.bak").write_text("")
    (root / "unrelated.txt").write_text("")
    expected = (
        f"File not found: {root / 'config'}\n\nDid you mean one of these?\n"
        f"{root / 'config.yaml'}\n{root / 'config.yaml.bak'}{FIND_IT}"
    )
    with pytest.raises(ToolFailure, match=f"^{re.escape(expected)}$"):
        call(read, {"filePath": "config"}, make_ctx(root))


@pytest.mark.parametrize("name", ["nothing-like-it.txt", "no/such/dir/file.txt", "config.yaml/child"])
def test_missing_file_without_suggestions(root: Path, name: str) -> None:
    (root / "config.yaml").write_text("")
    with pytest.raises(ToolFailure, match=f"^{re.escape(f'File not found: {root / name}{FIND_IT}')}$"):
        call(read, {"filePath": name}, make_ctx(root))


def test_env_files_are_a_permission_matter_not_a_read_matter(root: Path) -> None:
    # `.env` protection is the `read` rule on the absolute path (dispatch, permissions.yaml); the
    # handler itself reads the file and asks nothing more inside the root.
    (root / ".env").write_text("SECRET=1\n")
    asked: list[PermissionRequest] = []
    result = call(read, {"filePath": ".env"}, make_ctx(root, asked))
    assert "00001| SECRET=1" in result["output"]
    assert asked == []
    definition = yaml.safe_load((REPO / "tools.d" / "read.yaml").read_text())
    assert definition["permission"]["key"] == "read"
    assert definition["permission"]["patterns"] == ["{{ filePath | abspath }}", "{{ filePath | realpath }}"]


# --- hostile paths and files ----------------------------------------------------------------------


def test_outside_paths_ask_external_directory(root: Path) -> None:
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret data")
    for file_path in (str(outside / "secret.txt"), "../outside/secret.txt"):
        asked: list[PermissionRequest] = []
        result = call(read, {"filePath": file_path}, make_ctx(root, asked))
        assert "secret data" in result["output"]
        assert asked == [
            PermissionRequest(
                "external_directory",
                (f"{outside}/*",),
                (f"{outside}/*",),
                {"filepath": str(outside / "secret.txt"), "parentDir": str(outside)},
            )
        ]


def test_inside_paths_ask_nothing(root: Path) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "in.txt").write_text("nested content")
    asked: list[PermissionRequest] = []
    assert "nested content" in call(read, {"filePath": str(root / "sub" / "in.txt")}, make_ctx(root, asked))["output"]
    assert asked == []


def test_saved_truncated_output_reads_without_asking(root: Path) -> None:
    # Dispatch saves cut output under <data_dir>/tool-output/<project key> and tells the model to read it back.
    data_dir = root.parent / "data"
    saved = tool_output_dir(data_dir, root) / "tool_1"
    saved.parent.mkdir(parents=True)
    saved.write_text("full output")
    asked: list[PermissionRequest] = []
    ctx = make_ctx(root, asked, data_dir=data_dir)
    assert "full output" in call(read, {"filePath": str(saved)}, ctx)["output"]
    assert asked == []


def test_denied_outside_read_raises_and_reads_nothing(root: Path) -> None:
    outside = root.parent / "outside.txt"
    outside.write_text("secret")
    with pytest.raises(DeniedError, match="external_directory denied"):
        call(read, {"filePath": "../outside.txt"}, make_ctx(root, deny="external_directory"))


def test_a_symlink_out_of_the_root_asks_for_its_target(root: Path) -> None:
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret data")
    (root / "innocent.txt").symlink_to(outside / "secret.txt")
    asked: list[PermissionRequest] = []
    assert "secret data" in call(read, {"filePath": "innocent.txt"}, make_ctx(root, asked))["output"]
    # external_directory for the target's directory, then `read` for the target itself (asked before
    # the call by dispatch; the handler asks again at open time, in case the symlink changed since).
    assert [request.patterns for request in asked] == [(f"{outside}/*",), (str(outside / "secret.txt"),)]
    with pytest.raises(DeniedError, match="external_directory denied"):
        call(read, {"filePath": "innocent.txt"}, make_ctx(root, deny="external_directory"))


def test_dev_zero_asks_then_is_refused_without_hanging(root: Path) -> None:
    asked: list[PermissionRequest] = []
    with pytest.raises(ToolFailure, match=r"^Cannot read /dev/zero: it is a character device, not a regular file\."):
        call(read, {"filePath": "/dev/zero"}, make_ctx(root, asked))
    assert [request.patterns for request in asked] == [("/dev/*",)]


def test_a_fifo_is_refused_without_hanging(root: Path) -> None:
    os.mkfifo(root / "pipe")
    with pytest.raises(ToolFailure, match=r"^Cannot read .*pipe: it is a FIFO \(named pipe\), not a regular file\."):
        call(read, {"filePath": "pipe"}, make_ctx(root))


def test_a_50_mb_file_is_streamed_not_loaded(root: Path) -> None:
    big = root / "big.log"
    with big.open("wb") as handle:
        chunk = b"".join(b"%09d some log text\n" % i for i in range(100_000))
        while handle.tell() < 50 * 1024 * 1024:
            handle.write(chunk)
    result = call(read, {"filePath": "big.log", "offset": 1_000_000, "limit": 3}, make_ctx(root))
    assert result["output"].startswith("<file>\n1000001| 000000000 some log text\n")
    assert "(File has more lines. Use 'offset' parameter to read beyond line 1000003)" in result["output"]


def test_a_50_mb_single_line_is_cut_not_loaded(root: Path) -> None:
    with (root / "one-line.min.js").open("wb") as handle:
        for _ in range(50):
            handle.write(b"x" * (1024 * 1024))
    output = call(read, {"filePath": "one-line.min.js"}, make_ctx(root))["output"]
    assert output == f"<file>\n00001| {'x' * 2000}...\n\n(End of file - total 1 lines)\n</file>"


def test_an_unreadable_file_says_so(root: Path) -> None:
    locked = root / "locked.txt"
    locked.write_text("secret")
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as root (or with CAP_DAC_OVERRIDE): mode 000 does not stop reads")
        with pytest.raises(ToolFailure, match=r"^Cannot read .*locked\.txt: permission denied\."):
            call(read, {"filePath": "locked.txt"}, make_ctx(root))
    finally:
        locked.chmod(0o644)


def test_a_nul_byte_in_the_path_is_an_error_not_a_crash(root: Path) -> None:
    with pytest.raises(ToolFailure, match=r"^Invalid path '.*a\\x00b': it contains a NUL byte\."):
        call(read, {"filePath": "a\x00b"}, make_ctx(root))


# --- the YAML definition ---------------------------------------------------------------------


def load_definition() -> dict[str, Any]:
    return tool_helpers.load_definition("read")


def test_yaml_handler_resolves_and_examples_validate() -> None:
    tool_helpers.check_definition("read", read)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "'filePath' is a required property"),
        ({"filePath": ""}, "should be non-empty"),
        ({"filePath": 3}, "3 is not of type 'string'"),
        ({"filePath": "a", "offset": -1}, "-1 is less than the minimum of 0"),
        ({"filePath": "a", "offset": "10"}, "'10' is not of type 'integer'"),
        ({"filePath": "a", "limit": 0}, "0 is less than the minimum of 1"),
        ({"filePath": "a", "path": "b"}, "Additional properties are not allowed"),
    ],
)
def test_schema_rejects_bad_arguments(args: dict[str, Any], message: str) -> None:
    with pytest.raises(jsonschema.ValidationError, match=re.escape(message)):
        jsonschema.validate(args, load_definition()["parameters"])
