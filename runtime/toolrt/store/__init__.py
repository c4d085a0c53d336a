"""Where state that outlives a call is kept: one interface (`Store`), three engines.

`memory` (in-process, the default for `rt.call` hosts), `sqlite` (a file in the data directory that the
processes of one machine share) and a `postgresql://…` URI (one database for replicas on many
machines). `open_store(setting, data_dir)` opens the one the host-only `store` setting names.
"""

from __future__ import annotations

from .model import (
    CALL_CLAIM_SECONDS,
    DECISIONS,
    AuditQuery,
    AuditRow,
    CallClaim,
    Pruned,
    Replica,
    Store,
    decision_of,
    session_id,
)
from .uri import is_persistent, open_store, redact

__all__ = [
    "CALL_CLAIM_SECONDS",
    "DECISIONS",
    "AuditQuery",
    "AuditRow",
    "CallClaim",
    "Pruned",
    "Replica",
    "Store",
    "decision_of",
    "is_persistent",
    "open_store",
    "redact",
    "session_id",
]
