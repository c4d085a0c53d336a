"""`DetachedCall`: the call behind a `ToolContext` built outside a Runtime (a handler's unit test, a host
running a handler by hand). Nothing stands behind it, so it fails closed: every ask is denied, nothing
is permitted outright, no other tool runs, the agent cannot change, and processes get the default sandbox."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import anyio

from ..errors import DeniedError, ToolFailure
from ..permissions.denied_reads import ReadDenies
from ..permissions.evaluate import unapprovable
from ..permissions.model import PermissionRequest
from ..result import ToolResult
from ..sandbox.policy import SandboxPolicy
from ..scope import DEFAULT_SCOPE, CallScope, Questioner
from .client import NO_CLIENT, ClientChannel
from .context import LanguageServers

__all__ = ["DetachedCall"]

PermissionAsker = Callable[[Sequence[PermissionRequest]], Awaitable[None]]
"""Decides a handler's own permission requests: returns when allowed, raises when not."""
SubcallRunner = Callable[[Sequence[tuple[str, Mapping[str, Any]]]], Awaitable[list[ToolResult]]]
Permits = Callable[[str, str], bool]
"""Whether the rules allow (permission, pattern) outright, without asking anyone."""
MetadataSink = Callable[[str | None, Mapping[str, Any] | None], None]


async def _deny_every_request(requests: Sequence[PermissionRequest]) -> None:
    """Nobody can approve, so every request is denied (fail closed)."""
    wanted = ", ".join(f"{r.permission} `{p}`" for r in requests for p in r.patterns) or "a permission"
    raise DeniedError(unapprovable(wanted))


def _permit_nothing(permission: str, pattern: str) -> bool:
    return False


async def _no_batch(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ToolResult]:
    raise ToolFailure("This context cannot run other tools: it runs outside a Runtime.")


def _no_session(agent: str) -> None:
    raise ToolFailure("This call cannot switch agents: it runs outside a session.")


def _drop_metadata(title: str | None, metadata: Mapping[str, Any] | None) -> None:
    """Nobody listens to a detached call."""


@dataclass(frozen=True)
class DetachedCall:
    """What a `ToolContext(DetachedCall(...))` shows; each field is the `ToolContext` member of that name
    (`tool_id` is `ctx.tool`; `ask`, `permits`, `batch`, `switch_agent`, `on_metadata` do what the
    context's methods of those names ask; `reads` and `lsp` are `ctx.reads` and `ctx.lsp`)."""

    tool_id: str
    root: Path
    data_dir: Path
    scope: CallScope = DEFAULT_SCOPE
    agent: str = "build"
    message_id: str = ""
    call_id: str = ""
    abort: anyio.Event | None = None
    session_state: MutableMapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    questioner: Questioner | None = None
    available_tools: tuple[str, ...] = ()
    sandbox: SandboxPolicy | None = field(default_factory=SandboxPolicy)
    """The default policy unless given: a context built without a Runtime never lacks one by omission."""
    granted: Collection[tuple[str, str]] = ()
    reads: ReadDenies | None = None
    lsp: LanguageServers | None = None
    channel: ClientChannel = NO_CLIENT
    ask: PermissionAsker = _deny_every_request
    permits: Permits = _permit_nothing
    batch: SubcallRunner = _no_batch
    switch_agent: Callable[[str], None] = _no_session
    on_metadata: MetadataSink = _drop_metadata

    def read_denies(self) -> ReadDenies | None:
        return self.reads

    def language_servers(self) -> LanguageServers | None:
        return self.lsp
