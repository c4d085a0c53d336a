"""The client a handler talks to through its context: who it is, and the requests it can answer.

A host (the MCP server, or a library host through `rt.call(..., client=...)`) gives a call a
`ClientChannel`; the handler reaches it as `ctx.client`, `ctx.log`, `ctx.progress`, `ctx.elicit`,
`ctx.sample`, `ctx.roots` and `ctx.ask_client`. A request is checked against the capabilities the
client declared before it leaves: a client without the capability is a `ProtocolError(-32021)`.
Without a channel (a library host that gave none) the client declares nothing, log and progress go
nowhere, and every request is that error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol

from ..errors import ProtocolError

__all__ = [
    "MISSING_CAPABILITY",
    "NO_CLIENT",
    "ClientChannel",
    "ClientInfo",
    "ClientRequest",
    "Elicited",
    "check_capabilities",
]

MISSING_CAPABILITY = -32021
"""JSON-RPC code of a request the client did not declare the capability for (MCP 2026-07-28)."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_CAPABILITY = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
"""Which declared client capability each request needs."""


@dataclass(frozen=True, slots=True)
class ClientInfo:
    """`ctx.client`: what the client declared about itself."""

    capabilities: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    """The client's capabilities as it declared them (`{"elicitation": {}, "sampling": {}, ...}`)."""
    name: str | None = None
    version: str | None = None
    protocol_version: str | None = None
    """The MCP protocol version of this request; None outside MCP."""


@dataclass(frozen=True, slots=True)
class ClientRequest:
    """One request to the client: `elicitation/create`, `sampling/createMessage` or `roots/list`."""

    method: Literal["elicitation/create", "sampling/createMessage", "roots/list"]
    params: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class Elicited:
    """The person's answer to `ctx.elicit`: `accept` with the form's `content`, or `decline`/`cancel`."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None


class ClientChannel(Protocol):
    """What a host gives a call to reach its client (see the module's docstring)."""

    @property
    def info(self) -> ClientInfo: ...

    async def request(self, requests: Mapping[str, ClientRequest]) -> dict[str, Mapping[str, Any]]:
        """Send every request in one round; return each answer (the client's result) by its key."""
        ...

    def log(self, level: str, message: str, data: Any = None) -> None:
        """A log message to the client (`notifications/message`), dropped below its level."""
        ...

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """A progress notification for this call (dropped when the client asked for none)."""
        ...


class _NoClient:
    """The channel of a call whose host gave none: nothing declared, nothing delivered."""

    info = ClientInfo()

    async def request(self, requests: Mapping[str, ClientRequest]) -> dict[str, Mapping[str, Any]]:
        check_capabilities(self.info, requests.values())
        return {}  # pragma: no cover - check_capabilities raised: this client declares nothing

    def log(self, level: str, message: str, data: Any = None) -> None:
        return None

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


NO_CLIENT: ClientChannel = _NoClient()


def check_capabilities(info: ClientInfo, requests: Any) -> None:
    """Raise `ProtocolError(-32021)` naming every capability the requests need that the client lacks."""
    missing: dict[str, dict[str, Any]] = {
        _CAPABILITY[request.method]: {}
        for request in requests
        if info.capabilities.get(_CAPABILITY[request.method]) is None
    }
    if missing:
        names = ", ".join(sorted(missing))
        who = f"The client {info.name}" if info.name else "The client"
        raise ProtocolError(
            MISSING_CAPABILITY,
            f"{who} did not declare the {names} capability this tool needs.",
            {"requiredCapabilities": missing},
        )
