"""Namespaces and Landlock rulesets kept for reuse by the thread launcher: creating a mount or network
namespace per process costs milliseconds, building a ruleset about fifty system calls; joining an
existing namespace or enforcing a built ruleset costs microseconds.

Module state, on purpose: these are kernel objects of this process, not state of a project or a
Runtime. Each kept object is a value-keyed memo, bounded (LRU) and keyed by what it is made of: a
ruleset by its rules and the device and inode of each path (`LandlockRules.key`), so a directory
replaced on disk or a path made later gets a fresh ruleset; a read-only mount namespace by each
protected path's device and inode, so a file replaced on disk (an editor's save) gets a fresh
namespace instead of showing the old file. The one empty network namespace is a fact of the process:
it has only a downed loopback, and Landlock's scoping keeps abstract UNIX sockets of different calls
apart. A process with a minimal `/dev` gets a devpts of its own and a ruleset of its own granting it
(`devices.own_terminals`): what is kept is shared by the processes of every call. Only usable where
this process may create namespaces itself (CAP_SYS_ADMIN); otherwise the fork server creates them per
process (and keeps its own, the same way).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from . import keeper, kernel, launch_request, loopback, seccomp

__all__ = [
    "covered_namespace",
    "enter_from_thread",
    "mount_namespace",
    "network_namespace",
    "own_ruleset",
    "release_after",
    "ruleset",
]

_MAX_MOUNT_NAMESPACES = 16
_MAX_RULESETS = 64
_MAX_TEMPLATES = 8
"""Each template holds a descriptor per rule path (about a dozen): a few cover a project's calls."""
_lock = threading.Lock()
_mounts: OrderedDict[tuple[Any, ...], int] = OrderedDict()
"""`launch_request.mount_key` of the protected paths and masks → mount namespace fd."""
_network: list[int] = []
_rulesets: OrderedDict[tuple[Any, ...], int] = OrderedDict()
"""Rules and their paths' identities (`LandlockRules.key`) → ruleset fd."""
_templates: OrderedDict[tuple[Any, ...], kernel.RuleTemplate] = OrderedDict()
"""The same keys → the rules' template, for processes that each need a ruleset of their own."""


def _in_new_thread(setup: Callable[[], None], kind: str) -> int:
    """Run `setup` in a throwaway thread and return an fd holding the namespace of `kind` it made."""
    result: list[int | BaseException] = []

    def body() -> None:
        try:
            setup()
            result.append(os.open(f"/proc/thread-self/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC))
        except BaseException as error:
            result.append(error)

    thread = threading.Thread(target=body, name=f"toolrt-sandbox-{kind}ns")
    thread.start()
    thread.join()
    outcome = result[0]
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def mount_namespace(
    read_only: Sequence[str],
    masks: Mapping[str, Any] | None = None,
    dev: bool = False,
    pinned: Sequence[str] = (),
    writable: Sequence[str] | None = None,
) -> int:
    """An fd of a private mount namespace where `read_only` are read-only bind mounts, `pinned` are
    writable ones (see `binds.bind_read_only`), the paths of `masks` (`launch_request.request_masks`) are
    hidden, with `dev` `/dev` is the minimal one, and every mount outside the `writable` directories is
    read-only (`kernel.read_only_outside`)."""
    key = launch_request.mount_key(read_only, masks, dev, pinned, writable)
    with _lock:
        fd = _mounts.get(key)
        if fd is not None:
            _mounts.move_to_end(key)
            return fd

        def setup() -> None:
            kernel.unshare(kernel.CLONE_NEWNS)
            kernel.make_mounts_private()
            kernel.make_mounts(key)

        fd = _mounts[key] = _in_new_thread(setup, "mnt")
        while len(_mounts) > _MAX_MOUNT_NAMESPACES:
            os.close(_mounts.popitem(last=False)[1])
        return fd


def network_namespace() -> int:
    """An fd of the shared network namespace with nothing but a downed loopback."""
    with _lock:
        if not _network:
            _network.append(_in_new_thread(lambda: kernel.unshare(kernel.CLONE_NEWNET), "net"))
        return _network[0]


def ruleset(rules: kernel.LandlockRules) -> int:
    """A built ruleset fd for `rules`, shared by every process with the same rules on the same inodes."""
    key = rules.key()
    with _lock:
        fd = _rulesets.get(key)
        if fd is not None:
            _rulesets.move_to_end(key)
            return fd
        fd = _rulesets[key] = kernel.build_ruleset(rules)
        while len(_rulesets) > _MAX_RULESETS:
            os.close(_rulesets.popitem(last=False)[1])
        return fd


def own_ruleset(rules: kernel.LandlockRules) -> int:
    """A new ruleset fd for `rules`, for one process to add its own rules to (close it once enforced),
    built from a kept template (`kernel.RuleTemplate`): a third of the cost of building it anew."""
    key = rules.key()
    with _lock:  # built under the lock: an eviction by another thread never closes what is in use
        template = _templates.get(key)
        if template is None:
            template = _templates[key] = kernel.RuleTemplate(rules)
            while len(_templates) > _MAX_TEMPLATES:
                _templates.popitem(last=False)[1].close()
        else:
            _templates.move_to_end(key)
        return template.build()


def enter_from_thread(request: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
    """Put the calling thread (and every process it starts) in the sandbox a request describes: join the
    kept namespaces first (a Landlocked thread may not change mounts), then enforce Landlock, then drop
    every capability of the programs it starts (root's included; the thread keeps its permitted set, see
    `kernel.drop_capabilities`).

    Returns the fd of a single-use mount namespace (a request with a `cover`), which the caller hands
    to `release_after` once the process is started (this thread may start no thread by then), or None;
    the seccomp listener of a request with a socket allow-list (`supervise_unix`), or None; and the proxy
    listener made in the thread's own network namespace for a request with `proxy_net` (see `loopback`),
    or None."""
    read_only = [str(p) for p in request.get("read_only", ())]
    pinned = [str(p) for p in request.get("pinned", ())]
    masks = launch_request.request_masks(request)
    rules = launch_request.landlock_rules(request)
    dev = bool(request.get("dev"))
    writable = launch_request.request_writable(request)
    # Built (or found) before joining any mount namespace: its rules hold the real tree's directories, the
    # same in every namespace. With a minimal /dev, one of the process's own: it gains a rule on the
    # process's own devpts below, and on a covered root's overlay (Landlock ignores the real root beneath it).
    # A covered namespace made ahead (with a minimal /dev) may come with its ruleset made ahead too, its
    # own devpts already granted (see `_make_spare`): nothing of Landlock is left for the call's path.
    single_use, granted, landlock = _covered_and_ruleset(request, read_only, masks, dev, pinned, rules, writable)
    listener = proxy = None
    try:
        try:
            _join_mounts(request, single_use, read_only, masks, dev, pinned, writable)
            proxy = _join_network(request)
            if request.get("pid"):
                kernel.unshare(kernel.CLONE_NEWPID)  # the thread's next child, the program, is the namespace's init
            if landlock is not None and rules is not None:
                if dev and granted is None:  # this process's own devpts, and its covered root's overlay
                    kernel.grant_own_terminals(
                        landlock, rules, launch_request.covered_root(request) if single_use else None
                    )
                kernel.restrict_with(landlock)
        finally:
            if landlock is not None and dev:
                os.close(landlock)
        listener = _filter_sockets(request)
        # this thread stays alive beside the program; one the keeper started ahead has an empty bounding set
        kernel.drop_capabilities(keep_permitted=True, bounding_set_empty=keeper.bounding_set_empty())
    except BaseException:
        for fd in (listener, proxy):
            if fd is not None:
                os.close(fd)
        if single_use is not None:
            _forget(single_use)
        raise
    return single_use, listener, proxy


def _covered_and_ruleset(
    request: Mapping[str, Any],
    read_only: list[str],
    masks: dict[str, Any] | None,
    dev: bool,
    pinned: list[str],
    rules: kernel.LandlockRules | None,
    writable: list[str] | None = None,
) -> tuple[int | None, int | None, int | None]:
    """(the single-use covered namespace of a request with a `cover`, the ruleset made ahead with it and
    its devpts granted, the ruleset to enforce): that one, a kept one, or one of the process's own."""
    cover = request.get("cover") if launch_request.wants_mounts(request) else None
    single_use = granted = None
    if cover:  # made for this process, its devpts included (`kernel.make_mounts`)
        single_use, granted = covered_namespace(read_only, masks, dev, cover, pinned, rules, writable)
    try:
        landlock = granted
        if landlock is None and rules is not None:
            landlock = own_ruleset(rules) if dev else ruleset(rules)
    except BaseException:
        if single_use is not None:
            _forget(single_use)
        raise
    return single_use, granted, landlock


def _join_mounts(
    request: Mapping[str, Any],
    single_use: int | None,
    read_only: list[str],
    masks: dict[str, Any] | None,
    dev: bool,
    pinned: list[str],
    writable: list[str] | None = None,
) -> None:
    """Join the request's mount namespace: its single-use covered one, or a kept one (with a minimal /dev,
    a copy of it with a devpts of this process's own)."""
    if not launch_request.wants_mounts(request):
        return
    mounts = single_use if single_use is not None else mount_namespace(read_only, masks, dev, pinned, writable)
    kernel.unshare(kernel.CLONE_FS)  # joining a mount namespace needs our own root and cwd
    kernel.setns(mounts, kernel.CLONE_NEWNS)
    if dev and single_use is None:  # a copy of the kept one, for its terminals alone
        kernel.unshare(kernel.CLONE_NEWNS)
        kernel.own_terminals()


def _join_network(request: Mapping[str, Any]) -> int | None:
    """Join the kept empty network namespace (`unshare_net`), or make one of this thread's own whose only
    listener is the proxy's (`proxy_net`: that listener's fd is returned)."""
    if request.get("unshare_net"):
        kernel.setns(network_namespace(), kernel.CLONE_NEWNET)
    elif request.get("proxy_net"):
        kernel.unshare(kernel.CLONE_NEWNET)
        return loopback.proxy_listener()
    return None


def _filter_sockets(request: Mapping[str, Any]) -> int | None:
    """The seccomp filter on UNIX sockets a request asks for; the supervisor's listener fd, or None."""
    if not request.get("no_unix_sockets"):
        return None
    kernel.set_no_new_privs()
    if request.get("supervise_unix"):
        return seccomp.supervise_unix_sockets()
    seccomp.refuse_unix_sockets()
    return None


_spares: OrderedDict[tuple[Any, ...], list[tuple[int, int | None]]] = OrderedDict()
"""Covered mount namespaces made ahead of use, by key, each for one process (see `covered_namespace`), with
the process's own Landlock ruleset when it has a minimal /dev (its devpts granted), else None. At most
`_MAX_SPARES` in all."""
_building: set[tuple[Any, ...]] = set()
_built = threading.Condition(_lock)
"""Notified whenever a spare's making ends (made or failed)."""
_SPARE_WAIT = 2.0
"""How long a process waits for its spare being made before making its own (seconds)."""
_wanted: dict[int, tuple[Any, ...]] = {}
"""Single-use namespace fd → what its successor is made of (made once the process using it started)."""
_MAX_SPARES = 4
_bases: OrderedDict[tuple[Any, ...], int] = OrderedDict()
"""`launch_request.cover_base_key` → the fd of a kept namespace each covered one of that key is copied from."""
_MAX_BASES = 4


def covered_namespace(
    read_only: Sequence[str],
    masks: Mapping[str, Any] | None,
    dev: bool,
    cover: Any,
    pinned: Sequence[str] = (),
    rules: kernel.LandlockRules | None = None,
    writable: Sequence[str] | None = None,
) -> tuple[int, int | None]:
    """An fd of a fresh mount namespace for ONE process: the kept mounts, and the absent protected names
    covered (`kernel.cover_absent`). An overlay caches what it looks up while the real tree changes
    under it, so no two processes share one, not even one after the other: a process can leave
    descriptors of its files in flight over a socket pair of its own (sent over each other's ends), which
    outlive it and keep the overlay's entries for their names looked up, so its overlay would show the
    next process a directory the person has moved away since. The next one is made ahead, in a thread,
    before it is needed (its overlay has looked nothing up until it is used), and the end of each
    (unmounting it, a few milliseconds) is left to `release_after`: neither is on the path of a call.

    With `dev` and `rules`, a namespace made ahead comes with the process's own ruleset made ahead too
    (the second fd, to enforce and close; None when it was not made ahead): `rules` built from the kept
    template and granted that namespace's own devpts (`kernel.grant_own_terminals`), which no process
    outside it ever sees."""
    mounts = launch_request.mount_key(read_only, masks, dev, pinned, writable)
    landlock = (rules, rules.key()) if dev and rules is not None else None
    root = str(cover["root"])
    beneath = _ancestors(
        root, (*read_only, *pinned, *(masks["files"] if masks else ()), *(masks["directories"] if masks else ()))
    )
    key = (mounts, repr(cover), _held_identity((root, *beneath)), landlock[1] if landlock else None)
    with _lock:
        spare = _take(key)
        # One being made (the last process's successor, not ready yet on a busy machine): waited for, not
        # made a second time beside it, which would take the CPU it needs and leave it to be thrown away.
        while spare is None and key in _building and _built.wait(_SPARE_WAIT):
            spare = _take(key)
        if spare is not None:
            _wanted[spare[0]] = (key, mounts, cover, landlock)
            return spare
    # Made here, for this process alone: its successor is noted under its own fd once it exists (other
    # threads make theirs meanwhile).
    fd = _in_new_thread(lambda: _make_covered(mounts, cover), "mnt")
    with _lock:
        _wanted[fd] = (key, mounts, cover, landlock)
    return fd, None


def _ancestors(root: str, paths: Iterable[str]) -> tuple[str, ...]:
    """The directories strictly between `root` and each of `paths` beneath it: the overlay's entries for
    them are looked up when a mount beneath them is made, so a namespace made ahead must find them the same
    directories when it is used (their identities are part of its key)."""
    top = root.rstrip("/")
    found: set[str] = set()
    for path in paths:
        parent = os.path.dirname(path)
        while parent.startswith(top + "/") and parent not in found:
            found.add(parent)
            parent = os.path.dirname(parent)
    return tuple(sorted(found))


def _held_identity(directories: Iterable[str]) -> tuple[tuple[str, int, int, int, int, int], ...]:
    """(path, device, inode, mode, owner, group) of each existing directory: the overlay's entries it keeps for
    them (the root, `_ancestors`) hold the mode and owners they had when looked up, which its permission
    checks use, so a directory the host made stricter since gets a fresh namespace."""
    found = []
    for path in directories:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        found.append((path, info.st_dev, info.st_ino, info.st_mode, info.st_uid, info.st_gid))
    return tuple(found)


def _take(key: tuple[Any, ...]) -> tuple[int, int | None] | None:
    """A namespace of `key` made ahead, the last one first (called under `_lock`)."""
    ready = _spares.get(key)
    if not ready:
        return None
    spare = ready.pop()
    if not ready:
        del _spares[key]
    return spare


def _put_back(key: tuple[Any, ...], spare: tuple[int, int | None]) -> None:
    """Add a ready namespace of `key`; close the oldest beyond `_MAX_SPARES` (each unmounts its overlay)."""
    evicted = []
    with _lock:
        _spares.setdefault(key, []).append(spare)
        _spares.move_to_end(key)
        while sum(map(len, _spares.values())) > _MAX_SPARES:
            oldest = next(iter(_spares))
            evicted.append(_spares[oldest].pop(0))
            if not _spares[oldest]:
                del _spares[oldest]
        _built.notify_all()
    for namespace, ruleset in evicted:
        _close(namespace, ruleset)


def _close(namespace: int, ruleset: int | None = None) -> None:
    """Close a covered namespace that no process uses (its overlay unmounted with it), and its ruleset."""
    kernel.close_each(fd for fd in (namespace, ruleset) if fd is not None)


def _forget(namespace: int) -> None:
    """Close a single-use namespace fd whose process never started (no successor is made for it)."""
    with _lock:
        _wanted.pop(namespace, None)
    _close(namespace)


def _make_covered(mounts: tuple[Any, ...], cover: Any) -> None:
    """In a throwaway thread: a covered namespace, copied from its kept base (`kernel.cover_base`: the
    lower layer, the minimal /dev and own /proc are copied, not made again) where one can serve."""
    if not launch_request.base_usable(cover):
        kernel.unshare(kernel.CLONE_NEWNS)
        kernel.make_mounts_private()
        kernel.covered_mounts(mounts, cover, lower=True, dev=True)
        return
    base = _base(mounts, cover)
    try:
        kernel.unshare(kernel.CLONE_FS)  # joining a mount namespace needs our own root and cwd
        kernel.setns(base, kernel.CLONE_NEWNS)
    finally:
        os.close(base)
    kernel.unshare(kernel.CLONE_NEWNS)
    kernel.covered_mounts(mounts, cover, lower=False, dev=False)


def _base(mounts: tuple[Any, ...], cover: Any) -> int:
    """A copy of the fd of the kept base namespace for `cover` (made now when missing): a copy, so that
    its eviction by another thread never closes what this one is about to join."""
    key = launch_request.cover_base_key(mounts, cover)
    with _lock:
        fd = _bases.get(key)
        if fd is not None:
            _bases.move_to_end(key)
            return os.dup(fd)

    def setup() -> None:
        kernel.unshare(kernel.CLONE_NEWNS)
        kernel.cover_base(bool(mounts[0]), cover)

    made = _in_new_thread(setup, "mnt")
    with _lock:
        kept = _bases.setdefault(key, made)
        if kept != made:  # another thread made one meanwhile
            os.close(made)
        while len(_bases) > _MAX_BASES:
            os.close(_bases.popitem(last=False)[1])
        return os.dup(kept)


def _spare_ruleset(rules: kernel.LandlockRules, key: tuple[Any, ...], covered_root: str) -> int | None:
    """In the thread that made a spare covered namespace: `rules` built from their kept template (`key`,
    their `LandlockRules.key` taken outside this namespace, where the project's paths are the real ones;
    the template is never made here) and granted this namespace's own devpts and the overlay on its
    `covered_root` (`kernel.grant_own_terminals`); None when none is kept."""
    with _lock:  # under the lock: an eviction by another thread never closes what is in use
        template = _templates.get(key)
        if template is None:
            return None
        built = template.build()
    try:
        kernel.grant_own_terminals(built, rules, covered_root)
    except BaseException:
        os.close(built)
        raise
    return built


def _make_spare(
    key: tuple[Any, ...],
    mounts: tuple[Any, ...],
    cover: Any,
    landlock: tuple[kernel.LandlockRules, tuple[Any, ...]] | None = None,
) -> None:
    with _lock:
        if key in _building or _spares.get(key):
            return
        _building.add(key)

    def body() -> None:  # in the keeper thread
        fd = built = None
        try:
            _make_covered(mounts, cover)
            fd = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            built = _spare_ruleset(*landlock, str(cover["root"])) if landlock is not None else None
        except OSError:
            pass  # the next process makes its own (its ruleset too), and reports what fails
        finally:
            with _lock:
                _building.discard(key)
            if fd is not None:
                _put_back(key, (fd, built))
            else:
                with _lock:
                    _built.notify_all()

    keeper.soon(body)


def _forget_in_child() -> None:
    """A forked child makes its covered namespaces itself (its keeper too, see `keeper`): the ones made
    ahead for the parent's next processes are the parent's (a process of each in one overlay otherwise),
    and so are the ones its processes use now (the child's copies would keep them mounted after the
    parent closed its own). A lock of its own: the parent's keeper may have held this one at the fork,
    in the middle of a namespace whose making (`_building`) the child would wait for in vain. The kept
    namespaces and rulesets serve any number of processes: the child keeps them."""
    global _lock, _built
    _lock = threading.Lock()
    _built = threading.Condition(_lock)
    ready = [fd for spares in _spares.values() for spare in spares for fd in spare if fd is not None]
    kernel.close_each({*ready, *_wanted})
    _spares.clear()
    _wanted.clear()
    _building.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def release_after(pid: int, namespace: int) -> None:
    """Close a single-use namespace fd once process `pid` has ended, in the keeper thread (`keeper`): the
    last reference unmounts the overlay, which should not delay the call that used it. Never handed to
    another process, even once every process of its PID namespace has ended: descriptors it left in flight
    keep its overlay's entries for their names (see `covered_namespace`). The next one is made now, by the
    keeper too, while the process runs, not while it was being started, and so is the thread it will be
    launched from (`keeper.start_thread`)."""
    with _lock:
        wanted = _wanted.pop(namespace, None)
    if wanted is not None:
        _make_spare(*wanted)
        keeper.park_a_thread()  # the next process's launch thread, made ahead with its namespace
    keeper.close_when_ended(pid, namespace)
