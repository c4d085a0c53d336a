"""`toolrt serve --transport http` as an OAuth 2.1 resource server (issue 30): a real authorization server on
loopback (tests/oauth_issuer.py: keys the test makes, a JWKS endpoint, a token endpoint), real signed tokens,
the real MCP client with the SDK's OAuth provider; every refused token is a request whose tool never runs
(its side effect, a file the tool writes, is absent)."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import anyio
import httpx2 as httpx
import jwt
import mcp_types as types
import pytest
from cryptography.hazmat.primitives import serialization
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AccessToken
from oauth_issuer import Issuer, TokenStore, issuing
from otel_helpers import Installed, installed_providers
from serve_http import free_port, serving

from toolrt.api import Runtime
from toolrt.audit import read_records
from toolrt.config.settings import AuthSettings
from toolrt.errors import UsageError
from toolrt.faces import serve_auth
from toolrt.faces.serve import refuse_unauthenticated, run_serve
from toolrt.faces.serve_principal import caller_of
from toolrt.faces.serve_sessions import SESSION_META_KEY
from toolrt.scope import CallScope

MARK = """\
id: mark
description: "Writes its environment to ran-NAME.env and says it ran."
parameters: {type: object, properties: {name: {type: string, pattern: "^[a-z]+$"}}, required: [name]}
handler: {shell: "env > ran-{{ name }}.env; echo ran {{ name }}"}
"""
DEPLOY = """\
id: deploy
description: "Writes ran-deploy.env: a tool whose token needs the deploy:write scope."
parameters: {type: object, properties: {}}
handler: {shell: "env > ran-deploy.env; echo deployed"}
scopes: [deploy:write]
"""
PERMISSIONS = """\
permission:
  mark: allow
  deploy: allow
agents:
  readonly:
    mode: primary
    permission:
      mark: deny
      deploy: deny
"""
VERSION = "2025-11-25"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "mark.yaml").write_text(MARK, encoding="utf-8")
    (root / "tools.d" / "deploy.yaml").write_text(DEPLOY, encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    (root / "permissions.yaml").write_text(PERMISSIONS, encoding="utf-8")
    return root


@pytest.fixture
def installed() -> Iterator[Installed]:
    with installed_providers() as made:
        yield made


def ran(root: Path) -> list[str]:
    """The tools' side effects: which `ran-*.env` files exist."""
    return sorted(path.name for path in root.glob("ran-*.env"))


Body = Callable[[Runtime, Issuer, str], Awaitable[None]]


def run(
    tmp_path: Path,
    body: Body,
    *,
    locked: str | None = None,
    required: tuple[str, ...] = (),
    root: Path | None = None,
) -> Runtime:
    """Serve the project (`root`, else `project`'s) with authentication against a loopback issuer;
    `body(rt, issuer, url)`."""
    root = root or project(tmp_path)
    settings: dict[str, Any] = {"data_dir": tmp_path / "data"}
    if locked is not None:
        (tmp_path / "locked.yaml").write_text(locked, encoding="utf-8")
        settings["locked_permissions"] = tmp_path / "locked.yaml"
    rt = Runtime.load(root, settings=settings)

    async def main() -> None:
        with anyio.fail_after(60):
            async with issuing() as issuer:
                port = free_port()
                url = f"http://127.0.0.1:{port}/mcp"
                auth = AuthSettings(issuer=issuer.url, audience=url, jwks_url=issuer.jwks_url, required_scopes=required)
                async with serving(rt, auth=auth, port=port) as served:
                    assert served == url
                    await body(rt, issuer, url)

    try:
        anyio.run(main)
    finally:
        rt.close()
    return rt


async def open_session(http: httpx.AsyncClient, url: str, token: str) -> dict[str, str]:
    """A session opened by hand with `token`; the headers of its later requests."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    bearer = {**HEADERS, "authorization": f"Bearer {token}"}
    opened = await http.post(url, json=init, headers=bearer)
    assert opened.status_code == 200, opened.text
    headers = {**bearer, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    done = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert done.status_code == 202, done.text
    return headers


async def call(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], tool: str, **arguments: Any
) -> httpx.Response:
    message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    return await http.post(url, json=message, headers=headers)


def with_token(headers: dict[str, str], token: str) -> dict[str, str]:
    return {**headers, "authorization": f"Bearer {token}"}


@pytest.mark.slow
def test_the_sdks_oauth_client_finds_the_issuer_gets_a_token_and_calls_and_the_token_goes_nowhere(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, installed: Installed
) -> None:
    caplog.set_level(logging.DEBUG)
    seen: dict[str, Any] = {}

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        storage = TokenStore()
        oauth = ClientCredentialsOAuthProvider(url, storage, "ci-bot", "secret", scope="tools", issuer=issuer.url)
        async with (
            httpx.AsyncClient(auth=oauth, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            listed = await client.list_tools()
            assert sorted(tool.name for tool in listed.tools) == ["deploy", "mark"]
            result = await client.call_tool("mark", {"name": "one"})
            assert not result.is_error and result.content[0].text == "ran one\n"  # type: ignore[union-attr]
        seen["token"] = storage.tokens.access_token
        async with httpx.AsyncClient(timeout=30) as http:
            metadata = (await http.get(url.replace("/mcp", "/.well-known/oauth-protected-resource"))).json()
        assert metadata["resource"] == url and metadata["authorization_servers"] == [issuer.url]
        assert metadata["scopes_supported"] == ["tools", "deploy:write"]

    rt = run(tmp_path, body, required=("tools",))
    token = seen["token"]
    assert jwt.decode(token, options={"verify_signature": False})["sub"] == "ci-bot"
    root = rt.root
    assert ran(root) == ["ran-one.env"]
    records, _ = read_records(tmp_path / "data" / "audit.jsonl")
    assert [(r["tool"], r["principal"], r["status"]) for r in records] == [("mark", "ci-bot", "ok")]
    # The bearer token is in none of what the server wrote or said: the tool's environment, the audit, logs.
    out, err = capfd.readouterr()
    spans = installed.finished()
    server = next(span for span in spans if span.name == "tools/call mark")
    assert (server.attributes or {})["enduser.id"] == "ci-bot"
    outputs = {
        "spans": "\n".join(f"{span.name} {dict(span.attributes or {})} {span.events} {span.status}" for span in spans),
        "tool environment": (root / "ran-one.env").read_text(encoding="utf-8"),
        "audit": (tmp_path / "data" / "audit.jsonl").read_text(encoding="utf-8"),
        "stdout": out,
        "stderr": err,
        "log": caplog.text,
    }
    for where, text in outputs.items():
        assert token not in text, where
        assert token.split(".")[2] not in text, where  # not even its signature


def test_no_token_is_401_naming_the_metadata_and_the_metadata_names_the_issuer(tmp_path: Path) -> None:
    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=HEADERS)
            assert refused.status_code == 401
            challenge = refused.headers["www-authenticate"]
            metadata_url = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
            assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata_url}"' in challenge
            for where in (metadata_url, url.replace("/mcp", "/.well-known/oauth-protected-resource")):
                metadata = (await http.get(where)).json()
                assert metadata["resource"] == url and metadata["authorization_servers"] == [issuer.url]
                assert metadata["scopes_supported"] == ["deploy:write"]

    run(tmp_path, body)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(issuer: Issuer, url: str) -> str:
    header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": issuer.kid}).encode())
    claims = {"iss": issuer.url, "aud": url, "sub": "mallory", "exp": 2**40}
    return f"{header}.{_b64(json.dumps(claims).encode())}."


def _hs256_with_public_key(issuer: Issuer, url: str) -> str:
    """The classic confusion: the issuer's public key (PEM) used as an HMAC secret."""
    pem = issuer.key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": issuer.kid}).encode())
    claims = _b64(json.dumps({"iss": issuer.url, "aud": url, "sub": "mallory", "exp": 2**40}).encode())
    import hashlib
    import hmac

    signature = hmac.new(pem, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return f"{header}.{claims}.{_b64(signature)}"


BAD_TOKENS: dict[str, Callable[[Issuer, str], str]] = {
    "expired": lambda issuer, url: issuer.mint(audience=url, lifetime=-3600),
    "not yet valid": lambda issuer, url: issuer.mint(audience=url, nbf=2**33),
    "wrong audience": lambda issuer, url: issuer.mint(audience="http://127.0.0.1:1/mcp"),
    "no audience": lambda issuer, url: issuer.mint(audience=None),
    "wrong issuer": lambda issuer, url: issuer.mint(audience=url, iss="http://127.0.0.1:1"),
    "alg none": _unsigned,
    "HS256 with the public key": _hs256_with_public_key,
    "unknown kid": lambda issuer, url: issuer.mint(audience=url, headers={"kid": "made-up"}),
    "over size": lambda issuer, url: issuer.mint(audience=url, padding="x" * 9000),
    "not a JWT": lambda issuer, url: "opaque-token-value",
}


def test_every_bad_token_is_401_and_no_tool_runs(tmp_path: Path) -> None:
    answers: dict[str, tuple[int, str]] = {}

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            headers = await open_session(http, url, issuer.mint(audience=url))
            for name, make in BAD_TOKENS.items():
                hits = issuer.jwks_hits
                refused = await call(http, url, with_token(headers, make(issuer, url)), "mark", name="bad")
                answers[name] = (refused.status_code, refused.headers.get("www-authenticate", ""))
                if name == "over size":  # refused before it is parsed: the issuer is not asked
                    assert issuer.jwks_hits == hits
            hits = issuer.jwks_hits
            huge = await call(http, url, with_token(headers, "x" * 70_000), "mark", name="huge")
            assert huge.status_code in (400, 401, 431) and issuer.jwks_hits == hits  # past HTTP's header limit
        async with httpx.AsyncClient(timeout=30) as http:  # a refused header may have closed the connection
            fine = await call(http, url, headers, "mark", name="good")
            assert fine.status_code == 200 and "ran good" in fine.text, fine.text

    rt = run(tmp_path, body)
    for name, (status, challenge) in answers.items():
        assert status == 401, name
        assert 'error="invalid_token"' in challenge and "resource_metadata=" in challenge, name
    assert ran(rt.root) == ["ran-good.env"]


def test_a_jwks_that_is_down_or_slow_fails_closed_within_the_bound_and_cached_keys_still_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serve_auth, "JWKS_WAIT_SECONDS", 0.5)
    monkeypatch.setattr(serve_auth, "JWKS_MIN_REFETCH_SECONDS", 0.0)

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            issuer.jwks_down = True
            init = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            down = await http.post(url, json=init, headers=with_token(HEADERS, issuer.mint(audience=url)))
            assert down.status_code == 401  # no keys: nothing verifies
            issuer.jwks_down, issuer.jwks_delay = False, 60.0
            with anyio.fail_after(20):  # the server stops waiting after 0.5 s, long before the issuer answers
                slow = await http.post(url, json=init, headers=with_token(HEADERS, issuer.mint(audience=url)))
            assert slow.status_code == 401
            issuer.jwks_delay = 0.0
            headers = await open_session(http, url, issuer.mint(audience=url))  # the keys are fetched now
            issuer.jwks_down = True
            cached = await call(http, url, with_token(headers, issuer.mint(audience=url)), "mark", name="cached")
            assert cached.status_code == 200 and "ran cached" in cached.text, cached.text
            unknown = issuer.mint(audience=url, headers={"kid": "rotated"})
            refused = await call(http, url, with_token(headers, unknown), "mark", name="rotated")
            assert refused.status_code == 401

    rt = run(tmp_path, body)
    assert ran(rt.root) == ["ran-cached.env"]


def test_a_verified_token_is_remembered_for_a_minute_at_most_and_never_past_its_expiry(tmp_path: Path) -> None:
    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        keys = serve_auth.JwksKeys(issuer.jwks_url, min_refetch=0.0)
        now = [time.time()]
        verifier = serve_auth.JwtVerifier(issuer.url, url, keys, clock=lambda: now[0])
        token = issuer.mint(audience=url, lifetime=30)
        first = await verifier.verify_token(token)
        assert first is not None and first.subject == "alice"
        issuer.jwks_down = True
        keys._keys.clear()  # the key is gone: only the remembered verification lets the token in
        assert await verifier.verify_token(token) is first
        assert await verifier.verify_token(issuer.mint(audience=url, lifetime=30, jti="2")) is None  # another is not
        now[0] += 31  # past its exp, within the minute: verified again, and it no longer verifies
        assert await verifier.verify_token(token) is None

    run(tmp_path, body)


def test_a_tool_whose_scope_the_token_lacks_is_403_insufficient_scope_and_does_not_run(tmp_path: Path) -> None:
    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            headers = await open_session(http, url, issuer.mint(audience=url, scope="tools"))
            refused = await call(http, url, headers, "deploy")
            assert refused.status_code == 403
            challenge = refused.headers["www-authenticate"]
            assert 'error="insufficient_scope"' in challenge and 'scope="deploy:write"' in challenge
            assert not ran(rt.root)
            allowed = with_token(headers, issuer.mint(audience=url, scope="tools deploy:write"))
            done = await call(http, url, allowed, "deploy")
            assert done.status_code == 200 and "deployed" in done.text, done.text

    rt = run(tmp_path, body)
    assert ran(rt.root) == ["ran-deploy.env"]


def test_a_tool_whose_scope_the_token_lacks_does_not_run_as_a_batch_sub_call_either(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "toolrt.yaml").write_text("builtin_tools: [batch]\n", encoding="utf-8")
    (root / "permissions.yaml").write_text("permission:\n  batch: allow\n  mark: allow\n  deploy: allow\n")
    with Runtime.load(root, settings={"data_dir": tmp_path / "data"}, flags={"batch_tool": True}) as rt:
        lacking = CallScope(principal="alice", token_scopes=frozenset({"tools"}))
        direct = rt.call_sync("deploy", {}, lacking)
        assert (
            direct.error
            == "The deploy tool needs the OAuth scope deploy:write, which the caller's token does not hold."
        )
        batched = rt.call_sync("batch", {"tool_calls": [{"tool": "deploy", "parameters": {}}]}, lacking)
        assert "needs the OAuth scope deploy:write" in batched.output, batched
        assert not ran(root)
        holding = CallScope(principal="alice", token_scopes=frozenset({"deploy:write"}))
        assert rt.call_sync("batch", {"tool_calls": [{"tool": "deploy", "parameters": {}}]}, holding).error is None
        assert ran(root) == ["ran-deploy.env"]
        assert rt.call_sync("mark", {"name": "library"}).error is None  # nobody authenticated: scopes bind nothing
    records, _ = read_records(tmp_path / "data" / "audit.jsonl")
    assert [(r["tool"], r["status"]) for r in records][:2] == [("deploy", "invalid"), ("deploy", "invalid")]


def test_required_scopes_refuse_a_token_without_them(tmp_path: Path) -> None:
    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            init = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            refused = await http.post(
                url, json=init, headers=with_token(HEADERS, issuer.mint(audience=url, scope="other"))
            )
            assert refused.status_code == 403 and 'error="insufficient_scope"' in refused.headers["www-authenticate"]

    run(tmp_path, body, required=("tools",))


PRINCIPALS = """\
principals:
  - {match: {groups: admins}, agent: build}
  - {match: {sub: [carol, dave]}, agent: readonly}
"""


def test_principals_map_claims_to_agents_and_a_token_matching_none_is_refused(tmp_path: Path) -> None:
    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            admin = await open_session(http, url, issuer.mint(audience=url, sub="alice", groups=["dev", "admins"]))
            done = await call(http, url, admin, "mark", name="admin")
            assert done.status_code == 200 and "ran admin" in done.text, done.text
            reader = await open_session(http, url, issuer.mint(audience=url, sub="carol"))
            denied = await call(http, url, reader, "mark", name="reader")  # readonly denies it: not offered
            assert denied.status_code == 200 and "Unknown tool: mark" in denied.text, denied.text
            assert "ran admin" not in denied.text
            stranger = issuer.mint(audience=url, sub="eve", groups=["dev"])
            init = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            refused = await http.post(url, json=init, headers=with_token(HEADERS, stranger))
            assert refused.status_code == 403 and "principals" in refused.json()["error_description"]
            # eve with alice's MCP session: refused before the session is looked at
            stolen = await call(http, url, with_token(admin, stranger), "mark", name="stolen")
            assert stolen.status_code == 403

    rt = run(tmp_path, body, locked=PRINCIPALS)
    assert ran(rt.root) == ["ran-admin.env"]
    records, _ = read_records(tmp_path / "data" / "audit.jsonl")
    assert [(r["principal"], r["agent"], r["status"]) for r in records] == [("alice", "build", "ok")]


def test_a_default_entry_gives_every_other_token_its_agent(tmp_path: Path) -> None:
    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            anyone = await open_session(http, url, issuer.mint(audience=url, sub="zed"))
            denied = await call(http, url, anyone, "mark", name="zed")
            assert denied.status_code == 200 and "Unknown tool: mark" in denied.text, denied.text

    rt = run(
        tmp_path,
        body,
        locked="principals:\n  - {match: {groups: admins}, agent: build}\n  - {match: {}, agent: readonly}\n",
    )
    assert not ran(rt.root)


def test_a_session_is_bound_to_its_principal(tmp_path: Path) -> None:
    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            alices = await open_session(http, url, issuer.mint(audience=url, sub="alice"))
            bobs = with_token(alices, issuer.mint(audience=url, sub="bob"))
            refused = await call(http, url, bobs, "mark", name="bob")
            assert refused.status_code == 404  # as if the session did not exist
            done = await call(http, url, alices, "mark", name="alice")
            assert done.status_code == 200, done.text
            names = [name for name in list(rt.sessions.held._states) if name.startswith("mcp:")]
            assert len(names) == 1 and names[0].startswith(f"mcp:{alices['mcp-session-id']}@")

    rt = run(tmp_path, body)
    assert ran(rt.root) == ["ran-alice.env"]


def test_a_sessionless_token_of_one_principal_is_nobody_elses(tmp_path: Path) -> None:
    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async def call_as(subject: str, session: str) -> str:
            bearer = {"Authorization": f"Bearer {issuer.mint(audience=url, sub=subject)}"}
            async with (
                httpx.AsyncClient(headers=bearer, timeout=30) as http,
                Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client,
            ):
                meta = cast(types.RequestParamsMeta, {SESSION_META_KEY: session})
                result = await client.call_tool("mark", {"name": subject}, meta=meta)
                assert not result.is_error and result.meta is not None, result
                return str(result.meta[SESSION_META_KEY])

        alices = await call_as("alice", "new")
        assert await call_as("alice", alices) == alices  # hers, on her next request
        taken = await call_as("bob", alices)  # bob naming her token gets a session of his own
        assert taken != alices
        names = sorted(name for name in list(rt.sessions.held._states) if name.startswith("mcp-token:"))
        assert len(names) == 2 and all("@" in name for name in names)
        assert {name.split("@")[0] for name in names} == {f"mcp-token:{alices}", f"mcp-token:{taken}"}

    rt = run(tmp_path, body)
    assert ran(rt.root) == ["ran-alice.env", "ran-bob.env"]


def test_a_principals_session_suffix_is_the_same_on_every_replica() -> None:
    claims = {"iss": "https://login.example", "sub": "alice", "client_id": "app"}
    tokens = [AccessToken(token=f"t{n}", client_id="app", scopes=[], subject="alice", claims=claims) for n in (1, 2)]
    assert caller_of(tokens[0]).key == caller_of(tokens[1]).key  # a digest of who, not of the token or the process
    other = AccessToken(token="t3", client_id="app", scopes=[], subject="bob", claims={**claims, "sub": "bob"})
    assert caller_of(other).key != caller_of(tokens[0]).key


def test_a_non_loopback_host_without_authentication_refuses_to_start(tmp_path: Path) -> None:
    rt = Runtime.load(project(tmp_path), settings={"data_dir": tmp_path / "data"})
    try:
        with pytest.raises(
            UsageError, match=r"needs authentication: set auth\.issuer, auth\.audience and auth\.jwks_url"
        ):
            run_serve(rt, transport="http", host="0.0.0.0", port=free_port(), scope=CallScope())
    finally:
        rt.close()
    refuse_unauthenticated("127.0.0.1", AuthSettings())
    refuse_unauthenticated("::1", AuthSettings())
    with pytest.raises(UsageError, match=r"authentication needs auth\.audience, auth\.jwks_url as well"):
        refuse_unauthenticated("0.0.0.0", AuthSettings(issuer="https://login.example"))
    with pytest.raises(UsageError, match=r"auth\.jwks_url must be an http\(s\) URL"):
        refuse_unauthenticated(
            "0.0.0.0", AuthSettings(issuer="https://a", audience="https://b/mcp", jwks_url="file:///k")
        )


def test_a_project_cannot_set_the_auth_settings(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / ".env").write_text("TOOLRT_AUTH__ISSUER=http://127.0.0.1:1\nTOOLRT_AUTH__JWKS_URL=http://127.0.0.1:1/k\n")
    rt = Runtime.load(root, settings={"data_dir": tmp_path / "data"})
    try:
        assert rt.settings.values.auth == AuthSettings()
        ignored = {item.key: item.reason for item in rt.settings.ignored}
        assert "auth.issuer" in ignored and "auth.jwks_url" in ignored
        assert "TOOLRT_AUTH__ISSUER" in ignored["auth.issuer"]
    finally:
        rt.close()
