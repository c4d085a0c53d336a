"""The file tools open what they checked: a real background process swaps names for symlinks while the
real `read`, `write`, `edit` and `apply_patch` run through `Runtime.call` (issue 25, item 2).

Each race is bounded (a few hundred calls) and waits on the swapper's own "ready" line, never on a sleep.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt import Runtime, beneath
from toolrt.audit import read_records
from toolrt.errors import PathChanged
from toolrt.permissions.ask import AskRequest, Reply

SECRET = "API_KEY=hunter2-secret"
LOCKED = """\
permission:
  read: {"*.env": deny}
  external_directory: deny
"""

# Swaps NAME between a real entry and a symlink to TARGET forever, atomically (renameat2 RENAME_EXCHANGE).
SWAPPER = """
import ctypes, os, sys
root, name, target, kind = sys.argv[1:5]
os.chdir(root)
if kind == "dir":
    os.mkdir(name)
else:
    with open(name, "w") as f:
        f.write("plain text\\n")
os.symlink(target, name + ".link")
libc = ctypes.CDLL(None, use_errno=True)
one, other = os.fsencode(name), os.fsencode(name + ".link")
print("ready", flush=True)
while True:
    if libc.renameat2(-100, one, -100, other, 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".env").write_text(SECRET + "\n", encoding="utf-8")
    (root / "tools.d").mkdir()
    (root / "permissions.yaml").write_text("permission:\n  '*': allow\n  read: allow\n", encoding="utf-8")
    locked = tmp_path / "admin" / "locked.yaml"
    locked.parent.mkdir()
    locked.write_text(LOCKED, encoding="utf-8")
    monkeypatch.setenv("TOOLRT_LOCKED_PERMISSIONS", str(locked))
    (tmp_path / "outside").mkdir()
    return root


def _swapping(root: Path, name: str, target: str, kind: str) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(root), name, target, kind], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"  # an event, not a sleep
        yield process
    finally:
        process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def swap_file(project: Path) -> Iterator[subprocess.Popen[str]]:
    """`x.txt` is a plain file one moment and a symlink to `.env` the next."""
    yield from _swapping(project, "x.txt", ".env", "file")


@pytest.fixture
def swap_outside(project: Path) -> Iterator[subprocess.Popen[str]]:
    """`stage/` is a directory one moment and a symlink to a directory outside the project the next."""
    yield from _swapping(project, "stage", str(project.parent / "outside"), "dir")


@pytest.fixture
def swap_config(project: Path) -> Iterator[subprocess.Popen[str]]:
    """`stage/` is a directory one moment and a symlink to the project's `tools.d/` the next."""
    yield from _swapping(project, "stage", "tools.d", "dir")


def _calls(root: Path, calls: list[tuple[str, dict[str, Any]]], model: str | None = None) -> list[Any]:
    async def main() -> list[Any]:
        rt = Runtime.load(root)
        results = []
        with anyio.fail_after(120):
            for index, (tool, args) in enumerate(calls):
                # a session per attempt: no doom loop across them
                results.append(await rt.call(tool, args, session=f"s{index}", model=model))
        return results

    return anyio.run(main)


def _clean(results: list[Any]) -> None:
    """Every refusal is a message the model can act on, never an exception's text."""
    for result in results:
        assert result.error is None or "Errno" not in result.error, result.error


def test_read_never_returns_a_locked_denied_file_swapped_in_mid_call(project: Path, swap_file: Any) -> None:
    results = _calls(project, [("read", {"filePath": "x.txt", "limit": 1000 + i}) for i in range(300)])
    assert not [r for r in results if "hunter2" in r.output]
    assert any(r.error is None and "plain text" in r.output for r in results)  # the race really ran both ways
    _clean(results)


def test_write_never_lands_outside_the_project_through_a_swapped_directory(
    project: Path, swap_outside: Any, tmp_path: Path
) -> None:
    results = _calls(project, [("write", {"filePath": f"stage/f{i}.txt", "content": "x"}) for i in range(200)])
    assert list((tmp_path / "outside").iterdir()) == []
    _clean(results)
    refused = [r for r in results if r.error is not None]
    assert all("changed while" in r.error or "external" in r.error.lower() for r in refused), refused


def test_write_never_puts_a_tool_file_into_tools_d_through_a_swapped_directory(project: Path, swap_config: Any) -> None:
    results = _calls(project, [("write", {"filePath": f"stage/p{i}.yaml", "content": "id: p\n"}) for i in range(200)])
    assert list((project / "tools.d").iterdir()) == []
    assert any(r.error is None for r in results) and any(r.error is not None for r in results)  # both ways
    _clean(results)


def test_apply_patch_never_adds_into_tools_d_through_a_swapped_directory(project: Path, swap_config: Any) -> None:
    # A patch adds only when `stage/` stays a directory through all of its checks, a narrow window: batches
    # of 150 until one did (at most 6), so that the race is shown to run both ways.
    results: list[Any] = []
    for batch in range(6):
        patches = [f"*** Begin Patch\n*** Add File: stage/q{batch}_{i}.yaml\n+id: q\n*** End Patch" for i in range(150)]
        results += _calls(project, [("apply_patch", {"patchText": text}) for text in patches], model="gpt-5")
        if any(r.error is None for r in results):
            break
    assert list((project / "tools.d").iterdir()) == []
    assert any(r.error is None for r in results), [r.error for r in results][:3]
    _clean(results)


def test_a_swap_is_a_refusal_with_an_audit_record(project: Path) -> None:
    (project / "permissions.yaml").write_text("permission:\n  '*': allow\n  edit: ask\n", encoding="utf-8")
    (project / "stage").mkdir()

    async def swap_then_approve(request: AskRequest) -> Reply:
        # The rules were checked on `stage/p.yaml` while `stage` was a directory; it becomes a link now.
        (project / "stage").rmdir()
        (project / "stage").symlink_to("tools.d")
        return Reply("once")

    async def main() -> Any:
        rt = Runtime.load(project)
        return rt, await rt.call("write", {"filePath": "stage/p.yaml", "content": "id: p\n"}, ask=swap_then_approve)

    rt, result = anyio.run(main)
    assert result.error is not None and "changed while the call ran" in result.error
    assert list((project / "tools.d").iterdir()) == []
    assert rt.audit.path is not None
    [record] = read_records(rt.audit.path)[0]
    assert record["tool"] == "write" and "changed while the call ran" in record["error"]


def test_a_refused_write_leaves_no_new_file_or_directory(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolrt.builtin import filepaths

    (project / "a").mkdir()
    (project / "a" / "b").symlink_to(tmp_path / "outside")  # a link on the way to directories still to make
    with pytest.raises(PathChanged, match="changed while the call ran"):
        filepaths.write_regular(project / "a" / "b" / "n1" / "n2" / "x.txt", b"x", "x.txt")
    assert list((tmp_path / "outside").iterdir()) == []
    # The parents were made, then the file's own open found a swap: the new directories go again.
    refuse = beneath.changed(project / "fresh" / "deeper" / "x.txt")

    def swapped(*args: Any) -> int:
        raise refuse

    monkeypatch.setattr(filepaths, "open_checked", swapped)
    with pytest.raises(PathChanged, match="changed while the call ran"):
        filepaths.write_regular(project / "fresh" / "deeper" / "x.txt", b"x", "x.txt")
    assert not (project / "fresh").exists()


@pytest.mark.parametrize("openat2", [True, False], ids=["openat2", "O_NOFOLLOW-walk"])
def test_both_openers_refuse_a_symlink_on_the_way_and_open_plain_paths(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openat2: bool
) -> None:
    monkeypatch.setattr(beneath, "use_openat2", openat2)
    (project / "dir").mkdir()
    (project / "dir" / "f.txt").write_text("ok")
    (project / "link").symlink_to("dir")
    (project / "dir" / "env").symlink_to("../.env")
    fd = beneath.open_checked(project / "dir" / "f.txt", os.O_RDONLY)
    assert os.read(fd, 10) == b"ok" and beneath.descriptor_path(fd) == str(project / "dir" / "f.txt")
    os.close(fd)
    for through in (project / "link" / "f.txt", project / "dir" / "env"):
        with pytest.raises(PathChanged, match="changed while the call ran"):
            beneath.open_checked(through, os.O_RDONLY)
    with pytest.raises(FileNotFoundError):
        beneath.open_checked(project / "dir" / "missing", os.O_RDONLY)
