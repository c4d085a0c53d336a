"""The two entry points dispatch calls: a command string, or the bash tool's validated arguments."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from ..beneath import steady_realpath
from ..permissions.model import CallSite, PermissionRequest
from .analyzer import analyze_text
from .findings import Findings
from .paths import fs_safe, scope_for
from .wrappers import WrapperTable, default_wrappers

__all__ = ["analyze_call", "analyze_command"]


def analyze_command(
    command: str, site: CallSite, *, wrappers: WrapperTable | None = None, expand_globs: bool = True
) -> tuple[PermissionRequest, ...]:
    """The permission requests running `command` in `site.cwd` needs.

    `external_directory` (one request, a `<dir>/*` glob per location outside `site.root`) comes
    first, then one `bash` request with every command's patterns and always-patterns, then one
    `bash` request with floor `ask` per command that must never be auto-allowed (its reason says
    why). A command that is only `cd DIR` asks nothing for `bash`. Never raises on bad input:
    unparseable, oversized or binary text fails closed. `expand_globs=False` leaves globs as written
    (for patterns people check, `toolrt check bash` and `tests:`, which must not depend on the
    files present).
    """
    scope = scope_for(site)
    findings = Findings(expand_globs=expand_globs)
    analyze_text(command, scope=scope, table=wrappers or default_wrappers(), findings=findings, cwd=scope.cwd)
    return _with_protected(findings, site)


def analyze_call(
    args: Mapping[str, Any], site: CallSite, *, wrappers: WrapperTable | None = None
) -> tuple[PermissionRequest, ...]:
    """`permission: {analyzer: bash}`: the requests of the bash tool's arguments.

    `command` is analysed in `workdir` (resolved against `site.root`, `~` expanded) when given,
    else in `site.cwd`; a `workdir` outside the root asks `external_directory` for `<workdir>/*`.
    """
    command = args.get("command")
    if not isinstance(command, str):
        return (PermissionRequest("bash", (repr(command),), (), floor="ask", reason="the command is not a string"),)
    scope = scope_for(site)
    findings = Findings()
    cwd = scope.cwd
    workdir = args.get("workdir")
    if isinstance(workdir, str) and workdir:
        absolute = scope.expand(workdir, scope.root)
        cwd = posixpath.normpath(absolute if absolute is not None else workdir)
        if not scope.inside(cwd) or scope.external(cwd, None):
            findings.directories[cwd] = None
    analyze_text(command, scope=scope, table=wrappers or default_wrappers(), findings=findings, cwd=cwd)
    requests = _with_protected(findings, site)
    if not findings.read:
        return requests
    # The bash tool also asks `read` for every path the line names (and its real path), so a rule that
    # denies or asks reading a file (`*.env`) binds `cat .env` as it binds the read tool.
    # A path the OS cannot take (a NUL after `cd a<NUL>b`) has no real path: its words fail closed already.
    paths = tuple(
        dict.fromkeys(
            form for path in findings.read for form in ((path, steady_realpath(path)) if fs_safe(path) else (path,))
        )
    )
    return (*requests, PermissionRequest("read", paths, ()))


def _with_protected(findings: Findings, site: CallSite) -> tuple[PermissionRequest, ...]:
    """The findings' requests, plus `protected` for the protected paths the commands write."""
    requests = findings.requests()
    if site.protected is None or not findings.written:
        return requests
    protected = site.protected.request(findings.written)
    return requests if protected is None else (*requests, protected)
