"""toolrt: a declarative, config-driven tool runtime for LLM agents.

```python
from runtime import Runtime

rt = Runtime.load(root=".")
specs = rt.specs("openai", model="gpt-5")
result = await rt.call("read", {"filePath": "README.md"})
```
"""

from __future__ import annotations

from .api import ReloadStatus, Runtime, SnapshotChange
from .context import ToolContext
from .errors import (
    CallError,
    ConfigError,
    CorrectedError,
    DeniedError,
    InvalidArgumentsError,
    PermissionBlocked,
    Problem,
    RejectedError,
    ToolFailure,
    ToolrtError,
    UnknownToolError,
    UsageError,
)
from .permissions.ask import AskRequest, Reply
from .permissions.model import Decision, PatternDecision, PermissionRequest, Rule
from .result import ToolResult

__version__ = "0.1.0"

__all__ = [
    "AskRequest",
    "CallError",
    "ConfigError",
    "CorrectedError",
    "Decision",
    "DeniedError",
    "InvalidArgumentsError",
    "PatternDecision",
    "PermissionBlocked",
    "PermissionRequest",
    "Problem",
    "RejectedError",
    "ReloadStatus",
    "Reply",
    "Rule",
    "Runtime",
    "SnapshotChange",
    "ToolContext",
    "ToolFailure",
    "ToolResult",
    "ToolrtError",
    "UnknownToolError",
    "UsageError",
]
