"""Running `argv:` and `shell:` handlers as processes."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..attribution import approved_files, journal_for
from ..build.templates import ARG_PREFIX, TemplateProblem, render, render_argv, render_shell
from ..config.model import ArgvHandler, ShellHandler
from ..errors import ToolFailure
from ..execute.confinement import confinement
from ..execute.environment import DEFAULT_ENV_ALLOW, build_env
from ..execute.notes import outcome_notes, with_tagged_notes
from ..execute.process import nul_refusal, run_process
from ..result import ToolResult
from ..sandbox.config import call_plan
from ..sandbox.plan import SandboxPlan
from ..truncate import new_output_path
from .active import ActiveCall
from .titles import call_title
from .truncation import truncate_result

__all__ = ["run_command"]


async def _start_background(
    call: ActiveCall,
    args: dict[str, Any],
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    plan: SandboxPlan | None,
    shown: str,
) -> ToolResult:
    """Start a host-approved `background: true` tool's process, kept by the Runtime, and return at once."""
    snapshot, tool = call.snapshot, call.tool
    output = new_output_path(snapshot.truncation_dir)
    try:
        started = await call.services.background().start(
            argv,
            cwd=cwd,
            env=env,
            sandbox=plan,
            output=output,
            journal=journal_for(snapshot.data_dir),
            approved=approved_files(call.granted, snapshot.root),
            confined=confinement(plan),
            tool=tool.id,
            call_id=call.request.call_id,
            session=call.session,
            command=shown,
        )
    except OSError as error:
        raise ToolFailure(f"Could not start '{argv[0]}': {error.strerror or error}.") from error
    text = (
        f"Started in the background (pid {started.pid}); it keeps running after this call, until the session "
        f"or the Runtime closes. Its output goes to {output}: read that file to see it."
    )
    metadata = {
        "background": True,
        "pid": started.pid,
        "outputPath": str(output),
        "sandbox": plan.description if plan else "none",
    }
    return ToolResult(
        title=call_title(tool, args, snapshot.root) or shown[:80], output=text, metadata=MappingProxyType(metadata)
    )


async def run_command(call: ActiveCall, args: dict[str, Any], timeout: float) -> ToolResult:
    """Run an `argv:` or `shell:` handler: no shell for argv, every value of a shell template in a
    `TOOLRT_ARG_*` environment variable; a new process group killed whole on timeout or abort; output
    bounded in memory."""
    tool = call.tool
    snapshot = call.snapshot
    handler = tool.definition.handler
    assert isinstance(handler, (ArgvHandler, ShellHandler))
    names, root = tool.parameter_names, snapshot.root
    values: dict[str, str] = {}
    if isinstance(handler, ArgvHandler):
        assert tool.argv is not None
        argv = render_argv(tool.argv, args, names, root)
        shown = " ".join(argv)
    else:
        try:
            command = render_shell(tool.shell, args, names, root)
        except TemplateProblem as problem:
            raise ToolFailure(f"The {tool.id} tool's shell template cannot run with these values: {problem}") from None
        argv = [handler.shell, "-c", command.script]
        values = dict(command.env)
        shown = f"{handler.shell} -c {command.shown}"
        for name, value in values.items():
            if "\0" in value:
                raise nul_refusal(f"The value in {name}")
    options = handler.options
    cwd = root / render(tool.cwd, args, names, root) if tool.cwd is not None else root
    allow = (
        options.env_allow
        if options.env_allow is not None
        else (snapshot.resolved.values.env_allow or DEFAULT_ENV_ALLOW)
    )
    env = build_env(allow, set={k: render(t, args, names, root) for k, t in tool.env_set.items()})
    for name in [name for name in env if name.startswith(ARG_PREFIX)]:
        del env[name]  # only this call's values go by these names
    env.update(values)
    stdin = render(tool.stdin, args, names, root).encode() if tool.stdin is not None else None

    def on_output(text: str) -> None:
        call.emit("metadata", {"output": text})

    journal = journal_for(snapshot.data_dir)
    plan = call_plan(
        snapshot.sandbox_for(tool.id),
        root=root,
        output_dir=snapshot.truncation_dir,
        granted=call.granted,
        reads=call.read_denies(),
        journal=journal,
    )
    if options.background and tool.id in snapshot.resolved.values.background:
        return await _start_background(call, args, argv, cwd, env, plan, shown)
    with journal.process(
        call.request.call_id, timeout=timeout, approved=approved_files(call.granted, root), confined=confinement(plan)
    ):
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
    ok_exit = options.ok_exit
    output = with_tagged_notes(
        outcome.output, outcome_notes(tool.id, outcome, timeout * 1000, ok_exit), "toolrt_metadata"
    )
    metadata: dict[str, Any] = {
        "exit": outcome.exit_code,
        "output_bytes": outcome.total_bytes,
        "sandbox": outcome.sandbox or "none",
    }
    if outcome.network_refused:
        metadata["network_refused"] = list(outcome.network_refused)
    if outcome.spill_path is not None:
        metadata["outputPath"] = str(outcome.spill_path)
    title = call_title(tool, args, root) or shown[:80]
    result = ToolResult(title=title, output=output, metadata=MappingProxyType(metadata))
    if outcome.exit_code is None or outcome.exit_code in ok_exit:
        return result
    # A status outside `ok_exit` is an error result that keeps the output (cut to the limits first: the
    # pipeline does not cut error texts).
    cut = truncate_result(call, result)
    return ToolResult(cut.title, cut.output, cut.metadata, cut.attachments, error=cut.output)
