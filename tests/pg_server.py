"""A real PostgreSQL server for the state store's tests, started by the test session itself.

`pgserver` (a test dependency) ships PostgreSQL's binaries. Its data directory is a fresh temporary
directory; each pytest-xdist worker starts its own server once (a session-scoped fixture) and stops it
at the end. Run as root, pgserver adds a `pgserver` system user to run the server as and opens its
paths' parent directories for others to traverse (g+rx, o+rx up to `/`). Each test gets a schema of
its own (`fresh_database`), so tests never see each other's rows.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["postgres_server", "postgres_uri"]

_names = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """The worker's PostgreSQL server (a `pgserver.PostgresServer`).

    Its directory is made under the system's temporary directory, not pytest's: pytest keeps its own
    `pytest-of-USER` at mode 0700 (resetting it whenever any pytest run starts), which the server's
    user could then no longer traverse."""
    try:
        with warnings.catch_warnings():  # platformdirs warns that XDG_RUNTIME_DIR is unset (pgserver never uses it)
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError as error:  # the test extra installs it; a bare environment says what is missing
        pytest.skip(f"pgserver is not installed ({error}): pip install -e '.[test]'")
    directory = Path(tempfile.mkdtemp(prefix="toolrt-postgresql-"))
    server = pgserver.postgres_server.get_server(directory / "data", cleanup_mode="stop")
    # A throwaway server: no fsync, so the shutdown checkpoint does not wait on the disk.
    server.psql("ALTER SYSTEM SET fsync = off; ALTER SYSTEM SET synchronous_commit = off; SELECT pg_reload_conf();")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def postgres_uri(postgres_server: Any) -> Callable[[], str]:
    """Make a new empty schema and return a URI whose connections use it (tables land there): each call
    gives a store of its own, as a fresh database would, at a fraction of the cost."""
    import psycopg

    base = postgres_server.get_uri()

    def fresh_database() -> str:
        name = f"t{os.getpid()}_{next(_names)}"
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(f'CREATE SCHEMA "{name}"')
        return f"{base}&options=-csearch_path%3D{name}"

    return fresh_database
