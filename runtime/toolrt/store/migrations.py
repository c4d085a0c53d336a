"""The SQL engines' schema, as numbered migrations applied in order when a store opens.

A migration is never edited once released: a change is a new entry. The version a database holds is
kept in `toolrt_schema`; a database whose version is above `LATEST` was written by a newer toolrt and
is refused (its tables may mean something this version does not know).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

__all__ = ["LATEST", "MIGRATIONS", "Dialect"]

Dialect = Literal["sqlite", "postgresql"]

_ID = {"sqlite": "INTEGER PRIMARY KEY", "postgresql": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"}
_FLOAT = {"sqlite": "REAL", "postgresql": "DOUBLE PRECISION"}


def _version_1(dialect: Dialect) -> tuple[str, ...]:
    id_, real = _ID[dialect], _FLOAT[dialect]
    return (
        f"""CREATE TABLE toolrt_audit (
            id {id_}, time {real} NOT NULL, session TEXT NOT NULL, tool TEXT NOT NULL,
            status TEXT NOT NULL, decision TEXT, record TEXT NOT NULL)""",
        "CREATE INDEX toolrt_audit_time ON toolrt_audit (time)",
        "CREATE INDEX toolrt_audit_session ON toolrt_audit (session, time)",
        f"CREATE TABLE toolrt_sessions (id TEXT PRIMARY KEY, state TEXT NOT NULL, touched {real} NOT NULL)",
        "CREATE INDEX toolrt_sessions_touched ON toolrt_sessions (touched)",
        f"""CREATE TABLE toolrt_approvals (
            id {id_}, session TEXT NOT NULL, agent TEXT NOT NULL, permission TEXT NOT NULL,
            pattern TEXT NOT NULL, given {real} NOT NULL, UNIQUE (session, agent, permission, pattern))""",
        f"CREATE TABLE toolrt_nonces (nonce TEXT PRIMARY KEY, expires {real} NOT NULL)",
        "CREATE TABLE toolrt_keys (version INTEGER PRIMARY KEY, secret TEXT NOT NULL)",
    )


def _version_2(dialect: Dialect) -> tuple[str, ...]:
    real = _FLOAT[dialect]
    return (
        f"""CREATE TABLE toolrt_calls (
            session TEXT NOT NULL, key TEXT NOT NULL, fingerprint TEXT NOT NULL, started {real} NOT NULL,
            result TEXT, PRIMARY KEY (session, key))""",
        "CREATE INDEX toolrt_calls_started ON toolrt_calls (started)",
        f"""CREATE TABLE toolrt_replicas (
            id TEXT PRIMARY KEY, digest TEXT NOT NULL, ready INTEGER NOT NULL, detail TEXT NOT NULL,
            seen {real} NOT NULL)""",
    )


MIGRATIONS: tuple[tuple[int, str, Callable[[Dialect], tuple[str, ...]]], ...] = (
    (1, "audit, sessions, approvals, nonces, keys", _version_1),
    (2, "calls started and finished (idempotency keys), replicas and the snapshot each serves", _version_2),
)
"""(version, what it adds, statements by dialect)."""

LATEST = MIGRATIONS[-1][0]
