"""One line from toolrt after a program the sandbox stopped: what was refused and how to widen it.

The program's own message stays as it printed it; the hint is added only when the output shows a
refusal the sandbox explains: a write to a path outside the writable set (EACCES / EPERM / EROFS),
or a connection while the network is off.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .plan import SandboxPlan, within

__all__ = ["refusal_hint"]

_WHY = r"(?P<why>Permission denied|Operation not permitted|Read-only file system)"
_REFUSED_PATH = re.compile(
    # `sh: 1: cannot create /x/y: Permission denied`, `touch: cannot touch '/x/y': Permission denied`
    r"""(?P<path>(?:/|\.{1,2}/|~/)?[^\s:'"`‘’]+)['"`‘’]?(?::\s*\w+)?:\s*"""
    + _WHY
    # Python: `PermissionError: [Errno 13] Permission denied: '/x/y'`
    + r"""|(?P<why2>Permission denied|Operation not permitted|Read-only file system): ['"](?P<path2>[^'"\n]+)['"]"""
)
_NETWORK = re.compile(
    r"Network is unreachable|Temporary failure in name resolution|Could not resolve host|"
    r"Name or service not known|Failed to establish a new connection|connect.*Permission denied|"
    r"/dev/(?:tcp|udp)/",
    re.IGNORECASE,
)


def refusal_hint(output: str, plan: SandboxPlan, cwd: Path) -> str | None:
    """The hint for a failed process's output, or None when nothing there points at the sandbox."""
    if plan.deny_network and _NETWORK.search(output):
        return (
            "toolrt: the sandbox has the network off for this tool (sandbox.network: false), so connections "
            "fail. The person can turn it on in the host settings (TOOLRT_SANDBOX__NETWORK=true)."
        )
    for match in _REFUSED_PATH.finditer(output):
        raw = match.group("path") or match.group("path2")
        why = match.group("why") or match.group("why2")
        if raw.startswith(("/dev/tcp/", "/dev/udp/")):
            continue
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            path = cwd / path
        path = Path(os.path.normpath(path))
        if why == "Read-only file system" and any(within(str(path), p) for p in plan.read_only):
            return (
                f"toolrt: {path} is protected: it is read-only inside the sandbox. Changing it needs the "
                "person: they can run the command themselves, or declare the path writable in the host "
                "settings (TOOLRT_SANDBOX__WRITABLE)."
            )
        if not any(within(str(path), w) for w in plan.writable):
            directory = path.parent if not path.is_dir() else path
            where = (
                "the project root, the temp and tool-output directories, and sandbox.writable"
                if plan.mode == "workspace-write"
                else "only the device files and sandbox.writable: the mode is read-only"
            )
            return (
                f"toolrt: the sandbox refused a write to {directory} (writable here: {where}). The person can "
                "allow that directory for one call as an external_directory, or add it to sandbox.writable in the "
                "host settings (TOOLRT_SANDBOX__WRITABLE)."
            )
    return None
