"""Who is calling `toolrt serve` over authenticated HTTP, and what that makes them (`auth.*` settings).

The caller is the verified token's principal (`serve_auth`; the SDK hands it to every handler of the
request). Its claims pick the agent it acts as from the locked file's `principals:`
(`permissions.principals`); its identity (issuer, client, subject) is folded into every toolrt session
name it uses (`principal_suffix`), so its sessions, approvals and pending asks are its own: a token
for another subject that presents the same MCP session id or session token reaches a different
session, on every replica alike (the suffix is a digest of the identity, not process state).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, principal_components

from ..permissions.config import PermissionConfig
from ..permissions.principals import agent_for

__all__ = ["Caller", "caller_of", "current_caller", "principal_suffix", "refusal"]


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller: the name the audit and telemetry show, and its token's claims."""

    principal: str
    """The token's subject (`sub`)."""
    key: str
    """A digest of (client, issuer, subject): the part of its session names no other caller shares."""
    claims: Mapping[str, Any]
    scopes: frozenset[str]
    """The token's scopes."""


def caller_of(token: AccessToken) -> Caller:
    identity = json.dumps(principal_components(token), separators=(",", ":"))
    key = hashlib.sha256(identity.encode()).hexdigest()[:32]
    return Caller(token.subject or token.client_id, key, token.claims or {}, frozenset(token.scopes))


def current_caller() -> Caller | None:
    """The caller of the request being handled; None where nobody authenticates (stdio, loopback)."""
    token = get_access_token()
    return None if token is None else caller_of(token)


def principal_suffix() -> str:
    """What the current caller's session names end with (empty where nobody authenticates)."""
    token = get_access_token()
    return "" if token is None else "@" + caller_of(token).key


def refusal(permissions: PermissionConfig, claims: Mapping[str, Any]) -> str | None:
    """Why a token with `claims` may not call at all (no `principals:` entry matches it), or None."""
    if permissions.principals is None or agent_for(permissions.principals, claims) is not None:
        return None
    return "No agent is mapped to this caller: no entry of the locked file's principals matches the token"
