"""No socket to host daemons, in every network mode: a real pathname UNIX socket served by this test
process (a docker.sock stand-in) is unreachable from real bash and python in the sandbox, under both
launchers; `socketpair` and TCP keep working (issue 25, item 5)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox import seccomp
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and seccomp.supported()), reason=f"no Landlock or no filter here: {SUPPORT.describe()}"
)
LAUNCHES = ["thread", "forkserver"]
CLIENT = """
import socket, sys
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    print("CONNECTED")
except OSError as error:
    print("refused:", error.strerror)
a, b = socket.socketpair()
a.sendall(b"pair")
print("socketpair", b.recv(4).decode())
socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
print("inet socket made")
"""


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Path, socket.socket]]:
    """A listening pathname socket outside the project, as a host daemon has."""
    path = tmp_path / "daemon" / "docker.sock"
    path.parent.mkdir()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    server.setblocking(False)
    yield path, server
    server.close()


def _run(argv: list[str], root: Path, launch: str, network: bool) -> ProcessOutcome:
    async def main() -> ProcessOutcome:
        support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
        plan = plan_sandbox(SandboxPolicy(network=network), support, root=root, output_dir=root / "out")
        return await run_process(argv, cwd=root, env=build_env(), timeout=20, sandbox=plan)

    return anyio.run(main)


def _nobody_connected(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return True
    return False


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("network", [True, False], ids=["network-on", "network-off"])
def test_a_host_daemon_socket_is_unreachable_and_socketpair_still_works(
    tmp_path: Path, daemon: tuple[Path, socket.socket], launch: str, network: bool
) -> None:
    path, server = daemon
    root = tmp_path / "project"
    root.mkdir()
    result = _run([sys.executable, "-c", CLIENT, str(path)], root, launch, network)
    assert "refused: Address family not supported by protocol" in result.output, result.output
    assert "socketpair pair" in result.output and "inet socket made" in result.output
    assert _nobody_connected(server)


@pytest.mark.parametrize("launch", LAUNCHES)
def test_bash_tools_cannot_reach_it_either(tmp_path: Path, daemon: tuple[Path, socket.socket], launch: str) -> None:
    path, server = daemon
    root = tmp_path / "project"
    root.mkdir()
    # curl and socat may be missing; bash's own /dev/tcp has no UNIX form, so python stands in for a client.
    command = f"python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{path}\")'; echo status=$?"
    result = _run(["bash", "-c", command], root, launch, True)
    assert "Address family not supported by protocol" in result.output and "status=1" in result.output
    assert _nobody_connected(server)


@pytest.mark.parametrize("launch", LAUNCHES)
def test_io_uring_which_makes_sockets_around_socket_is_refused(tmp_path: Path, launch: str) -> None:
    # io_uring_setup(2) (425) with a zeroed params struct: a real ring outside, ENOSYS inside.
    probe = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nparams = ctypes.create_string_buffer(120)\n"
        "fd = libc.syscall(425, 4, params)\nprint('ring' if fd >= 0 else 'refused: ' + os.strerror(ctypes.get_errno()))"
    )
    result = _run([sys.executable, "-c", probe], tmp_path, launch, True)
    assert result.output.startswith("refused: Function not implemented"), result.output


def test_the_filter_is_what_refuses_it(tmp_path: Path, daemon: tuple[Path, socket.socket]) -> None:
    path, server = daemon
    root = tmp_path / "project"
    root.mkdir()

    async def main() -> ProcessOutcome:
        plan = plan_sandbox(SandboxPolicy(), SUPPORT, root=root, output_dir=root / "out")
        assert plan is not None and plan.no_unix_sockets
        plan = replace(plan, no_unix_sockets=False)
        return await run_process(
            [sys.executable, "-c", CLIENT, str(path)], cwd=root, env=build_env(), timeout=20, sandbox=plan
        )

    assert "CONNECTED" in anyio.run(main).output  # the wall this test relies on is the filter, nothing else
    assert not _nobody_connected(server)


DATAGRAM = """
import socket, sys
for kind in ("SOCK_DGRAM", "SOCK_RAW"):  # AF_UNIX makes SOCK_RAW a datagram socket
    try:
        a, b = socket.socketpair(socket.AF_UNIX, getattr(socket, kind))
    except OSError as error:
        print(kind, "refused:", error.strerror)
        continue
    a.sendto(b"via sendto", sys.argv[1])
    a.connect(sys.argv[1])
    a.send(b"via connect")
    print(kind, "sent")
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
a.sendall(b"pair")
print("seqpacket pair:", b.recv(4).decode())
"""


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("network", [True, False], ids=["network-on", "network-off"])
def test_a_datagram_socketpair_cannot_send_to_a_host_daemon(tmp_path: Path, launch: str, network: bool) -> None:
    # journald, syslog's /dev/log and sd_notify listen on datagram sockets; a datagram pair could sendto
    # (or re-connect to) any path: made through socketpair, which the filter otherwise lets through.
    path = tmp_path / "log.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(path))
    server.setblocking(False)
    root = tmp_path / "project"
    root.mkdir()
    with server:
        result = _run([sys.executable, "-c", DATAGRAM, str(path)], root, launch, network)
        with pytest.raises(BlockingIOError):
            server.recv(64)
    assert result.output.splitlines() == [
        "SOCK_DGRAM refused: Address family not supported by protocol",
        "SOCK_RAW refused: Address family not supported by protocol",
        "seqpacket pair: pair",
    ], result.output
