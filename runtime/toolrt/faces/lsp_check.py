"""`toolrt lsp check`: start each configured language server for the project, initialize it, report
what it supports, and shut it down.

```
pylsp          ok             /usr/bin/pylsp (1.9 s): definition, references, hover, documentSymbol, ...
pyright        not installed  pyright-langserver is not on PATH (outside the project)
rust-analyzer  failed         language server rust-analyzer (...) exited with status 1; it wrote: ...
```
Exit status 0 when every installed server started, 1 when one failed, 2 for a usage mistake.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any, TextIO

from ..api import Runtime
from ..errors import UsageError

__all__ = ["FEATURES", "run_lsp_check"]

FEATURES = (
    ("definitionProvider", "definition"),
    ("referencesProvider", "references"),
    ("hoverProvider", "hover"),
    ("documentSymbolProvider", "documentSymbol"),
    ("workspaceSymbolProvider", "workspaceSymbol"),
    ("implementationProvider", "implementation"),
    ("callHierarchyProvider", "callHierarchy"),
    ("textDocumentSync", "documentSync"),
    ("diagnosticProvider", "pullDiagnostics"),
)
"""Server capabilities `lsp check` reports, by the names the `lsp` tool and edits use."""


def run_lsp_check(
    rt: Runtime, *, servers: Sequence[str] = (), timeout: float = 30.0, json_output: bool = False, out: TextIO
) -> int:
    """Check the project's servers (or only `servers`); print one row each (or JSON); return the exit status.

    Raises:
        UsageError: `servers` names a server the settings do not declare (or switch off).
    """
    from ..lsp.access import lsp_config

    config = lsp_config(rt.snapshot)
    known = {server.name: server for server in config.servers}
    unknown = sorted(set(servers) - set(known))
    if unknown:
        names = ", ".join(sorted(known)) or "none (language servers are switched off: lsp.enabled)"
        raise UsageError(f"unknown language server {', '.join(map(repr, unknown))} (configured: {names})")
    chosen = [known[name] for name in servers] if servers else list(config.servers)
    rows = [asyncio.run(_check(server, config, timeout)) for server in chosen]
    if json_output:
        json.dump({"servers": rows}, out, indent=2)
        out.write("\n")
    elif not rows:
        out.write("no language server is configured (lsp.enabled is false, or every server is disabled)\n")
    else:
        width = max(len(row["name"]) for row in rows)
        for row in rows:
            out.write(f"{row['name']:<{width}}  {row['status']:<13}  {row['detail']}\n")
    return 1 if any(row["status"] == "failed" for row in rows) else 0


async def _check(server: Any, config: Any, timeout: float) -> dict[str, Any]:
    from ..errors import LspError
    from ..lsp.client import ServerClient
    from ..lsp.servers import resolve_program

    row: dict[str, Any] = {"name": server.name, "command": list(server.command)}
    program = resolve_program(server.command[0], config.root, path=config.path)
    if program is None:
        detail = f"{server.command[0]} is not on PATH (outside the project)"
        return {**row, "status": "not installed", "detail": detail, "supports": []}
    client = ServerClient(
        server,
        config.root,
        program=program,
        env={**config.env, **dict(server.env)},
        sandbox=config.sandbox,
        on_exit=lambda client, code: None,
    )
    started = time.monotonic()
    try:
        await client.start(timeout)
    except LspError as error:
        await client.stop(1.0)
        return {**row, "status": "failed", "detail": str(error), "supports": []}
    seconds = time.monotonic() - started
    supports = [name for capability, name in FEATURES if client.supports(capability)]
    await client.stop()
    listed = ", ".join(supports) or "nothing toolrt uses"
    return {
        **row,
        "status": "ok",
        "program": program,
        "seconds": round(seconds, 2),
        "supports": supports,
        "detail": f"{program} ({seconds:.1f} s): {listed}",
    }
