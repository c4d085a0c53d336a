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
apart. Only usable where this process may create namespaces itself (CAP_SYS_ADMIN); otherwise the
fork server creates them per process (and keeps its own, the same way).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import kernel, seccomp

__all__ = ["enter_from_thread", "mount_namespace", "network_namespace", "ruleset"]

_MAX_MOUNT_NAMESPACES = 16
_MAX_RULESETS = 64
_lock = threading.Lock()
_mounts: OrderedDict[tuple[Any, ...], int] = OrderedDict()
"""`kernel.mount_key` of the protected paths and masks → mount namespace fd."""
_network: list[int] = []
_rulesets: OrderedDict[tuple[Any, ...], int] = OrderedDict()
"""Rules and their paths' identities (`LandlockRules.key`) → ruleset fd."""


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


def mount_namespace(read_only: Sequence[str], masks: Mapping[str, Any] | None = None, dev: bool = False) -> int:
    """An fd of a private mount namespace where `read_only` are read-only bind mounts, the paths of
    `masks` (`kernel.request_masks`) are hidden, and with `dev` `/dev` is the minimal one."""
    key = kernel.mount_key(read_only, masks, dev)
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


def enter_from_thread(request: Mapping[str, Any]) -> None:
    """Put the calling thread (and every process it starts) in the sandbox a request describes: join the
    kept namespaces first (a Landlocked thread may not change mounts), then enforce Landlock, then drop
    every capability (root's programs included)."""
    read_only = [str(p) for p in request.get("read_only", ())]
    masks = kernel.request_masks(request)
    if kernel.wants_mounts(request):
        mounts = mount_namespace(read_only, masks, bool(request.get("dev")))
        kernel.unshare(kernel.CLONE_FS)  # joining a mount namespace needs our own root and cwd
        kernel.setns(mounts, kernel.CLONE_NEWNS)
    if request.get("unshare_net"):
        kernel.setns(network_namespace(), kernel.CLONE_NEWNET)
    if request.get("pid"):
        kernel.unshare(kernel.CLONE_NEWPID)  # the thread's next child, the program, is the namespace's init
    rules = kernel.landlock_rules(request)
    if rules is not None:
        kernel.restrict_with(ruleset(rules))
    if request.get("no_unix_sockets"):
        kernel.set_no_new_privs()
        seccomp.refuse_unix_sockets()
    kernel.drop_capabilities()
