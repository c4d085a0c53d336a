"""The keeper (`toolrt.sandbox.keeper`): one thread of toolrt that makes the next covered namespace and the next
launch thread ahead and closes each used namespace once its process has ended. Real processes, real
namespaces, real overlays, the thread launcher (root only)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from processes import holding, sandboxed_bash, spares_made_ahead, until

from toolrt.sandbox import keeper, kernel, namespaces
from toolrt.sandbox.plan import SandboxPlan, plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = [
    pytest.mark.skipif(
        not (SUPPORT.landlock_abi and SUPPORT.mount_namespace), reason=f"no mount namespace: {SUPPORT.describe()}"
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="the thread launcher makes namespaces itself only as root"),
]


def _covered_plan(root: Path) -> SandboxPlan:
    plan = plan_sandbox(
        SandboxPolicy(protected=(root / "tools.d",)),
        replace(SUPPORT, launch="thread"),
        root=root,
        output_dir=root / "o",
    )
    assert plan is not None and plan.covered == ("tools.d",)
    return plan


def _in_keeper(job: Callable[[], object]) -> object:
    """Run `job` in the keeper and return what it returned."""
    done = threading.Event()
    result: list[object] = []

    def run() -> None:
        try:
            result.append(job())
        finally:
            done.set()

    keeper.soon(run)
    assert done.wait(10), "the keeper did not run the job"
    return result[0] if result else None


def test_a_process_launched_from_a_thread_made_ahead_has_no_capability_and_its_cover(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    plan = _covered_plan(root)
    sandboxed_bash("true", plan, root)  # its successor's namespace and launch thread are made ahead now
    until(lambda: bool(keeper._parked), "parked a launch thread")
    waiting = list(keeper._parked)
    command = "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status; mkdir tools.d/x || echo refused"
    result = sandboxed_bash(command, plan, root)
    assert any(thread.job is not None for thread in waiting), "no launch thread made ahead was used"
    lines = result.output.splitlines()
    sets = dict(line.split(":\t") for line in lines[:5])
    assert sets == dict.fromkeys(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), "0000000000000000"), lines
    assert lines[-1] == "refused" and not (root / "tools.d").exists(), result.output


def test_a_thread_made_ahead_starts_in_toolrt_s_mount_namespace_with_an_empty_bounding_set() -> None:
    home = os.readlink("/proc/thread-self/ns/mnt")
    _in_keeper(lambda: kernel.unshare(kernel.CLONE_NEWNS))  # a job that leaves the keeper elsewhere
    keeper.park_a_thread()
    until(lambda: bool(keeper._parked), "parked a thread")
    seen: list[tuple[str, bool, str]] = []
    done = threading.Event()

    def look() -> None:
        with open("/proc/thread-self/status") as status:
            bounding = next(line for line in status if line.startswith("CapBnd:"))
        seen.append((os.readlink("/proc/thread-self/ns/mnt"), keeper.bounding_set_empty(), bounding.split()[1]))
        done.set()

    keeper.start_thread(look, ())
    assert done.wait(10)
    assert seen == [(home, True, "0000000000000000")]
    assert os.readlink("/proc/thread-self/ns/mnt") == home  # the keeper's moves are its own


def test_a_job_that_fails_leaves_the_keeper_serving_the_next() -> None:
    def failing() -> None:
        raise OSError("a namespace that could not be made")

    keeper.soon(failing)
    assert _in_keeper(lambda: "served") == "served"


def _names(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        return "closed"


def test_a_used_namespace_is_closed_once_its_process_ended_not_before(tmp_path: Path) -> None:
    namespace = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    held = os.dup(namespace)
    os.close(namespace)  # the number the keeper is handed; `held` shows what it named
    reader, writer = os.pipe()
    running = subprocess.Popen(["cat"], stdin=reader)
    os.close(reader)
    try:
        handed = os.dup(held)
        keeper.close_when_ended(running.pid, handed)
        _in_keeper(lambda: None)  # the keeper has taken it in
        assert _names(handed) == _names(held)  # still open while its process runs
    finally:
        os.close(writer)  # cat ends
        running.wait(10)
    try:
        until(lambda: _names(handed) != _names(held), "closed the namespace once its process ended")
    finally:
        os.close(held)


def test_the_thread_that_unmounts_runs_at_the_lowest_priority_and_the_one_that_makes_ahead_does_not() -> None:
    """No call waits for an unmount; the next process may wait for what is made ahead, and a launch thread
    made ahead inherits the priority of the thread that started it."""
    keeper.close_when_ended(os.getpid(), os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC))
    _in_keeper(lambda: None)
    threads = {thread.name: thread.native_id for thread in threading.enumerate()}
    closing, making = threads["toolrt-sandbox-keeper-ends"], threads["toolrt-sandbox-keeper-jobs"]
    assert closing is not None and making is not None
    until(lambda: os.getpriority(os.PRIO_PROCESS, closing) == 19, "lowered the closing thread's priority")
    assert os.getpriority(os.PRIO_PROCESS, making) == os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_a_forked_child_starts_a_keeper_of_its_own_even_when_the_lock_was_held_at_the_fork() -> None:
    _in_keeper(lambda: None)  # the parent's keeper runs
    with keeper._lock:  # held by a thread of the parent at the fork
        child = os.fork()
        if child == 0:  # the child: no keeper thread, a free lock
            signal.alarm(10)  # a child stuck on the parent's lock dies instead of holding the test
            served = threading.Event()
            keeper.soon(served.set)
            os._exit(0 if served.wait(10) else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _mount_namespaces_held() -> int:
    """How many mount namespace fds this process holds."""
    held = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            held += os.readlink(f"/proc/self/fd/{fd}").startswith("mnt:")
        except OSError:
            continue
    return held


def test_concurrent_first_calls_each_get_a_namespace_of_their_own_and_none_is_left_open(tmp_path: Path) -> None:
    """Calls of four threads at once, none with a namespace made ahead: each makes its own (none took
    another's place in the bookkeeping: KeyError and a namespace never closed), and each namespace is
    closed once its process ended."""
    roots = [tmp_path / f"project{i}" for i in range(4)]
    for root in roots:
        root.mkdir()
    plans = [_covered_plan(root) for root in roots]
    # What a worker's first covered call makes once and keeps (the base namespace copies start from, the
    # keeper's own), made before the count, so the test holds wherever it runs in the worker's order.
    (tmp_path / "first").mkdir()
    sandboxed_bash("true", _covered_plan(tmp_path / "first"), tmp_path / "first")
    before = _mount_namespaces_held()
    together = threading.Barrier(len(roots))
    outcomes: dict[int, str] = {}

    def call(index: int) -> None:
        together.wait()
        try:
            outcomes[index] = sandboxed_bash("mkdir tools.d/x || echo refused", plans[index], roots[index]).output
        except BaseException as error:
            outcomes[index] = repr(error)

    threads = [threading.Thread(target=call, args=(index,)) for index in range(len(roots))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [outcomes.get(i, "").splitlines()[-1:] for i in range(len(roots))] == [["refused"]] * len(roots), outcomes
    assert not any((root / "tools.d").exists() for root in roots)
    spares = len(roots)  # each call's successor, made ahead and kept for the next call of its kind
    until(lambda: _mount_namespaces_held() <= before + spares, "closed the namespaces of the ended processes")


def test_a_process_launched_from_a_thread_made_ahead_creates_files_under_the_host_s_umask_of_now(
    tmp_path: Path,
) -> None:
    """A host that tightens its umask after the keeper started: the files its next processes create get
    it, as they do from a thread started on the call's path (a thread started by the keeper's making
    thread had that thread's copy of the umask, taken when it began to make namespaces)."""
    root = tmp_path / "project"
    root.mkdir()
    plan = _covered_plan(root)
    sandboxed_bash("true", plan, root)  # the keeper runs, and makes this plan's next namespace ahead
    _in_keeper(lambda: None)
    earlier = os.umask(0o077)
    try:
        sandboxed_bash("true", plan, root)  # ... and the next launch thread
        until(lambda: bool(keeper._parked), "parked a launch thread")
        waiting = list(keeper._parked)
        result = sandboxed_bash("umask; touch made; stat -c %a made", plan, root)
        assert any(thread.job is not None for thread in waiting), "no launch thread made ahead was used"
    finally:
        os.umask(earlier)
    assert result.output.split() == ["0077", "600"], result.output
    assert (root / "made").stat().st_mode & 0o777 == 0o600


def _namespaces_of(pid: int | str) -> set[str]:
    """The mount namespaces process `pid` holds fds of."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            name = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if name.startswith("mnt:"):
            held.add(name)
    return held


def test_a_forked_child_holds_neither_the_namespace_made_ahead_for_the_parent_nor_one_in_use(tmp_path: Path) -> None:
    """A host forked (a pre-forking server, multiprocessing): the child's processes never join the
    namespace made ahead for the parent's next process (two processes in one overlay), and the child
    does not keep the namespace of a process of the parent's that still runs mounted after it ended."""
    root = tmp_path / "project"
    root.mkdir()
    plan = _covered_plan(root)
    sandboxed_bash("true", plan, root)
    until(lambda: bool(spares_made_ahead()), "made a namespace ahead")
    spares = {os.readlink(f"/proc/self/fd/{spare[0]}") for ready in spares_made_ahead().values() for spare in ready}
    fifo = tmp_path / "fifo"  # outside the root: one there is the overlay's, another pipe than toolrt's
    os.mkfifo(fifo)
    marker = f"toolrt-fork-{os.getpid()}"
    running = threading.Thread(target=sandboxed_bash, args=(f"cat {fifo}; : {marker}", plan, root))
    running.start()
    try:
        until(lambda: bool(holding(marker)), "started the process")
        used = os.readlink(f"/proc/{holding(marker)[0]}/ns/mnt")
        spares |= {
            os.readlink(f"/proc/self/fd/{spare[0]}") for ready in spares_made_ahead().values() for spare in ready
        }
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:  # the child: says which namespaces it holds
            try:
                os.write(writer, "\n".join(_namespaces_of("self")).encode())
            finally:
                os._exit(0)
        os.close(writer)
        with os.fdopen(reader) as told:
            held = set(told.read().split())
        os.waitpid(child, 0)
    finally:
        try:  # cat, waiting to open it for reading, ends
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # it never started
        running.join(20)
    assert not held & (spares | {used}), (held, spares, used)


def test_a_forked_child_makes_namespaces_ahead_of_its_own_when_the_keeper_was_mid_job_at_the_fork(
    tmp_path: Path,
) -> None:
    """The keeper making a namespace at the fork (inside the namespaces' lock, its key being made): the
    child neither waits forever for the lock nor for a namespace only the parent's keeper would make."""
    root = tmp_path / "project"
    root.mkdir()
    plan = _covered_plan(root)
    sandboxed_bash("true", plan, root)
    busy, release = threading.Event(), threading.Event()

    def mid_job() -> None:
        with namespaces._lock:
            busy.set()
            release.wait(20)

    keeper.soon(mid_job)
    assert busy.wait(10)
    try:
        child = os.fork()
        if child == 0:  # the child: its calls run, and the next one's namespace is made ahead
            signal.alarm(20)  # a child stuck on the parent's lock dies instead of holding the test
            made = threading.Event()
            try:
                sandboxed_bash("true", plan, root)
                sandboxed_bash("true", plan, root)
                for _ in range(1000):
                    if namespaces._spares:
                        made.set()
                        break
                    made.wait(0.01)
            finally:
                os._exit(0 if made.is_set() else 1)
    finally:
        release.set()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_200_calls_from_four_event_loops_at_once_never_share_a_namespace_and_leave_no_thread_or_namespace(
    tmp_path: Path,
) -> None:
    """Four threads, each with event loops of its own, 50 covered calls each over two projects: no two
    processes are in one mount namespace at once, every one is refused the protected name, and once the
    keeper is done the threads and namespaces held are those of before, plus what it keeps."""
    roots = [tmp_path / "a", tmp_path / "b"]
    for root in roots:
        root.mkdir()
    plans = [_covered_plan(root) for root in roots]
    threads_before, namespaces_before = len(os.listdir("/proc/self/task")), _mount_namespaces_held()
    with open("/proc/self/mountinfo") as mountinfo:
        mounts_before = len(mountinfo.readlines())
    spans: list[tuple[str, int, int]] = []
    failures: list[str] = []
    command = "date +%s%N; readlink /proc/self/ns/mnt; sleep 0.02; date +%s%N; mkdir tools.d/x || echo refused"

    def calls(index: int) -> None:
        for _ in range(50):
            try:
                words = sandboxed_bash(command, plans[index % 2], roots[index % 2]).output.split()
                spans.append((words[1], int(words[0]), int(words[2])))
                if words[-1] != "refused":
                    failures.append(" ".join(words))
            except BaseException as error:
                failures.append(repr(error))

    workers = [threading.Thread(target=calls, args=(index,)) for index in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert not failures and len(spans) == 200, failures[:3]
    spans.sort(key=lambda span: span[1])
    shared = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1 :] if a[0] == b[0] and b[1] < a[2]]
    assert not shared, shared[:3]
    kept = 3 + keeper._MAX_PARKED + namespaces._MAX_SPARES  # its threads, launch threads, namespaces ahead
    until(lambda: len(os.listdir("/proc/self/task")) <= threads_before + kept, "ended its threads")
    until(lambda: _mount_namespaces_held() <= namespaces_before + kept, "closed the used namespaces")
    with open("/proc/self/mountinfo") as mountinfo:
        assert len(mountinfo.readlines()) == mounts_before
