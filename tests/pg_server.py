"""A real PostgreSQL server for the state store's tests, started by the test session itself.

`pgserver` (a test dependency) ships PostgreSQL's binaries. Its data directory is a fresh temporary
directory, one per run: the first pytest-xdist worker to need it starts the server (a session-scoped
fixture), the others use the same one, and the last to finish stops it and removes the directory. Run
as root, pgserver adds a `pgserver` system user to run the server as and opens its paths' parent
directories for others to traverse (g+rx, o+rx up to `/`). Each test gets a schema of its own
(`fresh_database`), so tests never see each other's rows (a test that ends connections ends only its
own, by their `application_name`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
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
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")  # the same in every worker of one run
    if run is None:
        directory = Path(tempfile.mkdtemp(prefix="toolrt-postgresql-"))
    else:
        directory = Path(tempfile.gettempdir()) / f"toolrt-postgresql-{run}"
        directory.mkdir(exist_ok=True)
    # pgserver counts the processes using the server (under an inter-process lock): the last one's
    # cleanup stops it and deletes its data directory.
    server = pgserver.postgres_server.get_server(directory / "data", cleanup_mode="delete")
    # A throwaway server: no fsync, so the shutdown checkpoint does not wait on the disk.
    server.psql("ALTER SYSTEM SET fsync = off; ALTER SYSTEM SET synchronous_commit = off; SELECT pg_reload_conf();")
    try:
        yield server
    finally:
        server.cleanup()
        with contextlib.suppress(OSError):
            directory.rmdir()  # fails while another worker's server data is still in it


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
