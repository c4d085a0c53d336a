"""The keeper: three threads of toolrt's for the thread launcher's work off the calls' path. One makes ahead
the next process's covered mount namespace (`namespaces._make_spare`); one starts ahead the thread it will
be launched from (`start_thread`). The third closes each used namespace once its process has ended (the
last reference unmounts it, and unmounting an overlay syncs the filesystem under it, which may wait on
the disk: never in the way of the next namespace being made), at the lowest priority (nice 19: no call
waits for an unmount, which on a busy machine would take the CPU from the call that ended and the
next). A thread started per process for each of these jobs cost about 0.1 ms of CPU, three per process,
one of them on the call's path; these three are started once, and wait on their jobs and on the
processes' pidfds.

Making a namespace moves the thread that makes it into it: the maker goes back to the mount namespace it
started in after each job, so it holds none it made, and one closed is unmounted at once. It must have a
root, working directory and umask of its own for that (`unshare(CLONE_FS)`), a copy taken once, which
a thread it started would share: a launch thread started by it would give its process the umask of
when the maker began, not the host's of now. So the launch threads are started by a thread that never
leaves toolrt's namespaces nor its root, working directory and umask, which the threads it starts share
with toolrt. It empties its own capability bounding set when it may (CAP_SETPCAP): a thread it starts
inherits the empty set, so a launch thread made ahead need not drop the 41 capabilities itself
(`bounding_set_empty`). All three are threads of toolrt, never sandboxed, like the threads they replace.
"""

from __future__ import annotations

import _thread
import os
import select
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from . import kernel

__all__ = ["bounding_set_empty", "close_when_ended", "park_a_thread", "soon", "start_thread"]

_lock = threading.Lock()
_jobs: deque[Callable[[], None]] = deque()
_ends: deque[tuple[int, int]] = deque()
"""(pidfd, fd): close `fd` once the process of `pidfd` has ended (both are the keeper's to close)."""
_watched: dict[int, int] = {}
"""pidfd → the fd to close once that process has ended: the `ends` thread's (the `_ends` it took in)."""
_wakes: dict[str, int] = {}
"""`jobs`, `threads` and `ends` → the eventfd that wakes the thread serving them, once it runs (cleared in a forked
child, which has neither thread)."""
_MAX_PARKED = 2
_NICEST = 19


class _Parked:
    """A thread started ahead by the keeper, waiting for the one function it will run."""

    __slots__ = ("bounded", "go", "job")

    def __init__(self, bounded: bool) -> None:
        self.bounded = bounded
        """Whether its bounding set is empty (inherited from the keeper's)."""
        self.go = _thread.allocate_lock()
        self.go.acquire()
        self.job: tuple[Callable[..., None], tuple[Any, ...]] | None = None


_parked: list[_Parked] = []
_here = threading.local()


def soon(job: Callable[[], None]) -> None:
    """Run `job` in the keeper's making thread. It may change the thread's mount namespace; an exception it
    raises is its own business (the keeper goes on with the next)."""
    with _lock:
        _jobs.append(job)
        wake = _started("jobs")
    os.eventfd_write(wake, 1)


def close_when_ended(pid: int, fd: int) -> None:
    """Close `fd` (the keeper's from now on) once process `pid` has ended; at once when it has (or cannot
    be watched)."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        os.close(fd)
        return
    with _lock:
        _ends.append((pidfd, fd))
        wake = _started("ends")
    os.eventfd_write(wake, 1)


def start_thread(function: Callable[..., None], args: tuple[Any, ...]) -> None:
    """Run `function(*args)` in a thread of its own: one the keeper started ahead (`park_a_thread`) when one
    waits, else a new one. Either is a bare thread of toolrt in toolrt's namespaces, never sandboxed yet."""
    with _lock:
        parked = _parked.pop() if _parked else None
    if parked is None:
        _thread.start_new_thread(function, args)
        return
    parked.job = (function, args)
    parked.go.release()


def park_a_thread() -> None:
    """Have the keeper start a thread ahead for the next `start_thread` (up to two wait at once)."""
    with _lock:
        wake = _started("threads")
    os.eventfd_write(wake, 1)


def bounding_set_empty() -> bool:
    """Whether the calling thread's capability bounding set is known to be empty: a thread the keeper started
    ahead after emptying its own (the set is per thread, inherited by the threads a thread starts)."""
    return bool(getattr(_here, "bounded", False))


def _started(kind: str) -> int:
    """The eventfd of the thread serving `kind` (`jobs`, `threads` or `ends`), started when it is not
    running (called under `_lock`)."""
    if kind not in _wakes:
        wake = os.eventfd(0, os.EFD_CLOEXEC)
        serve = {"jobs": _make_ahead, "threads": _start_ahead, "ends": _close_ended}[kind]
        threading.Thread(target=serve, args=(wake,), name=f"toolrt-sandbox-keeper-{kind}", daemon=True).start()
        _wakes[kind] = wake
    return _wakes[kind]


def _make_ahead(wake: int) -> None:
    home = os.open("/proc/thread-self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)  # toolrt's: where it starts
    try:
        kernel.unshare(kernel.CLONE_FS)  # a root and working directory of its own: joining a namespace needs them
    except OSError:
        pass  # each job that makes a namespace unshares them itself
    while True:
        os.eventfd_read(wake)
        with _lock:
            jobs = list(_jobs)
            _jobs.clear()
        for job in jobs:
            _run(job, home)


def _start_ahead(wake: int) -> None:
    """Start a launch thread ahead for each request (`park_a_thread`), from toolrt's namespaces and with
    toolrt's root, working directory and umask, which it never leaves (the threads it starts share them)."""
    _here.bounded = kernel.empty_bounding_set()  # not for itself (it never execs): for the threads it starts
    _here.home = os.stat("/proc/thread-self/ns/mnt").st_ino
    while True:
        for _ in range(min(os.eventfd_read(wake), _MAX_PARKED)):
            _park()


def _close_ended(wake: int) -> None:
    try:  # the lowest priority: no call waits for an unmount, and each would take CPU from a call's path
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICEST)  # Linux: this thread's alone
    except OSError:
        pass
    poller = select.poll()
    poller.register(wake, select.POLLIN)
    while True:
        for fd, _ in poller.poll():
            if fd != wake:
                poller.unregister(fd)
                held = _watched.pop(fd)  # before closing: a child forked meanwhile closes only what is open
                os.close(fd)
                os.close(held)
                continue
            os.eventfd_read(wake)
            with _lock:
                ends = list(_ends)
                _watched.update(ends)  # before `_ends` is cleared: a child forked meanwhile closes each
                _ends.clear()
            for pidfd, _ in ends:
                poller.register(pidfd, select.POLLIN)


def _run(job: Callable[[], None], home: int) -> None:
    try:
        job()
    except Exception:
        pass  # a job reports its own failures (the next process makes its own namespace): the keeper goes on
    finally:
        try:
            kernel.unshare(kernel.CLONE_FS)  # a thread a job started may share them: setns needs them its own
            kernel.setns(home, kernel.CLONE_NEWNS)
        except OSError:
            pass  # it stays where the job left it, holding that namespace until its next job (and parks none)


def _park() -> None:
    """In the thread that starts launch threads: start one that waits for its function."""
    with _lock:
        if len(_parked) >= _MAX_PARKED:
            return
    if os.stat("/proc/thread-self/ns/mnt").st_ino != _here.home:
        return  # never moved: a thread started here would begin in another namespace than toolrt's
    parked = _Parked(_here.bounded)
    _thread.start_new_thread(_wait, (parked,))
    with _lock:
        _parked.append(parked)


def _wait(parked: _Parked) -> None:
    parked.go.acquire()
    if parked.job is None:
        return
    _here.bounded = parked.bounded
    function, args = parked.job
    function(*args)


def _forget_in_child() -> None:
    """A forked child has no keeper thread: it starts its own on first use, with a lock of its own (another
    thread of the parent may have held this one at the fork). Its copies of the fds the parent's keeper
    was to close are closed now: the namespaces of the parent's processes, which they would keep mounted
    after those ended (their pidfds and the keeper's eventfds with them)."""
    global _lock
    _lock = threading.Lock()
    kernel.close_each({*(fd for pair in (*_ends, *_watched.items()) for fd in pair), *_wakes.values()})
    _jobs.clear()
    _ends.clear()
    _watched.clear()
    _wakes.clear()
    _parked.clear()


os.register_at_fork(after_in_child=_forget_in_child)
