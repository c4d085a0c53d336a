"""The bash tool's handler, called directly with a ToolContext."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from processes import holding

from toolrt.builtin.bash import MAX_METADATA_LENGTH, bash, shell_program
from toolrt.call.context import ToolContext
from toolrt.call.detached import DetachedCall
from toolrt.errors import ToolFailure


def make_ctx(tmp_path: Path, **kwargs: Any) -> ToolContext:
    return ToolContext(DetachedCall(tool_id="bash", root=tmp_path, data_dir=tmp_path / "data", **kwargs))


def run(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        with anyio.fail_after(20):
            return await bash(args, ctx)

    return anyio.run(main)


def test_echo_hello_returns_exactly_its_output(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    plan = ctx.sandbox_plan()
    result = run({"command": "echo hello", "description": "Say hello"}, ctx)
    assert result == {
        "title": "Say hello",
        "output": "hello\n",
        "metadata": {
            "output": "hello\n",
            "exit": 0,
            "description": "Say hello",
            "sandbox": plan.description if plan is not None else "none",
        },
    }


def _note(*lines: str) -> str:
    return "\n\n<bash_metadata>\n" + "\n".join(lines) + "\n</bash_metadata>"


_NOT_ALWAYS = (
    "A non-zero status is not always a failure (grep finding nothing, test, diff): "
    "read the output to decide what to do next."
)
_SILENT = "The command printed no output."


@pytest.mark.parametrize(
    ("command", "output", "exit_code"),
    [
        ("echo a; echo b >&2; echo c", "a\nb\nc\n", 0),
        ("echo out; exit 3", "out\n" + _note(f"The command exited with status 3. {_NOT_ALWAYS}"), 3),
        ("printf 'no newline'", "no newline", 0),
        ("pwd", "{root}\n", 0),
        ("false", _note(f"The command exited with status 1. {_NOT_ALWAYS}", _SILENT), 1),
        ("true", _note("The command succeeded (exit status 0) and printed no output."), 0),
        ("kill -TERM $$", _note(f"The command was killed by signal 15. {_NOT_ALWAYS}", _SILENT), -15),
    ],
)
def test_output_is_interleaved_and_exit_code_reported(
    tmp_path: Path, command: str, output: str, exit_code: int
) -> None:
    # In the sandbox the program is its PID namespace's init, which ignores its own `kill -TERM $$`
    # (test_boundary_processes); the report of a program ended by a signal is checked unsandboxed.
    ctx = make_ctx(tmp_path, sandbox=None) if command.startswith("kill") else make_ctx(tmp_path)
    result = run({"command": command, "description": "Run it"}, ctx)
    assert result["output"] == output.format(root=tmp_path)
    assert result["metadata"]["exit"] == exit_code


def test_workdir_is_resolved_against_the_root(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    result = run({"command": "pwd", "description": "Where", "workdir": "sub"}, make_ctx(tmp_path))
    assert result["output"] == f"{tmp_path / 'sub'}\n"


def test_missing_workdir_is_an_error_that_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ToolFailure, match=r"The workdir 'nope' is not a directory .*omit workdir"):
        run({"command": "pwd", "description": "Where", "workdir": "nope"}, make_ctx(tmp_path))


@pytest.mark.parametrize("timeout", [-5, -1])
def test_negative_timeout_uses_opencode_text(tmp_path: Path, timeout: int) -> None:
    with pytest.raises(ToolFailure, match=rf"^Invalid timeout value: {timeout}\. Timeout must be a positive number\.$"):
        run({"command": "echo x", "description": "x", "timeout": timeout}, make_ctx(tmp_path))


def test_timeout_stops_the_command_and_its_grandchildren(tmp_path: Path) -> None:
    # A unique sleep length marks the grandchild: inside the sandbox's PID namespace `$!` is not a host pid.
    seconds = f"6{uuid.uuid4().int % 10**6:06d}"
    command = f"sleep {seconds} & echo started; wait"
    result = run({"command": command, "description": "Sleep", "timeout": 300}, make_ctx(tmp_path))
    assert result["output"] == (
        "started\n\n\n<bash_metadata>\nbash tool terminated command after exceeding timeout 300 ms. If it needs "
        "more time, run it again with a larger timeout; if it was waiting for input, there is no terminal: pass "
        "the input as arguments, a file or a pipe.\n</bash_metadata>"
    )
    assert result["metadata"]["exit"] is None

    async def wait_gone() -> None:
        with anyio.fail_after(20):
            while any(_alive(pid) for pid in holding(seconds)):
                await anyio.sleep(0.01)

    anyio.run(wait_gone)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_abort_stops_the_command(tmp_path: Path) -> None:
    def on_metadata(title: str | None, metadata: Mapping[str, Any] | None) -> None:
        if metadata and "started" in metadata.get("output", ""):
            ctx.abort.set()

    ctx = make_ctx(tmp_path, on_metadata=on_metadata)
    result = run({"command": "echo started; sleep 60", "description": "Wait"}, ctx)
    assert result["output"] == (
        "started\n\n\n<bash_metadata>\nUser aborted the command. Do not run it again unless the user asks you to."
        "\n</bash_metadata>"
    )
    assert result["metadata"]["exit"] is None


def test_metadata_output_is_sliced_but_the_output_is_whole(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    result = run({"command": "head -c 40000 /dev/zero | tr '\\0' a", "description": "Print a lot"}, ctx)
    assert result["output"] == "a" * 40_000
    assert result["metadata"]["output"] == "a" * MAX_METADATA_LENGTH + "\n\n..."
    assert ctx.live_metadata["output"] == "a" * MAX_METADATA_LENGTH + "\n\n..."


@pytest.mark.parametrize(
    ("shell", "expected"),
    [
        ("/bin/sh", "/bin/sh"),
        ("/usr/bin/fish", None),
        ("/nonexistent/zsh", None),
        ("bash", None),
        ("", None),
    ],
)
def test_shell_is_the_users_when_acceptable(shell: str, expected: str | None) -> None:
    chosen = shell_program({"SHELL": shell})
    if expected is None:
        assert os.path.basename(chosen) == "bash"
    else:
        assert chosen == expected
