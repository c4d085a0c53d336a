"""`toolrt watch`: the development loop. Reload on every save and print what each reload did.

Text output, one block per reload:
```
reload 3: +grep -old_tool ~read; permission rules changed
reload 3: config invalid, still serving the last good config:
  tools.d/read.yaml:4:3: 'type' is a required property
```
`--json` prints one JSON object per reload: `{"generation", "digest", "loaded_at", "ok", "added",
"removed", "changed", "permissions_changed", "errors": [{"file", "line", "column", "pointer",
"message", "severity"}]}`.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

import anyio

from ..api import Runtime
from ..reload import Reloader, ReloadEvent

__all__ = ["event_json", "format_event", "run_watch"]


def event_json(event: ReloadEvent) -> dict[str, Any]:
    """The `--json` line of one reload."""
    change = event.change
    errors = [p.to_json() for p in (event.error.problems if event.error is not None else ())]
    return {
        "generation": event.status.generation,
        "digest": event.status.digest,
        "loaded_at": event.status.loaded_at,
        "ok": event.error is None,
        "added": list(change.added) if change else [],
        "removed": list(change.removed) if change else [],
        "changed": list(change.changed) if change else [],
        "permissions_changed": change.permissions_changed if change else False,
        "errors": errors,
    }


def format_event(event: ReloadEvent) -> str:
    """The text block of one reload (no trailing newline)."""
    head = f"reload {event.status.generation}:"
    if event.error is not None:
        if event.repeated:
            return f"{head} config still invalid ({len(event.error.problems)} problem(s)), serving the last good config"
        serving = "still serving the last good config" if event.change is None else "serving what is valid"
        lines = [f"{head} config invalid, {serving}:"]
        lines.extend(f"  {problem}" for problem in event.error.problems)
        return "\n".join(lines)
    change = event.change
    if change is None:
        return f"{head} no changes"
    parts = [f"+{name}" for name in change.added]
    parts += [f"-{name}" for name in change.removed]
    parts += [f"~{name}" for name in change.changed]
    summary = " ".join(parts)
    if change.permissions_changed:
        summary = f"{summary}; permission rules changed" if summary else "permission rules changed"
    return f"{head} {summary or 'settings changed'}"


def run_watch(rt: Runtime, *, json_output: bool, out: TextIO) -> int:
    """Watch the config of `rt` and print every reload until Ctrl-C (then exit 0)."""

    def show(event: ReloadEvent) -> None:
        text = json.dumps(event_json(event)) if json_output else format_event(event)
        out.write(text + "\n")
        out.flush()

    async def main() -> None:
        reloader = Reloader(rt)
        reloader.on_reload(show)
        ready = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: reloader.run(ready=ready))
            await ready.wait()
            if not json_output:
                status = rt.status()
                out.write(f"watching {rt.root} (generation {status.generation}, {len(rt.snapshot.tools)} tools)\n")
                out.flush()

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        return 0
    return 0
