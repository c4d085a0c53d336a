"""Attacks on toolrt's network proxy and masked credentials (issue 31) from inside a real sandbox, as the
model would make them: each aims at a server, a secret or the toolrt process, and must get nothing."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from net_origins import Authority, Origin, Reflecting, make_authority

from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox import proxy
from toolrt.sandbox.credentials import Credential
from toolrt.sandbox.netrules import NetworkRules
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.net_namespace), reason=f"no network namespace here: {SUPPORT.describe()}"
)
NAMES = ("tls.test", "other.test", "wild.test", "a.wild.test", "evilwild.test")


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return make_authority(tmp_path_factory.mktemp("ca"), ("tls.test", "other.test"))


@pytest.fixture
def resolved() -> Iterator[None]:
    proxy.use_resolver(lambda name: ["127.0.0.1"] if name in NAMES else [])
    yield
    proxy.use_resolver(None)


def _run(
    argv: list[str],
    root: Path,
    rules: NetworkRules,
    credentials: tuple[Credential, ...] = (),
    env: dict[str, str] | None = None,
    on_output: Callable[[str], None] | None = None,
) -> ProcessOutcome:
    policy = SandboxPolicy(network=False, network_rules=rules, credentials=credentials)
    plan = plan_sandbox(policy, replace(SUPPORT, launch="thread"), root=root, output_dir=root / "o")
    assert plan is not None

    async def main() -> ProcessOutcome:
        return await run_process(
            argv, cwd=root, env={**build_env(), **(env or {})}, timeout=60, sandbox=plan, on_output=on_output
        )

    return anyio.run(main)


EXFILTRATE = r"""
import gzip, os, socket, ssl, sys
token, port, ca = os.environ["GITHUB_TOKEN"], int(sys.argv[1]), sys.argv[2]
context = ssl.create_default_context()  # toolrt's bundle (SSL_CERT_FILE), with the proxy's authority
context.load_verify_locations(ca)

def exchange(head):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(f"CONNECT tls.test:{port} HTTP/1.1\r\n\r\n".encode())
    assert s.recv(4096).startswith(b"HTTP/1.1 200")
    tls = context.wrap_socket(s, server_hostname="tls.test")
    tls.sendall(head.encode())
    data = b""
    try:
        while chunk := tls.recv(65536):
            data += chunk
    except OSError:
        pass
    return data

reply = exchange(f"GET /reflect HTTP/1.1\r\nHost: tls.test\r\nAuthorization: Bearer {token}\r\n"
                 "Accept-Encoding: gzip\r\n\r\n")
head, _, body = reply.partition(b"\r\n\r\n")
if b"Content-Encoding: gzip" in head:
    body = gzip.decompress(body)
print("compressed", body.decode(errors="replace"))
forced = exchange(f"GET /gzip HTTP/1.1\r\nHost: tls.test\r\nAuthorization: Bearer {token}\r\n\r\n")
print("forced", repr(forced))
interim = exchange(f"POST /gzip HTTP/1.1\r\nHost: tls.test\r\nAuthorization: Bearer {token}\r\n"
                   "Expect: 100-continue\r\nContent-Length: 1\r\n\r\nx")
print("interim", repr(interim))
pieces = []
for start in range(0, 120, 6):  # six bytes at a time: no piece is the whole value the proxy stars out
    piece = exchange(f"GET /reflect HTTP/1.1\r\nHost: tls.test\r\nAuthorization: Bearer {token}\r\n"
                     f"Range: bytes={start}-{start + 5}\r\n\r\n")
    pieces.append(piece.partition(b"\r\n\r\n")[2].decode(errors="replace"))
print("ranges", "".join(pieces))
folded = exchange(f"GET /echo HTTP/1.1\r\nHost: tls.test\r\nX-Echo: a\r\n Authorization: Bearer {token}\r\n\r\n")
print("folded", folded.split(b"\r\n")[0].decode(errors="replace"))
spaced = exchange(f"GET /echo HTTP/1.1\r\nHost: tls.test\r\nAuthorization : Bearer {token}\r\n\r\n")
print("spaced", spaced.split(b"\r\n")[0].decode(errors="replace"))
"""


def test_a_masked_secret_does_not_come_back_compressed_nor_go_out_in_a_folded_header(
    tmp_path: Path, resolved: None, authority: Authority, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An echoing declared host answers gzip when asked (or unasked), or the byte range asked for: the
    starring of the reply must not be skipped by compression or by asking for the value piece by piece;
    an obsolete folded line (` Authorization: ...` continuing `X-Echo`) or a name with a space before its
    colon is another header for the server, and must not be given the real value."""
    secret = "ghp_canary" + os.urandom(12).hex()
    monkeypatch.setenv("GITHUB_TOKEN", secret)
    api = Reflecting(tmp_path, tls=authority)
    proxy.trust_upstream(str(authority.ca))
    try:
        rules = NetworkRules(((f"tls.test:{api.port}",),))
        credentials = (Credential("GITHUB_TOKEN", "mask", "tls.test", "Authorization"),)
        argv = [sys.executable, "-c", EXFILTRATE, str(api.port), str(authority.ca)]
        root = tmp_path / "project"
        root.mkdir()
        result = _run(argv, root, rules, credentials, env={"GITHUB_TOKEN": secret})
    finally:
        proxy.trust_upstream(None)
        api.stop()
    assert result.exit_code == 0, result.output
    assert secret not in result.output and secret[10:] not in result.output
    compressed = next(line for line in result.output.splitlines() if line.startswith("compressed"))
    assert compressed == f"compressed Bearer {'*' * len(secret)}"  # asked for gzip, answered plain and starred
    assert api.seen[0]["accept-encoding"] == "identity"
    assert api.seen[0]["authorization"] == f"Bearer {secret}"  # still works toward its host
    # the folded heads were not sent
    assert [seen["path"] for seen in api.seen] == ["/reflect", "/gzip", "/gzip", *["/reflect"] * 20]
    for seen in api.seen:
        assert secret not in json.dumps({k: v for k, v in seen.items() if k != "authorization"}), seen
    assert "folded HTTP/1.1 400 Bad Request" in result.output and "spaced HTTP/1.1 400 Bad Request" in result.output
    assert f"ranges Bearer {'*' * len(secret)}Bearer {'*' * len(secret)}" in result.output  # each whole
    assert "range" not in api.seen[3]
    assert "forced b''" in result.output  # a server that compresses unasked: nothing of its reply comes in
    assert "interim b''" in result.output and "expect" not in api.seen[2]  # no 100 Continue before it
    assert "ask the person" not in result.output  # the allow list is not what refused them
    assert result.network_refused == (
        f"tls.test:{api.port}: the response is encoded (gzip): toolrt could not redact it",
        f"tls.test:{api.port}: a header line toolrt will not rewrite (folded, or a space in its name)",
    )


FLOOD = r"""
import select, socket, sys, time
held = []
for _ in range(int(sys.argv[1])):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(b"GET http://tls.test/ HTTP/1.1\r\n")  # a head never finished (slowloris)
    held.append(s)
closed, deadline = set(), time.monotonic() + 10
while len(closed) < int(sys.argv[2]) and time.monotonic() < deadline:  # until the proxy closed the extra ones
    ready, _, _ = select.select([s for s in held if s not in closed], [], [], 0.5)
    for s in ready:
        if s.recv(100) == b"":
            closed.add(s)
print("held", len(held), "closed by the proxy", len(closed), flush=True)
open(sys.argv[3]).read()  # the test counts toolrt's descriptors, then writes here
"""


def test_a_flood_of_unfinished_connections_holds_a_bounded_number_of_descriptors(tmp_path: Path) -> None:
    """Thousands of connections held open with unfinished heads would each keep a descriptor in the
    toolrt process (and its limit is the whole runtime's): the proxy keeps at most MAX_CONNECTIONS of one
    process open at once, and closes the rest at once, saying why."""
    root = tmp_path / "project"
    root.mkdir()
    fifo = root / "go"
    os.mkfifo(fifo)
    flood = proxy.MAX_CONNECTIONS + 200
    counts: list[int] = []
    before = len(os.listdir("/proc/self/fd"))

    def on_output(text: str) -> None:
        if "held" in text and not counts:
            counts.append(len(os.listdir("/proc/self/fd")))
            with open(fifo, "w") as handle:
                handle.write("go")

    rules = NetworkRules((("tls.test",),))
    argv = [sys.executable, "-c", FLOOD, str(flood), str(flood - proxy.MAX_CONNECTIONS), str(fifo)]
    result = _run(argv, root, rules, on_output=on_output)
    assert result.exit_code == 0, result.output
    # each connect succeeds (the kernel's backlog); the proxy closes what is over its limit
    assert f"held {flood} closed by the proxy {flood - proxy.MAX_CONNECTIONS}" in result.output
    # (the margin: descriptors the process opens meanwhile, e.g. namespaces and rulesets made ahead; the
    # flood is 200 past the limit)
    assert counts and counts[0] - before <= proxy.MAX_CONNECTIONS + 60, (counts, before)
    # 200 refusals, kept once (each distinct refusal is kept, at most MAX_REFUSALS of them)
    assert result.network_refused == (f"?:0: more than {proxy.MAX_CONNECTIONS} connections open at once",)
    said = f"toolrt's network proxy refused a connection: more than {proxy.MAX_CONNECTIONS} connections open at once"
    assert result.output.endswith(said + "\n") and "ask the person" not in result.output


def test_an_unfinished_request_head_is_dropped_after_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slowloris: a head that never ends is not waited for forever."""
    monkeypatch.setattr(proxy, "_FIRST_BYTES_TIMEOUT", 1.0)
    script = (
        "import socket, time\n"
        "s = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
        "s.sendall(b'GET http://tls.test/ HTTP/1.1\\r\\nX: ')\n"
        "start = time.monotonic()\n"
        "print('ended', s.recv(100), time.monotonic() - start < 15)\n"
    )
    root = tmp_path / "project"
    root.mkdir()
    result = _run([sys.executable, "-c", script], root, NetworkRules((("tls.test",),)))
    assert "ended b'' True" in result.output, result.output


PROBES = r"""
import json, socket, ssl, sys
port = int(sys.argv[1])
found = {}

def ask(request):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(request.encode())
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except OSError:
        pass
    return data.decode(errors="replace")

def status(request):
    return ask(request).split("\r\n")[0]

for name in ["wild.test", "evilwild.test", "WILD.test.", "[::ffff:7f00:1]", "0.0.0.0", "[::]", "0"]:
    found[name] = status(f"CONNECT {name}:{port} HTTP/1.1\r\n\r\n")
found["userinfo"] = status(f"GET http://a.wild.test:{port}@evilwild.test:{port}/secret HTTP/1.1\r\n\r\n")
first = f"GET http://tls.test:{port}/echo HTTP/1.1\r\nHost: tls.test:{port}\r\n\r\n"
second = f"GET http://evilwild.test:{port}/secret HTTP/1.1\r\nHost: evilwild.test:{port}\r\n\r\n"
found["pipelined"] = ask(first + second)

def socks(command):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(b"\x05\x01\x00")
    s.recv(2)
    s.sendall(b"\x05" + bytes([command]) + b"\x00\x03\x08tls.test" + port.to_bytes(2, "big"))
    return s.recv(10)[1]

found["socks bind"], found["socks udp associate"] = socks(2), socks(3)

def hello(name):
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    tls = context.wrap_bio(incoming, outgoing, server_hostname=name)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()

def tunnel_with(first):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(f"CONNECT tls.test:{port} HTTP/1.1\r\n\r\n".encode())
    s.recv(4096)
    s.sendall(first)
    try:
        return s.recv(100) == b""
    except OSError:
        return True

found["no server name"] = tunnel_with(hello(None))
record = hello("tls.test")
body = record[5:]  # one handshake message, cut in two records before its extensions
cut = 60
found["hello split across records"] = tunnel_with(
    record[:3] + cut.to_bytes(2, "big") + body[:cut] + record[:3] + (len(body) - cut).to_bytes(2, "big") + body[cut:]
)
print(json.dumps(found))
"""


def test_names_and_addresses_that_look_allowed_reach_nothing_else(tmp_path: Path, resolved: None) -> None:
    """`*.wild.test` covers neither `wild.test` nor `evilwild.test`; every spelling of this machine's
    addresses (IPv4 in IPv6, the unspecified address that reaches loopback) is refused; userinfo names
    no host; a second request pipelined after an allowed one goes to the allowed host's address only;
    SOCKS5 offers CONNECT only; a tunnel whose ClientHello has no server name, or has it in a second
    record, connects nothing."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "secret").write_text("the allowed site's own file")
    site = Origin(tmp_path / "site")
    try:
        rules = NetworkRules((("*.wild.test:*", "tls.test:*"),))
        root = tmp_path / "project"
        root.mkdir()
        result = _run([sys.executable, "-c", PROBES, str(site.port)], root, rules)
    finally:
        site.stop()
    found = json.loads(result.output.splitlines()[0])
    forbidden = "HTTP/1.1 403 Forbidden"
    for name in ("wild.test", "evilwild.test", "WILD.test.", "[::ffff:7f00:1]", "0.0.0.0", "[::]", "0"):
        assert found[name] == forbidden, name
    assert found["userinfo"] == forbidden
    # tls.test's own server answers the first request; the second never reaches evilwild.test
    assert found["pipelined"].startswith("HTTP/1.0 200") and "host=tls.test" in found["pipelined"]
    assert found["socks bind"] == found["socks udp associate"] == 7  # command not supported
    assert found["no server name"] is True and found["hello split across records"] is True
    assert site.accepted == 1
    said = "\n".join(result.network_refused)
    assert "SOCKS5 BIND and UDP are not offered" in said
    assert said.count("the TLS ClientHello names 'no server', not tls.test") == 1  # both, kept once


TAMPER = r"""
import os
bundle = os.environ["SSL_CERT_FILE"]
info = os.stat(bundle)
with open(bundle, "r+b") as handle:  # same length, same times: only the change time tells
    data = handle.read()
    handle.seek(0)
    handle.write(data.replace(b"MII", b"!!!"))
os.utime(bundle, ns=(info.st_atime_ns, info.st_mtime_ns))
with open(os.environ["NODE_EXTRA_CA_CERTS"], "ab") as handle:
    handle.write(b"an authority of the model's own\n")
print("tampered", bundle)
"""

READ = r"""
import os
print("bundle", os.environ["SSL_CERT_FILE"], open(os.environ["SSL_CERT_FILE"], "rb").read().count(b"!!!"))
print("ca", open(os.environ["NODE_EXTRA_CA_CERTS"]).read().count("model's own"))
"""


def test_the_trusted_authorities_a_process_changed_are_not_what_the_next_process_trusts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundle of authorities a sandboxed process trusts lies in a temp directory it may write: one
    process rewrites it (keeping its size and times) and adds to toolrt's authority file; the next
    process gets files as toolrt wrote them."""
    from toolrt.sandbox.credentials import authority

    monkeypatch.setenv("GITHUB_TOKEN", "ghp_canary")
    root = tmp_path / "project"
    root.mkdir()
    rules = NetworkRules((("tls.test",),))
    credentials = (Credential("GITHUB_TOKEN", "mask", "tls.test", "Authorization"),)
    first = _run([sys.executable, "-c", TAMPER], root, rules, credentials)
    assert first.output.startswith("tampered"), first.output
    tampered = first.output.split()[1]
    assert Path(tampered).read_bytes().count(b"!!!") > 0  # the attack itself works: the file is writable
    second = _run([sys.executable, "-c", READ], root, rules, credentials)
    bundle = second.output.split()[1]
    assert bundle != tampered and f"bundle {bundle} 0\nca 0\n" == second.output
    assert authority().files()[0] == bundle
