"""One line from toolrt after a program the sandbox stopped: what was refused, by which rule, what to do.

The program's own message stays as it printed it; the hint is added when the output shows a refusal
the sandbox explains: a write to a path outside the writable set (EACCES / EPERM / EROFS), a write to
a protected or masked path, an absent protected name the sandbox covers (EEXIST, EISDIR, EROFS,
EBUSY), a device node (`mknod`), a UNIX socket (the seccomp filter's
EAFNOSUPPORT), or a connection while the network is off. A program that failed and printed nothing
(any status but 1, the usual silent "no") gets the exit status and what the sandbox refuses, since its
silence may be one of those refusals.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .plan import SandboxPlan, within

__all__ = ["refusal_hint"]

_WHY = (
    r"(?P<why>Permission denied|Operation not permitted|Read-only file system|File exists|Is a directory|"
    r"Not a directory|Device or resource busy)"
)
_PLAIN_FAILURES = ("File exists", "Is a directory", "Not a directory", "Device or resource busy")
"""Errors of every filesystem: hinted only where the sandbox's cover explains them."""
_REFUSED_PATH = re.compile(
    # `sh: 1: cannot create /x/y: Permission denied`, `touch: cannot touch '/x/y': Permission denied`
    r"""(?P<path>(?:/|\.{1,2}/|~/)?[^\s:'"`‘’]+)['"`‘’]?(?::\s*\w+)?:\s*"""
    + _WHY
    # Python: `PermissionError: [Errno 13] Permission denied: '/x/y'`
    + r"""|(?P<why2>Permission denied|Operation not permitted|Read-only file system|File exists|"""
    + r"""Is a directory|Device or resource busy): ['"](?P<path2>[^'"\n]+)['"]"""
)
_UNIX_SOCKET = re.compile(r"Address family not supported by protocol|EAFNOSUPPORT", re.IGNORECASE)
_UNLISTED_SOCKET = re.compile(
    r"connect[^\n]*Permission denied|\[Errno 13\] Permission denied\s*$|EACCES", re.IGNORECASE | re.MULTILINE
)
_MKNOD = re.compile(r"\bmknod\b|\bmkfifo\b.*\bc\b|\bOperation not permitted\b.*\bdevice\b", re.IGNORECASE)
_NETWORK = re.compile(
    r"Network is unreachable|Temporary failure in name resolution|Could not resolve host|"
    r"Name or service not known|Failed to establish a new connection|connect.*Permission denied|"
    r"/dev/(?:tcp|udp)/",
    re.IGNORECASE,
)


def refusal_hint(output: str, plan: SandboxPlan, cwd: Path, exit_code: int | None = None) -> str | None:
    """The hint for a failed process's output, or None when nothing there points at the sandbox."""
    if not output.strip():
        return _silent(plan, exit_code)
    hint = _socket_hint(output, plan) or _network_hint(output, plan)
    if hint is not None:
        return hint
    for match in _REFUSED_PATH.finditer(output):
        hint = _path_hint(match, output, plan, cwd)
        if hint is not None:
            return hint
    return None


def _socket_hint(output: str, plan: SandboxPlan) -> str | None:
    """The hint for a UNIX socket the seccomp filter refused, or one not on the socket allow-list."""
    if plan.sockets and _UNLISTED_SOCKET.search(output):
        listed = ", ".join(path for path, _, _ in plan.sockets)
        return (
            f"toolrt: the sandbox connects UNIX sockets only to those the host lists (sandbox.sockets: {listed}), "
            "named by that absolute path, with no symlink on the way, and only while each is the file toolrt first "
            "found there; any other socket, abstract name or relative path is refused. Use the listed path, or ask "
            "the person to list the socket in the host settings (TOOLRT_SANDBOX__SOCKETS)."
        )
    if plan.no_unix_sockets and plan.sockets and _UNIX_SOCKET.search(output):
        return (
            "toolrt: the sandbox refuses datagram UNIX sockets (a seccomp filter), since one could send to any "
            "local daemon (syslog, journald), and every address family other than IP and netlink (vsock, packet, "
            "Bluetooth). Stream sockets reach the listed sockets only (sandbox.sockets)."
        )
    if plan.no_unix_sockets and _UNIX_SOCKET.search(output):
        return (
            "toolrt: the sandbox refuses UNIX sockets (a seccomp filter on socket(AF_UNIX)) and every address "
            "family other than IP and netlink (vsock, packet, Bluetooth), so no local daemon (docker, D-Bus, an ssh "
            "agent, a database by socket path) and no hypervisor host can be reached from here. Use TCP on "
            "127.0.0.1 where the service offers it, or ask the person to run the command outside toolrt."
        )
    return None


def _network_hint(output: str, plan: SandboxPlan) -> str | None:
    """The hint for a connection the network rules (or the network being off) refused."""
    if plan.network_rules is not None and _NETWORK.search(output):
        return (
            "toolrt: this tool reaches the network only through toolrt's proxy (sandbox.network names the "
            "allowed hosts; HTTP_PROXY, HTTPS_PROXY and ALL_PROXY point at it): a program that ignores those "
            "variables, or a host not on the list, has no route out. Use the proxy, or ask the person to add "
            "the host to sandbox.network.allow in the host settings."
        )
    if plan.deny_network and _NETWORK.search(output):
        return (
            "toolrt: the sandbox has the network off for this tool (sandbox.network: false), so connections "
            "fail. The person can turn it on in the host settings (TOOLRT_SANDBOX__NETWORK=true)."
        )
    return None


def _path_hint(match: re.Match[str], output: str, plan: SandboxPlan, cwd: Path) -> str | None:
    """The hint for one refused path in the output, or None when the sandbox does not explain it."""
    raw = match.group("path") or match.group("path2")
    why = match.group("why") or match.group("why2")
    if raw.startswith(("/dev/tcp/", "/dev/udp/")):
        return None
    path = Path(os.path.expanduser(raw))
    if not path.is_absolute():
        path = cwd / path
    path = Path(os.path.normpath(path))
    covered = next((n for n in plan.covered if within(str(path), os.path.join(plan.root, n))), None)
    if covered is not None:
        return (
            f"toolrt: {covered} is a protected name (toolrt's config, editor tasks, shell start-up files and the "
            "like): the sandbox keeps it from being created at the project root, where it appears as an empty "
            "read-only directory. Creating it needs the person: they can make it themselves, or approve it "
            "through a file tool's `protected` question."
        )
    if why in _PLAIN_FAILURES:
        return None
    return _write_hint(path, why, _line_at(output, match.start()), plan)


def _write_hint(path: Path, why: str, line: str, plan: SandboxPlan) -> str | None:
    """The hint for a refused write to `path` (`why`: the error's text, `line`: the output line it is on)."""
    if any(within(str(path), p) for p in plan.read_only):
        return (
            f"toolrt: {path} is protected: it is read-only inside the sandbox (toolrt's config, handler code, "
            "VCS internals and the like). Changing it needs the person: they can make the change themselves, "
            "or approve it through a file tool's `protected` question."
        )
    if str(path) in plan.masks.files or any(within(str(path), d) for d in plan.masks.directories):
        return (
            f"toolrt: {path} is hidden in the sandbox because the read rules deny it (it reads as empty and "
            "cannot be written). Leave it alone, or ask the person if the task needs it."
        )
    if why != "Read-only file system" and _MKNOD.search(line):
        return (
            "toolrt: the sandbox refuses to make device nodes (mknod b/c), for every user, root included. "
            "Use a regular file, a FIFO (mkfifo) or a socket pair instead."
        )
    if any(within(str(path), w) for w in plan.writable):
        return None
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


def _line_at(output: str, index: int) -> str:
    end = output.find("\n", index)
    return output[output.rfind("\n", 0, index) + 1 : end if end >= 0 else len(output)]


def _silent(plan: SandboxPlan, exit_code: int | None) -> str | None:
    """What a program that failed without a word may have run into. Status 1 is left alone: it is the
    usual silent "no" (`false`, `grep` finding nothing, `test`, `diff`), not a failure to explain."""
    if not exit_code or exit_code == 1:
        return None
    refused = [
        "writes outside "
        + (
            "the project root, temp and tool-output directories"
            if plan.mode == "workspace-write"
            else "sandbox.writable"
        )
    ]
    if plan.read_only:
        refused.append("writes to protected paths (toolrt's config, .git, ...)")
    if plan.covered:
        refused.append(f"creating protected names at the project root ({', '.join(plan.covered[:4])}, ...)")
    if plan.masks:
        refused.append("reading the files the read rules deny (they read as empty)")
    refused.append("device nodes")
    if plan.no_unix_sockets:
        refused.append("UNIX sockets other than sandbox.sockets" if plan.sockets else "UNIX sockets (local daemons)")
        refused.append("sockets other than IP and netlink (vsock, packet, Bluetooth)")
    if plan.network_rules is not None:
        refused.append("network connections except to the allowed hosts through the proxy")
    elif plan.deny_network:
        refused.append("every network connection")
    status = f"killed by signal {-exit_code}" if exit_code < 0 else f"exit status {exit_code}"
    return (
        f"toolrt: the program failed ({status}) without printing why. If it needed one of what the sandbox "
        f"refuses here ({'; '.join(refused)}), that is the reason: do without it, or ask the person."
    )
