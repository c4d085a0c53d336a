"""`toolrt watch`: the development loop. Reload on every save and print what each reload did.

Text output, one block per reload:
```
reload 3: +grep -old_tool ~read; permission rules changed
reload 4: handler code changed (handlers.py: greet)
reload 4: config invalid, still serving the last good config:
  handlers.py:3:12: SyntaxError: invalid syntax (the code in use is kept until this is fixed)
reload 5: handler code changed (handlers.py: greet); valid again
```
Each failure is printed once (a repeated one as one short line); the reload logger's own copy is not
printed beside it. `--json` prints one JSON object per reload: `{"generation", "digest", "loaded_at",
"ok", "fixed", "initial", "added", "removed", "changed", "permissions_changed", "code_changed", "code_files",
"settings_changed", "errors": [{"file", "line", "column", "pointer", "message", "severity"}]}`.
"""

from __future__ import annotations

import json
import logging
from typing import Any, TextIO

import anyio

from ..api import Runtime
from ..build.changes import SnapshotChange
from ..reload import Reloader, ReloadEvent

__all__ = ["change_summary", "event_json", "format_event", "run_watch"]


def event_json(event: ReloadEvent) -> dict[str, Any]:
    """The `--json` line of one reload."""
    change = event.change
    errors = [p.to_json() for p in (event.error.problems if event.error is not None else ())]
    return {
        "generation": event.status.generation,
        "digest": event.status.digest,
        "loaded_at": event.status.loaded_at,
        "ok": event.error is None,
        "fixed": event.fixed,
        "initial": event.initial,
        "added": list(change.added) if change else [],
        "removed": list(change.removed) if change else [],
        "changed": list(change.changed) if change else [],
        "permissions_changed": change.permissions_changed if change else False,
        "code_changed": list(change.code_changed) if change else [],
        "code_files": list(change.code_files) if change else [],
        "settings_changed": change.settings_changed if change else False,
        "errors": errors,
    }


def format_event(event: ReloadEvent) -> str:
    """The text block of one reload (no trailing newline)."""
    head = f"reload {event.status.generation}:"
    if event.initial and event.error is not None:
        generation = event.status.generation
        lines = [f"generation {generation}: handler code does not import (its tools fail until a save fixes it):"]
        lines.extend(f"  {problem}" for problem in event.error.problems)
        return "\n".join(lines)
    if event.error is not None:
        if event.repeated:
            return f"{head} config still invalid ({len(event.error.problems)} problem(s)), serving the last good config"
        serving = "still serving the last good config" if event.change is None else "serving what is valid"
        lines = [f"{head} config invalid, {serving}:"]
        lines.extend(f"  {problem}" for problem in event.error.problems)
        return "\n".join(lines)
    change = event.change
    fixed = "; valid again" if event.fixed else ""
    if change is None:
        return f"{head} no changes{fixed}"
    return f"{head} {change_summary(change)}{fixed}"


def change_summary(change: SnapshotChange) -> str:
    """What a swap changed, in words: tools (+added -removed ~changed), handler code, rules, settings."""
    tools = [f"+{name}" for name in change.added]
    tools += [f"-{name}" for name in change.removed]
    tools += [f"~{name}" for name in change.changed]
    parts = [" ".join(tools)] if tools else []
    if change.code_files:
        users = f": {', '.join(change.code_changed)}" if change.code_changed else ""
        parts.append(f"handler code changed ({', '.join(change.code_files)}{users})")
    if change.permissions_changed:
        parts.append("permission rules changed")
    if change.settings_changed:
        parts.append("settings changed")
    return "; ".join(parts) or "config changed (no tool, rule, setting or handler code differs)"


def run_watch(rt: Runtime, *, json_output: bool, out: TextIO, color: str = "auto") -> int:
    """Watch the config of `rt` and print every reload until Ctrl-C (then exit 0).

    At a terminal (`color`, see `terminal.painter`) a failed reload's first line is red, a fix's green.
    """
    from .terminal import painter

    paint = painter(color, out)

    def show(event: ReloadEvent) -> None:
        if json_output:
            text = json.dumps(event_json(event))
        else:
            head, newline, rest = format_event(event).partition("\n")
            kind = "error" if event.error is not None else "ok" if event.fixed else ""
            text = paint(head, kind) + newline + rest
        out.write(text + "\n")
        out.flush()

    async def main() -> None:
        reloader = Reloader(rt)
        reloader.subscribe(show)
        ready = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: reloader.run(ready=ready))
            await ready.wait()
            if not json_output:
                status = rt.status()
                out.write(f"watching {rt.root} (generation {status.generation}, {len(rt.snapshot.tools)} tools)\n")
                out.flush()

    # Every reload is printed above: the reload logger's copy (Python's last-resort stderr handler) is not.
    reload_logger = logging.getLogger("toolrt.reload")
    quiet = logging.NullHandler()
    reload_logger.addHandler(quiet)
    propagate, reload_logger.propagate = reload_logger.propagate, False
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        return 0
    finally:
        reload_logger.removeHandler(quiet)
        reload_logger.propagate = propagate
    return 0
