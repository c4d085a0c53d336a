"""Running `argv:` and `shell:` handlers as processes."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from ..config.model import ArgvHandler, ShellHandler
from ..execute.environment import DEFAULT_ENV_ALLOW, build_env
from ..execute.notes import outcome_notes, with_notes
from ..execute.process import run_process
from ..result import ToolResult
from ..sandbox.config import call_plan
from ..templates import render, render_argv
from .active import ActiveCall
from .titles import call_title

__all__ = ["run_command"]


async def run_command(call: ActiveCall, args: dict[str, Any], timeout: float) -> ToolResult:
    """Run an `argv:` or `shell:` handler: no shell for argv, every value quoted for shell templates;
    a new process group killed whole on timeout or abort; output bounded in memory."""
    tool = call.tool
    snapshot = call.snapshot
    handler = tool.definition.handler
    assert isinstance(handler, (ArgvHandler, ShellHandler))
    names, root = tool.parameter_names, snapshot.root
    if isinstance(handler, ArgvHandler):
        assert tool.argv is not None
        argv = render_argv(tool.argv, args, names, root)
    else:
        argv = [handler.shell, "-c", render(tool.shell, args, names, root)]
    options = handler.options
    cwd = root / render(tool.cwd, args, names, root) if tool.cwd is not None else root
    allow = (
        options.env_allow
        if options.env_allow is not None
        else (snapshot.resolved.values.env_allow or DEFAULT_ENV_ALLOW)
    )
    env = build_env(allow, set={k: render(t, args, names, root) for k, t in tool.env_set.items()})
    stdin = render(tool.stdin, args, names, root).encode() if tool.stdin is not None else None

    def on_output(text: str) -> None:
        call.emit("metadata", {"output": text})

    plan = call_plan(snapshot.sandbox_for(tool.id), root=root, output_dir=snapshot.truncation_dir, granted=call.granted)
    outcome = await run_process(
        argv,
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdin=stdin,
        abort=call.request.abort,
        on_output=on_output,
        spill_dir=snapshot.truncation_dir,
        sandbox=plan,
    )
    output = with_notes(outcome.output, outcome_notes(tool.id, outcome, timeout * 1000), "toolrt_metadata")
    metadata: dict[str, Any] = {
        "exit": outcome.exit_code,
        "output_bytes": outcome.total_bytes,
        "sandbox": outcome.sandbox or "none",
    }
    if outcome.spill_path is not None:
        metadata["outputPath"] = str(outcome.spill_path)
    title = call_title(tool, args, root) or " ".join(argv)[:80]
    return ToolResult(title=title, output=output, metadata=MappingProxyType(metadata))
