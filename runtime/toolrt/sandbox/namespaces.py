"""Namespaces and Landlock rulesets kept for reuse by the thread launcher: creating a mount or network
namespace per process costs milliseconds, building a ruleset about fifty system calls; joining an
existing namespace or enforcing a built ruleset costs microseconds.

A ruleset holds the inodes its paths had when it was built: a writable directory replaced on disk
since then is refused (fail closed) until the cache lets the ruleset go.

A read-only mount namespace is made once per set of protected paths, keyed by each path's device and
inode, so a file replaced on disk (an editor's save) gets a fresh namespace instead of showing the old
file. The empty network namespace is shared: it has only a downed loopback, and Landlock's scoping keeps
abstract UNIX sockets of different calls apart. Only usable where this process may create namespaces
itself (CAP_SYS_ADMIN); otherwise the fork server creates them per process.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import kernel

__all__ = ["enter_from_thread", "mount_namespace", "network_namespace", "ruleset"]

_MAX_MOUNT_NAMESPACES = 16
_MAX_RULESETS = 64
_lock = threading.Lock()
_mounts: OrderedDict[tuple[tuple[str, int, int], ...], int] = OrderedDict()
_network: list[int] = []
_rulesets: OrderedDict[tuple[Any, ...], tuple[int, tuple[str, ...]]] = OrderedDict()
"""Rules → (ruleset fd, the paths that did not exist when it was built)."""


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


def mount_namespace(read_only: Sequence[str]) -> int:
    """An fd of a private mount namespace where `read_only` are read-only bind mounts."""
    frozen = kernel.identity_key(read_only)
    with _lock:
        fd = _mounts.get(frozen)
        if fd is not None:
            _mounts.move_to_end(frozen)
            return fd

        def setup() -> None:
            kernel.unshare(kernel.CLONE_NEWNS)
            kernel.make_mounts_private()
            kernel.bind_read_only([path for path, _, _ in frozen])

        fd = _mounts[frozen] = _in_new_thread(setup, "mnt")
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
    """A built ruleset fd for `rules`, shared by every process with the same rules; rebuilt once a path
    that was missing when it was built exists (a tool-output directory made later)."""
    key = rules.key()
    with _lock:
        hit = _rulesets.get(key)
        if hit is not None:
            fd, missing = hit
            if not any(os.path.lexists(path) for path in missing):
                _rulesets.move_to_end(key)
                return fd
            os.close(_rulesets.pop(key)[0])
        missing = rules.missing()
        fd = kernel.build_ruleset(rules)
        _rulesets[key] = (fd, missing)
        while len(_rulesets) > _MAX_RULESETS:
            os.close(_rulesets.popitem(last=False)[1][0])
        return fd


def enter_from_thread(request: Mapping[str, Any]) -> None:
    """Put the calling thread (and every process it starts) in the sandbox a request describes: join the
    kept namespaces first (a Landlocked thread may not change mounts), then enforce Landlock."""
    read_only = [str(p) for p in request.get("read_only", ())]
    if read_only:
        mounts = mount_namespace(read_only)
        kernel.unshare(kernel.CLONE_FS)  # joining a mount namespace needs our own root and cwd
        kernel.setns(mounts, kernel.CLONE_NEWNS)
    if request.get("unshare_net"):
        kernel.setns(network_namespace(), kernel.CLONE_NEWNET)
    rules = kernel.landlock_rules(request)
    if rules is not None:
        kernel.restrict_with(ruleset(rules))
