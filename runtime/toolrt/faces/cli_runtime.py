"""The Runtime, the call scope and the host settings that a `toolrt` command's options select."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..api import Runtime
    from ..config.settings import ResolvedSettings
    from ..scope import CallScope

__all__ = ["host_settings", "load_runtime", "selected_scope"]


def _flags(values: Sequence[str]) -> dict[str, bool]:
    from ..config.settings import parse_flag_option

    return dict(parse_flag_option(v) for v in values)


def load_runtime(options: argparse.Namespace, *, blocked_ok: bool = True) -> Runtime:
    """The runtime for a command; a broken config still loads (failing closed), its problems on stderr.

    The tools of invalid tool files are left out; with an invalid `permissions.yaml`, `toolrt.yaml` or
    locked file no call runs (`blocked_ok=False`: the command stops with exit 1, for `check`).
    """
    from ..api import Runtime
    from ..build.snapshot import degraded_lines

    settings = {
        "data_dir": getattr(options, "data_dir", None),
        "audit": getattr(options, "audit", None),
        "locked_permissions": getattr(options, "locked_permissions", None),
        "sandbox.mode": getattr(options, "sandbox", None),
        "serve.host": getattr(options, "host", None),
        "serve.port": getattr(options, "port", None),
    }
    rt = Runtime.load(
        options.root,
        flags=_flags(getattr(options, "flag", [])),
        settings={key: value for key, value in settings.items() if value is not None},
        partial=True,
    )
    snapshot = rt.snapshot
    if snapshot.blocked is not None and not blocked_ok:
        raise snapshot.blocked
    err = getattr(options, "err", None) or sys.stderr
    for line in degraded_lines(snapshot):
        print(f"toolrt: warning: {line}", file=err)
    return rt


def selected_scope(options: argparse.Namespace) -> CallScope:
    """The command's scope from its selection options (flags are the Runtime's, set at load)."""
    from ..scope import CallScope

    return CallScope(
        agent=getattr(options, "agent", None),
        model=getattr(options, "model", None),
        provider=getattr(options, "provider", None),
        client=getattr(options, "client", None),
        session=getattr(options, "session", None) or "default",
        toolset=getattr(options, "toolset", None),
    )


def host_settings(options: argparse.Namespace) -> ResolvedSettings:
    """The settings without loading the project's tools (host-only ones come from the host's layers)."""
    from ..config.settings import CommandLineSettings, resolve_settings

    values = {
        "data_dir": options.data_dir,
        "audit": options.audit,
        "locked_permissions": options.locked_permissions,
        "serve.host": getattr(options, "host", None),
        "serve.port": getattr(options, "port", None),
    }
    cli = CommandLineSettings({key: value for key, value in values.items() if value is not None})
    return resolve_settings(Path(options.root), cli=cli)
