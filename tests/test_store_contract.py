"""The state store's contract: every engine (memory, SQLite, a real PostgreSQL server) passes the same tests.

The PostgreSQL server is started by the test session (tests/pg_server.py); nothing here is mocked.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest
from pg_server import postgres_server, postgres_uri  # noqa: F401  (fixtures)

from toolrt.errors import StoreError
from toolrt.store import CALL_CLAIM_SECONDS, AuditQuery, AuditRow, CallClaim, Replica, Store, open_store, session_id
from toolrt.store.migrations import LATEST

ENGINES = ("memory", "sqlite", "postgresql")

Opener = Callable[[], Store]


@pytest.fixture(params=ENGINES)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the engine's store; every store it opens shares one database (a fresh one per test)."""
    engine: str = request.param
    opened: list[Store] = []
    if engine == "memory":
        single = open_store("memory", tmp_path)
        setting = ""
    elif engine == "sqlite":
        setting = "sqlite"
    else:
        setting = request.getfixturevalue("postgres_uri")()

    def open_one() -> Store:
        store = single if engine == "memory" else open_store(setting, tmp_path)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


@pytest.fixture
def store(opener: Opener) -> Store:
    return opener()


def row(at: float, session: str = "s1", tool: str = "read", decision: str | None = "allow") -> AuditRow:
    return AuditRow(at, session, tool, "ok", decision, f'{{"time":{at},"tool":"{tool}"}}')


def test_a_store_opens_at_the_latest_schema_version(store: Store) -> None:
    assert store.schema_version() == LATEST


def test_audit_records_come_back_oldest_first_and_filtered(store: Store) -> None:
    store.append_audit(row(100.0, "a", "read", "allow"))
    store.append_audit(row(200.0, "b", "bash", "deny"))
    store.append_audit(row(300.0, "a", "bash", "ask"))
    assert [r.time for r in store.audit_records()] == [100.0, 200.0, 300.0]
    assert store.audit_records()[1] == row(200.0, "b", "bash", "deny")
    assert [r.time for r in store.audit_records(AuditQuery(session="a"))] == [100.0, 300.0]
    assert [r.time for r in store.audit_records(AuditQuery(tool="bash"))] == [200.0, 300.0]
    assert [r.time for r in store.audit_records(AuditQuery(decision="deny"))] == [200.0]
    assert [r.time for r in store.audit_records(AuditQuery(since=200.0))] == [200.0, 300.0]
    assert [r.time for r in store.audit_records(AuditQuery(session="a", tool="bash"))] == [300.0]
    assert [r.time for r in store.audit_records(AuditQuery(limit=2))] == [200.0, 300.0]
    assert store.audit_records(AuditQuery(session="nobody")) == []


def test_a_session_state_is_saved_replaced_and_dropped(store: Store) -> None:
    assert store.load_session("s1") is None
    store.save_session("s1", {"tools": {"todos": [{"content": "a"}]}, "agent": None}, 10.0)
    loaded = store.load_session("s1")
    assert loaded == {"tools": {"todos": [{"content": "a"}]}, "agent": None}
    assert loaded is not None
    loaded["agent"] = "changed by the caller"
    assert store.load_session("s1") == {"tools": {"todos": [{"content": "a"}]}, "agent": None}
    store.save_session("s1", {"agent": "plan"}, 11.0)
    assert store.load_session("s1") == {"agent": "plan"}
    store.add_approval("s1", "build", "bash", "git *", 11.0)
    store.drop_session("s1")
    assert store.load_session("s1") is None
    assert store.approvals("s1") == []
    store.drop_session("never existed")


def test_an_approval_is_kept_once_in_the_order_given(store: Store) -> None:
    assert store.add_approval("s1", "build", "bash", "git *", 1.0) is True
    assert store.add_approval("s1", "build", "edit", "src/*", 2.0) is True
    assert store.add_approval("s1", "build", "bash", "git *", 3.0) is False
    assert store.add_approval("s2", "build", "bash", "git *", 3.0) is True
    assert store.add_approval("s1", "plan", "bash", "git *", 3.0) is True  # approvals are per agent
    assert store.approvals("s1") == [("build", "bash", "git *"), ("build", "edit", "src/*"), ("plan", "bash", "git *")]
    assert store.approvals("s2") == [("build", "bash", "git *")]


def test_a_session_and_its_approvals_load_together_as_they_do_apart(store: Store) -> None:
    assert store.load_session_and_approvals("s1") == (None, [])
    store.add_approval("s1", "build", "bash", "git push", 1.0)  # approvals of a session with no state yet
    store.add_approval("s1", "plan", "edit", "*", 2.0)
    assert store.load_session_and_approvals("s1") == (None, [("build", "bash", "git push"), ("plan", "edit", "*")])
    store.save_session("s1", {"tools": {"todos": [1]}}, 3.0)
    store.add_approval("s2", "build", "read", "*", 4.0)
    assert store.load_session_and_approvals("s1") == (
        {"tools": {"todos": [1]}},
        [("build", "bash", "git push"), ("plan", "edit", "*")],
    )
    assert store.load_session_and_approvals("s1") == (store.load_session("s1"), store.approvals("s1"))


def test_a_record_and_a_session_state_are_written_together(opener: Opener) -> None:
    first, second = opener(), opener()
    first.append_audit_saving_session(row(5.0, session="s9"), "s9", {"tools": {"a": 1}}, 5.0)
    assert [r.session for r in second.audit_records()] == ["s9"]
    assert second.load_session("s9") == {"tools": {"a": 1}}
    first.append_audit_saving_session(row(6.0, session="s9"), "s9", {"tools": {"a": 2}}, 6.0)
    assert second.load_session("s9") == {"tools": {"a": 2}} and len(second.audit_records()) == 2


def test_a_nonce_is_consumed_once_until_it_expires(store: Store) -> None:
    assert store.consume_nonce("n1", expires=100.0, now=50.0) is True
    assert store.consume_nonce("n1", expires=100.0, now=60.0) is False
    assert store.consume_nonce("n2", expires=100.0, now=60.0) is True
    assert store.consume_nonce("n1", expires=200.0, now=100.0) is True  # expired: a state of its age is refused anyway


def test_the_first_signing_key_of_a_version_is_the_one_every_caller_gets(store: Store) -> None:
    made: list[str] = []

    def make(value: str) -> Callable[[], str]:
        def maker() -> str:
            made.append(value)
            return value

        return maker

    assert store.signing_key(1, make("first")) == "first"
    assert store.signing_key(1, make("second")) == "first"
    assert store.signing_key(2, make("third")) == "third"
    assert made == ["first", "third"]


def test_retention_removes_old_records_stale_sessions_and_expired_nonces(store: Store) -> None:
    day = 86400.0
    now = 100 * day
    store.append_audit(row(now - 10 * day))
    store.append_audit(row(now - 1 * day))
    store.save_session("old", {"n": 1}, now - 40 * day)
    store.add_approval("old", "build", "bash", "*", now - 40 * day)
    store.save_session("new", {"n": 2}, now - 1 * day)
    store.add_approval("new", "build", "bash", "*", now - 40 * day)
    store.add_approval("stateless", "build", "edit", "*", now - 40 * day)
    store.consume_nonce("gone", expires=now - 1, now=now - 2)
    store.consume_nonce("kept", expires=now + 60, now=now - 2)
    pruned = store.prune(now, audit_days=5, session_days=30)
    assert (pruned.audit, pruned.sessions, pruned.nonces) == (1, 1, 1)
    assert [r.time for r in store.audit_records()] == [now - 1 * day]
    assert store.load_session("old") is None and store.approvals("old") == []
    assert store.load_session("new") == {"n": 2} and store.approvals("new") == [("build", "bash", "*")]
    assert store.approvals("stateless") == []
    assert store.consume_nonce("kept", expires=now + 60, now=now) is False
    nothing = store.prune(now, audit_days=None, session_days=None)
    assert (nothing.audit, nothing.sessions) == (0, 0)
    assert len(store.audit_records()) == 1


def test_two_handles_on_one_store_see_each_others_writes(opener: Opener) -> None:
    first, second = opener(), opener()
    first.append_audit(row(1.0))
    first.save_session("s1", {"agent": "plan"}, 1.0)
    assert second.add_approval("s1", "build", "bash", "ls", 1.0) is True
    assert [r.time for r in second.audit_records()] == [1.0]
    assert second.load_session("s1") == {"agent": "plan"}
    assert first.approvals("s1") == [("build", "bash", "ls")]
    assert first.consume_nonce("n", expires=10.0, now=1.0) is True
    assert second.consume_nonce("n", expires=10.0, now=1.0) is False


def test_concurrent_approvals_and_nonces_have_one_consistent_outcome(opener: Opener) -> None:
    """Eight threads over two handles give the same approval and consume the same nonce: one wins each."""
    handles = [opener(), opener()]
    start = threading.Barrier(8)
    approved: list[bool] = []
    consumed: list[bool] = []
    keys: list[str] = []

    def worker(index: int) -> None:
        handle = handles[index % 2]
        start.wait(timeout=30)
        approved.append(handle.add_approval("s1", "build", "bash", "git push", float(index)))
        consumed.append(handle.consume_nonce("n1", expires=1e12, now=1.0))
        keys.append(handle.signing_key(1, lambda: f"key-of-{index}"))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(approved) == [False] * 7 + [True]
    assert sorted(consumed) == [False] * 7 + [True]
    assert len(set(keys)) == 1 and len(keys) == 8
    assert handles[0].approvals("s1") == [("build", "bash", "git push")]


def test_a_call_key_is_claimed_once_and_its_retries_see_what_became_of_it(opener: Opener) -> None:
    """A claim seen from another handle (another replica): started, then finished with its result; other
    arguments under the key conflict; a released key (the call waits for input) is claimed again."""
    first, second = opener(), opener()
    assert first.claim_call("s1", "k1", "fp", now=100.0) == CallClaim("new")
    assert second.claim_call("s1", "k1", "fp", now=101.0) == CallClaim("started")
    assert second.claim_call("s1", "k1", "other", now=101.0) == CallClaim("conflict")
    assert second.claim_call("s2", "k1", "fp", now=101.0) == CallClaim("new")  # keys are per session
    first.finish_call("s1", "k1", '{"content":[]}')
    assert second.claim_call("s1", "k1", "fp", now=102.0) == CallClaim("finished", '{"content":[]}')
    second.finish_call("s2", "k1", None)
    assert first.claim_call("s2", "k1", "fp", now=103.0) == CallClaim("new")
    late = 100.0 + CALL_CLAIM_SECONDS + 1  # an old key opens a new call
    assert first.claim_call("s1", "k1", "fp", now=late) == CallClaim("new")


def test_concurrent_claims_of_one_call_key_let_exactly_one_run(opener: Opener) -> None:
    handles = [opener(), opener()]
    start = threading.Barrier(8)
    states: list[str] = []

    def worker(index: int) -> None:
        start.wait(timeout=30)
        states.append(handles[index % 2].claim_call("s1", "retry-me", "fp", now=50.0).state)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(states) == ["new"] + ["started"] * 7


def test_replicas_report_the_snapshot_they_serve_and_are_forgotten_when_they_stop(opener: Opener) -> None:
    first, second = opener(), opener()
    first.report_replica(Replica("r1", "d1", True, "host a pid 1", 10.0))
    second.report_replica(Replica("r2", "d2", False, "host b pid 2", 11.0))
    first.report_replica(Replica("r1", "d3", True, "host a pid 1", 12.0))
    assert second.replicas() == [
        Replica("r1", "d3", True, "host a pid 1", 12.0),
        Replica("r2", "d2", False, "host b pid 2", 11.0),
    ]
    second.drop_replica("r1")
    assert [replica.id for replica in first.replicas()] == ["r2"]


def test_session_ids_are_digests_that_never_contain_the_token() -> None:
    token = "tok_0123456789abcdef"
    assert session_id(token) == session_id(token)
    assert session_id(token) != session_id(token + "x")
    assert token not in session_id(token) and len(session_id(token)) == 24


# --- what persists, and what refuses -------------------------------------------------------------------


def test_a_sqlite_store_keeps_its_state_across_a_reopen_in_wal_mode(tmp_path: Path) -> None:
    store = open_store("sqlite", tmp_path)
    store.append_audit(row(5.0))
    store.add_approval("s1", "build", "bash", "make", 5.0)
    store.close()
    path = tmp_path / "state.sqlite3"
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert path.stat().st_mode & 0o777 == 0o600
    again = open_store("sqlite", tmp_path)
    assert [r.time for r in again.audit_records()] == [5.0]
    assert again.approvals("s1") == [("build", "bash", "make")]
    again.close()


def test_a_sqlite_store_with_a_newer_schema_refuses_to_open_naming_the_version(tmp_path: Path) -> None:
    open_store("sqlite", tmp_path).close()
    path = tmp_path / "state.sqlite3"
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        db.execute("UPDATE toolrt_schema SET version = ?", (LATEST + 41,))
    with pytest.raises(StoreError, match=rf"store setting \(sqlite\).*schema version {LATEST + 41}, newer than"):
        open_store("sqlite", tmp_path)


def test_a_file_that_is_not_a_database_is_refused_naming_the_setting(tmp_path: Path) -> None:
    (tmp_path / "state.sqlite3").write_text("not a database\n" * 100)
    with pytest.raises(StoreError, match=r"the store setting \(sqlite\): sqlite .*state.sqlite3.*not a database"):
        open_store("sqlite", tmp_path)


def test_a_postgresql_store_with_a_newer_schema_refuses_to_open(postgres_uri: Callable[[], str]) -> None:  # noqa: F811
    import psycopg

    uri = postgres_uri()
    open_store(uri, Path("/nonexistent")).close()
    with psycopg.connect(uri, autocommit=True) as connection:
        connection.execute("UPDATE toolrt_schema SET version = %s", (LATEST + 1,))
    with pytest.raises(StoreError, match=rf"schema version {LATEST + 1}, newer than this toolrt's \({LATEST}\)"):
        open_store(uri, Path("/nonexistent"))


def test_replicas_opening_one_new_postgresql_store_together_migrate_it_once(
    postgres_uri: Callable[[], str],  # noqa: F811
) -> None:
    uri = postgres_uri()
    stores: list[Store] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def replica() -> None:
        start.wait(timeout=30)
        try:
            stores.append(open_store(uri, Path("/nonexistent")))
        except BaseException as error:  # the assertion below shows it
            errors.append(error)

    threads = [threading.Thread(target=replica) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    try:
        assert errors == []
        assert [store.schema_version() for store in stores] == [LATEST] * 4
    finally:
        for store in stores:
            store.close()


def test_an_unreachable_postgresql_store_fails_fast_without_its_password() -> None:
    started = time.monotonic()
    with pytest.raises(StoreError) as raised:
        open_store("postgresql://toolrt:s3cr%21t-pw@127.0.0.1:1/state", Path("/nonexistent"))
    assert time.monotonic() - started < 10
    text = str(raised.value)
    assert text.startswith("the store setting (postgresql://toolrt:***@127.0.0.1:1/state): postgresql store ")
    assert "127.0.0.1" in text and "s3cr" not in text and "%21" not in text
    assert "s3cr" not in repr(raised.value)


def test_an_unknown_engine_is_refused_naming_the_engines(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"the store setting \(redis://x\): unknown engine; use one of memory, sqlite"):
        open_store("redis://x", tmp_path)


def test_a_store_repr_never_shows_the_password(postgres_server: object) -> None:  # noqa: F811
    from toolrt.store import redact

    assert redact("postgresql://app:hunter2@db.example:5432/toolrt?sslmode=require") == (
        "postgresql://app:***@db.example:5432/toolrt?sslmode=require"
    )
    assert redact("postgresql://app@db/toolrt") == "postgresql://app@db/toolrt"
    uri = postgres_server.get_uri().replace("postgres:@", "postgres:hunter2@")  # type: ignore[attr-defined]
    store = open_store(uri, Path("/nonexistent"))  # trust authentication over the socket ignores the password
    try:
        assert "hunter2" not in repr(store) and "postgres:***@" in repr(store)
    finally:
        store.close()
