from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from toolrt.truncate import (
    MAX_BYTES,
    MAX_LINES,
    cleanup_outputs,
    new_output_path,
    truncate_output,
)

SEARCH_HINT = "Use Grep to search the full content or Read with offset/limit to view specific sections."
DELEGATE_HINT = (
    "Use the Task tool to have explore agent process this file with Grep and Read (with offset/limit). "
    "Do NOT read the full file yourself - delegate to save context."
)


def test_defaults_are_opencodes() -> None:
    assert (MAX_LINES, MAX_BYTES) == (2000, 51200)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello\n",
        "\n".join(f"line {i}" for i in range(2000)),  # exactly 2000 lines
        "x" * 51200,  # exactly the byte limit
        "é" * 25600,  # 51200 bytes in two-byte characters
    ],
)
def test_within_limits_is_unchanged_and_writes_nothing(text: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = truncate_output(text, output_dir=out)
    assert (result.content, result.truncated, result.output_path) == (text, False, None)
    assert not out.exists()


def _expected(preview: str, removed: int, unit: str, path: Path | None, hint: str, direction: str) -> str:
    full_hint = f"The tool call succeeded but the output was truncated. Full output saved to: {path}\n{hint}"
    marker = f"...{removed} {unit} truncated..."
    if direction == "head":
        return f"{preview}\n\n{marker}\n\n{full_hint}"
    return f"{marker}\n\n{full_hint}\n\n{preview}"


@pytest.mark.parametrize(
    ("lines", "kwargs", "preview_lines", "removed", "unit"),
    [
        # line limit, head: the first 2000 of 2001 lines, one line removed
        (2001, {}, range(2000), 1, "lines"),
        # line limit, tail: the last 2000
        (2001, {"direction": "tail"}, range(1, 2001), 1, "lines"),
        # a custom line limit
        (10, {"max_lines": 3}, range(3), 7, "lines"),
        (10, {"max_lines": 3, "direction": "tail"}, range(7, 10), 7, "lines"),
    ],
)
def test_line_limit(
    lines: int, kwargs: dict[str, object], preview_lines: range, removed: int, unit: str, tmp_path: Path
) -> None:
    text = "\n".join(f"L{i}" for i in range(lines))
    result = truncate_output(text, output_dir=tmp_path, **kwargs)  # type: ignore[arg-type]
    direction = str(kwargs.get("direction", "head"))
    preview = "\n".join(f"L{i}" for i in preview_lines)
    assert result.truncated
    assert result.content == _expected(preview, removed, unit, result.output_path, SEARCH_HINT, direction)


@pytest.mark.parametrize("direction", ["head", "tail"])
def test_byte_limit_counts_one_byte_per_separator(direction: str, tmp_path: Path) -> None:
    # Ten 9-byte lines: the 3-line budget is 9 + 10 + 10 = 29 bytes; a 4th line would need 39.
    lines = [f"{i}" * 9 for i in range(10)]
    text = "\n".join(lines)
    result = truncate_output(text, output_dir=tmp_path, max_bytes=38, direction=direction)  # type: ignore[arg-type]
    kept = lines[:3] if direction == "head" else lines[-3:]
    removed = len(text.encode()) - 29
    assert result.content == _expected("\n".join(kept), removed, "bytes", result.output_path, SEARCH_HINT, direction)


def test_byte_limit_counts_utf8_bytes_not_characters(tmp_path: Path) -> None:
    # 3-byte characters: 100 characters per line = 300 bytes; 1000 bytes keep 3 lines (300+301+301).
    lines = ["€" * 100] * 5
    result = truncate_output("\n".join(lines), output_dir=tmp_path, max_bytes=1000)
    assert result.content.startswith("\n".join(lines[:3]) + "\n\n...")
    assert f"...{5 * 300 + 4 - 902} bytes truncated..." in result.content


def test_a_single_line_over_the_byte_limit_keeps_nothing(tmp_path: Path) -> None:
    result = truncate_output("y" * 60000, output_dir=tmp_path)
    assert result.content.startswith("\n\n...60000 bytes truncated...\n\n")


@pytest.mark.parametrize(("delegate", "hint"), [(False, SEARCH_HINT), (True, DELEGATE_HINT)])
def test_hint_wording(delegate: bool, hint: str, tmp_path: Path) -> None:
    result = truncate_output("a\n" * 3000, output_dir=tmp_path, delegate_hint=delegate)
    assert result.content.endswith(
        f"The tool call succeeded but the output was truncated. Full output saved to: {result.output_path}\n{hint}"
    )


@pytest.mark.parametrize(
    "text",
    [
        "z\n" * 5000,
        "ünïcødé ✓ 𝄞\n" * 9000,
        "bad bytes \udcff\udcfe kept\n" * 5000,  # surrogateescape text round-trips to its bytes
    ],
)
def test_saved_file_holds_the_full_input(text: str, tmp_path: Path) -> None:
    out = tmp_path / "deep" / "tool-output"
    result = truncate_output(text, output_dir=out)
    assert result.truncated and result.output_path is not None
    assert result.output_path.parent == out
    assert result.output_path.read_bytes() == text.encode("utf-8", "surrogateescape")


def test_output_paths_ascend_and_are_unique(tmp_path: Path) -> None:
    names = [new_output_path(tmp_path).name for _ in range(2000)]
    assert all(re.fullmatch(r"tool_[0-9a-f]{16}[0-9A-Za-z]{10}", n) for n in names)
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    assert not any(tmp_path.iterdir())


def test_cleanup_deletes_only_old_tool_files(tmp_path: Path) -> None:
    now = time.time()
    old = [tmp_path / "tool_old1", tmp_path / "tool_old2"]
    fresh = tmp_path / "tool_fresh"
    other = tmp_path / "notes_old"
    for path in (*old, fresh, other):
        path.write_text("x")
    for path in (*old, other):
        os.utime(path, (now - 8 * 86400, now - 8 * 86400))
    os.utime(fresh, (now - 6 * 86400, now - 6 * 86400))
    (tmp_path / "tool_dir_old").mkdir()
    os.utime(tmp_path / "tool_dir_old", (now - 30 * 86400, now - 30 * 86400))

    assert cleanup_outputs(tmp_path, now=now) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes_old", "tool_dir_old", "tool_fresh"]
    assert cleanup_outputs(tmp_path, max_age=86400, now=now) == 1
    assert cleanup_outputs(tmp_path / "missing") == 0


def test_an_existing_full_output_file_is_named_not_copied(tmp_path: Path) -> None:
    spill = tmp_path / "tool_spill"
    spill.write_text("the full output")
    result = truncate_output("q\n" * 3000, output_dir=tmp_path / "out", saved_path=spill)
    assert result.output_path == spill
    assert f"Full output saved to: {spill}\n" in result.content
    assert not (tmp_path / "out").exists()
