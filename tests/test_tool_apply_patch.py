"""The `apply_patch` tool: OpenCode's tests ported, all-or-nothing writes, fuzzy passes, the analyzer."""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import tool_helpers

from toolrt.builtin.apply_patch import MAX_PATCH_FILE_BYTES, apply_patch, permission_requests
from toolrt.builtin.patch_format import AddFile, Chunk, DeleteFile, PatchError, UpdateFile, parse_patch
from toolrt.call.context import ToolContext
from toolrt.errors import DeniedError, ToolFailure
from toolrt.permissions.model import CallSite, PermissionRequest

REPO = Path(__file__).resolve().parent.parent


make_ctx = functools.partial(tool_helpers.make_ctx, tool="apply_patch")


def run_patch(root: Path, patch: str, ctx: ToolContext | None = None) -> dict[str, Any]:
    return tool_helpers.call(apply_patch, {"patchText": patch}, ctx or make_ctx(root))


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for directories)."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


# --- OpenCode's apply_patch tests ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "^patchText is required$"),
        ("invalid patch", r"^apply_patch verification failed: Invalid patch format: missing Begin/End markers"),
        ("*** Begin Patch\n*** End Patch", "^patch rejected: empty patch$"),
        ("  *** Begin Patch\r\n*** End Patch\r\n", "^patch rejected: empty patch$"),
        ("*** Begin Patch\njust words\n*** End Patch", "^apply_patch verification failed: no hunks found$"),
        (
            patch("*** Frobnicate File: foo"),
            r"^apply_patch verification failed: line 2: unknown header '\*\*\* Frobnicate File: foo'",
        ),
        (patch("*** Add File:"), r"^apply_patch verification failed: line 2: '\*\*\* Add File:' needs a file path"),
        (
            patch("*** Update File: a.txt", "@@"),
            r"^apply_patch verification failed: '\*\*\* Update File: a.txt' has no",
        ),
    ],
)
def test_malformed_patches_are_rejected(root: Path, text: str, message: str) -> None:
    with pytest.raises(ToolFailure, match=message):
        run_patch(root, text)
    assert snapshot(root) == {}


def test_add_update_delete_in_one_patch(root: Path) -> None:
    (root / "modify.txt").write_text("line1\nline2\n")
    (root / "delete.txt").write_text("obsolete\n")
    asked: list[PermissionRequest] = []
    result = run_patch(
        root,
        patch(
            "*** Add File: nested/new.txt",
            "+created",
            "*** Delete File: delete.txt",
            "*** Update File: modify.txt",
            "@@",
            "-line2",
            "+changed",
        ),
        make_ctx(root, asked),
    )
    expected = "Success. Updated the following files:\nA nested/new.txt\nD delete.txt\nM modify.txt"
    assert result["output"] == expected
    assert result["title"] == expected
    assert "Index:" in result["metadata"]["diff"]
    assert [(f["relativePath"], f["type"], f["additions"], f["deletions"]) for f in result["metadata"]["files"]] == [
        ("nested/new.txt", "add", 1, 0),
        ("delete.txt", "delete", 0, 1),
        ("modify.txt", "update", 1, 1),
    ]
    assert asked == []
    assert (root / "nested" / "new.txt").read_text() == "created\n"
    assert (root / "modify.txt").read_text() == "line1\nchanged\n"
    assert not (root / "delete.txt").exists()


@pytest.mark.parametrize(
    ("before", "body", "after"),
    [
        (
            "line1\nline2\nline3\nline4\n",
            ["@@", "-line2", "+changed2", "@@", "-line4", "+changed4"],
            "line1\nchanged2\nline3\nchanged4\n",
        ),
        ("alpha\nomega\n", ["@@", " alpha", "+beta", " omega"], "alpha\nbeta\nomega\n"),
        ("no newline at end", ["@@", "-no newline at end", "+first line", "+second line"], "first line\nsecond line\n"),
        ("alpha\nlast\n", ["@@", "-last", "+end", "*** End of File"], "alpha\nend\n"),
        (
            "start\nmarker\nmiddle\nmarker\nend\n",
            ["@@", "-marker", "-end", "+marker-changed", "+end", "*** End of File"],
            "start\nmarker\nmiddle\nmarker-changed\nend\n",
        ),
        ("fn a\nx=10\ny=2\nfn b\nx=10\ny=20\n", ["@@ fn b", "-x=10", "+x=11"], "fn a\nx=10\ny=2\nfn b\nx=11\ny=20\n"),
        ("line1  \nline2\nline3   \n", ["@@", "-line2", "+changed"], "line1  \nchanged\nline3   \n"),
        ("  line1\nline2\n  line3\n", ["@@", "-line2", "+changed"], "  line1\nchanged\n  line3\n"),
        ("    indented()\n", ["@@", "-indented()", "+    renamed()"], "    renamed()\n"),
        (
            "print(\u201chello\u201d) \u2014 ok\u2026\n",
            ["@@", '-print("hello") - ok...', "+print('bye')"],
            "print('bye')\n",
        ),
        ("a\nb\n", ["-a", "+A"], "A\nb\n"),
        ("a\n\nb\n", ["@@", " a", "", "-b", "+B"], "a\n\nB\n"),
        ("keep\n", ["@@", "+appended"], "keep\nappended\n"),
        ("a\r\nb\r\n", ["@@", "-b", "+B"], "a\r\nB\r\n"),
        ("\ufeffbom\nx\n", ["@@", "-x", "+y"], "\ufeffbom\ny\n"),
    ],
)
def test_update_hunks(root: Path, before: str, body: list[str], after: str) -> None:
    (root / "f.txt").write_bytes(before.encode("utf-8"))
    result = run_patch(root, patch("*** Update File: f.txt", *body))
    assert (root / "f.txt").read_bytes() == after.encode("utf-8")
    assert result["output"] == "Success. Updated the following files:\nM f.txt"


def test_move_to_a_new_directory(root: Path) -> None:
    (root / "old").mkdir()
    (root / "old" / "name.txt").write_text("old content\n")
    result = run_patch(
        root,
        patch(
            "*** Update File: old/name.txt", "*** Move to: renamed/dir/name.txt", "@@", "-old content", "+new content"
        ),
    )
    assert not (root / "old" / "name.txt").exists()
    assert (root / "renamed" / "dir" / "name.txt").read_text() == "new content\n"
    assert result["output"] == "Success. Updated the following files:\nM renamed/dir/name.txt"
    assert result["metadata"]["files"][0]["movePath"] == str(root / "renamed" / "dir" / "name.txt")


def test_move_overwrites_an_existing_destination(root: Path) -> None:
    (root / "old").mkdir()
    (root / "old" / "name.txt").write_text("from\n")
    (root / "renamed").mkdir()
    (root / "renamed" / "name.txt").write_text("existing\n")
    run_patch(root, patch("*** Update File: old/name.txt", "*** Move to: renamed/name.txt", "@@", "-from", "+new"))
    assert not (root / "old" / "name.txt").exists()
    assert (root / "renamed" / "name.txt").read_text() == "new\n"


def test_add_overwrites_an_existing_file(root: Path) -> None:
    (root / "duplicate.txt").write_text("old content\n")
    run_patch(root, patch("*** Add File: duplicate.txt", "+new content"))
    assert (root / "duplicate.txt").read_text() == "new content\n"


def test_later_hunks_see_earlier_ones(root: Path) -> None:
    run_patch(root, patch("*** Add File: f.txt", "+one", "*** Update File: f.txt", "@@", "-one", "+two"))
    assert (root / "f.txt").read_text() == "two\n"


@pytest.mark.parametrize(
    ("heredoc", "name"),
    [
        ("cat <<'EOF'\n{patch}\nEOF", "heredoc_test.txt"),
        ("<<EOF\n{patch}\nEOF", "heredoc_no_cat.txt"),
        ('cat <<"PATCH"\n{patch}\nPATCH\n', "quoted.txt"),
    ],
)
def test_heredoc_wrappers_are_accepted(root: Path, heredoc: str, name: str) -> None:
    run_patch(root, heredoc.format(patch=patch(f"*** Add File: {name}", "+heredoc content")))
    assert (root / name).read_text() == "heredoc content\n"


# --- failures leave no file changed --------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (["*** Update File: missing.txt", "@@", "-nope", "+better"], "Failed to read file to update: missing.txt"),
        (["*** Delete File: missing.txt"], "Failed to read file to delete: missing.txt does not exist"),
        (["*** Delete File: dir"], "Cannot delete dir: it is a directory"),
        (
            ["*** Update File: modify.txt", "@@", "-missing", "+changed"],
            "Failed to find expected lines in modify.txt:\nmissing",
        ),
        (
            ["*** Update File: modify.txt", "@@ nowhere", "-line1", "+x"],
            "Failed to find context 'nowhere' in modify.txt",
        ),
        (["*** Update File: modify.txt", "@@", "-line2", "+B", "", "-line1", "+D"], "Failed to find expected lines"),
        (["*** Add File: dir", "+x"], "Cannot add dir: a directory exists at that path"),
        (
            ["*** Update File: modify.txt", "*** Move to: dir", "@@", "-line2", "+x"],
            "Cannot move modify.txt to dir: a directory exists there",
        ),
    ],
)
def test_a_failing_hunk_leaves_no_file_changed(root: Path, body: list[str], message: str) -> None:
    (root / "modify.txt").write_text("line1\nline2\n")
    (root / "keep.txt").write_text("keep\n")
    (root / "dir").mkdir()
    before = snapshot(root)
    full = patch(
        "*** Add File: created.txt",
        "+hello",
        "*** Delete File: keep.txt",
        "*** Update File: modify.txt",
        "@@",
        "-line1",
        "+LINE1",
        *body,
    )
    with pytest.raises(ToolFailure, match=f"^apply_patch verification failed: {re.escape(message)}"):
        run_patch(root, full)
    assert snapshot(root) == before


def test_a_write_failure_while_staging_rolls_back(root: Path) -> None:
    (root / "blocker").write_text("a file where a directory is needed")
    (root / "modify.txt").write_text("line1\n")
    before = snapshot(root)
    text = patch(
        "*** Update File: modify.txt",
        "@@",
        "-line1",
        "+changed",
        "*** Add File: fresh/dir/a.txt",
        "+x",
        "*** Add File: blocker/b.txt",
        "+y",
    )
    with pytest.raises(ToolFailure, match="^apply_patch failed before changing any file: "):
        run_patch(root, text)
    assert snapshot(root) == before


def test_a_denied_external_path_changes_nothing(root: Path) -> None:
    (root / "a.txt").write_text("a\n")
    text = patch("*** Update File: a.txt", "@@", "-a", "+b", "*** Add File: ../escape.txt", "+x")
    with pytest.raises(DeniedError, match="external_directory denied"):
        run_patch(root, text, make_ctx(root, deny="external_directory"))
    assert (root / "a.txt").read_text() == "a\n"
    assert not (root.parent / "escape.txt").exists()


def test_a_symlink_out_of_the_root_asks_before_writing(root: Path) -> None:
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (outside / "target.txt").write_text("a\n")
    (root / "link.txt").symlink_to(outside / "target.txt")
    asked: list[PermissionRequest] = []
    run_patch(root, patch("*** Update File: link.txt", "@@", "-a", "+b"), make_ctx(root, asked))
    assert asked == [PermissionRequest("external_directory", (f"{outside}/*",), (f"{outside}/*",))]
    assert (outside / "target.txt").read_text() == "b\n"
    assert (root / "link.txt").is_symlink()


def test_special_files_are_refused(root: Path) -> None:
    with pytest.raises(ToolFailure, match="^apply_patch verification failed: /dev/zero is a character device"):
        run_patch(root, patch("*** Update File: /dev/zero", "@@", "-a", "+b"))


def test_a_huge_file_is_refused_before_anything_is_written(root: Path) -> None:
    with (root / "huge.log").open("wb") as handle:
        handle.write(b"first\n" + b"log line\n" * (MAX_PATCH_FILE_BYTES // 9 + 1))
    text = patch("*** Add File: new.txt", "+x", "*** Update File: huge.log", "@@", "-first", "+1st")
    with pytest.raises(ToolFailure, match=r"^apply_patch verification failed: huge\.log is \d+ bytes, over the"):
        run_patch(root, text)
    assert not (root / "new.txt").exists()


def test_non_utf8_bytes_outside_the_hunk_survive(root: Path) -> None:
    (root / "f.txt").write_bytes(b"caf\xe9\nline2\n")
    run_patch(root, patch("*** Update File: f.txt", "@@", "-line2", "+LINE2"))
    assert (root / "f.txt").read_bytes() == b"caf\xe9\nLINE2\n"


def test_file_mode_is_kept(root: Path) -> None:
    script = root / "run.sh"
    script.write_text("echo a\n")
    script.chmod(0o755)
    run_patch(root, patch("*** Update File: run.sh", "@@", "-echo a", "+echo b"))
    assert script.stat().st_mode & 0o777 == 0o755


# --- parser ----------------------------------------------------------------------------------------


def test_parse_patch_structure() -> None:
    text = patch(
        "*** Add File: a.txt",
        "+1",
        "+2",
        "*** Update File: b.txt",
        "*** Move to: c.txt",
        "@@ def f():",
        " keep",
        "-old",
        "+new",
        "*** End of File",
        "*** Delete File: d.txt",
    )
    assert parse_patch(text) == (
        AddFile("a.txt", "1\n2"),
        UpdateFile("b.txt", (Chunk(("keep", "old"), ("keep", "new"), "def f():", True),), "c.txt"),
        DeleteFile("d.txt"),
    )


def test_parse_error_is_a_patch_error() -> None:
    with pytest.raises(PatchError, match="missing Begin/End markers"):
        parse_patch("*** End Patch\n*** Begin Patch")


# --- permissions (the YAML analyzer) ----------------------------------------------------------


def site_for(root: Path, *exempt: Path) -> CallSite:
    return CallSite(root=root, cwd=root, home=root.parent / "home", exempt=exempt)


def test_one_edit_request_names_every_touched_path(root: Path) -> None:
    text = patch(
        "*** Add File: src/new.py",
        "+x",
        "*** Update File: src/old.py",
        "*** Move to: lib/old.py",
        "@@",
        "-a",
        "+b",
        "*** Delete File: src/gone.py",
        "*** Update File: src/new.py",
        "@@",
        "-x",
        "+y",
    )
    assert permission_requests({"patchText": text}, site_for(root)) == (
        PermissionRequest(
            "edit",
            ("src/new.py", "src/old.py", "lib/old.py", "src/gone.py"),
            ("*",),
            {"filepath": "src/new.py, src/old.py, lib/old.py, src/gone.py"},
        ),
        # The sources of the move and the delete must be readable: their content moves on or goes.
        PermissionRequest("read", (str(root / "src/old.py"), str(root / "src/gone.py")), ("*",)),
    )


def test_outside_paths_add_one_external_directory_request_each(root: Path) -> None:
    outside = root.parent
    text = patch(
        "*** Add File: ../a.txt",
        "+x",
        "*** Add File: ../b.txt",
        "+x",
        "*** Add File: /etc/passwd",
        "+x",
        "*** Add File: ~/notes.txt",
        "+x",
        "*** Add File: inside.txt",
        "+x",
    )
    requests = permission_requests({"patchText": text}, site_for(root))
    assert requests[:-1] == (
        PermissionRequest("external_directory", (f"{outside}/*",), (f"{outside}/*",)),
        PermissionRequest("external_directory", ("/etc/*",), ("/etc/*",)),
        PermissionRequest("external_directory", (f"{outside}/home/*",), (f"{outside}/home/*",)),
    )
    assert requests[-1].permission == "edit"
    etc = os.path.relpath("/etc/passwd", root)
    assert requests[-1].patterns == ("../a.txt", "../b.txt", etc, "../home/notes.txt", "inside.txt")


def test_symlinks_in_the_analyzer_are_resolved(root: Path) -> None:
    outside = root.parent / "elsewhere"
    outside.mkdir()
    (root / "linked").symlink_to(outside, target_is_directory=True)
    requests = permission_requests({"patchText": patch("*** Add File: linked/x.txt", "+x")}, site_for(root))
    assert [(r.permission, r.patterns) for r in requests] == [
        ("external_directory", (f"{outside}/*",)),
        ("edit", ("linked/x.txt", "../elsewhere/x.txt")),  # the name, and the real path the rules also see
    ]


def test_exempt_directories_do_not_ask(root: Path) -> None:
    exempt = root.parent / "tool-output"
    text = patch(f"*** Add File: {exempt}/x.txt", "+x")
    requests = permission_requests({"patchText": text}, site_for(root, exempt))
    assert [r.permission for r in requests] == ["edit"]


@pytest.mark.parametrize(
    "args", [{}, {"patchText": ""}, {"patchText": 3}, {"patchText": "garbage"}, {"patchText": patch()}]
)
def test_unparsable_patches_ask_nothing(root: Path, args: dict[str, Any]) -> None:
    assert permission_requests(args, site_for(root)) == ()


# --- the YAML definition ---------------------------------------------------------------------


def load_definition(name: str = "apply_patch") -> dict[str, Any]:
    return tool_helpers.load_definition(name)


def test_yaml_handler_and_analyzer_resolve_and_examples_validate() -> None:
    definition = tool_helpers.check_definition("apply_patch", apply_patch)
    module_name, function_name = definition["permission"]["analyzer"].split(":")
    assert getattr(importlib.import_module(module_name), function_name) is permission_requests


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "'patchText' is a required property"),
        ({"patchText": ""}, "should be non-empty"),
        ({"patchText": ["*** Begin Patch"]}, "is not of type 'string'"),
        ({"patchText": "x", "extra": 1}, "Additional properties are not allowed"),
    ],
)
def test_schema_rejects_bad_arguments(args: dict[str, Any], message: str) -> None:
    with pytest.raises(jsonschema.ValidationError, match=re.escape(message)):
        jsonschema.validate(args, load_definition()["parameters"])


def _wildcard(value: str, pattern: str) -> bool:
    return re.fullmatch(".*".join(re.escape(part) for part in pattern.split("*")), value, re.S) is not None


def _selector_matches(selector: Mapping[str, Any], model: str | None) -> bool:
    """The `when.models` semantics the brief states: no `model` matches any model; `not` must all miss."""
    if "model" in selector and (model is None or not _wildcard(model, selector["model"])):
        return False
    return not any(_selector_matches(inner, model) for inner in selector.get("not", []))


def _offered(name: str, model: str | None) -> bool:
    return any(_selector_matches(selector, model) for selector in load_definition(name)["when"]["models"])


@pytest.mark.parametrize(
    ("model", "uses_patch"),
    [
        ("gpt-5", True),
        ("openai/gpt-5.1-codex", True),
        ("gpt-3.5-turbo", True),
        ("gpt-4o", False),
        ("gpt-4.1-mini", False),
        ("gpt-oss-120b", False),
        ("claude-sonnet-4-5", False),
        ("gemini-2.5-pro", False),
        (None, False),
    ],
)
def test_when_filters_offer_patch_or_edit_as_opencode_does(model: str | None, uses_patch: bool) -> None:
    # OpenCode: usePatch = id.includes("gpt-") && !id.includes("oss") && !id.includes("gpt-4").
    assert _offered("apply_patch", model) is uses_patch
    assert _offered("edit", model) is not uses_patch
    assert _offered("write", model) is not uses_patch
