"""The PostgreSQL engine: one database shared by every replica, on any machine.

psycopg 3 with psycopg-pool (see docs/deploy.md for why not SQLAlchemy): the store's statements are a
dozen lines of SQL that both engines speak, so a query builder would add a dependency and a layer
without removing any code. Migrations run under a transaction-scoped advisory lock, so replicas
starting together apply each one once. Errors and `repr` show the URI without its password.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from .model import AuditRow
from .sql import Cursor, SqlStore
from .uri import redact, scrub

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = ["PostgresStore"]

CONNECT_TIMEOUT_SECONDS = 5
"""How long opening a connection may take (a store unreachable at start fails within it)."""
MIGRATION_LOCK = 0x746F6F6C7274  # "toolrt": the advisory lock key replicas migrate under


class PostgresStore(SqlStore):
    engine = "postgresql"
    dialect = "postgresql"

    def __init__(self, uri: str, *, max_connections: int = 8) -> None:
        """Connect to `uri`, bring the schema up to date, and keep a pool of connections.

        Raises:
            StoreError: the server cannot be reached, refuses the login, or holds a newer schema.
        """
        import psycopg
        from psycopg_pool import ConnectionPool

        self._uri = uri
        self._shown = redact(uri)
        try:
            with psycopg.connect(uri, connect_timeout=CONNECT_TIMEOUT_SECONDS) as connection:
                with connection.transaction(), connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                    self._migrate(cursor)
        except psycopg.Error as error:
            raise StoreError(f"{self.where}: {_one_line(scrub(str(error), uri))}") from None
        self._pool: ConnectionPool[Any] = ConnectionPool(
            uri,
            min_size=1,
            max_size=max_connections,
            kwargs={"connect_timeout": CONNECT_TIMEOUT_SECONDS, "autocommit": True},
            timeout=CONNECT_TIMEOUT_SECONDS * 2,
            name="toolrt-store",
            open=False,
        )
        self._pool.open(wait=False)
        self._lock = threading.Lock()
        self._held: Any = None
        """The connection the main thread holds (see `_connection`)."""

    @property
    def where(self) -> str:
        return f"postgresql store {self._shown}"

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A connection: the main thread's own (taken from the pool on its first use and kept: the event
        loop of `toolrt serve` runs there and makes most calls, and a checkout per statement cost more CPU
        than the statement), else one checked out for this use. A held connection that broke (the server
        restarted, the backend was ended) goes back to the pool, which drops it; the next use takes another."""
        import psycopg

        if threading.current_thread() is not threading.main_thread():
            with self._pool.connection() as connection:
                yield connection
            return
        with self._lock:
            held = self._held
            if held is None:
                held = self._held = self._pool.getconn()
        try:
            yield held
        except psycopg.Error:
            if held.broken or held.closed:
                self._release(held)
            raise

    def _release(self, connection: Any) -> None:
        with self._lock:
            if self._held is connection:
                self._held = None
        self._pool.putconn(connection)

    @contextmanager
    def _transaction(self) -> Iterator[Cursor]:
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self._connection() as connection, connection.transaction(), connection.cursor() as cursor:
                yield cursor
        except (psycopg.Error, PoolTimeout) as error:
            raise StoreError(f"{self.where}: {_one_line(scrub(str(error), self._uri))}") from None

    @contextmanager
    def _statement(self) -> Iterator[Cursor]:
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self._connection() as connection, connection.cursor() as cursor:  # autocommit
                yield cursor
        except (psycopg.Error, PoolTimeout) as error:
            raise StoreError(f"{self.where}: {_one_line(scrub(str(error), self._uri))}") from None

    def close(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None and not pool.closed:
            with self._lock:
                held, self._held = self._held, None
            if held is not None:
                pool.putconn(held)
            pool.close()

    def append_audit_saving_session(self, row: AuditRow, session: str, state: Mapping[str, Any], now: float) -> None:
        text = json.dumps(state, separators=(",", ":"), default=str)
        with self._statement() as cursor:  # one statement: both rows or neither, one round trip
            cursor.execute(
                "WITH saved AS (INSERT INTO toolrt_sessions (id, state, touched) VALUES (%s, %s, %s)"
                " ON CONFLICT (id) DO UPDATE SET state = excluded.state, touched = excluded.touched)"
                " INSERT INTO toolrt_audit (time, session, tool, status, decision, record)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (session, text, now, row.time, row.session, row.tool, row.status, row.decision, row.record),
            )

    def __repr__(self) -> str:
        return f"PostgresStore({self._shown!r})"


def _one_line(text: str) -> str:
    """libpq's multi-line message on one line (a log line, the last line `toolrt serve` prints)."""
    return " ".join(text.split())
