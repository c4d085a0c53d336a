"""What a caller asked (`CallRequest`): the tool, its raw arguments, who is calling (`toolrt.scope`)
and the host's ways to reach the person and to stop the call."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import anyio

from ..permissions.ask import Asker
from ..scope import DEFAULT_SCOPE, CallScope, Questioner
from .client import ClientChannel

__all__ = ["CallRequest"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class CallRequest(NamedTuple):
    """One call as the model (or a host) made it: the tool, its raw arguments, the scope, and the
    host's ways to reach the person (`ask`, `questioner`) and to stop the call (`abort`).

    A tuple, like the call's record: one is built per call, and a frozen dataclass costs several
    times as much to build; `_replace` gives a changed copy."""

    tool: str
    args: Any
    scope: CallScope = DEFAULT_SCOPE
    call_id: str = ""
    message_id: str = ""
    ask: Asker | None = None
    abort: anyio.Event | None = None
    questioner: Questioner | None = None
    extra: Mapping[str, Any] = _EMPTY
    """Host-supplied values handed to Python handlers as `ctx.extra` (e.g. the `task` tool's runner)."""
    refused: str | None = None
    """Why the call must not run although the model made it (a provider call without the id its result
    needs): the pipeline records it as `invalid` under a generated id and returns this as the error."""
    client: ClientChannel | None = None
    """The client the call came from (MCP) or the host's callbacks: `ctx.client`, `ctx.elicit`, ..."""
