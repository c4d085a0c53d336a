"""`toolrt serve --transport http` as an OAuth 2.1 resource server (MCP's authorization spec).

Declared by the host (`auth.issuer`, `auth.audience`, `auth.jwks_url`, `auth.required_scopes`; never by
the project). The MCP SDK's pieces do the HTTP side: `BearerAuthBackend` reads the bearer token,
`RequireAuthMiddleware` answers `401` with `WWW-Authenticate` naming the protected-resource metadata
(served at `/.well-known/oauth-protected-resource` and at its RFC 9728 path form), `AuthContextMiddleware`
hands the token to the request's handlers. This module adds:

- `JwtVerifier`: a JWT checked by PyJWT against the issuer's JWKS: signature (asymmetric algorithms
  only: `none` and HMAC are refused, so a token "signed" with the public key as an HS256 secret is
  too), `iss`, `aud` (this server's resource URL), `exp`/`nbf`/`iat` with `CLOCK_SKEW_SECONDS`; a token
  over `MAX_TOKEN_CHARS` is refused unread;
- `JwksKeys`: the issuer's keys, fetched with a bounded wait (`JWKS_WAIT_SECONDS`) and size
  (`MAX_JWKS_BYTES`; a redirect is not followed), kept
  (`JWKS_REFRESH_SECONDS`) and used while the endpoint is down; an unknown `kid` refetches at most once
  per `JWKS_MIN_REFETCH_SECONDS`; no key, no entry (fail closed);
- `ScopeGate`: `403 insufficient_scope` for a `tools/call` whose tool's `scopes:` the token lacks.

The token itself is never logged, recorded or passed on: only its claims leave this module (the SDK's
`AccessToken` of a request carries the token's digest in its `token`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import jwt
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from pydantic import AnyHttpUrl

from ..errors import UsageError
from .asgi import App, Receive, Scope, Send

if TYPE_CHECKING:
    from ..config.settings import AuthSettings

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "CLOCK_SKEW_SECONDS",
    "JWKS_WAIT_SECONDS",
    "MAX_JWKS_BYTES",
    "MAX_TOKEN_CHARS",
    "JwksKeys",
    "JwtVerifier",
    "ScopeGate",
    "check_settings",
    "metadata_app",
    "protect",
    "token_digest",
    "token_scopes",
]

ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""The only algorithms a token may be signed with: `none` and the HMAC family (whose "secret" could be
the issuer's public key) never verify."""
CLOCK_SKEW_SECONDS = 60
"""Leeway for `exp`, `nbf` and `iat` between the issuer's clock and this one."""
MAX_TOKEN_CHARS = 8192
"""A bearer token longer than this is refused before it is parsed."""
JWKS_WAIT_SECONDS = 5.0
"""How long a JWKS fetch may take; a slower endpoint counts as down."""
MAX_JWKS_BYTES = 1024 * 1024
"""A JWKS answer longer than this is not read to its end (an issuer's key set is a few KiB): as down."""
JWKS_REFRESH_SECONDS = 300.0
"""Keys older than this are fetched again on next use (kept if the endpoint is down)."""
JWKS_MIN_REFETCH_SECONDS = 10.0
"""An unknown `kid` fetches the set again at most this often (a flood of made-up ids costs one fetch)."""
VERIFIED_SECONDS = 60.0
"""A token that verified is taken as verified again, without its signature checked, for this long (and never
past its expiry): a client sends the same token on every request, and a JWT's decoding and signature cost
more than the rest of the request's authentication."""
VERIFIED_TOKENS = 1024
"""Verified tokens remembered at most (the oldest are forgotten first)."""
_MAX_BODY = 4 * 1024 * 1024
"""`ScopeGate` reads a POST body this long at most to find the tool it calls (the SDK's own limit)."""

_PUBLIC_KEY_TYPES = frozenset(("RSA", "EC", "OKP"))
"""The JWK `kty`s whose keys `ASYMMETRIC_ALGORITHMS` verify with."""


class JwksKeys:
    """The issuer's signing keys by `kid`, from its JWKS URL."""

    def __init__(
        self,
        url: str,
        *,
        wait: float = JWKS_WAIT_SECONDS,
        refresh: float = JWKS_REFRESH_SECONDS,
        min_refetch: float = JWKS_MIN_REFETCH_SECONDS,
    ) -> None:
        self._url = url
        self._wait = wait
        self._refresh = refresh
        self._min_refetch = min_refetch
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._fetched = float("-inf")
        """When the keys were last fetched (`time.monotonic`)."""
        self._tried = float("-inf")
        """When a fetch was last tried, whether or not it worked."""
        self._lock = anyio.Lock()

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key of `kid` (None: the set's only key), fetching the set when it is old or lacks `kid`."""
        now = time.monotonic()
        found = self._find(kid)
        if found is not None and now - self._fetched < self._refresh:
            return found
        async with self._lock:
            # with no keys held too: while the issuer is down, a flood of tokens costs one fetch per
            # `min_refetch`, and requests queued on the lock do not each wait out a fetch of their own
            if time.monotonic() - self._tried >= self._min_refetch:
                await self._fetch()
        return self._find(kid)

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _fetch(self) -> None:
        import httpx2

        self._tried = time.monotonic()
        try:
            with anyio.fail_after(self._wait):
                async with (
                    httpx2.AsyncClient(timeout=self._wait, follow_redirects=False) as client,
                    client.stream("GET", self._url, headers={"Accept": "application/json"}) as response,
                ):
                    response.raise_for_status()
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_JWKS_BYTES:
                            return  # no issuer's key set is this large: the memory is not spent on it
            document = json.loads(body)
            if not isinstance(document, dict):
                return
            keys = jwt.PyJWKSet.from_dict(document)
        except (TimeoutError, httpx2.HTTPError, ValueError, TypeError, jwt.PyJWKSetError, jwt.InvalidKeyError):
            return  # down, slow, huge or garbled: the keys held stay, and nothing new is trusted
        # signing keys of a public-key type only: a symmetric key (whose secret the set publishes) could
        # verify nothing anyway, and must not shadow the signing key of the same `kid`
        usable = {
            key.key_id: key
            for key in keys.keys
            if key.public_key_use in (None, "sig") and key.key_type in _PUBLIC_KEY_TYPES
        }
        self._keys = usable
        self._fetched = time.monotonic()


_DATE_CLAIMS = ("exp", "nbf", "iat")
_LATEST_DATE = 253402300799
"""9999-12-31T23:59:59Z: a date claim past it is refused (it would not fit a float or a datetime)."""


def _numeric_date(value: object) -> bool:
    """Whether a date claim is absent or a NumericDate (RFC 7519: a JSON number; PyJWT also takes numeric
    strings) within the range a timestamp can hold."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return -_LATEST_DATE <= value <= _LATEST_DATE


def token_digest(token: str) -> str:
    """What stands for a bearer token past its verification: `sha256:` and its SHA-256, in hex."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def token_scopes(claims: Mapping[str, Any]) -> list[str]:
    """A token's scopes: `scope` (space-separated, RFC 9068) or `scp` (a list or a string)."""
    raw = claims.get("scope", claims.get("scp"))
    if isinstance(raw, str):
        return raw.split()
    if isinstance(raw, list):
        return [str(item) for item in raw]
    return []


class JwtVerifier:
    """The SDK's `TokenVerifier` for JWTs of one issuer, for one audience (this server)."""

    def __init__(self, issuer: str, audience: str, keys: JwksKeys, clock: Callable[[], float] = time.time) -> None:
        self._issuer = issuer
        self._audience = audience
        self._keys = keys
        self._clock = clock
        """The time (`time.time`) a remembered verification is compared with."""
        self._verified: dict[str, tuple[float, AccessToken]] = {}
        """Token digest → (until when it counts as verified, `time.time()`; what it verified to)."""

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's identity and scopes, or None when it does not verify (the caller answers 401).

        The `AccessToken` holds the token's digest (`token_digest`), never the token: the SDK hands it to
        every handler of the request (`get_access_token()`), Python tools in this process included."""
        if len(token) > MAX_TOKEN_CHARS:
            return None
        digest = token_digest(token)
        remembered = self._verified.get(digest)
        if remembered is not None:
            if self._clock() < remembered[0]:
                return remembered[1]
            del self._verified[digest]
        verified = await self._verify(token, digest)
        if verified is not None:
            if len(self._verified) >= VERIFIED_TOKENS:
                del self._verified[next(iter(self._verified))]
            until = min(self._clock() + VERIFIED_SECONDS, float(verified.expires_at or 0))
            self._verified[digest] = (until, verified)
        return verified

    async def _verify(self, token: str, digest: str) -> AccessToken | None:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            return None
        algorithm = header.get("alg")
        kid = header.get("kid")
        if algorithm not in ASYMMETRIC_ALGORITHMS or not isinstance(kid, (str, type(None))):
            return None
        key = await self._keys.key(kid)
        if key is None:
            return None
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self._audience,
                issuer=self._issuer,
                leeway=CLOCK_SKEW_SECONDS,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except (jwt.PyJWTError, ValueError, TypeError, OverflowError):
            return None
        if not all(_numeric_date(claims.get(name)) for name in _DATE_CLAIMS):
            return None
        subject = str(claims["sub"])
        client = claims.get("client_id", claims.get("azp", subject))
        return AccessToken(
            token=digest,
            client_id=str(client),
            scopes=token_scopes(claims),
            expires_at=int(claims["exp"]),
            resource=self._audience,
            subject=subject,
            claims=claims,
        )


class ScopeGate:
    """Answers `403 insufficient_scope` to a `tools/call` of a tool whose `scopes:` the token lacks, before
    the MCP server reads the request (so the tool never starts); everything else passes through."""

    def __init__(
        self,
        app: App,
        scopes_of: Callable[[str], Sequence[str]],
        refusal: Callable[[Mapping[str, Any]], str | None],
        metadata_url: str,
    ) -> None:
        self._app = app
        self._scopes_of = scopes_of
        self._refusal = refusal
        self._metadata_url = metadata_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        refused = self._refusal(user.access_token.claims or {}) if isinstance(user, AuthenticatedUser) else None
        if refused is not None:
            await _send_error(send, 403, "access_denied", refused)
            return
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self._app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            more = bool(message.get("more_body")) and size <= _MAX_BODY
        body = b"".join(chunks)
        # a method spelled with JSON escapes (`tools\/call`) is the same method: any backslash is parsed too
        missing = self._missing(body, scope) if b"tools/call" in body or b"\\" in body else []
        if missing:
            await self._refuse(send, missing)
            return
        replayed = False

        async def replay() -> MutableMapping[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": more}
            return await receive()

        await self._app(scope, replay, send)

    def _missing(self, body: bytes, scope: Scope) -> list[str]:
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            return []  # the SDK answers a parse error (nesting too deep, too)
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return []
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if not isinstance(name, str):
            return []
        needed = self._scopes_of(name)
        if not needed:
            return []
        user = scope.get("user")
        held = set(user.scopes) if isinstance(user, AuthenticatedUser) else set()
        return [item for item in needed if item not in held]

    async def _refuse(self, send: Send, missing: Sequence[str]) -> None:
        wanted = " ".join(missing)
        description = f"This tool needs the scope {wanted}"
        challenge = (
            f'Bearer error="insufficient_scope", scope="{wanted}", error_description="{description}", '
            f'resource_metadata="{self._metadata_url}"'
        )
        await _send_error(send, 403, "insufficient_scope", description, challenge)


async def _send_error(send: Send, status: int, error: str, description: str, challenge: str | None = None) -> None:
    body = json.dumps({"error": error, "error_description": description}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if challenge is not None:
        headers.append((b"www-authenticate", challenge.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def check_settings(auth: AuthSettings) -> tuple[str, str, str]:
    """(issuer, audience, JWKS URL) of settings that turn authentication on.

    Raises:
        UsageError: a setting is missing or is not an http(s) URL.
    """
    named = {"auth.issuer": auth.issuer, "auth.audience": auth.audience, "auth.jwks_url": auth.jwks_url}
    missing = [key for key, value in named.items() if not value]
    if missing:
        raise UsageError(f"authentication needs {', '.join(missing)} as well (set: {', '.join(named)})")
    for key, value in named.items():
        if not str(value).startswith(("https://", "http://")):
            raise UsageError(f"{key} must be an http(s) URL, not {value!r}")
    assert auth.issuer is not None and auth.audience is not None and auth.jwks_url is not None
    return auth.issuer, auth.audience, auth.jwks_url


def metadata_app(audience: str, issuer: str, scopes: Sequence[str]) -> tuple[tuple[str, ...], App]:
    """The protected-resource metadata (RFC 9728): the paths it answers and the SDK's handler for them."""
    from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
    from mcp.server.auth.routes import cors_middleware
    from mcp.shared.auth import ProtectedResourceMetadata
    from starlette.routing import Route, Router

    # strings, not `AnyHttpUrl`s: the model keeps an empty path empty (an issuer compares as a string)
    metadata = ProtectedResourceMetadata.model_validate(
        {"resource": audience, "authorization_servers": [issuer], "scopes_supported": list(scopes) or None}
    )
    handler = cors_middleware(ProtectedResourceMetadataHandler(metadata).handle, ["GET", "OPTIONS"])
    path_form = str(build_resource_metadata_url(AnyHttpUrl(audience))).split("/", 3)[3]
    paths = tuple(dict.fromkeys(("/.well-known/oauth-protected-resource", "/" + path_form)))
    router = Router(routes=[Route(path, endpoint=handler, methods=["GET", "OPTIONS"]) for path in paths])
    return paths, router


def protect(
    app: App,
    auth: AuthSettings,
    scopes_of: Callable[[str], Sequence[str]],
    refusal: Callable[[Mapping[str, Any]], str | None],
    tool_scopes: Sequence[str],
) -> App:
    """`app` (the MCP endpoint) behind bearer authentication, with the protected-resource metadata beside it.

    `scopes_of(tool)`: the scopes a tool needs; `refusal(claims)`: why a verified token may not call at
    all, or None; `tool_scopes`: every tool's scopes, for the metadata's `scopes_supported`."""
    from starlette.middleware.authentication import AuthenticationMiddleware

    issuer, audience, jwks_url = check_settings(auth)
    resource_metadata = build_resource_metadata_url(AnyHttpUrl(audience))
    keys = JwksKeys(jwks_url, wait=JWKS_WAIT_SECONDS, min_refetch=JWKS_MIN_REFETCH_SECONDS)
    verifier = JwtVerifier(issuer, audience, keys)
    gated = ScopeGate(AuthContextMiddleware(app), scopes_of, refusal, str(resource_metadata))
    required = RequireAuthMiddleware(gated, list(auth.required_scopes), resource_metadata)
    # the verifier checks the audience itself; the backend's own resource check would repeat it
    authenticated = AuthenticationMiddleware(required, backend=BearerAuthBackend(verifier))
    supported = list(dict.fromkeys((*auth.required_scopes, *tool_scopes)))
    paths, metadata = metadata_app(audience, issuer, supported)

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") in paths:
            await metadata(scope, receive, send)
        elif scope["type"] == "http":
            await authenticated(scope, receive, send)
        elif scope["type"] == "lifespan":  # the SDK's session manager starts and stops with the server
            await app(scope, receive, send)
        else:  # a WebSocket (uvicorn accepts the upgrade): nothing unauthenticated reaches the app
            await send({"type": "websocket.close", "code": 1008})

    return dispatch
