"""Fresh attacks on the host's socket allow-list (`sandbox.sockets`): real listening UNIX sockets on the
host, real bash and python in the kernel sandbox, under both launchers, and a real second toolrt process.

toolrt pins a listed socket (device, inode) the first time it sees it, per toolrt process: a `toolrt
call` is a new process. Each sandboxed process here runs inside a span of the attribution journal, as a
process tool's does, and the next toolrt reads that journal.

A listed socket in the writable set (`$SSH_AUTH_SOCK` under /tmp) that a
sandboxed process could rename aside and replace with another daemon's socket (a tmux server, an
editor's IPC socket: both run commands as the person) would be pinned as that one by the next toolrt.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from unix_daemons import Daemon

from toolrt.attribution import journal_for
from toolrt.errors import Problem
from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.execute.confinement import confinement
from toolrt.sandbox import seccomp
from toolrt.sandbox.config import host_layer
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.mount_namespace and seccomp.supported()),
    reason=f"no Landlock, mount namespace or filter here: {SUPPORT.describe()}",
)
LAUNCHES = ["thread", "forkserver"]
CLIENT = """
import socket, sys, threading
def ask(path):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s.recv(64).decode()
    except OSError as error:
        return "refused: " + error.strerror
print("main ->", ask(sys.argv[1]))
found = []
worker = threading.Thread(target=lambda: found.append(ask(sys.argv[1])))
worker.start()
worker.join()
print("thread ->", found[0])
"""
NEXT_TOOLRT = """
import sys, anyio
from dataclasses import replace
from pathlib import Path
from toolrt.attribution import journal_for
from toolrt.execute import build_env, run_process
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

async def main():
    launch, listed, root = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    support = replace(detect_support(), launch=launch)
    journal = journal_for(root.parent / "data")
    policy = SandboxPolicy(sockets=(listed,))
    plan = plan_sandbox(policy, support, root=root, output_dir=root / "out", journal=journal)
    result = await run_process(sys.argv[4:], cwd=root, env=build_env(), timeout=30, sandbox=plan)
    print(result.output, end="")

anyio.run(main)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def other(tmp_path: Path) -> Iterator[Daemon]:
    """Another daemon's socket in the writable temp directory (a tmux server's), never listed."""
    (tmp_path / "tmux-0").mkdir()
    daemon = Daemon(tmp_path / "tmux-0" / "default")
    yield daemon
    daemon.server.close()


def _run(argv: list[str], root: Path, launch: str, listed: Path, *, network: bool = True) -> ProcessOutcome:
    async def main() -> ProcessOutcome:
        support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
        policy = SandboxPolicy(network=network, sockets=(str(listed),))
        journal = journal_for(root.parent / "data")
        plan = plan_sandbox(policy, support, root=root, output_dir=root / "out", journal=journal)
        assert plan is not None
        with journal.process("call-1", timeout=30, confined=confinement(plan)):
            return await run_process(argv, cwd=root, env=build_env(), timeout=30, sandbox=plan)

    return anyio.run(main)


def _wait_for_file_times_past(moment: int, directory: Path) -> None:
    """Until a file made in `directory` has a ctime after `moment` (file times come from the kernel's
    coarse clock, a tick behind `time.time_ns()`)."""
    probe = directory / ".probe"
    deadline = time.monotonic() + 20  # a hang guard: the tick comes within milliseconds
    while time.monotonic() < deadline:
        probe.touch()
        changed = os.stat(probe).st_ctime_ns
        probe.unlink()
        if changed > moment:
            return
    raise AssertionError("the file clock did not move on in 5 s")


def _next_toolrt(launch: str, listed: Path, root: Path, *argv: str) -> str:
    """A call run by a new toolrt process, which pins the listed sockets afresh."""
    command = [sys.executable, "-c", NEXT_TOOLRT, launch, str(listed), str(root), *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("network", [True, False], ids=["network-on", "network-off"])
def test_a_listed_socket_cannot_be_swapped_for_the_next_toolrt(
    tmp_path: Path, project: Path, other: Daemon, launch: str, network: bool
) -> None:
    """Before: the rename and the link went through, and the next toolrt pinned (and connected the
    process to) the tmux server under the agent's name."""
    (tmp_path / "ssh-agent").mkdir()
    agent = Daemon(tmp_path / "ssh-agent" / "agent.1")
    try:
        swap = (
            f"mv {agent.path} {agent.path}.saved; ln {other.path} {agent.path} || mv -f {other.path} {agent.path}; "
            f"mv {agent.path.parent} {tmp_path}/moved; ls {agent.path.parent}"
        )
        result = _run(["bash", "-c", swap], project, launch, agent.path, network=network)
        assert result.output.count("Device or resource busy") >= 3, result.output  # a mount point, and its folder
        assert result.output.splitlines()[-1] == "agent.1", result.output
        assert not Path(f"{agent.path}.saved").exists() and other.path.exists()
        output = _next_toolrt(launch, agent.path, project, sys.executable, "-c", CLIENT, str(agent.path))
        assert output.splitlines()[0] == "main -> agent.1", output
        assert other.accepted == 0
    finally:
        agent.server.close()


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_link_made_where_a_listed_socket_is_missing_is_never_pinned(
    tmp_path: Path, project: Path, other: Daemon, launch: str
) -> None:
    """The agent is not running: its name is free in a writable directory. Before: the process linked
    the tmux server's socket there, and the next toolrt pinned it as the listed socket."""
    listed = tmp_path / "ssh-late" / "agent.2"
    listed.parent.mkdir()
    result = _run(["bash", "-c", f"ln {other.path} {listed} && echo linked"], project, launch, listed)
    assert result.output.strip() == "linked", result.output
    output = _next_toolrt(launch, listed, project, sys.executable, "-c", CLIENT, str(listed))
    assert output.splitlines()[0].startswith("main -> refused: "), output
    assert other.accepted == 0


def test_a_socket_renamed_where_a_listed_socket_is_missing_is_never_pinned(
    tmp_path: Path, project: Path, other: Daemon
) -> None:
    """The agent is not running: its name is free in a writable directory. Before: the process renamed
    the tmux server's socket there (one name, so the link check cannot see it), and the next toolrt
    pinned it. A rename sets the socket's ctime, inside the process's journalled span."""
    listed = tmp_path / "ssh-late" / "agent.3"
    listed.parent.mkdir()
    result = _run(["bash", "-c", f"mv {other.path} {listed} && echo moved"], project, "thread", listed)
    assert result.output.strip() == "moved", result.output
    output = _next_toolrt("thread", listed, project, sys.executable, "-c", CLIENT, str(listed))
    assert output.splitlines()[0].startswith("main -> refused: "), output
    assert other.accepted == 0
    problems: list[Problem] = []  # the person is told why, when toolrt reads its settings
    journal = journal_for(tmp_path / "data")
    host_layer(None, None, None, source="host settings", problems=problems, sockets=(listed,), journal=journal)
    assert [p.message for p in problems] == [
        f"sandbox.sockets names '{listed}', which was put there or changed while a process a tool started ran "
        "(call call-1): it may be another daemon's socket moved into its place. Restart the daemon, then toolrt"
    ]


def test_a_daemon_started_after_the_process_ended_is_pinned(tmp_path: Path, project: Path) -> None:
    """The journal refuses only a change made inside a span: the agent the person starts after the call
    ended is pinned by the next toolrt and reached."""
    listed = tmp_path / "ssh-late" / "agent.5"
    listed.parent.mkdir()
    result = _run(["bash", "-c", "echo ran"], project, "thread", listed)
    assert result.output.strip() == "ran", result.output
    _wait_for_file_times_past(time.time_ns(), listed.parent)
    agent = Daemon(listed)
    try:
        output = _next_toolrt("thread", listed, project, sys.executable, "-c", CLIENT, str(listed))
        assert output.splitlines()[0] == "main -> agent.5", output
    finally:
        agent.server.close()


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_thread_other_than_the_main_one_reaches_a_listed_socket(
    tmp_path: Path, project: Path, other: Daemon, launch: str
) -> None:
    """Go programs (the docker CLI) and thread pools connect from any thread; the notification names the
    thread. Before: its connect failed with ENOENT (no pidfd for a thread that leads no process)."""
    (tmp_path / "ssh-agent").mkdir()
    agent = Daemon(tmp_path / "ssh-agent" / "agent.4")
    try:
        result = _run([sys.executable, "-c", CLIENT, str(agent.path)], project, launch, agent.path)
        assert result.output.splitlines() == ["main -> agent.4", "thread -> agent.4"], result.output
        result = _run([sys.executable, "-c", CLIENT, str(other.path)], project, launch, agent.path)
        assert result.output.splitlines() == [
            "main -> refused: Permission denied",
            "thread -> refused: Permission denied",
        ], result.output
        assert other.accepted == 0
    finally:
        agent.server.close()


STUCK = """
import os, socket, struct, sys, threading
slow, agent = sys.argv[1:3]
first = socket.socket(socket.AF_UNIX)
first.connect(slow)  # the daemon's one place in its backlog: it never accepts
stuck = threading.Event()
def wait_in_connect():
    s = socket.socket(socket.AF_UNIX)
    stuck.set()
    s.connect(slow)  # blocks: the backlog is full
threading.Thread(target=wait_in_connect, daemon=True).start()
stuck.wait()
s = socket.socket(socket.AF_UNIX)
s.connect(agent)
print("agent ->", s.recv(64).decode(), flush=True)
timed = socket.socket(socket.AF_UNIX)
timed.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("qq", 0, 300000))  # its own 0.3 s
try:
    timed.connect(slow)
except OSError as error:
    print("timed ->", error.strerror, flush=True)
os._exit(0)  # leaves the other thread in its connect
"""


def _threads() -> int:
    return len(list(Path("/proc/self/task").iterdir()))


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_connect_to_a_daemon_that_never_accepts_holds_neither_the_others_nor_toolrt(
    tmp_path: Path, project: Path, launch: str
) -> None:
    """Before: the supervisor connected in its one thread, which then waited on the full backlog: the
    process's connect to the agent never got an answer (the call ran to its timeout), and the thread
    stayed in toolrt, holding the process's socket, after the process was gone."""
    (tmp_path / "run").mkdir()
    agent = Daemon(tmp_path / "run" / "agent.5")
    slow = socket.socket(socket.AF_UNIX)
    slow.bind(str(tmp_path / "run" / "slow.sock"))
    slow.listen(0)
    before = _threads()
    try:

        async def main() -> ProcessOutcome:
            support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
            policy = SandboxPolicy(sockets=(str(agent.path), str(tmp_path / "run" / "slow.sock")))
            plan = plan_sandbox(policy, support, root=project, output_dir=project / "out")
            argv = [sys.executable, "-c", STUCK, str(tmp_path / "run" / "slow.sock"), str(agent.path)]
            return await run_process(argv, cwd=project, env=build_env(), timeout=20, sandbox=plan)

        result = anyio.run(main)
        assert result.output.splitlines() == ["agent -> agent.5", "timed -> Resource temporarily unavailable"], (
            result.output
        )
        ended = threading.Event()
        for _ in range(100):  # the waiting connect looks for its caller every 0.2 s
            if _threads() <= before:
                ended.set()
                break
            ended.wait(0.05)
        assert ended.is_set(), f"{_threads() - before} supervisor thread(s) left in toolrt"
    finally:
        slow.close()
        agent.server.close()


NETLINK = """
import socket
def ask(protocol, address):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, protocol)
    try:
        s.connect(address)
        s.send(b"libudev" + bytes(57))
        return "sent"
    except OSError as error:
        return "refused"
print("uevent group ->", ask(15, (0, 1)))
print("route group ->", ask(0, (0, 1)))
print("another process ->", ask(0, (4242, 0)))
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
s.connect((0, 0))  # the kernel itself: nothing asked of the caller
print("kernel -> connected")
"""


@pytest.mark.parametrize("launch", LAUNCHES)
def test_the_supervisor_lends_no_capability_to_a_netlink_connect(tmp_path: Path, project: Path, launch: str) -> None:
    """Root in the sandbox has dropped CAP_NET_ADMIN. Before: with a socket list the supervisor, which
    holds toolrt's capabilities, connected the process's netlink socket to a multicast group, and a
    forged uevent went to every listener in the host's network namespace (the network on)."""
    (tmp_path / "run").mkdir()
    agent = Daemon(tmp_path / "run" / "agent.6")
    try:
        result = _run([sys.executable, "-c", NETLINK], project, launch, agent.path)
    finally:
        agent.server.close()
    assert result.output.splitlines() == [
        "uevent group -> refused",
        "route group -> refused",
        "another process -> refused",
        "kernel -> connected",
    ], result.output
