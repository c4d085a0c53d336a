"""A real OAuth authorization server for the tests, on loopback: keys the test makes, a JWKS endpoint, the
authorization server metadata and a `client_credentials` token endpoint issuing JWTs signed with them.

`Issuer.mint(**claims)` signs any token a test wants (expired, for another audience, ...); the token
endpoint gives a client `sub` = its client id, its requested scopes, and `aud` = the `resource` it asked
for, as an authorization server following RFC 8707 does.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from serve_http import free_port
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["Issuer", "TokenStore", "issuing"]


@dataclass
class Issuer:
    """The authorization server's keys, its URL and what it has served."""

    url: str
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    kid: str = "test-key-1"
    jwks_hits: int = 0
    jwks_delay: float = 0.0
    """Seconds the JWKS endpoint waits before answering (a slow issuer)."""
    jwks_down: bool = False
    """The JWKS endpoint answers 503."""
    jwks_padding: int = 0
    """Bytes of padding the JWKS answer carries in an extra member, streamed (a huge key set)."""
    jwks_answer: Any = None
    """What the JWKS endpoint answers instead of the key set (JSON), when set."""
    jwks_redirect: str | None = None
    """Where the JWKS endpoint redirects (302) instead of answering, when set."""
    groups: dict[str, list[str]] = field(default_factory=dict)
    """Client id → the `groups` claim its tokens carry."""

    @property
    def jwks_url(self) -> str:
        return f"{self.url}/jwks"

    def jwks(self) -> dict[str, Any]:
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def mint(
        self, *, audience: str | None, lifetime: float = 300.0, headers: dict[str, Any] | None = None, **claims: Any
    ) -> str:
        """A token signed with the issuer's key: `iss`, `aud`, `iat`, `exp` unless `claims` say otherwise."""
        now = int(time.time())
        body: dict[str, Any] = {"iss": self.url, "iat": now, "exp": now + int(lifetime), "sub": "alice"}
        if audience is not None:
            body["aud"] = audience
        body.update(claims)
        body = {name: value for name, value in body.items() if value is not None}
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": self.kid, **(headers or {})})

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(
            {
                "issuer": self.url,
                "authorization_endpoint": f"{self.url}/authorize",  # required by the metadata's schema
                "token_endpoint": f"{self.url}/token",
                "jwks_uri": self.jwks_url,
                "response_types_supported": ["code"],
                "grant_types_supported": ["client_credentials"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            }
        )

    async def _keys(self, request: Request) -> Response:
        self.jwks_hits += 1
        if self.jwks_delay:
            await anyio.sleep(self.jwks_delay)
        if self.jwks_down:
            return JSONResponse({"error": "down"}, status_code=503)
        if self.jwks_redirect is not None:
            return RedirectResponse(self.jwks_redirect, status_code=302)
        if self.jwks_answer is not None:
            return JSONResponse(self.jwks_answer)
        if self.jwks_padding:
            return StreamingResponse(self._padded_keys(self.jwks_padding), media_type="application/json")
        return JSONResponse(self.jwks())

    async def _padded_keys(self, padding: int) -> AsyncIterator[bytes]:
        """The key set inside a JSON document `padding` bytes longer (a document past the size bound)."""
        keys = json.dumps(self.jwks()["keys"]).encode()
        yield b'{"keys": ' + keys + b', "padding": "'
        for start in range(0, padding, 1 << 16):
            yield b"x" * min(1 << 16, padding - start)
        yield b'"}'

    async def _token(self, request: Request) -> Response:
        form = await request.form()
        basic = request.headers.get("authorization", "")
        client = str(form.get("client_id") or "")
        if basic.lower().startswith("basic "):
            client = base64.b64decode(basic[6:]).decode().partition(":")[0]
        if form.get("grant_type") != "client_credentials" or not client:
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        scope = str(form.get("scope") or "")
        claims: dict[str, Any] = {"sub": client, "client_id": client, "scope": scope}
        if client in self.groups:
            claims["groups"] = self.groups[client]
        access = self.mint(audience=str(form.get("resource") or ""), **claims)
        return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 300, "scope": scope})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", self._metadata),
                Route("/jwks", self._keys),
                Route("/token", self._token, methods=["POST"]),
            ]
        )


class TokenStore:
    """The MCP client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


@asynccontextmanager
async def issuing(configure: Callable[[Issuer], None] | None = None) -> AsyncIterator[Issuer]:
    """An `Issuer` served on a free loopback port in the current event loop."""
    port = free_port()
    issuer = Issuer(f"http://127.0.0.1:{port}")
    if configure is not None:
        configure(issuer)
    # a slow JWKS answer still being made need not hold up the end of the test
    config = uvicorn.Config(issuer.app(), host="127.0.0.1", port=port, log_level="error", timeout_graceful_shutdown=1)
    web = uvicorn.Server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(web.serve)
        with anyio.fail_after(20):  # a hang guard
            while not web.started:
                await anyio.sleep(0.01)
        try:
            yield issuer
        finally:
            web.should_exit = True
