"""The `bash` tool: run one command line in the user's shell, as OpenCode's bash tool (§8).

Permission is decided before the handler runs (`permission: {analyzer: bash}`, see toolrt.shell);
the handler only runs the command: `$SHELL -c COMMAND` (bash, zsh or sh; else /bin/bash) in a new
process group, stdout and stderr interleaved, a timeout and the abort signal stopping the whole
group, live output published to `ctx.metadata`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..attribution import approved_files, journal_for
from ..call.context import ToolContext
from ..errors import ToolFailure
from ..execute import build_env, run_process
from ..execute.confinement import confinement
from ..execute.notes import outcome_notes, with_tagged_notes
from ..truncate import tool_output_dir

__all__ = ["DEFAULT_TIMEOUT_MS", "MAX_METADATA_LENGTH", "bash", "shell_program"]

DEFAULT_TIMEOUT_MS = 120_000
MAX_METADATA_LENGTH = 30_000
# OpenCode fires its timer 100 ms after the timeout it reports.
_TIMER_SLACK_MS = 100
_ACCEPTABLE_SHELLS = frozenset(("bash", "zsh", "sh"))


def shell_program(environ: Mapping[str, str] | None = None) -> str:
    """`$SHELL` when it is bash, zsh or sh and exists; otherwise /bin/bash (OpenCode's `Shell.acceptable`)."""
    shell = (os.environ if environ is None else environ).get("SHELL", "")
    if os.path.basename(shell) in _ACCEPTABLE_SHELLS and os.path.isabs(shell) and os.access(shell, os.X_OK):
        return shell
    return shutil.which("bash") or "/bin/bash"


def _timeout_ms(value: object) -> int:
    if value is None:
        return DEFAULT_TIMEOUT_MS
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ToolFailure(f"Invalid timeout value: {value!r}. Timeout must be a positive number of milliseconds.")
    if value < 0:
        shown = int(value) if float(value).is_integer() else value
        raise ToolFailure(f"Invalid timeout value: {shown}. Timeout must be a positive number.")
    return int(value)


def _workdir(args: Mapping[str, Any], ctx: ToolContext) -> Path:
    workdir = args.get("workdir")
    if not workdir:
        return ctx.root
    path = ctx.resolve(str(workdir))
    if not path.is_dir():
        raise ToolFailure(
            f"The workdir {workdir!r} is not a directory ({path}). Give an existing directory, or omit workdir "
            "to run in the project root."
        )
    return path


def _sliced(output: str) -> str:
    if len(output) > MAX_METADATA_LENGTH:
        return output[:MAX_METADATA_LENGTH] + "\n\n..."
    return output


async def bash(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Run `command` and return `{"title", "output", "metadata": {"output", "exit", "description"}}`.

    `output` is everything the command wrote (stdout and stderr interleaved), followed by a
    `<bash_metadata>` block when the command exited non-zero, printed nothing, or was stopped by the
    timeout or the user (`outcome_notes`). The exit code is None when the command was stopped.
    Raises ToolFailure for a negative timeout, a workdir that
    is not a directory, or a command that cannot be started.
    """
    command = str(args["command"])
    description = str(args.get("description") or "")
    timeout = _timeout_ms(args.get("timeout"))
    cwd = _workdir(args, ctx)
    if args.get("background") is True:
        await ctx.continue_as_task()  # over MCP, to a client with the tasks extension: the call goes on as a task
    shown = ""

    def on_output(text: str) -> None:
        # Only the first 30,000 characters are ever shown live, so only those are kept here.
        nonlocal shown
        if len(shown) <= MAX_METADATA_LENGTH:
            shown += text[: MAX_METADATA_LENGTH + 1 - len(shown)]
            ctx.metadata(metadata={"output": _sliced(shown), "description": description})

    ctx.metadata(metadata={"output": "", "description": description})
    plan = ctx.sandbox_plan()
    seconds = (timeout + _TIMER_SLACK_MS) / 1000
    with journal_for(ctx.data_dir).process(
        ctx.call_id, timeout=seconds, approved=approved_files(ctx.granted, ctx.root), confined=confinement(plan)
    ):
        outcome = await run_process(
            [shell_program(), "-c", command],
            cwd=cwd,
            env=build_env(),
            timeout=seconds,
            abort=ctx.abort,
            on_output=on_output,
            spill_dir=tool_output_dir(ctx.data_dir, ctx.root),
            sandbox=plan,
        )
    output = with_tagged_notes(outcome.output, outcome_notes("bash", outcome, timeout), "bash_metadata")
    return {
        "title": description,
        "output": output,
        "metadata": {
            "output": _sliced(output),
            "exit": outcome.exit_code,
            "description": description,
            "sandbox": outcome.sandbox or "none",
            **({"network_refused": list(outcome.network_refused)} if outcome.network_refused else {}),
        },
    }
