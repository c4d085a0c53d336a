"""The SQLite engine: one file in the data directory, shared by the processes of one machine.

WAL lets readers run beside the one writer; `busy_timeout` makes a process wait for another's write
instead of failing; `synchronous=NORMAL` keeps every committed write through a killed process (a
power loss may drop the last ones). Each store holds one connection, used under a lock.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreError
from .sql import Cursor, SqlStore

__all__ = ["FILE_NAME", "SqliteStore"]

FILE_NAME = "state.sqlite3"
"""The store's file in the data directory (`store: sqlite`)."""

BUSY_TIMEOUT_MS = 10_000


class SqliteStore(SqlStore):
    engine = "sqlite"
    dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        """Open (creating) the database at `path` and bring its schema up to date.

        Raises:
            StoreError: the file cannot be opened, is not a database, or holds a newer schema.
        """
        self.path = path
        self._lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
            )
        except (OSError, sqlite3.Error) as error:
            raise StoreError(f"{self.where}: cannot open it: {error}") from None
        try:
            path.chmod(0o600)
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
        except (OSError, sqlite3.Error) as error:
            self._db.close()
            raise StoreError(f"{self.where}: cannot open it: {error}") from None
        try:
            with self._transaction() as cursor:
                self._migrate(cursor)
        except StoreError:
            self._db.close()
            raise

    @property
    def where(self) -> str:
        return f"sqlite {self.path}"

    @contextmanager
    def _transaction(self) -> Iterator[Cursor]:
        with self._lock:
            cursor = self._db.cursor()
            try:
                cursor.execute("BEGIN IMMEDIATE")  # take the write lock now: no upgrade deadlock later
                yield cursor
                cursor.execute("COMMIT")
            except sqlite3.Error as error:
                self._rollback()
                raise StoreError(f"{self.where}: {error}") from None
            except BaseException:
                self._rollback()
                raise
            finally:
                cursor.close()

    @contextmanager
    def _statement(self) -> Iterator[Cursor]:
        with self._lock:
            cursor = self._db.cursor()
            try:
                yield cursor  # the connection autocommits each statement (isolation_level=None)
            except sqlite3.Error as error:
                raise StoreError(f"{self.where}: {error}") from None
            finally:
                cursor.close()

    def _rollback(self) -> None:
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"
