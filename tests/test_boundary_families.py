"""Address families a network namespace does not cut are refused in the sandbox, in every network mode
and under both launchers (issue 25, item 5): real python in the kernel sandbox, real sockets.

`AF_VSOCK` reaches the hypervisor's host (CID 2) and a loopback transport's local listeners (CID 1)
whatever the network namespace: before, a sandboxed process with `network: false` made one (and this
VM's host was one `connect` away). Only IP and netlink sockets, which live in the process's network
namespace, may be made besides the UNIX ones the filter already handles.
"""

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
from toolrt.sandbox.plan import SandboxPlan, plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and seccomp.supported()), reason=f"no Landlock or no filter here: {SUPPORT.describe()}"
)
LAUNCHES = ["thread", "forkserver"]
PROBE = """
import socket
tries = [
    ("vsock", socket.AF_VSOCK, socket.SOCK_STREAM, 0),
    ("packet", socket.AF_PACKET, socket.SOCK_DGRAM, 0),
    ("xdp", 44, socket.SOCK_RAW, 0),
    ("alg", 38, socket.SOCK_SEQPACKET, 0),
    ("bluetooth", 31, socket.SOCK_STREAM, 3),
    ("inet", socket.AF_INET, socket.SOCK_STREAM, 0),
    ("inet6", socket.AF_INET6, socket.SOCK_DGRAM, 0),
    ("netlink", socket.AF_NETLINK, socket.SOCK_RAW, 0),
]
for name, family, kind, protocol in tries:
    try:
        socket.socket(family, kind, protocol).close()
        print(name, "made")
    except OSError as error:
        print(name, "refused:", error.strerror)
"""
VSOCK = "import socket\nsocket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()\nprint('vsock made')"
REFUSED = "refused: Address family not supported by protocol"


def _host_makes_vsock() -> bool:
    try:
        socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()
    except (OSError, AttributeError):
        return False
    return True


@pytest.fixture
def listed(tmp_path: Path) -> Iterator[Path]:
    """A listening socket for the host's allow-list (the supervised filter)."""
    path = tmp_path / "agent" / "agent.sock"
    path.parent.mkdir()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    yield path
    server.close()


def _plan(root: Path, launch: str, policy: SandboxPolicy) -> SandboxPlan:
    support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
    plan = plan_sandbox(policy, support, root=root, output_dir=root / "out")
    assert plan is not None
    return plan


def _run(argv: list[str], root: Path, plan: SandboxPlan) -> ProcessOutcome:
    async def main() -> ProcessOutcome:
        return await run_process(argv, cwd=root, env=build_env(), timeout=20, sandbox=plan)

    return anyio.run(main)


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("network", [True, False], ids=["network-on", "network-off"])
@pytest.mark.parametrize("with_list", [False, True], ids=["no-list", "socket-list"])
def test_only_ip_and_netlink_sockets_are_made(
    tmp_path: Path, listed: Path, launch: str, network: bool, with_list: bool
) -> None:
    sockets = (str(listed),) if with_list else ()
    plan = _plan(tmp_path, launch, SandboxPolicy(network=network, sockets=sockets))
    assert bool(plan.sockets) == with_list
    result = _run([sys.executable, "-c", PROBE], tmp_path, plan)
    assert result.output.splitlines() == [
        f"vsock {REFUSED}",
        f"packet {REFUSED}",
        f"xdp {REFUSED}",
        f"alg {REFUSED}",
        f"bluetooth {REFUSED}",
        "inet made",
        "inet6 made",
        "netlink made",
    ], result.output


@pytest.mark.skipif(not _host_makes_vsock(), reason="this kernel makes no AF_VSOCK socket, in or out of the sandbox")
@pytest.mark.parametrize("launch", LAUNCHES)
def test_the_filter_is_what_refuses_vsock(tmp_path: Path, launch: str) -> None:
    plan = _plan(tmp_path, launch, SandboxPolicy(network=False))
    assert plan.no_unix_sockets and plan.unshare_net
    refused = _run([sys.executable, "-c", VSOCK], tmp_path, plan).output.splitlines()
    assert "OSError: [Errno 97] Address family not supported by protocol" in refused, refused
    assert refused[-1].startswith(  # the model is told why (`sandbox.hint`)
        "toolrt: the sandbox refuses UNIX sockets (a seccomp filter on socket(AF_UNIX)) and every address family "
        "other than IP and netlink (vsock, packet, Bluetooth), so no local daemon"
    ), refused
    unfiltered = replace(plan, no_unix_sockets=False)  # the network namespace alone lets it through
    assert _run([sys.executable, "-c", VSOCK], tmp_path, unfiltered).output == "vsock made\n"
