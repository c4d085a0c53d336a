"""bubblewrap, where the kernel has no Landlock: the same policy as mounts in a private namespace.

Everything is bound read-only, then the writable set read-write, then the protected paths
read-only again (a mount can carve the read-only hole Landlock cannot); `network: false` unshares
the network. `--new-session` stops TIOCSTI keystroke injection into the person's terminal.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

__all__ = ["bwrap_argv"]


def bwrap_argv(bwrap: str, writable: Sequence[str], read_only: Sequence[str], *, network: bool) -> list[str]:
    """`bwrap ... --` to put in front of a command; paths that do not exist are left out."""
    argv = [bwrap, "--new-session", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev"]
    for path in writable:
        if os.path.isdir(path) and not path.startswith("/dev/"):
            argv += ["--bind", path, path]
    for path in read_only:
        if os.path.lexists(path):
            argv += ["--ro-bind", path, path]
    if not network:
        argv.append("--unshare-net")
    return [*argv, "--"]
