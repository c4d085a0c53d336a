"""Absent protected names made unwritable by the kernel: which names, where the overlay's directories
live, and whether this machine can do it (see `kernel.cover_absent` for the mounts).

A read-only bind mount covers only a path that exists; an absent `tools.d/`, `toolrt.yaml`, `.envrc` or
`.vscode/` at the project root would be an ordinary writable name. Each sandboxed process gets, in a
mount namespace of its own, an overlay on the root whose upper layer is the root itself and whose lower
layer holds one empty directory per absent protected name, each covered read-only: the names exist
there and nowhere else, and everything else reads and writes the real tree.

The overlay needs two directories on the root's filesystem outside the project: `<data dir>/sandbox/
<project key>/{lower,work}` (or the same under the temporary directory when the data directory is on
another filesystem). Where neither is on the root's filesystem, or overlayfs refuses the root (an
overlayfs root itself, NFS), absent names are left to the `protected` rule and the plan says so. The
probe that finds out runs once per filesystem and launcher.

Only names directly in the root are covered (the root-level protected names and toolrt's config);
deeper and wildcard names (`.git` below the root, `*.pem`) are the rules' alone.
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..beneath import is_within
from . import kernel

__all__ = ["absent_names", "cover_request"]

_probes: dict[tuple[int, str], bool] = {}
_probe_lock = threading.Lock()


def absent_names(
    root: Path, protected: Iterable[Path], exists: Callable[[str], bool] = os.path.lexists
) -> tuple[str, ...]:
    """The protected names directly in `root` that do not exist now (`exists`: the check, which a plan
    shares with its read-only mounts so that each path is looked at once per call)."""
    return tuple(name for path, name in _root_level(str(root), tuple(protected)) if not exists(path))


@functools.lru_cache(maxsize=64)
def _root_level(directory: str, protected: tuple[Path, ...]) -> tuple[tuple[str, str], ...]:
    """(path, name) of each protected entry directly in `directory`, sorted by name: a function of the
    policy's strings alone (which of them exist is looked at per call), so cached."""
    found: dict[str, str] = {}
    for path in map(str, protected):
        parent, name = os.path.split(path)
        if parent == directory:
            found[name] = path
    return tuple((found[name], name) for name in sorted(found))


@functools.lru_cache(maxsize=64)
def _directories(root: str, data_parent: str, key: str) -> tuple[str, str] | None:
    """(lower, work) on the root's filesystem, made when missing; None when no candidate is on it."""
    try:
        device = os.stat(root).st_dev
    except OSError:
        return None
    for base in (Path(data_parent) / "sandbox" / key, Path(tempfile.gettempdir()) / f"toolrt-{os.getuid()}" / key):
        if is_within(base, root) or is_within(root, base):
            continue  # overlayfs refuses a work directory inside its upper layer
        try:
            (base / "lower").mkdir(parents=True, exist_ok=True)
            (base / "work").mkdir(exist_ok=True)
            if os.stat(base).st_dev == device:
                return str(base / "lower"), str(base / "work")
        except OSError:
            continue
    return None


def cover_request(root: Path, names: tuple[str, ...], output_dir: Path, launch: str) -> dict[str, Any] | None:
    """The `cover` field of a request for `names`, or None when this machine cannot cover them here.
    `output_dir` is the project's tool-output directory (`<data dir>/tool-output/<key>`)."""
    if not names or launch not in ("thread", "forkserver"):
        return None
    found = _directories(str(root), str(output_dir.parent.parent), output_dir.name)
    if found is not None and not (os.path.isdir(found[0]) and os.path.isdir(found[1])):
        _directories.cache_clear()  # removed since (a data directory cleaned up): made again
        found = _directories(str(root), str(output_dir.parent.parent), output_dir.name)
    if found is None:
        return None
    cover = {"root": str(root), "names": list(names), "lower": found[0], "work": found[1]}
    return cover if _works(cover, launch) else None


def _works(cover: dict[str, Any], launch: str) -> bool:
    """Whether an overlay on this root's filesystem can be mounted by `launch` (probed once)."""
    key = (os.stat(cover["root"]).st_dev, launch)
    with _probe_lock:
        known = _probes.get(key)
    if known is not None:
        return known
    probe = {**cover, "names": ["toolrt-probe"]}
    if launch == "forkserver":
        works = _probe_served(probe)
    else:
        works = _probe_in_thread(probe)
    with _probe_lock:
        _probes[key] = works
    return works


def _probe_in_thread(cover: dict[str, Any]) -> bool:
    result: list[bool] = []

    def body() -> None:
        try:
            kernel.unshare(kernel.CLONE_NEWNS)
            kernel.make_mounts_private()
            kernel.cover_absent(cover)
            result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=body, name="toolrt-sandbox-cover-probe")
    thread.start()
    thread.join()
    return bool(result and result[0])


def _probe_served(cover: dict[str, Any]) -> bool:
    """Ask the fork server to start `true` under only this cover: whether it ran."""
    from .launcher import fork_server

    request = {"argv": ["true"], "env": {"PATH": "/usr/bin:/bin"}, "cwd": "/", "cover": cover}
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        channel = fork_server().submit(request, (null, null, null))
    except OSError:
        return False
    finally:
        os.close(null)
    with channel:
        channel.settimeout(20)
        received = b""
        try:
            while chunk := channel.recv(256):
                received += chunk
        except OSError:
            return False
    return received.startswith(b"P") and b"\nX0" in received
