"""The state store's interface: what every engine (memory, SQLite, PostgreSQL) keeps and how it is asked.

A store holds what outlives one call and may be shared by several `toolrt serve` processes: audit
records, session states, a session's "always" approvals, the used nonces of 2026-07-28 request states
and the signing keys of those states. Every method is atomic on its own: two processes adding the same
approval, consuming the same nonce or creating the same key version get one consistent result.

Sessions are named by `session_id(token)`, never by their token: a store (and its backups) never holds
a credential a client could present.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

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
    "session_id",
]

DECISIONS = ("allow", "ask", "deny")
"""A call's permission decision as recorded: the strictest action the rules gave its requests."""


def session_id(token: str) -> str:
    """The id records and state name a session by: a digest of its token (the token itself is a credential)."""
    return hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=12, person=b"toolrt-sess").hexdigest()


def decision_of(requests: Any) -> str | None:
    """The strictest action (`deny` > `ask` > `allow`) among a record's `requests`; None without requests."""
    found: str | None = None
    if isinstance(requests, list):
        for request in requests:
            action = request.get("action") if isinstance(request, Mapping) else None
            if action in DECISIONS and (found is None or DECISIONS.index(action) > DECISIONS.index(found)):
                found = action
    return found


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One audit record as a store keeps it: the columns its queries filter on, and the record's JSON text."""

    time: float
    """Seconds since the epoch."""
    session: str
    """`session_id` of the session's token."""
    tool: str
    status: str
    decision: str | None
    record: str
    """The whole record as one JSON object (its `session` member is the id too)."""


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Which audit records to read (every field None: all of them), oldest first."""

    session: str | None = None
    tool: str | None = None
    decision: str | None = None
    since: float | None = None
    """Seconds since the epoch: records at or after it."""
    limit: int | None = None
    """The newest `limit` records matching (still oldest first)."""


CALL_CLAIM_SECONDS = 3600.0
"""How long a started call's key is held: a retry within it never runs the call again; a key older
than this opens a new call."""

ClaimState = Literal["new", "started", "finished", "conflict"]


@dataclass(frozen=True, slots=True)
class CallClaim:
    """What `Store.claim_call` found for a call's key."""

    state: ClaimState
    """new: claimed now, run the call; started: a call with this key started and has no result (it may
    have run, or still run); finished: `result` holds its result; conflict: the key names another call
    (other arguments)."""
    result: str | None = None
    """The finished call's result (JSON text)."""


@dataclass(frozen=True, slots=True)
class Replica:
    """A `toolrt serve` process as it last reported itself to the store."""

    id: str
    digest: str
    """The digest of the snapshot it serves."""
    ready: bool
    detail: str
    """Host, pid and address, as the replica describes itself."""
    seen: float
    """When it last reported (seconds since the epoch)."""


@dataclass(frozen=True, slots=True)
class Pruned:
    """What a retention pass removed."""

    audit: int
    sessions: int
    nonces: int


class Store(ABC):
    """Where state that outlives a call is kept. Engines: `MemoryStore`, `SqliteStore`, `PostgresStore`."""

    engine: str
    """memory | sqlite | postgresql"""
    persistent: bool
    """False for `memory`: nothing survives the process (and the JSON-lines file stays the audit record)."""

    # --- audit --------------------------------------------------------------------------------------

    @abstractmethod
    def append_audit(self, row: AuditRow) -> None:
        """Keep one record, durably before returning where the engine is persistent.

        Raises:
            StoreError: the record could not be written.
        """

    def append_audit_saving_session(self, row: AuditRow, session: str, state: Mapping[str, Any], now: float) -> None:
        """`save_session(session, state, now)` and `append_audit(row)` together: one round trip where the
        engine can (the state a call left and its record, written as the call ends).

        Raises:
            StoreError: either could not be written.
        """
        self.save_session(session, state, now)
        self.append_audit(row)

    @abstractmethod
    def audit_records(self, query: AuditQuery | None = None) -> list[AuditRow]:
        """The records `query` selects, oldest first."""

    # --- sessions -----------------------------------------------------------------------------------

    @abstractmethod
    def load_session(self, session: str) -> dict[str, Any] | None:
        """The state last saved for `session` (a `session_id`); None when none is kept."""

    @abstractmethod
    def save_session(self, session: str, state: Mapping[str, Any], now: float) -> None:
        """Replace `session`'s state (a JSON object) and mark it used at `now`."""

    @abstractmethod
    def drop_session(self, session: str) -> None:
        """Forget `session`'s state and approvals; an unknown session is ignored."""

    def load_session_and_approvals(self, session: str) -> tuple[dict[str, Any] | None, list[tuple[str, str, str]]]:
        """`load_session` and `approvals` of `session` together: one round trip where the engine can."""
        return self.load_session(session), self.approvals(session)

    @abstractmethod
    def add_approval(self, session: str, agent: str, permission: str, pattern: str, now: float) -> bool:
        """Keep an "always" approval given to `agent` in `session`; False when it was already kept (by any
        process)."""

    @abstractmethod
    def approvals(self, session: str) -> list[tuple[str, str, str]]:
        """`session`'s approvals as (agent, permission, pattern), in the order they were first given."""

    # --- request states (2026-07-28) --------------------------------------------------------------

    @abstractmethod
    def consume_nonce(self, nonce: str, expires: float, now: float) -> bool:
        """Mark `nonce` used until `expires`; False when it is already used and not yet expired."""

    @abstractmethod
    def signing_key(self, version: int, make: Callable[[], str]) -> str:
        """Key `version`, made with `make()` by the first process that asks; every process gets that one."""

    # --- calls (idempotency) -----------------------------------------------------------------------

    @abstractmethod
    def claim_call(self, session: str, key: str, fingerprint: str, now: float) -> CallClaim:
        """Record the call `key` of `session` as started before it runs, unless a call with that key was
        started less than `CALL_CLAIM_SECONDS` ago (by any process): then say what became of it. Atomic:
        of two processes claiming one key, one gets `new`.

        Raises:
            StoreError: the claim could not be written (the call must not run).
        """

    @abstractmethod
    def finish_call(self, session: str, key: str, result: str | None) -> None:
        """Keep the claimed call's result (JSON text) for its retries; None releases the key (the call
        did not finish: it waits for the client's input, and its retry runs it)."""

    # --- replicas -----------------------------------------------------------------------------------

    @abstractmethod
    def report_replica(self, replica: Replica) -> None:
        """Keep what `replica` says of itself (replacing its last report)."""

    @abstractmethod
    def replicas(self) -> list[Replica]:
        """Every replica's last report, most recently seen first."""

    @abstractmethod
    def drop_replica(self, replica_id: str) -> None:
        """Forget a replica (it stopped)."""

    # --- upkeep -------------------------------------------------------------------------------------

    @abstractmethod
    def prune(self, now: float, *, audit_days: float | None, session_days: float | None) -> Pruned:
        """Remove audit records older than `audit_days`, sessions unused for `session_days` (None: keep)
        and expired nonces."""

    @abstractmethod
    def schema_version(self) -> int:
        """The version of the schema the store holds."""

    @abstractmethod
    def close(self) -> None:
        """Let go of connections and files; idempotent."""


def cutoff(now: float, days: float | None) -> float | None:
    """The time before which a record `days` old is removed; None: keep everything."""
    return None if days is None else now - days * 86400.0
