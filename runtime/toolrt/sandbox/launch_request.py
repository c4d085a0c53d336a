"""What a launch request asks for, read the same way by both launchers (the fork server and the thread
launcher, `namespaces`): its masks, its Landlock rules, whether it needs a mount namespace of its own,
and the keys the namespaces and rulesets made for it are kept under.

Standard library only, like `kernel`: the fork server imports it under `python -I -S`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

if __package__:
    from .kernel import LandlockRules, identity_key, mounted_identity_key
else:  # run by path under `python -I -S`, outside the package (the fork server)
    from kernel import LandlockRules, identity_key, mounted_identity_key  # type: ignore[import-not-found,no-redef]

__all__ = [
    "base_usable",
    "cover_base_key",
    "covered_root",
    "landlock_rules",
    "mount_key",
    "request_masks",
    "request_writable",
    "wants_mounts",
]


def request_masks(request: Mapping[str, Any]) -> dict[str, Any] | None:
    """The masks a request carries (`{"files": [...], "directories": [...], "empty": path, "sources":
    [[file, source], ...]}`), or None."""
    masks = request.get("masks")
    if not isinstance(masks, Mapping) or not (masks.get("files") or masks.get("directories")):
        return None
    return {
        "files": [str(p) for p in masks.get("files", ())],
        "directories": [str(p) for p in masks.get("directories", ())],
        "empty": str(masks["empty"]),
        "sources": [[str(path), str(source)] for path, source in masks.get("sources", ())],
    }


def wants_mounts(request: Mapping[str, Any]) -> bool:
    """Whether a request needs a mount namespace of its own (a minimal /dev, read-only paths, masks)."""
    return bool(request.get("dev") or request.get("read_only") or request_masks(request) or request.get("cover"))


def landlock_rules(request: Mapping[str, Any]) -> LandlockRules | None:
    """The Landlock rules a request carries, or None."""
    landlock = request.get("landlock")
    if not isinstance(landlock, Mapping):
        return None
    rules = LandlockRules(
        int(landlock["abi"]),
        deny_tcp=bool(landlock["deny_tcp"]),
        scope_signals=bool(landlock["scope_signals"]),
        scope_abstract_unix=bool(landlock["scope_abstract_unix"]),
    )
    for path, rights in landlock["paths"]:
        rules.allow(str(path), int(rights))
    return rules


def mount_key(
    read_only: Sequence[str],
    masks: Mapping[str, Any] | None,
    dev: bool = False,
    pinned: Sequence[str] = (),
    writable: Sequence[str] | None = None,
) -> tuple[Any, ...]:
    """What a kept mount namespace is made of: whether `/dev` is the minimal one (and `/proc` lists only
    the process's own tree), the identity of each protected path, of each masked path and of each pinned
    directory (see `binds.bind_read_only`), each masked file's own source (a credential's placeholder),
    so a file replaced on disk (or a new denied file, or a new placeholder) gets a fresh namespace (a file
    given a new name entry for its inode too: `kernel.mounted_identity_key`); and the identity of each
    writable directory, outside which every mount is read-only (`kernel.read_only_outside`; None: a request
    that names none, whose namespace keeps the flags)."""
    writable_key = None if writable is None else identity_key(writable)
    if masks is None:
        return (dev, mounted_identity_key(read_only), (), (), "", identity_key(pinned), (), writable_key)
    return (
        dev,
        mounted_identity_key(read_only),
        mounted_identity_key(masks["files"]),
        identity_key(masks["directories"]),
        masks["empty"],
        identity_key(pinned),
        tuple(sorted((str(path), str(source)) for path, source in masks.get("sources", ()))),
        writable_key,
    )


def covered_root(request: Mapping[str, Any]) -> str | None:
    """The project root a request's namespace covers with an overlay (absent protected names), or None."""
    cover = request.get("cover")
    return str(cover["root"]) if isinstance(cover, Mapping) else None


def request_writable(request: Mapping[str, Any]) -> list[str] | None:
    """The writable directories a request names (outside which its mounts are read-only), or None."""
    writable = request.get("writable")
    return None if writable is None else [str(path) for path in writable]


def cover_base_key(key: tuple[Any, ...], cover: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a covered namespace's base (`cover_base`) is made of: the minimal /dev, and the overlay's
    lower layer. A lower directory removed and made again (a data directory cleaned up) gets a fresh
    base: the old one's tmpfs went with the old directory. Its change time is part of the key, since a
    new directory may get the old one's inode number."""
    lower = str(cover["lower"])
    try:
        changed = os.lstat(lower).st_ctime_ns
    except OSError:
        changed = 0
    return (key[0], tuple(map(str, cover["names"])), identity_key([lower]), changed)


def base_usable(cover: Mapping[str, Any]) -> bool:
    """Whether a covered namespace can be copied from a base (`cover_base`): not when the root holds
    `/dev` or `/proc`, whose mounts the overlay on the root would hide."""
    root = os.path.normpath(str(cover["root"])).rstrip("/") + "/"
    return not any((path + "/").startswith(root) for path in ("/dev", "/proc"))
