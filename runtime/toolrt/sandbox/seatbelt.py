"""macOS: a Seatbelt profile for `sandbox-exec` with the same policy as Landlock on Linux.

Untested on a Mac (toolrt's CI runs Linux): the profile text is unit-tested, not its enforcement.
Paths travel as `-D NAME=VALUE` parameters, never spliced into the profile, so no path can change
the profile's meaning. Unlike Landlock, Seatbelt can carve read-only holes, so protected paths are
excluded from the writable set directly.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["SANDBOX_EXEC", "seatbelt_argv", "seatbelt_profile"]

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
_DEVICES = ("/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper")


def seatbelt_profile(writable_count: int, protected_count: int, *, network: bool, masked_count: int = 0) -> str:
    """The profile: read anywhere but MASKED_k, write only under WRITABLE_i minus PROTECTED_j, network per policy."""
    lines = ["(version 1)", "(allow default)", "(deny file-write*)"]
    if masked_count:
        masked = " ".join(f'(subpath (param "MASKED_{k}"))' for k in range(masked_count))
        lines.append(f"(deny file-read* {masked})")
    if writable_count:
        subpaths = " ".join(f'(subpath (param "WRITABLE_{i}"))' for i in range(writable_count))
        holes = " ".join(f'(require-not (subpath (param "PROTECTED_{j}")))' for j in range(protected_count))
        target = f"(require-any {subpaths})"
        lines.append(
            f"(allow file-write* (require-all {target} {holes}))" if holes else f"(allow file-write* {target})"
        )
    lines.append(
        "(allow file-write* " + " ".join(f'(literal "{d}")' for d in _DEVICES) + ' (regex #"^/dev/ttys[0-9]+$"))'
    )
    if not network:
        lines.append("(deny network*)")
        lines.append("(allow network* (remote unix-socket))")
    return "\n".join(lines) + "\n"


def seatbelt_argv(
    writable: Sequence[str], protected: Sequence[str], *, network: bool, masked: Sequence[str] = ()
) -> list[str]:
    """`sandbox-exec -p PROFILE -D ... --` to put in front of a command."""
    profile = seatbelt_profile(len(writable), len(protected), network=network, masked_count=len(masked))
    argv = [SANDBOX_EXEC, "-p", profile]
    for index, path in enumerate(writable):
        argv += ["-D", f"WRITABLE_{index}={path}"]
    for index, path in enumerate(protected):
        argv += ["-D", f"PROTECTED_{index}={path}"]
    for index, path in enumerate(masked):
        argv += ["-D", f"MASKED_{index}={path}"]
    return [*argv, "--"]
