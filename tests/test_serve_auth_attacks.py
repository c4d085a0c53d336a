"""Attacks on `toolrt serve`'s authentication (issue 30) by a client on the network, against the real
server, a real loopback issuer and real signed tokens (tests/oauth_issuer.py); each closes a hole one of
them found, or covers a mechanism no other test attacks."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import jwt
import mcp_types as types
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from oauth_issuer import Issuer
from processes import holding
from test_serve_auth import HEADERS, PRINCIPALS, open_session, project, ran, run, with_token
from test_serve_input_required import ECHO, ELICITING, _approve
from test_serve_tasks import (
    MODERN,
    Ack,
    Tasks,
    UpdateParams,
    UpdateTask,
    _gone,
    _handle,
    _marker,
    cancel_task,
    get_task,
)
from test_serve_tasks import project as tasks_project

from toolrt.api import Runtime
from toolrt.audit import read_records
from toolrt.config.settings import AuthSettings
from toolrt.faces import asgi, serve_auth

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


def test_a_tools_call_spelled_with_json_escapes_is_still_403_insufficient_scope(tmp_path: Path) -> None:
    """`tools\\/call` and `d\\u0065ploy` are the same method and tool to the SDK: the scope gate must see them."""

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            headers = await open_session(http, url, issuer.mint(audience=url, scope="tools"))
            for raw in (
                rb'{"jsonrpc":"2.0","id":5,"method":"tools\/call","params":{"name":"deploy","arguments":{}}}',
                rb'{"jsonrpc":"2.0","id":6,"method":"\u0074ools/call","params":{"name":"d\u0065ploy"}}',
            ):
                refused = await http.post(url, content=raw, headers=headers)
                assert refused.status_code == 403, refused.text
                assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]
                assert 'scope="deploy:write"' in refused.headers["www-authenticate"]

    rt = run(tmp_path, body)
    assert not ran(rt.root)


def test_date_claims_that_are_not_numbers_or_past_any_date_are_401_not_a_server_error(tmp_path: Path) -> None:
    """Signed by the issuer, yet malformed: an `exp` past what a float holds crashed the verifier (500);
    a numeric string (which PyJWT takes) is not a NumericDate; neither is an infinite or a huge `nbf`."""
    answers: dict[str, int] = {}

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        bad = {
            "exp past a float": issuer.mint(audience=url, exp=10**400),
            "exp a numeric string": issuer.mint(audience=url, exp="9999999999"),
            "exp infinite": issuer.mint(audience=url, exp=math.inf),
            "exp a boolean": issuer.mint(audience=url, exp=True),
            "nbf past any date": issuer.mint(audience=url, nbf=-(10**400)),
        }
        async with httpx.AsyncClient(timeout=30) as http:
            for name, token in bad.items():
                answers[name] = (await http.post(url, json=PING, headers=with_token(HEADERS, token))).status_code
            fine = await http.post(url, json=PING, headers=with_token(HEADERS, issuer.mint(audience=url)))
            assert fine.status_code == 400 and "Missing session ID" in fine.text  # past authentication

    run(tmp_path, body)
    assert answers == dict.fromkeys(answers, 401)


async def modern_call(
    http: httpx.AsyncClient, url: str, token: str, arguments: Mapping[str, Any], **extra: Any
) -> tuple[int, dict[str, Any]]:
    """One 2026-07-28 `tools/call` of `guarded` with `token` (no handshake, no session); (HTTP status, reply)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": ELICITING,
    }
    params = {"name": "guarded", "arguments": dict(arguments), "_meta": meta, **extra}
    headers = {
        **HEADERS,
        "authorization": f"Bearer {token}",
        "mcp-protocol-version": MODERN,
        "mcp-method": "tools/call",
        "mcp-name": "guarded",
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    answer = await http.post(url, json=message, headers=headers)
    text = answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        text = [line[5:] for line in text.splitlines() if line.startswith("data:") and '"id"' in line][-1]
    return answer.status_code, json.loads(text)


def test_bob_reaches_none_of_alices_task_pending_ask_or_always_approval(tmp_path: Path) -> None:
    """Over the sessionless 2026-07-28 protocol two principals that name no session each get their own:
    bob naming alice's task id (`tasks/get`, `tasks/update`, `tasks/cancel`), replaying her sealed
    `requestState` with an approving answer, or calling after she answered "always", reaches nothing of
    hers, and nothing runs for him."""
    seconds = _marker()
    refused: dict[str, str] = {}

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        alice, bob = issuer.mint(audience=url, sub="alice"), issuer.mint(audience=url, sub="bob")

        def client(token: str) -> tuple[httpx.AsyncClient, Client]:
            http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
            return http, Client(streamable_http_client(url, http_client=http), mode=MODERN, extensions=[Tasks()])

        alice_http, alices = client(alice)
        bob_http, bobs = client(bob)
        async with alice_http, alices, bob_http, bobs:
            handle = await _handle(alices, "sleeper", {"seconds": seconds})
            with anyio.fail_after(15):
                while not holding(seconds):
                    await anyio.sleep(0.02)
            update = UpdateTask(params=UpdateParams(task_id=handle.task_id, input_responses={}))
            attempts: dict[str, Callable[[], Awaitable[object]]] = {
                "get": lambda: get_task(bobs, handle.task_id),
                "cancel": lambda: cancel_task(bobs, handle.task_id),
                "update": lambda: bobs.session.send_request(update, Ack),
            }
            for name, attempt in attempts.items():
                with pytest.raises(MCPError) as caught:
                    await attempt()
                refused[name] = f"{caught.value.code} {caught.value}"
            assert (await get_task(alices, handle.task_id)).status == "working"  # bob's cancel did nothing
            assert holding(seconds)
            await cancel_task(alices, handle.task_id)
            await _gone(seconds)

        async with httpx.AsyncClient(timeout=30) as http:
            status, asked = await modern_call(http, url, alice, {"word": "hers"})
            assert status == 200 and asked["result"]["resultType"] == "input_required", asked
            state = asked["result"]["requestState"]
            status, stolen = await modern_call(
                http, url, bob, {"word": "hers"}, inputResponses=_approve(asked), requestState=state
            )
            assert status == 400 and stolen["error"]["message"] == "Invalid or expired requestState", stolen
            status, done = await modern_call(
                http, url, alice, {"word": "hers"}, inputResponses=_approve(asked, "always"), requestState=state
            )
            assert status == 200 and done["result"]["content"][0]["text"] == "hers\n", done
            status, again = await modern_call(http, url, bob, {"word": "hers"})  # her "always" is hers
            assert status == 200 and again["result"]["resultType"] == "input_required", again
            status, hers = await modern_call(http, url, alice, {"word": "hers"})
            assert status == 200 and hers["result"]["content"][0]["text"] == "hers\n", hers

    root = tasks_project(tmp_path)
    (root / "tools.d" / "guarded.yaml").write_text(ECHO, encoding="utf-8")  # its "always" keeps `*`
    run(tmp_path, body, root=root)
    assert set(refused) == {"get", "cancel", "update"}
    assert all(text.startswith(f"{types.INVALID_PARAMS} ") for text in refused.values()), refused
    records, _ = read_records(tmp_path / "data" / "audit.jsonl")
    guarded = [(r["principal"], r["status"]) for r in records if r["tool"] == "guarded"]
    assert guarded == [("alice", "input_required"), ("alice", "ok"), ("bob", "input_required"), ("alice", "ok")]


def test_a_jwks_that_is_huge_redirects_or_is_not_an_object_is_as_down_and_keys_held_stay(tmp_path: Path) -> None:
    """A key set past `MAX_JWKS_BYTES` is not read to its end (it was read whole into memory, and its
    keys trusted), a redirect is not followed, and a JSON array is garbled: each counts as down, and
    keys fetched before still verify."""

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        token = issuer.mint(audience=url)

        def verifier() -> serve_auth.JwtVerifier:
            return serve_auth.JwtVerifier(issuer.url, url, serve_auth.JwksKeys(issuer.jwks_url, min_refetch=0.0))

        issuer.jwks_padding = 64 * serve_auth.MAX_JWKS_BYTES
        with anyio.fail_after(20):  # a hang guard: the cap stops the read at once
            assert await verifier().verify_token(token) is None
        issuer.jwks_padding = serve_auth.MAX_JWKS_BYTES // 2  # large, yet within the bound
        assert await verifier().verify_token(token) is not None
        issuer.jwks_padding = 0
        issuer.jwks_redirect = issuer.jwks_url + "?followed"
        assert await verifier().verify_token(token) is None
        issuer.jwks_redirect, issuer.jwks_answer = None, [issuer.jwks()]
        assert await verifier().verify_token(token) is None
        issuer.jwks_answer = None
        held = verifier()
        assert await held.verify_token(token) is not None
        issuer.jwks_padding = 64 * serve_auth.MAX_JWKS_BYTES  # the issuer's set turns huge: the held keys stay
        assert await held.verify_token(issuer.mint(audience=url, headers={"kid": "rotated"})) is None
        assert await held.verify_token(issuer.mint(audience=url, jti="another")) is not None

    run(tmp_path, body)


READER = """\
id: reader
description: "Returns what the request's authentication context holds, as a tool in the server's process could."
parameters: {type: object, properties: {}}
handler: {python: "reader_tool:reader"}
"""
READER_CODE = """\
def reader(args, ctx):
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    return "none" if token is None else f"{token.subject} {token.token}"
"""


def test_a_python_tool_in_the_servers_process_does_not_get_the_bearer_token_from_the_request_context(
    tmp_path: Path,
) -> None:
    """The SDK's `get_access_token()` is the documented way to the caller's token; it held the raw JWT, so
    any Python handler could read (and return, or send on) the caller's bearer token."""
    root = tmp_path / "reading"
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "reader.yaml").write_text(READER, encoding="utf-8")
    (root / "reader_tool.py").write_text(READER_CODE, encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    (root / "permissions.yaml").write_text("permission:\n  reader: allow\n", encoding="utf-8")
    seen: dict[str, str] = {}

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        token = seen["token"] = issuer.mint(audience=url, sub="alice")
        async with httpx.AsyncClient(timeout=30) as http:
            headers = await open_session(http, url, token)
            message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "reader"}}
            answer = await http.post(url, json=message, headers=headers)
            assert answer.status_code == 200 and '"isError":false' in answer.text, answer.text
            seen["answer"] = answer.text

    run(tmp_path, body, root=root)
    assert "alice " in seen["answer"]  # the caller's identity is there for a tool to use
    assert seen["token"] not in seen["answer"] and seen["token"].split(".")[2] not in seen["answer"]


def test_a_websocket_upgrade_reaches_nothing_behind_authentication(tmp_path: Path) -> None:
    """uvicorn upgrades a WebSocket request (the `websockets` package is installed): the protected app
    passed any scope but HTTP's to the MCP app unauthenticated; it closes one now, whatever its path."""
    reached: list[str] = []
    sent: list[MutableMapping[str, Any]] = []

    async def inner(scope: MutableMapping[str, Any], receive: asgi.Receive, send: asgi.Send) -> None:
        reached.append(scope["type"])

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def receive() -> MutableMapping[str, Any]:
        return {"type": "websocket.connect"}

    auth = AuthSettings(issuer="http://127.0.0.1:1", audience="http://127.0.0.1:2/mcp", jwks_url="http://127.0.0.1:1/j")
    app = serve_auth.protect(inner, auth, lambda tool: (), lambda claims: None, ())

    async def upgrade() -> None:
        for path in ("/mcp", "/.well-known/oauth-protected-resource", "/"):
            scope: dict[str, Any] = {"type": "websocket", "path": path, "headers": [], "subprotocols": ["mcp"]}
            await app(scope, receive, send)

    anyio.run(upgrade)
    assert reached == [] and sent == [{"type": "websocket.close", "code": 1008}] * 3


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _hmac_token(issuer: Issuer, url: str, secret: bytes, alg: str, kid: str) -> str:
    header = _b64(json.dumps({"alg": alg, "typ": "JWT", "kid": kid}).encode())
    claims = {"iss": issuer.url, "aud": url, "sub": "mallory", "exp": int(time.time()) + 300}
    body = _b64(json.dumps(claims).encode())
    signature = hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{_b64(signature)}"


def test_jwt_header_tricks_and_a_symmetric_key_in_the_jwks_verify_nothing(tmp_path: Path) -> None:
    """A token signed by the attacker's own key named in `jwk`, `jku` or `x5u`, one with a `crit`
    extension nobody understands, and tokens HMAC-signed with a symmetric key the issuer's JWKS
    publishes (its secret is public), under `RS256` or `HS256`: none verifies. The symmetric key of the
    same `kid` as the signing key does not shadow it (that refused the issuer's own tokens)."""
    mine = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = jwt.algorithms.RSAAlgorithm.to_jwk(mine.public_key(), as_dict=True)
    secret = b"a secret everyone can read in the JWKS"
    results: dict[str, bool] = {}

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        def verifier() -> serve_auth.JwtVerifier:
            return serve_auth.JwtVerifier(issuer.url, url, serve_auth.JwksKeys(issuer.jwks_url, min_refetch=0.0))

        claims = {"iss": issuer.url, "aud": url, "sub": "mallory", "exp": int(time.time()) + 300}
        forged = {
            f"own key in {header}": jwt.encode(claims, mine, "RS256", headers={"kid": issuer.kid, header: value})
            for header, value in (("jwk", public), ("jku", f"{issuer.url}/mine"), ("x5u", f"{issuer.url}/mine"))
        }
        forged["unknown crit"] = issuer.mint(audience=url, headers={"crit": ["exp-ext"], "exp-ext": 1})
        oct_key = {"kty": "oct", "k": _b64(secret), "use": "sig"}
        for kid in ("symmetric", issuer.kid):
            issuer.jwks_answer = {"keys": [*issuer.jwks()["keys"], {**oct_key, "kid": kid}]}
            checking = verifier()
            for alg in ("RS256", "HS256"):
                token = _hmac_token(issuer, url, secret, alg, kid)
                results[f"{alg} with the JWKS's symmetric key {kid}"] = await checking.verify_token(token) is not None
            results[f"the issuer's token beside symmetric {kid}"] = (
                await checking.verify_token(issuer.mint(audience=url)) is not None
            )
        issuer.jwks_answer = None
        checking = verifier()
        for name, token in forged.items():
            results[name] = await checking.verify_token(token) is not None

    run(tmp_path, body)
    issuers = {name for name in results if name.startswith("the issuer's token")}
    assert {name for name, verified in results.items() if verified} == issuers


def test_a_skill_is_listed_and_read_only_for_a_principal_whose_agent_may_load_it(tmp_path: Path) -> None:
    """Skills are served as resources by the `skill` tool's decisions for the caller's agent: carol,
    mapped to an agent that denies `skill`, neither lists nor reads the skill alice's agent may load."""
    root = project(tmp_path)
    folder = root / ".toolrt" / "skills" / "release"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: release\ndescription: Ship it.\n---\nShip.\n", encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: [skill]\n", encoding="utf-8")
    (root / "permissions.yaml").write_text(
        "permission:\n  skill: allow\nagents:\n  readonly:\n    mode: primary\n    permission:\n      skill: deny\n",
        encoding="utf-8",
    )
    read = {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "skill://release/SKILL.md"}}
    listing = {"jsonrpc": "2.0", "id": 4, "method": "resources/list", "params": {}}

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            alice = await open_session(http, url, issuer.mint(audience=url, sub="alice", groups=["admins"]))
            carol = await open_session(http, url, issuer.mint(audience=url, sub="carol"))
            assert "skill://release/SKILL.md" in (await http.post(url, json=listing, headers=alice)).text
            assert "Ship." in (await http.post(url, json=read, headers=alice)).text
            listed = await http.post(url, json=listing, headers=carol)
            assert listed.status_code == 200 and "skill://release" not in listed.text, listed.text
            refused = await http.post(url, json=read, headers=carol)
            assert '"error"' in refused.text and "Ship." not in refused.text, refused.text

    run(tmp_path, body, locked=PRINCIPALS, root=root)


def test_a_flood_of_tokens_while_the_issuer_is_down_costs_one_jwks_fetch(tmp_path: Path) -> None:
    """With no keys held (the issuer down since the start) every token fetched the JWKS again, one after
    another under the lock: a flood of made-up tokens made as many fetches, and each request waited out
    all those queued before it (at the 5 s bound each while the issuer is slow)."""

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        keys = serve_auth.JwksKeys(issuer.jwks_url, wait=0.5)
        verifier = serve_auth.JwtVerifier(issuer.url, url, keys)
        issuer.jwks_down = True
        tokens = [issuer.mint(audience=url, jti=str(n)) for n in range(8)]
        async with anyio.create_task_group() as group:
            for token in tokens:
                group.start_soon(verifier.verify_token, token)
        assert issuer.jwks_hits == 1  # not eight, one after another

    run(tmp_path, body)


def test_a_body_nested_too_deep_for_the_scope_gates_parser_is_the_sdks_parse_error(tmp_path: Path) -> None:
    """100 000 nested arrays beside a `tools/call`: `json.loads` in the scope gate raised RecursionError,
    which failed the request with HTTP 500 (and a traceback in the log) before the SDK could refuse it."""

    async def body(rt: Runtime, issuer: Issuer, url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as http:
            headers = await open_session(http, url, issuer.mint(audience=url, scope="tools"))
            deep = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
            answer = await http.post(url, content=deep, headers=headers)
            assert answer.status_code == 400 and "Parse error" in answer.text, answer.text

    rt = run(tmp_path, body)
    assert not ran(rt.root)
