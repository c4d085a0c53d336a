"""Attacks on the proxy's refusal of this machine's own addresses, in a fresh network namespace where
an internet address (93.184.216.34) is one of the machine's interfaces and a listener is bound to
0.0.0.0: a wildcard-allowed name resolving to it, in any spelling, must be refused before connecting."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

OWN = "93.184.216.34"

ATTACK = """
import socket, sys, anyio
from toolrt.sandbox import proxy
from toolrt.sandbox.netrules import NetworkRules

listener = socket.socket(socket.AF_INET6)
listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
listener.bind(("::", 0))
listener.listen()
listener.setblocking(False)
port = listener.getsockname()[1]
rules = NetworkRules((("*.wild.test:*",),))
for spelling in sys.argv[1:]:
    proxy.use_resolver(lambda name: [spelling])
    async def attempt() -> str:
        try:
            address = await proxy._destination("a.wild.test", port, rules)
        except proxy._Refused as refusal:
            return "refused: " + refusal.refusal.rule
        try:
            stream = await proxy._connect(address, port)
        except OSError as error:
            return f"allowed {address}, connect failed: {error}"
        await stream.aclose()
        return "connected to " + address
    print(spelling, "->", anyio.run(attempt))
try:
    listener.accept()
    print("LISTENER SAW A CONNECTION")
except BlockingIOError:
    print("listener saw nothing")
"""


def _attack(*spellings: str, added_after_start: bool = False) -> str:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip")
    add = f"ip addr add {OWN}/32 dev lo"
    script = ATTACK
    if added_after_start:  # the proxy reads its own addresses, then the interface gets the address
        script = script.replace(
            "for spelling",
            "proxy._own_addresses()\nimport subprocess\n"
            f"subprocess.run({add.split()!r}, check=True)\n"
            "proxy._own = (proxy._own[0] - proxy._OWN_SECONDS, proxy._own[1])\nfor spelling",
        )
        add = "true"
    probe = subprocess.run(["unshare", "-rn", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no user network namespace here: {probe.stderr.decode()}")
    command = f'ip link set lo up && {add} && exec "$0" -c "$@"'
    done = subprocess.run(
        ["unshare", "-rn", "sh", "-c", command, sys.executable, script, *spellings],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_interface_address_in_every_spelling_is_refused_and_never_reached() -> None:
    """Before: only the exact string of the interface's address was refused; `::ffff:93.184.216.34`
    (an AAAA record any DNS server can serve) connected to the listener bound to every address."""
    spellings = (OWN, f"::ffff:{OWN}", "::ffff:5db8:d822", "64:ff9b::5db8:d822", "2002:5db8:d822::1")
    output = _attack(*spellings)
    for spelling in spellings:
        assert f"{spelling} -> refused: it resolves to" in output, output
    assert "listener saw nothing" in output


def test_an_address_the_interface_gets_after_start_is_refused() -> None:
    """An address added once the proxy has read the machine's addresses is refused at the latest
    `_OWN_SECONDS` later; here the cache is aged by `_OWN_SECONDS` instead of sleeping."""
    output = _attack(f"::ffff:{OWN}", added_after_start=True)
    assert "listener saw nothing" in output
    assert f"::ffff:{OWN} -> refused: it resolves to" in output, output
