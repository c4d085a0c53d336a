"""`toolrt serve`, and the commands that read what servers keep: `status` (the replicas), `audit` (the records)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from .cli_runtime import host_settings, load_runtime, selected_scope

if TYPE_CHECKING:
    from ..api import Runtime

__all__ = ["cmd_audit", "cmd_serve", "cmd_status"]


def cmd_serve(options: argparse.Namespace, out: TextIO) -> int:
    if options.health:
        from .status_view import probe_health

        return probe_health(host_settings(options).values.serve, out)
    rt = load_runtime(options)
    rt.default_store = "sqlite"  # a server keeps its sessions, approvals and audit records through a restart
    try:
        return _serve(rt, options)
    finally:
        rt.close()  # idempotent: run_serve closes it too; a usage error (a port in use) must not leak the store


def _serve(rt: Runtime, options: argparse.Namespace) -> int:
    from ..sandbox.config import sandbox_problems, sandbox_status
    from .serve import ServeLimits, run_serve
    from .validate_report import problem_text

    for problem in sandbox_problems(rt.snapshot.sandbox):
        print(problem_text(problem), file=options.err)
    print(f"toolrt serve: sandbox: {sandbox_status(rt.snapshot.sandbox)}", file=options.err)
    print(f"toolrt serve: store: {rt.store!r}", file=options.err)  # opened now: an unreachable one exits 2
    if options.dev:
        rt.development = True
        print("toolrt serve: development mode: repeated identical calls warn instead of stopping", file=options.err)
    serve = rt.settings.values.serve
    return run_serve(
        rt,
        transport=options.transport,
        host=serve.host,
        port=serve.port,
        scope=selected_scope(options),
        limits=ServeLimits(
            **{
                field: value
                for field, value in (
                    ("page_size", options.page_size),
                    ("session_idle", options.session_idle),
                    ("max_sessions", options.max_sessions),
                )
                if value is not None
            }
        ),
        offer_unaskable=options.offer_unaskable,
    )


def cmd_status(options: argparse.Namespace, out: TextIO) -> int:
    from .status_view import run_status

    return run_status(host_settings(options), as_json=options.json, out=out)


def cmd_audit(options: argparse.Namespace, out: TextIO) -> int:
    from ..config.settings import CommandLineSettings
    from .audit_view import run_audit

    values = {"data_dir": options.data_dir, "audit": options.audit, "locked_permissions": options.locked_permissions}
    cli = CommandLineSettings({key: value for key, value in values.items() if value is not None})
    return run_audit(
        Path(options.root),
        cli=cli,
        session=options.session,
        tool=options.tool,
        decision=options.decision,
        since=options.since,
        as_json=options.json,
        out=out,
        err=options.err,
    )
