"""toolrt: a declarative, config-driven tool runtime for LLM agents.

```python
from toolrt import Runtime

rt = Runtime.load(root=".")
specs = rt.specs("openai", model="gpt-5")
result = await rt.call("read", {"filePath": "README.md"})
```
"""

from __future__ import annotations

import sys as _sys

if _sys.argv[:1] == ["-m"] and _sys.path and not getattr(_sys.flags, "safe_path", False):
    # `python -m toolrt` in a project put its directory first on sys.path, so a `yaml.py` the model wrote
    # there would be imported instead of the library, outside every sandbox: `python -m toolrt` is the
    # `toolrt` command, which imports nothing from the current directory (as `python -P` would).
    import os as _os

    if _sys.path[0] in ("", _os.getcwd()):
        del _sys.path[0]

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import Runtime
    from .attribution import Hold
    from .audit import AuditLog
    from .build.changes import ReloadStatus, SnapshotChange
    from .build.compiled import DescribeInfo
    from .build.selection import Hidden, Offered, ToolSet
    from .build.snapshot import Snapshot
    from .call.client import ClientChannel, ClientInfo, ClientRequest, Elicited
    from .call.context import ToolContext
    from .call.detached import DetachedCall
    from .call.events import CallEvent
    from .call.sessions import SessionStore
    from .config.settings import ResolvedSettings, Settings
    from .errors import (
        CallError,
        ConfigError,
        CorrectedError,
        DeniedError,
        InputRequired,
        InvalidArgumentsError,
        LspError,
        PermissionBlocked,
        Problem,
        ProtocolError,
        RejectedError,
        Severity,
        StoreError,
        ToolFailure,
        ToolrtError,
        UnknownToolError,
        UsageError,
    )
    from .execute.background import BackgroundProcess
    from .host.sessions import Sessions
    from .lsp.manager import ServerStatus
    from .permissions.ask import Asker, AskRequest, Reply
    from .permissions.model import Action, Decision, PatternDecision, PermissionRequest, Rule
    from .providers.model import StreamAccumulator, ToolCall
    from .result import ToolResult
    from .scope import CallScope, Questioner, ScopeFields
    from .store.model import Store

# Every name loads on first use, so `import toolrt.<module>` imports only what that module needs (the
# CLI's `--help` imports no module of the runtime at all).
_LAZY = {
    "CallError": "errors",
    "ConfigError": "errors",
    "CorrectedError": "errors",
    "DeniedError": "errors",
    "InputRequired": "errors",
    "InvalidArgumentsError": "errors",
    "PermissionBlocked": "errors",
    "Problem": "errors",
    "ProtocolError": "errors",
    "RejectedError": "errors",
    "StoreError": "errors",
    "ToolFailure": "errors",
    "ToolrtError": "errors",
    "UnknownToolError": "errors",
    "UsageError": "errors",
    "LspError": "errors",
    "Severity": "errors",
    "Action": "permissions.model",
    "DescribeInfo": "build.compiled",
    "Sessions": "host.sessions",
    "StreamAccumulator": "providers.model",
    "ToolCall": "providers.model",
    "Decision": "permissions.model",
    "PatternDecision": "permissions.model",
    "PermissionRequest": "permissions.model",
    "Rule": "permissions.model",
    "ToolResult": "result",
    "ReloadStatus": "build.changes",
    "Runtime": "api",
    "SnapshotChange": "build.changes",
    "CallEvent": "call.events",
    "ClientChannel": "call.client",
    "ClientInfo": "call.client",
    "ClientRequest": "call.client",
    "Elicited": "call.client",
    "CallScope": "scope",
    "Questioner": "scope",
    "ScopeFields": "scope",
    "ToolContext": "call.context",
    "DetachedCall": "call.detached",
    "AskRequest": "permissions.ask",
    "Asker": "permissions.ask",
    "Reply": "permissions.ask",
    "AuditLog": "audit",
    "BackgroundProcess": "execute.background",
    "Hold": "attribution",
    "Hidden": "build.selection",
    "Offered": "build.selection",
    "ToolSet": "build.selection",
    "ServerStatus": "lsp.manager",
    "SessionStore": "call.sessions",
    "ResolvedSettings": "config.settings",
    "Settings": "config.settings",
    "Snapshot": "build.snapshot",
    "Store": "store.model",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolrt' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__version__ = "0.2.0"

__all__ = [
    "Action",
    "AskRequest",
    "Asker",
    "AuditLog",
    "BackgroundProcess",
    "CallError",
    "CallEvent",
    "CallScope",
    "ClientChannel",
    "ClientInfo",
    "ClientRequest",
    "ConfigError",
    "CorrectedError",
    "Decision",
    "DeniedError",
    "DescribeInfo",
    "DetachedCall",
    "Elicited",
    "Hidden",
    "Hold",
    "InputRequired",
    "InvalidArgumentsError",
    "LspError",
    "Offered",
    "PatternDecision",
    "PermissionBlocked",
    "PermissionRequest",
    "Problem",
    "ProtocolError",
    "Questioner",
    "RejectedError",
    "ReloadStatus",
    "Reply",
    "ResolvedSettings",
    "Rule",
    "Runtime",
    "ScopeFields",
    "ServerStatus",
    "SessionStore",
    "Sessions",
    "Settings",
    "Severity",
    "Snapshot",
    "SnapshotChange",
    "Store",
    "StoreError",
    "StreamAccumulator",
    "ToolCall",
    "ToolContext",
    "ToolFailure",
    "ToolResult",
    "ToolSet",
    "ToolrtError",
    "UnknownToolError",
    "UsageError",
]
