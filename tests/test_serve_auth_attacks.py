"""Attacks on `toolrt serve`'s authentication (issue 30) by a client on the network, against the real
server, a real loopback issuer and real signed tokens (tests/oauth_issuer.py); each closes a hole one of
them found, or covers a mechanism no other test attacks."""

from __future__ import annotations

import math
from pathlib import Path

import httpx2 as httpx
from oauth_issuer import Issuer
from test_serve_auth import HEADERS, open_session, ran, run, with_token

from toolrt.api import Runtime

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
