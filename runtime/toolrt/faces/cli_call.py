"""`toolrt call` and `toolrt chat`: calls made from a terminal, the session's memory and "always" approvals
kept between runs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .cli_runtime import load_runtime, selected_scope
from .prompts import fixed_asker, terminal_asker, terminal_questioner

if TYPE_CHECKING:
    from ..api import Runtime
    from ..errors import UsageError
    from ..result import ToolResult
    from ..scope import CallScope
    from .terminal import LiveOutput

__all__ = ["cmd_call", "cmd_chat"]


def _unknown_tool(rt: Runtime, name: str, scope: CallScope) -> UsageError | None:
    """A usage error for a tool name the config does not define in any case (a person typed it: the model's
    `invalid` text is not the answer), with the closest offered names; None when the name is known."""
    import difflib

    from ..errors import UsageError

    snapshot = rt.snapshot
    if name in snapshot.tools or name.lower() in snapshot.tools or name in snapshot.withheld:
        return None
    names = rt.tools(scope).names()
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(n) for n in close)}?" if close else ""
    return UsageError(f"unknown tool {name!r}{hint} (tools: {', '.join(names) or 'none'})")


def cmd_call(options: argparse.Namespace, out: TextIO) -> int:
    import anyio

    rt = load_runtime(options)
    unknown = _unknown_tool(rt, options.tool, selected_scope(options))
    if unknown is not None:
        raise unknown
    asker = _asker(rt, options, out)
    questioner = terminal_questioner() if _at_terminal() else None
    state_file = _session_file(rt, options.session)
    _tell_unasked_once(rt, options, state_file.with_suffix(".notice"))
    rt.sessions.restore(options.session, _read_json(state_file))
    # "always" approvals outlive the process: kept per session (the file) and agent (the key).
    approvals_file = state_file.with_suffix(".approvals.json")
    approvals = _read_json(approvals_file)
    agent = options.agent or rt.snapshot.permissions.default_agent
    _restore_approvals(rt, options.session, agent, approvals.get(agent))
    live, call_id = _live_output(rt, options, out)
    result = anyio.run(
        lambda: rt.call(
            options.tool, options.args, selected_scope(options), ask=asker, questioner=questioner, call_id=call_id
        )
    )
    _write_json(state_file, rt.sessions.state(options.session))
    now = [list(pair) for pair in rt.sessions.approvals(options.session, agent)]
    kept = approvals.get(agent)
    if now != kept and (now or kept):
        _write_json(approvals_file, {**approvals, agent: now})
    _print_result(result, live, options, out)
    return 0 if result.error is None else 1


def _at_terminal() -> bool:
    """Whether a person can be asked: stdin and stderr are a terminal."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def _asker(rt: Runtime, options: argparse.Namespace, out: TextIO) -> Any:
    """Who answers what asks: `--yes`, `--no`, the person at the terminal (who first reviews the config the
    model changed), or nobody (the call is denied what asks)."""
    if options.yes:
        return fixed_asker("once")
    if options.no:
        return fixed_asker("reject")
    if not _at_terminal():
        return None
    if rt.snapshot.held:
        _review_held(rt, options.err)
    return terminal_asker(out)


def _restore_approvals(rt: Runtime, session: str, agent: str, kept: Any) -> None:
    """The agent's "always" approvals kept by an earlier `toolrt call` of the session (malformed pairs left out)."""
    if isinstance(kept, list):
        pairs = [
            (p[0], p[1]) for p in kept if isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
        ]
        rt.sessions.restore_approvals(session, pairs, agent=agent)


def _live_output(rt: Runtime, options: argparse.Namespace, out: TextIO) -> tuple[LiveOutput | None, str]:
    """At a terminal, the output as it is produced (as MCP progress carries it), and the call id it follows."""
    if options.json or not _is_terminal(out):
        return None, ""
    import secrets

    from .terminal import LiveOutput

    call_id = f"cli_{secrets.token_hex(4)}"
    live = LiveOutput(out, call_id)
    rt.subscribe(live.listen)
    return live, call_id


def _print_result(result: ToolResult, live: LiveOutput | None, options: argparse.Namespace, out: TextIO) -> None:
    """The result as JSON, its error on stderr, or its output (what `live` has not shown yet)."""
    if options.json:
        json.dump(result.to_json(), out, indent=2, ensure_ascii=False, default=str)
        out.write("\n")
    elif result.error is not None:
        from .terminal import painter

        error = result.error
        if live is not None:
            if live.shown and not live.shown.endswith("\n"):
                out.write("\n")
            error = live.rest(error).strip("\n")
        print(painter(options.color, options.err)(error, "error"), file=options.err)
    else:
        text = live.rest(result.output) if live is not None else result.output
        out.write(text)
        if not (live.shown + text if live is not None else text).endswith("\n"):
            out.write("\n")


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _tell_unasked_once(rt: Runtime, options: argparse.Namespace, seen: Path) -> None:
    """Say on stderr which offered tools run without asking, once per session (again when the list changes)."""
    from ..build.unasked import runs_without_asking, unasked_notice

    notice = unasked_notice(runs_without_asking(rt.snapshot, rt.tools(selected_scope(options)), options.agent))
    if notice is None:
        return
    try:
        if seen.read_text(encoding="utf-8") == notice:
            return
    except OSError:
        pass  # not said in this session yet
    print(notice, file=options.err)
    try:
        seen.parent.mkdir(parents=True, exist_ok=True)
        seen.write_text(notice, encoding="utf-8")
    except OSError as error:
        print(f"toolrt: could not remember the notice in {seen}: {error}", file=options.err)


def _session_file(rt: Runtime, session: str) -> Path:
    """Where `toolrt call --session S` keeps the session's memory between runs (read times, todos)."""
    import hashlib

    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in session)[:64]
    digest = hashlib.sha256(f"{rt.root}\0{session}".encode()).hexdigest()[:12]
    return rt.snapshot.data_dir / "sessions" / f"{safe}-{digest}.json"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # a first call, or a damaged file: start the session afresh
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    import os
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8") as handle:
            json.dump(data, handle, default=str)
        os.replace(handle.name, path)
    except OSError as error:
        print(f"toolrt: could not save session state to {path}: {error}", file=sys.stderr)


def cmd_chat(options: argparse.Namespace, out: TextIO) -> int:
    import os

    import anyio

    from ..errors import UsageError

    try:
        import openai
    except ImportError:
        raise UsageError("toolrt chat needs the openai package: pip install 'toolrt[openai]'") from None
    from .chat import run_chat

    base_url = options.base_url or os.environ.get("OPENAI_BASE_URL")
    if not base_url:
        raise UsageError("--base-url is required (or set OPENAI_BASE_URL)")
    if not options.model:
        raise UsageError("--model is required: the model id the endpoint serves")
    rt = load_runtime(options)
    key = os.environ.get(options.api_key_env) or "none"  # local servers often take any key
    client = openai.AsyncOpenAI(base_url=base_url, api_key=key)
    interactive = sys.stdin.isatty()

    def read_line(prompt: str) -> str | None:
        try:
            return input(prompt)
        except EOFError:
            return None

    return anyio.run(
        lambda: run_chat(
            rt,
            client,
            model=options.model,
            scope=selected_scope(options),
            ask=terminal_asker(out) if interactive else None,
            questioner=terminal_questioner() if interactive else None,
            read_line=read_line,
            out=out,
            system=options.system,
            interactive=interactive,
        )
    )


def _review_held(rt: Runtime, err: TextIO) -> None:
    """On a terminal, before a call: show each config file or module the model changed (the build left
    them out) and load those the person approves (what `toolrt trust` does)."""
    from .trust import run_trust, terminal_confirm

    err.write("toolrt: the model changed config the person has not approved; it is not loaded until approved.\n")
    run_trust(rt, (), approve_all=False, json_output=False, out=err, confirm=terminal_confirm(err))
