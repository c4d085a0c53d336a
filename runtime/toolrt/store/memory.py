"""The in-process store: the default for `rt.call` hosts. Nothing outlives the process; it is shared by
the threads of one process only (one lock), and its audit records are bounded (the oldest go first)."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from .model import CALL_CLAIM_SECONDS, AuditQuery, AuditRow, CallClaim, Pruned, Replica, Store, cutoff

__all__ = ["MemoryStore"]

SCHEMA_VERSION = 2
"""The memory store has no schema; it reports the version the SQL engines hold, so all three answer alike."""


class MemoryStore(Store):
    engine = "memory"
    persistent = False

    MAX_AUDIT = 100_000
    """Audit records held at once (the JSON-lines file is the memory engine's lasting record)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._audit: deque[AuditRow] = deque(maxlen=self.MAX_AUDIT)
        self._sessions: dict[str, tuple[str, float]] = {}
        self._approvals: dict[str, dict[tuple[str, str, str], float]] = {}
        self._nonces: dict[str, float] = {}
        self._keys: dict[int, str] = {}
        self._calls: dict[tuple[str, str], tuple[str, float, str | None]] = {}
        self._replicas: dict[str, Replica] = {}

    def append_audit(self, row: AuditRow) -> None:
        with self._lock:
            self._audit.append(row)

    def audit_records(self, query: AuditQuery | None = None) -> list[AuditRow]:
        query = query or AuditQuery()
        with self._lock:
            rows = [row for row in self._audit if _matches(row, query)]
        if query.limit is not None:
            rows = rows[-query.limit :] if query.limit > 0 else []
        return rows

    def load_session(self, session: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._sessions.get(session)
        if found is None:
            return None
        state: dict[str, Any] = json.loads(found[0])  # a copy: the caller may change it freely
        return state

    def save_session(self, session: str, state: Mapping[str, Any], now: float) -> None:
        text = json.dumps(state, separators=(",", ":"), default=str)
        with self._lock:
            self._sessions[session] = (text, now)

    def drop_session(self, session: str) -> None:
        with self._lock:
            self._sessions.pop(session, None)
            self._approvals.pop(session, None)

    def add_approval(self, session: str, agent: str, permission: str, pattern: str, now: float) -> bool:
        with self._lock:
            held = self._approvals.setdefault(session, {})
            if (agent, permission, pattern) in held:
                return False
            held[(agent, permission, pattern)] = now
            return True

    def approvals(self, session: str) -> list[tuple[str, str, str]]:
        with self._lock:
            return list(self._approvals.get(session, {}))

    def consume_nonce(self, nonce: str, expires: float, now: float) -> bool:
        with self._lock:
            until = self._nonces.get(nonce)
            if until is not None and until > now:
                return False
            self._nonces[nonce] = expires
            return True

    def signing_key(self, version: int, make: Callable[[], str]) -> str:
        with self._lock:
            key = self._keys.get(version)
            if key is None:
                key = self._keys[version] = make()
            return key

    def claim_call(self, session: str, key: str, fingerprint: str, now: float) -> CallClaim:
        with self._lock:
            held = self._calls.get((session, key))
            if held is None or held[1] < now - CALL_CLAIM_SECONDS:
                if len(self._calls) >= self.MAX_AUDIT:  # bounded, as the records: the oldest claims go
                    for stale in sorted(self._calls, key=lambda k: self._calls[k][1])[: self.MAX_AUDIT // 10]:
                        del self._calls[stale]
                self._calls[(session, key)] = (fingerprint, now, None)
                return CallClaim("new")
        if held[0] != fingerprint:
            return CallClaim("conflict")
        return CallClaim("started") if held[2] is None else CallClaim("finished", held[2])

    def finish_call(self, session: str, key: str, result: str | None) -> None:
        with self._lock:
            held = self._calls.get((session, key))
            if result is None:
                self._calls.pop((session, key), None)
            elif held is not None:
                self._calls[(session, key)] = (held[0], held[1], result)

    def report_replica(self, replica: Replica) -> None:
        with self._lock:
            self._replicas[replica.id] = replica

    def replicas(self) -> list[Replica]:
        with self._lock:
            return sorted(self._replicas.values(), key=lambda r: (-r.seen, r.id))

    def drop_replica(self, replica_id: str) -> None:
        with self._lock:
            self._replicas.pop(replica_id, None)

    def prune(self, now: float, *, audit_days: float | None, session_days: float | None) -> Pruned:
        audit_before, sessions_before = cutoff(now, audit_days), cutoff(now, session_days)
        with self._lock:
            audit = 0
            if audit_before is not None:
                kept = [row for row in self._audit if row.time >= audit_before]
                audit = len(self._audit) - len(kept)
                self._audit = deque(kept, maxlen=self.MAX_AUDIT)
            limit = -1.0 if sessions_before is None else sessions_before
            stale = [session for session, (_, used) in self._sessions.items() if used < limit]
            for session in stale:
                del self._sessions[session]
                self._approvals.pop(session, None)
            if sessions_before is not None:  # approvals of sessions that never saved a state
                for session, held in list(self._approvals.items()):
                    if session not in self._sessions and max(held.values(), default=0.0) < sessions_before:
                        del self._approvals[session]
            for claimed in [k for k, (_, started, _) in self._calls.items() if started < now - CALL_CLAIM_SECONDS]:
                del self._calls[claimed]
            expired = [nonce for nonce, until in self._nonces.items() if until <= now]
            for nonce in expired:
                del self._nonces[nonce]
        return Pruned(audit, len(stale), len(expired))

    def schema_version(self) -> int:
        return SCHEMA_VERSION

    def close(self) -> None:
        return None

    def __repr__(self) -> str:
        return "MemoryStore()"


def _matches(row: AuditRow, query: AuditQuery) -> bool:
    return (
        (query.session is None or row.session == query.session)
        and (query.tool is None or row.tool == query.tool)
        and (query.decision is None or row.decision == query.decision)
        and (query.since is None or row.time >= query.since)
    )
