"""bubblewrap, where the kernel has no Landlock: the same policy as mounts in a private namespace.

Everything is bound read-only, then the writable set read-write, then the protected paths
read-only again (a mount can carve the read-only hole Landlock cannot), then the paths the `read`
rules deny are covered by an empty file or directory; `network: false` unshares
the network. `--new-session` stops TIOCSTI keystroke injection into the person's terminal.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .masks import NO_MASKS, Masks

__all__ = ["bwrap_argv"]


def bwrap_argv(
    bwrap: str,
    writable: Sequence[str],
    read_only: Sequence[str],
    *,
    network: bool,
    masks: Masks = NO_MASKS,
    empty: str = "/dev/null",
    pinned: Sequence[str] = (),
) -> list[str]:
    """`bwrap ... --` to put in front of a command; paths that do not exist are left out. Masked
    directories become empty read-only tmpfs mounts, masked files the empty file `empty` (or their
    placeholder, `masks.sources`), read-only;
    `pinned` directories are bound writable among the read-only paths, the shallowest first (see
    `binds.bind_read_only`)."""
    argv = [bwrap, "--new-session", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev"]
    for path in writable:
        if os.path.isdir(path) and not path.startswith("/dev/"):
            argv += ["--bind", path, path]
    for path in sorted({*read_only, *pinned}, key=lambda p: (p.rstrip("/").count("/"), p)):
        if path in read_only and os.path.lexists(path):
            argv += ["--ro-bind", path, path]
        elif path not in read_only and os.path.isdir(path):
            argv += ["--bind", path, path]
    for path in masks.directories:
        if os.path.isdir(path) and not os.path.islink(path):
            argv += ["--tmpfs", path, "--remount-ro", path]
    sources = dict(masks.sources)
    for path in masks.files:
        if os.path.isfile(path) and not os.path.islink(path):
            argv += ["--ro-bind", sources.get(path, empty), path]
    if not network:
        argv.append("--unshare-net")
    return [*argv, "--"]
