"""From a policy to what the kernel is told for one process, and a line saying what that enforces.

A `SandboxPlan` is concrete: the Landlock rules (path, rights), whether the process gets its own
network namespace, which protected paths become read-only bind mounts. It is built per call (an
allowed `external_directory` widens the writable set for that call only) and costs about a hundred
microseconds: no file is read, one `lstat` of each protected path in the writable set (what depends on
the policy alone is kept per policy).
"""

from __future__ import annotations

import functools
import os
import stat
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ToolFailure
from ..permissions.model import usable_exempt
from . import kernel
from .bwrap import bwrap_argv
from .cover import absent_names, cover_request
from .credentials import Credential
from .masks import NO_MASKS, Masks, empty_file
from .netrules import NetworkRules
from .policy import SandboxPolicy
from .seatbelt import seatbelt_argv
from .seccomp import supported as seccomp_supported
from .supervisor import pin
from .support import Support

if TYPE_CHECKING:
    from ..attribution import Journal

__all__ = ["DEVICE_FILES", "SandboxPlan", "pinned_directories", "plan_sandbox", "within", "writable_set"]

DEVICE_FILES: tuple[str, ...] = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts")
"""Writable in every mode: programs expect to write to these (`2>/dev/null`, a terminal)."""
_TEMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
_ALL = (1 << 16) - 1
_WRITABLE = _ALL & ~(kernel.FS_MAKE_BLOCK | kernel.FS_MAKE_CHAR)
"""Every right in a writable directory but making device nodes (`mknod b 7 0` would reach a disk)."""
_DEVICE = kernel.FS_READ_FILE | kernel.FS_WRITE_FILE | kernel.FS_TRUNCATE | kernel.FS_IOCTL_DEV


@dataclass(frozen=True, slots=True)
class SandboxPlan:
    """What to enforce on one process."""

    launch: str
    """`thread` or `forkserver` (Landlock, see `support`), or `exec`: run `prefix + argv` (bubblewrap, Seatbelt)."""
    landlock_abi: int
    rules: tuple[tuple[str, int], ...]
    """(path, Landlock rights) pairs: read and execute everywhere, everything in the writable set."""
    writable: tuple[str, ...]
    """The writable set, for messages and for mechanisms other than Landlock."""
    deny_network: bool
    unshare_net: bool
    read_only: tuple[str, ...]
    """Protected paths bind-mounted read-only in a private mount namespace."""
    description: str
    """What is enforced, for `toolrt call --json` metadata: `landlock ABI 7 workspace-write + netns`."""
    mode: str = "workspace-write"
    prefix: tuple[str, ...] = ()
    """For `exec`: the sandboxing command to put in front of the program's argv."""
    masks: Masks = NO_MASKS
    """Paths the `read` rules deny, hidden in the mount namespace (see `masks`)."""
    mask_source: str = ""
    """The empty read-only file bound over each masked file."""
    minimal_dev: bool = False
    """`/dev` is the minimal one (see `devices`) in the process's mount namespace."""
    pid_namespace: bool = False
    """The process is the init of a PID namespace of its own: when it ends, everything it started ends."""
    no_unix_sockets: bool = False
    """A seccomp filter refuses `socket(AF_UNIX)` to the process and all it starts (see `seccomp`)."""
    sockets: tuple[tuple[str, int, int], ...] = ()
    """The host's socket allow-list, pinned (path, device, inode; see `supervisor.pin`): when not empty,
    the filter lets UNIX sockets be made and toolrt's supervisor connects them, to these only."""
    covered: tuple[str, ...] = ()
    """Absent protected names of the root, unwritable in the process's own mount namespace (see `cover`)."""
    cover_dirs: tuple[str, str] = ("", "")
    """(lower, work): the overlay's directories for `covered`."""
    root: str = ""
    pinned: tuple[str, ...] = ()
    """Directories bound onto themselves, writable, in the mount namespace (see `pinned_directories`)."""
    credentials: tuple[Credential, ...] = ()
    """The host's credentials list: denied variables are dropped from the process's environment, masked
    ones replaced by placeholders the proxy substitutes (see `credentials`)."""
    network_rules: NetworkRules | None = None
    """`network:` names: the process gets a network namespace of its own whose one listener, on
    127.0.0.1, is toolrt's proxy (see `proxy`), which lets through what these rules allow."""

    def _cover(self) -> dict[str, object] | None:
        if not self.covered:
            return None
        lower, work = self.cover_dirs
        return {"root": self.root, "names": list(self.covered), "lower": lower, "work": work}

    def request(self) -> dict[str, object]:
        """The fork server's request fields (see `forkserver`)."""
        return {
            "landlock": {
                "abi": self.landlock_abi,
                "paths": [list(rule) for rule in self.rules],
                "deny_tcp": self.deny_network and self.network_rules is None,
                "scope_signals": True,
                "scope_abstract_unix": self.deny_network,
            },
            "unshare_net": self.unshare_net and self.network_rules is None,
            "proxy_net": self.network_rules is not None,
            "dev": self.minimal_dev,
            "pid": self.pid_namespace,
            "no_unix_sockets": self.no_unix_sockets,
            "supervise_unix": bool(self.sockets) and self.no_unix_sockets,
            "cover": (
                {
                    "root": self.root,
                    "names": list(self.covered),
                    "lower": self.cover_dirs[0],
                    "work": self.cover_dirs[1],
                }
                if self.covered
                else None
            ),
            "read_only": list(self.read_only),
            "pinned": list(self.pinned),
            "writable": list(self.writable),
            "masks": {
                "files": list(self.masks.files),
                "directories": list(self.masks.directories),
                "empty": self.mask_source,
                "sources": [list(pair) for pair in self.masks.sources],
            },
        }


def writable_set(
    policy: SandboxPolicy, *, root: Path, output_dir: Path, journal: Journal | None = None
) -> tuple[str, ...]:
    """The directories a process may write under `policy` (the device files aside).

    The tool-output directory is writable only while neither it nor any directory above it is a
    symlink, checked at each call like an exempt directory (`usable_exempt`): a tool-output directory
    that is, becomes, or passes through a link to `/` (or anywhere else) widens nothing. A directory the
    host declared is followed through its links (the host chose it), but not through one the attribution
    `journal` says a process a tool started put there (`_without_planted`): that directory is left out."""
    fixed = _fixed_writable(policy, root)
    if journal is not None and policy.writable:
        fixed = _without_planted(policy, root, fixed, journal)
    if policy.mode != "workspace-write":
        return fixed
    return tuple(dict.fromkeys((*fixed, *usable_exempt((output_dir,)))))


def _without_planted(policy: SandboxPolicy, root: Path, fixed: tuple[str, ...], journal: Journal) -> tuple[str, ...]:
    """`fixed` less each declared directory reached through a link the `journal` attributes to a process a
    tool started (a call allowed to write `ext` that puts a link in the place of `ext/a`, above a declared
    `ext/a/bin`: from then on the declared name leads wherever the link points)."""
    planted = {
        resolved for resolved, links in _declared_links(policy) if any(_planted(link, journal) for link in links)
    }
    if not planted:
        return fixed
    kept = set(_fixed_writable(replace(policy, writable=()), root))  # the root and temp directories stay
    return tuple(path for path in fixed if path not in planted or path in kept)


def _planted(link: str, journal: Journal) -> bool:
    """Whether the link at `link` was made (or last changed) while a process a tool started was running, per
    the journal, wherever that process could write: renaming a directory leaves the times of what is in it
    as they were, so a link made where one call could write, in a directory a later call moved above the
    declared one, is where neither call's sandbox puts it (a host's link made during a call counts too).
    So is one in a directory that changed while such a process could write there: a call that renames a
    directory holding the host's link (`ext/lib/bin`) into the declared way (`ext/a`) puts no link."""
    try:
        changed = os.lstat(link).st_ctime_ns
    except OSError:
        return True  # gone since it was resolved: what the declared name leads to now is unknown
    return journal.span_at("", changed) is not None or any(  # "": at any place
        _moved_here(directory, journal) for directory in _above(link)
    )


def _moved_here(directory: str, journal: Journal) -> bool:
    """Whether `directory` changed (a rename into its place sets its change time) while a process a tool
    started could write the directory holding it, as renaming needs: the host's link in it may have been
    put on the declared way with it. A writable directory's own root (the project's, an approved one)
    changes with every file made in it, but no process renames it: its parent is not writable."""
    try:
        changed = os.lstat(directory).st_ctime_ns
    except OSError:
        return True
    return journal.span_at(os.path.dirname(directory), changed) is not None


def _above(link: str) -> tuple[str, ...]:
    """The directories holding `link`, nearest first, up to (not including) the root."""
    found = []
    directory = os.path.dirname(link)
    while directory not in ("/", ""):
        found.append(directory)
        directory = os.path.dirname(directory)
    return tuple(found)


@functools.lru_cache(maxsize=256)
def _declared_links(policy: SandboxPolicy) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(resolved, the links on the way) of each host-declared writable directory that is reached
    through a link; cached with `_fixed_writable`'s resolution (a later link is the read-only tree's to
    refuse, see `binds.open_directory`)."""
    found = []
    for path in map(str, policy.writable):
        links = _links_on(os.path.abspath(path))
        if links:
            found.append((os.path.realpath(path), links))
    return tuple(found)


def _links_on(path: str) -> tuple[str, ...]:
    """The symlinks resolving `path` goes through, each named where it is met (after the links before it)."""
    links: list[str] = []
    pending = [part for part in reversed(path.split("/")) if part]
    current = "/"
    while pending and len(links) <= 40:  # a loop: realpath gives up too
        name = pending.pop()
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, name)
        try:
            is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
        except OSError:
            current = candidate
            continue
        if not is_link:
            current = candidate
            continue
        links.append(candidate)
        target = os.readlink(candidate)
        current = "/" if target.startswith("/") else current
        pending.extend(part for part in reversed(target.split("/")) if part)
    return tuple(links)


@functools.lru_cache(maxsize=256)
def _fixed_writable(policy: SandboxPolicy, root: Path) -> tuple[str, ...]:
    """The root, the temp directories and the host's declared directories, resolved; cached, since
    resolving them costs more than the rest of a plan (the host chose them: their links are followed)."""
    paths: list[str] = []
    if policy.mode == "workspace-write":
        paths.append(str(root))
        paths.extend(dict.fromkeys((tempfile.gettempdir(), *_TEMP_DIRS)))
    paths.extend(str(p) for p in policy.writable)
    return tuple(dict.fromkeys(os.path.realpath(p) for p in paths))


@functools.lru_cache(maxsize=256)
def _mountable(policy: SandboxPolicy, writable: tuple[str, ...]) -> tuple[str, ...]:
    """The protected paths that need a read-only mount when they exist: those in the writable set (elsewhere
    they are read-only anyway) but not in a directory the host declared writable, unless essential; in
    read-only mode, where only what the host declared is writable, only essential ones. Cached: what it
    compares is the policy's and the call's writable set, not the tree (existence is checked per call)."""
    declared = _fixed_declared(policy)
    essential = frozenset(policy.essential)
    return tuple(
        str(p)
        for p in policy.protected
        if (policy.mode == "workspace-write" or p in essential)
        and any(within(str(p), w) for w in writable)
        and (p in essential or not any(within(str(p), d) for d in declared))
    )


@functools.lru_cache(maxsize=256)
def _fixed_declared(policy: SandboxPolicy) -> tuple[str, ...]:
    """The host's declared writable directories, resolved (cached as `_fixed_writable` resolves them)."""
    return tuple(os.path.realpath(p) for p in policy.writable)


def plan_sandbox(
    policy: SandboxPolicy,
    support: Support,
    *,
    root: Path,
    output_dir: Path,
    masks: Masks = NO_MASKS,
    granted: tuple[Path, ...] = (),
    journal: Journal | None = None,
) -> SandboxPlan | None:
    """The plan for `policy` on this machine; None when the mode is `off` or no mechanism exists.
    `granted`: the directories of `policy.writable` an approval widened it by for this call. `journal`:
    the attribution journal, which refuses to pin a listed socket a process put in place (`pin`).

    Raises:
        ToolFailure: `masks` is not empty and this machine has no way to hide them (Landlock without a
            mount namespace): the process would read what the rules deny, so it is not run.
    """
    if policy.mode == "off" or not support.available:
        return None
    source = empty_file() if masks else ""
    writable = writable_set(policy, root=root, output_dir=output_dir, journal=journal)
    deny_network = not policy.network
    exists = functools.cache(_exists)  # one look at each path per plan: the mounts' and the cover's
    protected = tuple(filter(exists, _mountable(policy, writable)))
    if not support.landlock_abi:
        return _exec_plan(policy, support, writable, protected, root, masks, source, granted)
    if masks and not support.mount_namespace:
        raise ToolFailure(
            f"The read rules deny {_count(masks)} in the project, which this process could read: the sandbox "
            "here has no mount namespace to hide them. Nothing was run."
        )
    rules = [("/", kernel.FS_READ)]
    rules.extend((device, _DEVICE) for device in DEVICE_FILES)
    rules.extend((path, _WRITABLE) for path in writable)
    unshare_net = deny_network and support.net_namespace
    proxied = policy.network_rules if unshare_net else None
    read_only = protected if support.mount_namespace else ()
    absent = absent_names(root, policy.protected, exists) if policy.mode == "workspace-write" else ()
    cover = cover_request(root, absent, output_dir, support.launch) if absent and support.mount_namespace else None
    sockets = pin(policy.sockets, journal) if policy.sockets and seccomp_supported() else ()
    description = _landlock_description(
        policy,
        support,
        proxied=proxied,
        unshare_net=unshare_net,
        protected=protected,
        read_only=read_only,
        absent=absent,
        cover=cover,
        masks=masks,
        sockets=sockets,
        root=root,
    )
    # A listed socket the process could rename aside, or put another socket in the place of, would be
    # pinned as that other one by the next toolrt: it is a mount point in the process's namespace.
    held = tuple(path for path, _, _ in sockets if any(within(path, w) for w in writable))
    if held and support.mount_namespace:
        read_only = tuple(dict.fromkeys((*read_only, *held)))
    approved = tuple(os.path.realpath(p) for p in granted)
    pinned = pinned_directories(read_only, (*policy.essential, *map(Path, held)), writable, approved)
    return SandboxPlan(
        launch=support.launch,
        landlock_abi=support.landlock_abi,
        rules=tuple(rules),
        writable=writable,
        deny_network=deny_network,
        unshare_net=unshare_net,
        read_only=read_only,
        description=description,
        mode=policy.mode,
        masks=masks if support.mount_namespace else NO_MASKS,
        mask_source=source,
        minimal_dev=support.mount_namespace,
        pid_namespace=support.pid_namespace,
        no_unix_sockets=seccomp_supported(),
        sockets=sockets,
        covered=tuple(cover["names"]) if cover is not None else (),
        cover_dirs=(cover["lower"], cover["work"]) if cover is not None else ("", ""),
        root=str(root),
        pinned=pinned,
        network_rules=proxied,
        credentials=policy.credentials,
    )


def _landlock_description(
    policy: SandboxPolicy,
    support: Support,
    *,
    proxied: NetworkRules | None,
    unshare_net: bool,
    protected: tuple[str, ...],
    read_only: tuple[str, ...],
    absent: tuple[str, ...],
    cover: dict[str, Any] | None,
    masks: Masks,
    sockets: tuple[tuple[str, int, int], ...],
    root: Path,
) -> str:
    """The plan's one-line description: the mechanisms in use and what each could not do here."""
    parts = [f"landlock ABI {support.landlock_abi} {policy.mode}"]
    if not policy.network:
        parts.append(_network_note(proxied, unshare_net, support.landlock_abi))
    if read_only:
        parts.append(_read_only_note(read_only, root))
    elif protected:
        parts.append("protected paths writable (no mount namespace)")
    if cover is not None:
        parts.append("absent protected covered")
    elif absent:
        parts.append("absent protected names: rules only")
    if masks:
        parts.append(f"masked {_count(masks)}")
    if sockets:
        parts.append(f"{len(sockets)} listed UNIX socket{'s' if len(sockets) > 1 else ''}")
    return " + ".join(parts)


def _network_note(proxied: NetworkRules | None, unshare_net: bool, landlock_abi: int) -> str:
    """How the network is kept off (or why it is not)."""
    if proxied is not None:
        return "netns + proxy"
    if unshare_net:
        return "netns"
    if landlock_abi >= 4:
        return "network off: TCP only (no network namespace)"
    return "network NOT off (no network namespace, Landlock ABI < 4)"


@functools.lru_cache(maxsize=256)
def pinned_directories(
    read_only: tuple[str, ...], essential: tuple[Path, ...], writable: tuple[str, ...], approved: tuple[str, ...]
) -> tuple[str, ...]:
    """The directories to bind onto themselves, writable, next to the read-only mounts `read_only`:

    - every directory above an essential path (the data directory, toolrt's environment, the locked
      file) whose parent is writable: a read-only mount holds its own tree, but a rename of a directory
      above it (`mv ~/.local/share/toolrt x`) would move the journal and the person's approvals aside,
      and toolrt would start an empty one where it looks. A mount point cannot be renamed or removed;
    - every writable directory beneath a read-only path (the tool-output directory and the language
      servers' cache in the data directory, a host's `writable:` entry), which stays writable; one an
      approval widened this call by (`approved`: an `external_directory`) is not: no approval lifts
      an essential path.

    A function of its arguments alone (strings and paths, not the tree), so cached."""
    walls = {str(path) for path in essential}
    found: list[str] = []
    for path in read_only:
        if path not in walls:
            continue
        parent = os.path.dirname(path)
        while parent != os.path.dirname(parent):
            if any(within(os.path.dirname(parent), w) for w in writable):
                found.append(parent)
            parent = os.path.dirname(parent)
    found.extend(w for w in writable if w not in approved and any(within(w, r) and w != r for r in read_only))
    return tuple(dict.fromkeys(found))


def _exec_plan(
    policy: SandboxPolicy,
    support: Support,
    writable: tuple[str, ...],
    protected: tuple[str, ...],
    root: Path,
    masks: Masks,
    source: str,
    granted: tuple[Path, ...],
) -> SandboxPlan:
    """bubblewrap (Linux without Landlock) or Seatbelt (macOS): a command put in front of the program."""
    if support.bwrap:
        approved = tuple(os.path.realpath(p) for p in granted)
        pinned = pinned_directories(protected, policy.essential, writable, approved)
        prefix = bwrap_argv(
            support.bwrap, writable, protected, network=policy.network, masks=masks, empty=source, pinned=pinned
        )
        parts = [f"bubblewrap {policy.mode}"] + ([] if policy.network else ["netns"])
    else:  # Seatbelt matches paths, not inodes: an absent protected name is denied as well as one that exists
        named = tuple(dict.fromkeys((*protected, *(str(root / n) for n in absent_names(root, policy.protected)))))
        prefix = seatbelt_argv(writable, named, network=policy.network, masked=(*masks.files, *masks.directories))
        parts = [f"seatbelt {policy.mode} (untested)"] + ([] if policy.network else ["network off"])
    if protected:
        parts.append(_read_only_note(protected, root))
    if masks:
        parts.append(f"masked {_count(masks)}")
    return SandboxPlan(
        launch="exec",
        landlock_abi=0,
        rules=(),
        writable=writable,
        deny_network=not policy.network,
        unshare_net=False,
        read_only=protected,
        description=" + ".join(parts),
        mode=policy.mode,
        prefix=tuple(prefix),
        masks=masks,
        mask_source=source,
        credentials=policy.credentials,  # denied variables are dropped, masked ones hold their placeholder
    )


def _count(masks: Masks) -> str:
    return "1 denied path" if len(masks) == 1 else f"{len(masks)} denied paths"


def _read_only_note(paths: tuple[str, ...], root: Path) -> str:
    prefix = str(root).rstrip("/") + "/"
    return "read-only " + ", ".join(p[len(prefix) :] if p.startswith(prefix) else p for p in paths)


def _exists(path: str) -> bool:
    """`os.path.lexists` without an exception raised and caught for each absent path (most protected names
    are absent): `faccessat(F_OK, AT_SYMLINK_NOFOLLOW)`."""
    return os.access(path, os.F_OK, follow_symlinks=False)


def within(path: str, directory: str) -> bool:
    """`path` is `directory` or beneath it (both normalised strings)."""
    return path == directory or path.startswith(directory.rstrip("/") + "/")
