"""What the SQLite and PostgreSQL engines share: every query, and the migrations run at open.

The statements are written once with `?` placeholders (PostgreSQL's driver gets `%s`); both engines
speak `INSERT … ON CONFLICT`, so each operation is one atomic statement whichever process runs it.
An engine provides `_transaction()`, a cursor inside one transaction committed on a clean exit, and
`_statement()`, a cursor whose statements each commit alone (one round trip for a one-statement operation).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..errors import StoreError
from .migrations import LATEST, MIGRATIONS, Dialect
from .model import CALL_CLAIM_SECONDS, AuditQuery, AuditRow, CallClaim, Pruned, Replica, Store, cutoff

__all__ = ["Cursor", "SqlStore"]


class Cursor(Protocol):
    """The part of a DB-API cursor the SQL engines use."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: Any, parameters: Sequence[Any] = ..., /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


def newer_schema(found: int, where: str) -> StoreError:
    return StoreError(
        f"{where} holds schema version {found}, newer than this toolrt's ({LATEST}): it was written by a "
        "newer toolrt; upgrade toolrt (a store is never downgraded)"
    )


class SqlStore(Store):
    """A store in SQL tables (`toolrt_*`); subclasses connect and say which dialect they speak."""

    persistent = True
    dialect: Dialect

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Cursor]:
        """A cursor in a transaction that commits on exit (rolls back on an exception).

        Raises:
            StoreError: the store cannot be reached or the statement failed (password never included).
        """

    @abstractmethod
    def _statement(self) -> AbstractContextManager[Cursor]:
        """A cursor whose statements each commit on their own (no BEGIN/COMMIT round trips): for the
        operations that are one statement.

        Raises:
            StoreError: as `_transaction`.
        """

    @property
    @abstractmethod
    def where(self) -> str:
        """The store as shown to people: `sqlite FILE` or the URI without its password."""

    def _sql(self, statement: str) -> str:
        return statement if self.dialect == "sqlite" else statement.replace("?", "%s")

    def _run(self, statement: str, parameters: Sequence[Any] = ()) -> int:
        """Run one statement (atomic on its own); the number of rows it changed."""
        with self._statement() as cursor:
            cursor.execute(self._sql(statement), parameters)
            return int(cursor.rowcount)

    # --- migrations ---------------------------------------------------------------------------------

    def _migrate(self, cursor: Cursor) -> int:
        """Bring the schema to `LATEST` inside the caller's transaction (which holds the migration lock).

        Raises:
            StoreError: the schema is newer than this toolrt knows.
        """
        cursor.execute("CREATE TABLE IF NOT EXISTS toolrt_schema (version INTEGER NOT NULL)")
        cursor.execute("SELECT MAX(version) FROM toolrt_schema")
        row = cursor.fetchone()
        found = int(row[0]) if row is not None and row[0] is not None else 0
        if found > LATEST:
            raise newer_schema(found, self.where)
        for version, _, statements in MIGRATIONS:
            if version <= found:
                continue
            for statement in statements(self.dialect):
                cursor.execute(statement)
            cursor.execute("DELETE FROM toolrt_schema")
            cursor.execute(self._sql("INSERT INTO toolrt_schema (version) VALUES (?)"), (version,))
            found = version
        return found

    def schema_version(self) -> int:
        with self._statement() as cursor:
            cursor.execute("SELECT MAX(version) FROM toolrt_schema")
            row = cursor.fetchone()
        return int(row[0]) if row is not None and row[0] is not None else 0

    # --- audit --------------------------------------------------------------------------------------

    def append_audit(self, row: AuditRow) -> None:
        self._run(
            "INSERT INTO toolrt_audit (time, session, tool, status, decision, record) VALUES (?, ?, ?, ?, ?, ?)",
            (row.time, row.session, row.tool, row.status, row.decision, row.record),
        )

    def append_audit_saving_session(self, row: AuditRow, session: str, state: Mapping[str, Any], now: float) -> None:
        text = json.dumps(state, separators=(",", ":"), default=str)
        with self._transaction() as cursor:  # one commit (SQLite: one WAL write) for both
            cursor.execute(
                self._sql(
                    "INSERT INTO toolrt_sessions (id, state, touched) VALUES (?, ?, ?)"
                    " ON CONFLICT (id) DO UPDATE SET state = excluded.state, touched = excluded.touched"
                ),
                (session, text, now),
            )
            cursor.execute(
                self._sql(
                    "INSERT INTO toolrt_audit (time, session, tool, status, decision, record) VALUES (?, ?, ?, ?, ?, ?)"
                ),
                (row.time, row.session, row.tool, row.status, row.decision, row.record),
            )

    def audit_records(self, query: AuditQuery | None = None) -> list[AuditRow]:
        query = query or AuditQuery()
        conditions: list[str] = []
        parameters: list[Any] = []
        for column, value in (("session", query.session), ("tool", query.tool), ("decision", query.decision)):
            if value is not None:
                conditions.append(f"{column} = ?")
                parameters.append(value)
        if query.since is not None:
            conditions.append("time >= ?")
            parameters.append(query.since)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        statement = f"SELECT time, session, tool, status, decision, record, id FROM toolrt_audit{where} ORDER BY id"
        if query.limit is not None:
            statement = f"SELECT * FROM ({statement} DESC LIMIT {max(int(query.limit), 0)}) AS newest ORDER BY id"
        with self._statement() as cursor:
            cursor.execute(self._sql(statement), parameters)
            rows = cursor.fetchall()
        return [AuditRow(float(r[0]), r[1], r[2], r[3], r[4], r[5]) for r in rows]

    # --- sessions -----------------------------------------------------------------------------------

    def load_session(self, session: str) -> dict[str, Any] | None:
        with self._statement() as cursor:
            cursor.execute(self._sql("SELECT state FROM toolrt_sessions WHERE id = ?"), (session,))
            row = cursor.fetchone()
        if row is None:
            return None
        state: dict[str, Any] = json.loads(row[0])
        return state

    def load_session_and_approvals(self, session: str) -> tuple[dict[str, Any] | None, list[tuple[str, str, str]]]:
        with self._statement() as cursor:
            cursor.execute(
                self._sql(
                    "SELECT 0, 0, state, NULL, NULL, NULL FROM toolrt_sessions WHERE id = ?"
                    " UNION ALL SELECT 1, id, NULL, agent, permission, pattern FROM toolrt_approvals WHERE session = ?"
                    " ORDER BY 1, 2"
                ),
                (session, session),
            )
            rows = cursor.fetchall()
        state: dict[str, Any] | None = None
        approvals: list[tuple[str, str, str]] = []
        for row in rows:
            if row[0] == 0:
                state = json.loads(row[2])
            else:
                approvals.append((row[3], row[4], row[5]))
        return state, approvals

    def save_session(self, session: str, state: Mapping[str, Any], now: float) -> None:
        text = json.dumps(state, separators=(",", ":"), default=str)
        self._run(
            "INSERT INTO toolrt_sessions (id, state, touched) VALUES (?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET state = excluded.state, touched = excluded.touched",
            (session, text, now),
        )

    def drop_session(self, session: str) -> None:
        with self._transaction() as cursor:
            cursor.execute(self._sql("DELETE FROM toolrt_sessions WHERE id = ?"), (session,))
            cursor.execute(self._sql("DELETE FROM toolrt_approvals WHERE session = ?"), (session,))

    def add_approval(self, session: str, agent: str, permission: str, pattern: str, now: float) -> bool:
        changed = self._run(
            "INSERT INTO toolrt_approvals (session, agent, permission, pattern, given) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (session, agent, permission, pattern) DO NOTHING",
            (session, agent, permission, pattern, now),
        )
        return changed == 1

    def approvals(self, session: str) -> list[tuple[str, str, str]]:
        with self._statement() as cursor:
            cursor.execute(
                self._sql("SELECT agent, permission, pattern FROM toolrt_approvals WHERE session = ? ORDER BY id"),
                (session,),
            )
            return [(row[0], row[1], row[2]) for row in cursor.fetchall()]

    # --- request states -----------------------------------------------------------------------------

    def consume_nonce(self, nonce: str, expires: float, now: float) -> bool:
        changed = self._run(
            "INSERT INTO toolrt_nonces (nonce, expires) VALUES (?, ?)"
            " ON CONFLICT (nonce) DO UPDATE SET expires = excluded.expires WHERE toolrt_nonces.expires <= ?",
            (nonce, expires, now),
        )
        return changed == 1

    def signing_key(self, version: int, make: Callable[[], str]) -> str:
        with self._statement() as cursor:
            cursor.execute(self._sql("SELECT secret FROM toolrt_keys WHERE version = ?"), (version,))
            row = cursor.fetchone()
        if row is not None:
            return str(row[0])
        with self._transaction() as cursor:
            cursor.execute(
                self._sql("INSERT INTO toolrt_keys (version, secret) VALUES (?, ?) ON CONFLICT (version) DO NOTHING"),
                (version, make()),
            )
            cursor.execute(self._sql("SELECT secret FROM toolrt_keys WHERE version = ?"), (version,))
            row = cursor.fetchone()
        return str(row[0])

    # --- calls (idempotency) -----------------------------------------------------------------------

    def claim_call(self, session: str, key: str, fingerprint: str, now: float) -> CallClaim:
        with self._transaction() as cursor:
            cursor.execute(
                self._sql(
                    "INSERT INTO toolrt_calls (session, key, fingerprint, started, result) VALUES (?, ?, ?, ?, NULL)"
                    " ON CONFLICT (session, key) DO UPDATE SET fingerprint = excluded.fingerprint,"
                    " started = excluded.started, result = NULL WHERE toolrt_calls.started < ?"
                ),
                (session, key, fingerprint, now, now - CALL_CLAIM_SECONDS),
            )
            if cursor.rowcount == 1:
                return CallClaim("new")
            cursor.execute(
                self._sql("SELECT fingerprint, result FROM toolrt_calls WHERE session = ? AND key = ?"), (session, key)
            )
            row = cursor.fetchone()
        if row is None:  # removed between the two statements (retention): the caller may try again
            raise StoreError(f"{self.where}: the call's key vanished while it was claimed")
        if row[0] != fingerprint:
            return CallClaim("conflict")
        return CallClaim("started") if row[1] is None else CallClaim("finished", str(row[1]))

    def finish_call(self, session: str, key: str, result: str | None) -> None:
        if result is None:
            self._run("DELETE FROM toolrt_calls WHERE session = ? AND key = ?", (session, key))
        else:
            self._run("UPDATE toolrt_calls SET result = ? WHERE session = ? AND key = ?", (result, session, key))

    # --- replicas -----------------------------------------------------------------------------------

    def report_replica(self, replica: Replica) -> None:
        self._run(
            "INSERT INTO toolrt_replicas (id, digest, ready, detail, seen) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET digest = excluded.digest, ready = excluded.ready,"
            " detail = excluded.detail, seen = excluded.seen",
            (replica.id, replica.digest, int(replica.ready), replica.detail, replica.seen),
        )

    def replicas(self) -> list[Replica]:
        with self._statement() as cursor:
            cursor.execute("SELECT id, digest, ready, detail, seen FROM toolrt_replicas ORDER BY seen DESC, id")
            rows = cursor.fetchall()
        return [Replica(str(r[0]), str(r[1]), bool(r[2]), str(r[3]), float(r[4])) for r in rows]

    def drop_replica(self, replica_id: str) -> None:
        self._run("DELETE FROM toolrt_replicas WHERE id = ?", (replica_id,))

    # --- upkeep -------------------------------------------------------------------------------------

    def prune(self, now: float, *, audit_days: float | None, session_days: float | None) -> Pruned:
        audit_before, sessions_before = cutoff(now, audit_days), cutoff(now, session_days)
        audit = sessions = 0
        with self._transaction() as cursor:
            if audit_before is not None:
                cursor.execute(self._sql("DELETE FROM toolrt_audit WHERE time < ?"), (audit_before,))
                audit = max(cursor.rowcount, 0)
            if sessions_before is not None:
                cursor.execute(
                    self._sql(
                        "DELETE FROM toolrt_approvals"
                        " WHERE session IN (SELECT id FROM toolrt_sessions WHERE touched < ?)"
                        " OR (session NOT IN (SELECT id FROM toolrt_sessions) AND session NOT IN"
                        " (SELECT session FROM toolrt_approvals WHERE given >= ?))"
                    ),
                    (sessions_before, sessions_before),
                )
                cursor.execute(self._sql("DELETE FROM toolrt_sessions WHERE touched < ?"), (sessions_before,))
                sessions = max(cursor.rowcount, 0)
            cursor.execute(self._sql("DELETE FROM toolrt_calls WHERE started < ?"), (now - CALL_CLAIM_SECONDS,))
            cursor.execute(self._sql("DELETE FROM toolrt_nonces WHERE expires <= ?"), (now,))
            nonces = max(cursor.rowcount, 0)
        return Pruned(audit, sessions, nonces)
