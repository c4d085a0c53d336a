"""The host's socket allow-list (`sandbox.sockets`, issue 25 item 5): real listening UNIX sockets on the
host, real python and bash in the sandbox under both launchers and both network modes. A listed socket
is reached; an unlisted one, an abstract one, a relative name are refused; the listed name is a mount
point the sandboxed process cannot move, and swapped on the host for a symlink or renamed over (once,
across calls, and raced by a swapper) it is refused; with no list nothing changes and no supervisor
runs."""

from __future__ import annotations

import json
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from unix_daemons import Daemon

from toolrt import Runtime
from toolrt.errors import ConfigError
from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox import seccomp
from toolrt.sandbox.hint import refusal_hint
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.supervisor import pin
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and seccomp.supported()), reason=f"no Landlock or no filter here: {SUPPORT.describe()}"
)
LAUNCHES = ["thread", "forkserver"]
NETWORK = pytest.mark.parametrize("network", [True, False], ids=["network-on", "network-off"])
CLIENT = """
import socket, sys
def ask(path):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s.recv(64).decode()
    except OSError as error:
        return "refused: " + error.strerror
for path in sys.argv[1:]:
    print(path, "->", ask(path))
"""


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[tuple[Daemon, Daemon]]:
    """`agent.sock` (the one the host lists) and `docker.sock` (not listed), in a directory the sandbox
    may write (under /tmp, as `$SSH_AUTH_SOCK` is)."""
    directory = tmp_path / "run"
    directory.mkdir()
    listed, other = Daemon(directory / "agent.sock"), Daemon(directory / "docker.sock")
    yield listed, other
    listed.server.close()
    other.server.close()


def _run(argv: list[str], root: Path, launch: str, network: bool, sockets: tuple[Path, ...]) -> ProcessOutcome:
    async def main() -> ProcessOutcome:
        support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
        policy = SandboxPolicy(network=network, sockets=tuple(str(p) for p in sockets))
        plan = plan_sandbox(policy, support, root=root, output_dir=root / "out")
        assert plan is not None and len(plan.sockets) == len(sockets)
        return await run_process(argv, cwd=root, env=build_env(), timeout=60, sandbox=plan)

    return anyio.run(main)


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.mark.parametrize("launch", LAUNCHES)
@NETWORK
def test_a_listed_socket_is_reached_and_nothing_else(
    tmp_path: Path, daemons: tuple[Daemon, Daemon], launch: str, network: bool
) -> None:
    listed, other = daemons
    root = _project(tmp_path)
    (root / "link.sock").symlink_to(listed.path)  # a link to the listed socket is not the listed path
    paths = [listed.path, other.path, root / "link.sock", f"{listed.path.parent}/x/../agent.sock"]
    result = _run([sys.executable, "-c", CLIENT, *map(str, paths)], root, launch, network, (listed.path,))
    lines = result.output.splitlines()
    assert lines == [
        f"{listed.path} -> agent.sock",
        f"{other.path} -> refused: Permission denied",
        f"{root / 'link.sock'} -> refused: Permission denied",
        f"{listed.path.parent}/x/../agent.sock -> agent.sock",  # names the listed path: that socket is reached
    ], result.output
    assert other.accepted == 0


@pytest.mark.parametrize("launch", LAUNCHES)
@NETWORK
def test_bash_reaches_the_listed_socket_and_not_another(
    tmp_path: Path, daemons: tuple[Daemon, Daemon], launch: str, network: bool
) -> None:
    listed, other = daemons
    root = _project(tmp_path)
    connect = "import socket as k, sys; s = k.socket(k.AF_UNIX); s.connect(sys.argv[1]); print(s.recv(64).decode())"
    command = (
        f"python3 -c '{connect}' {listed.path}; echo status=$?; "
        f"python3 -c '{connect}' {other.path} 2>&1 | tail -1; "
        f"cd {listed.path.parent} && python3 -c '{connect}' agent.sock 2>&1 | tail -1"  # relative: refused
    )
    result = _run(["bash", "-c", command], root, launch, network, (listed.path,))
    assert result.output.splitlines() == [
        "agent.sock",
        "status=0",
        "PermissionError: [Errno 13] Permission denied",
        "PermissionError: [Errno 13] Permission denied",
    ], result.output
    assert other.accepted == 0


SWAP_ONCE = """
import os, socket, sys
listed, other, moved = sys.argv[1:4]
folder = os.path.dirname(listed)
for name, move in (
    ("folder moved", lambda: os.rename(folder, folder + ".real")),
    ("socket moved", lambda: os.rename(listed, moved)),
    ("socket removed", lambda: os.unlink(listed)),
    ("renamed over", lambda: os.rename(other, listed)),
):
    try:
        move()
        print(name + ": done")
    except OSError as error:
        print(name + ": " + error.strerror)
s = socket.socket(socket.AF_UNIX)
s.connect(listed)
print("listed:", s.recv(64).decode())
"""


def _identity(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_dev, info.st_ino


def _swapped_on_the_host(listed: Daemon, other: Daemon, moved: Path) -> Iterator[str]:
    """Swap the listed name on the host (outside any sandbox: a daemon's restart, another program),
    yielding after each swap what was done."""
    folder = listed.path.parent
    folder.rename(folder.with_name("run.real"))
    folder.symlink_to(folder.with_name("run.real"))  # the listed socket itself, through a linked directory
    yield "parent link"
    folder.unlink()
    folder.with_name("run.real").rename(folder)
    listed.path.rename(moved)
    listed.path.symlink_to(other.path)
    yield "symlink"
    listed.path.unlink()
    listed.path.hardlink_to(other.path)  # a hard link: another name of the other socket, the same file
    yield "hard link"
    listed.path.unlink()
    other.path.rename(listed.path)
    yield "renamed over"


@pytest.mark.parametrize("launch", LAUNCHES)
@NETWORK
def test_the_listed_name_swapped_for_a_link_or_renamed_over_is_refused(
    tmp_path: Path, daemons: tuple[Daemon, Daemon], launch: str, network: bool
) -> None:
    listed, other = daemons
    root = _project(tmp_path)
    moved = listed.path.with_name("agent.saved")
    argv = [sys.executable, "-c", SWAP_ONCE, str(listed.path), str(other.path), str(moved)]
    result = _run(argv, root, launch, network, (listed.path,))
    # In the sandbox the listed socket, and its folder, are mount points: neither moves.
    assert result.output.splitlines() == [
        "folder moved: Device or resource busy",
        "socket moved: Device or resource busy",
        "socket removed: Device or resource busy",
        "renamed over: Device or resource busy",
        "listed: agent.sock",
    ], result.output
    client = [sys.executable, "-c", CLIENT, str(listed.path)]
    for swap in _swapped_on_the_host(listed, other, moved):
        result = _run(client, root, launch, network, (listed.path,))
        assert result.output.strip() == f"{listed.path} -> refused: Permission denied", swap
    # The real one put back under its name (the same file) is reached again.
    listed.path.unlink()
    moved.rename(listed.path)
    result = _run(client, root, launch, network, (listed.path,))
    assert result.output.strip() == f"{listed.path} -> agent.sock"
    assert other.accepted == 0


RACE = """
import json, socket, sys, time
listed = sys.argv[1]
answers = {}
deadline = time.monotonic() + 20
attempts = 0
while time.monotonic() < deadline and (attempts < 300 or len(answers) < 2):
    attempts += 1
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(listed)
        answer = s.recv(64).decode()
    except OSError as error:
        answer = "refused: " + error.strerror
    answers[answer] = answers.get(answer, 0) + 1
print(json.dumps(answers))
"""


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_swapper_racing_the_connects_never_gets_the_other_socket(
    tmp_path: Path, daemons: tuple[Daemon, Daemon], launch: str
) -> None:
    """The swapper runs on the host (in the sandbox the listed name is a mount point, which no rename
    moves): it swaps the listed name between the real socket and a link to the other one."""
    listed, other = daemons
    root = _project(tmp_path)
    done = threading.Event()
    real, link, back = (listed.path.with_name(listed.path.name + suffix) for suffix in (".real", ".link", ".back"))
    assert pin([str(listed.path)]) == ((str(listed.path), *_identity(listed.path)),)  # as toolrt's start does
    real.hardlink_to(listed.path)  # a second name of the real socket (the same file): never pinned as such

    def swap() -> None:
        while not done.is_set():
            link.symlink_to(other.path)
            link.rename(listed.path)  # now a link to the other socket
            back.hardlink_to(real)
            back.rename(listed.path)  # now the real socket again

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        result = _run([sys.executable, "-c", RACE, str(listed.path)], root, launch, True, (listed.path,))
    finally:
        done.set()
        swapper.join(10)
    answers = json.loads(result.output)
    assert set(answers) <= {"agent.sock", "refused: Permission denied"}, result.output
    assert answers.get("agent.sock") and answers.get("refused: Permission denied"), "the race never ran both ways"
    assert other.accepted == 0


ABSTRACT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1].replace("@", "\\0"))
    print(s.recv(64).decode())
except OSError as error:
    print("refused:", error.strerror)
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
except OSError as error:
    print("datagram:", error.strerror)
"""


@pytest.mark.parametrize("launch", LAUNCHES)
@NETWORK
def test_an_abstract_socket_and_datagram_sockets_stay_refused(
    tmp_path: Path, daemons: tuple[Daemon, Daemon], launch: str, network: bool
) -> None:
    listed, _ = daemons
    root = _project(tmp_path)
    name = f"@toolrt-test-{uuid.uuid4().hex}"  # abstract names are machine-wide: unique across xdist workers
    server = socket.socket(socket.AF_UNIX)
    server.bind(name.replace("@", "\0"))
    server.listen(1)
    server.setblocking(False)
    with server:
        result = _run([sys.executable, "-c", ABSTRACT, name], root, launch, network, (listed.path,))
        with pytest.raises(BlockingIOError):
            server.accept()
    assert result.output.splitlines() == [
        "refused: Permission denied",
        "datagram: Address family not supported by protocol",
    ], result.output


TCP = """
import socket, sys
s = socket.socket()
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print(s.recv(64).decode())
except OSError as error:
    print("refused:", error.strerror)
"""


@pytest.mark.parametrize("launch", LAUNCHES)
def test_tcp_still_follows_the_network_setting(tmp_path: Path, daemons: tuple[Daemon, Daemon], launch: str) -> None:
    listed, _ = daemons
    root = _project(tmp_path)
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer() -> None:
        connection, _ = server.accept()
        with connection:
            connection.sendall(b"tcp answered")

    threading.Thread(target=answer, daemon=True).start()
    with server:
        on = _run([sys.executable, "-c", TCP, str(port)], root, launch, True, (listed.path,))
        off = _run([sys.executable, "-c", TCP, str(port)], root, launch, False, (listed.path,))
    assert on.output.strip() == "tcp answered"
    assert off.output.strip() == "refused: Permission denied"


def test_with_no_list_the_plan_and_the_request_are_as_before(tmp_path: Path) -> None:
    plan = plan_sandbox(SandboxPolicy(), SUPPORT, root=tmp_path, output_dir=tmp_path / "out")
    assert plan is not None and plan.sockets == () and plan.request()["supervise_unix"] is False
    assert "listed UNIX socket" not in plan.description


def test_the_list_is_host_only(
    tmp_path: Path, daemons: tuple[Daemon, Daemon], project_writer: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed, other = daemons
    tool = "id: runner\ndescription: Runs a fixed command for the socket list tests, with enough words.\n"
    tool += "handler: {argv: [echo, hi]}\n"
    writer = project_writer
    assert callable(writer)
    root = tmp_path / "p"
    writer(root, {"runner": tool}, settings=f"sandbox:\n  sockets: [{other.path}]\n")
    with pytest.raises(ConfigError, match="sockets"):
        Runtime.load(root)
    root = tmp_path / "q"
    writer(root, {"runner": tool})
    (root / ".env").write_text(f"TOOLRT_SANDBOX__SOCKETS={json.dumps([str(other.path)])}\n")
    rt = Runtime.load(root)
    assert rt.snapshot.sandbox.sockets == ()
    assert any("sandbox.sockets is a host-only setting" in i.reason for i in rt.settings.ignored)
    monkeypatch.setenv("SOCKET_UNDER_TEST", str(listed.path))
    monkeypatch.setenv("TOOLRT_SANDBOX__SOCKETS", '["$SOCKET_UNDER_TEST", "/nonexistent/agent.sock"]')
    rt = Runtime.load(root)
    assert rt.snapshot.sandbox.sockets == (str(listed.path), "/nonexistent/agent.sock")
    assert "sandbox.sockets names '/nonexistent/agent.sock', which is not a UNIX socket now (or is a symlink)" in [
        w.message for w in rt.snapshot.warnings
    ]


@pytest.mark.parametrize("launch", LAUNCHES)
def test_the_model_is_told_which_sockets_it_may_reach(
    tmp_path: Path, daemons: tuple[Daemon, Daemon], launch: str
) -> None:
    listed, other = daemons
    root = _project(tmp_path)
    client = f"import socket; socket.socket(socket.AF_UNIX).connect({str(other.path)!r})"
    result = _run([sys.executable, "-c", client], root, launch, True, (listed.path,))
    assert result.exit_code == 1 and "PermissionError: [Errno 13] Permission denied" in result.output
    plan = plan_sandbox(SandboxPolicy(sockets=(str(listed.path),)), SUPPORT, root=root, output_dir=root / "out")
    assert plan is not None
    hint = refusal_hint(result.output, plan, root, result.exit_code)
    assert hint is not None and hint.startswith(
        f"toolrt: the sandbox connects UNIX sockets only to those the host lists (sandbox.sockets: {listed.path})"
    ), hint
