"""The rest of "file tools open what they checked" (issue 25, item 2): the `lsp` tool, `read`'s listing of
a missing file's neighbours, and the permission step's `realpath` (templates, `protected`), attacked with
real symlinks and a real background process swapping a name for one, through `Runtime` and a real
language server (pylsp). Each race is bounded (at most a few hundred calls and a deadline) and waits on
the swapper's "ready" line, never on a sleep."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from lsp_helpers import lsp_settings

from toolrt import Runtime
from toolrt.result import ToolResult

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("collect_garbage")]

SECRET = "hunter2_secret_token = 1\n"
PLAIN = "plain_symbol = 1\n"
LOCKED = """\
permission:
  read: {"*.env": deny}
  external_directory: deny
"""
SWAPPER = """
import ctypes, os, sys
root, name, target, kind, content = sys.argv[1:6]
os.chdir(root)
if kind == "dir":
    os.mkdir(name)
    for entry in ("inside_a.txt", "inside_b.txt"):
        open(os.path.join(name, entry), "w").close()
else:
    with open(name, "w") as f:
        f.write(content)
os.symlink(target, name + ".link")
libc = ctypes.CDLL(None, use_errno=True)
one, other = os.fsencode(name), os.fsencode(name + ".link")
print("ready", flush=True)
while True:
    if libc.renameat2(-100, one, -100, other, 2) != 0:  # RENAME_EXCHANGE: atomic
        raise OSError(ctypes.get_errno(), "renameat2")
"""
DEADLINE = 40.0
"""Seconds a race may run (a bound, not a wait: the loops stop as soon as they have seen both outcomes)."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'attacked'\n", encoding="utf-8")
    (root / ".env").write_text(SECRET, encoding="utf-8")
    (root / "permissions.yaml").write_text("permission:\n  '*': allow\n  read: allow\n", encoding="utf-8")
    locked = tmp_path / "admin" / "locked.yaml"
    locked.parent.mkdir()
    locked.write_text(LOCKED, encoding="utf-8")
    monkeypatch.setenv("TOOLRT_LOCKED_PERMISSIONS", str(locked))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "inside_from_outside.txt").write_text("x\n", encoding="utf-8")
    return root


@contextmanager
def _swapping(root: Path, name: str, target: str, kind: str) -> Iterator[None]:
    """NAME is a plain entry one moment and a symlink to TARGET the next, swapped by a real process."""
    process = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(root), name, target, kind, PLAIN], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"  # an event, not a sleep
        yield
    finally:
        process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _race(rt: Runtime, tool: str, args: dict[str, Any], done: Any, limit: int = 300) -> list[ToolResult]:
    """Call `tool` until `done(results)` says the race ran both ways, or `limit` calls, or the deadline."""

    async def main() -> list[ToolResult]:
        results: list[ToolResult] = []
        deadline = time.monotonic() + DEADLINE
        while len(results) < limit and time.monotonic() < deadline and not (len(results) >= 30 and done(results)):
            results.append(await rt.call(tool, args, session=f"s{len(results)}"))
        return results

    return anyio.run(main)


def _clean(results: list[ToolResult]) -> None:
    """Every refusal is a message the model can act on, never an exception's text."""
    for result in results:
        assert result.error is None or ("Errno" not in result.error and "Traceback" not in result.error), result.error


def _lsp_runtime(root: Path) -> Runtime:
    return Runtime.load(root, settings=lsp_settings(), flags={"lsp_tool": True})


def test_lsp_does_not_send_a_denied_file_through_a_symlink(project: Path) -> None:
    (project / "x.py").symlink_to(".env")  # what a bash call of the model can do in one line
    (project / "plain.py").write_text(PLAIN, encoding="utf-8")
    with _lsp_runtime(project) as rt:
        result = rt.call_sync("lsp", {"operation": "documentSymbol", "filePath": "x.py"})
        plain = rt.call_sync("lsp", {"operation": "documentSymbol", "filePath": "plain.py"})
    assert result.error is not None and "hunter2" not in result.output + result.error, result
    assert "read" in result.error and ".env" in result.error, result.error
    assert plain.error is None and "plain_symbol" in plain.output  # the server answers for an allowed file


def test_lsp_never_answers_from_a_denied_file_swapped_in_mid_call(project: Path) -> None:
    with _swapping(project, "x.py", ".env", "file"):
        with _lsp_runtime(project) as rt:
            results = _race(
                rt,
                "lsp",
                {"operation": "documentSymbol", "filePath": "x.py"},
                lambda found: (
                    any(r.error is None and "plain_symbol" in r.output for r in found)
                    and any(r.error is not None for r in found)
                ),
            )
    assert not [r for r in results if "hunter2" in r.output or "hunter2" in (r.error or "")]
    assert any(r.error is None and "plain_symbol" in r.output for r in results)  # the race ran both ways
    assert any(r.error is not None for r in results)
    _clean(results)


def test_read_never_lists_a_directory_outside_the_project_swapped_in(project: Path, tmp_path: Path) -> None:
    with _swapping(project, "stage", str(tmp_path / "outside"), "dir"):
        with Runtime.load(project) as rt:
            results = _race(
                rt,
                "read",
                {"filePath": "stage/inside"},  # missing: the error lists the names beside it
                lambda found: False,  # every attempt: the window between the check and the listing is narrow
                limit=250,
            )
    assert not [r for r in results if "inside_from_outside" in (r.error or "") + r.output]
    assert any("inside_a.txt" in (r.error or "") for r in results)  # the listing really ran
    _clean(results)


TEMPLATED = """\
id: show
description: Shows a file's first line for the realpath race, with enough words to pass the checks.
parameters:
  type: object
  properties:
    path: {type: string}
  required: [path]
handler: {argv: [head, -n1, "{{path}}"]}
permission:
  key: read
  patterns: ["{{ path | realpath }}", "{{ path | abspath }}"]
  paths: [path]
"""


def test_a_realpath_template_racing_a_swap_is_a_refusal_never_a_traceback_or_the_secret(project: Path) -> None:
    (project / "tools.d").mkdir()
    (project / "tools.d" / "show.yaml").write_text(TEMPLATED, encoding="utf-8")
    with _swapping(project, "x.txt", ".env", "file"):
        with Runtime.load(project) as rt:
            results = _race(
                rt,
                "show",
                {"path": "x.txt"},
                lambda found: any("plain_symbol" in r.output for r in found) and any(r.error for r in found),
                limit=200,
            )
    assert not [r for r in results if "hunter2" in r.output]
    assert any("plain_symbol" in r.output for r in results)
    _clean(results)
