"""Audit records in the state store: written before the result returns, named by a session id (never
the token), read back by `toolrt audit`; a store that cannot take a record fails the call closed."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from cli_helpers import run
from pg_server import postgres_server, postgres_uri  # noqa: F401  (fixtures)

from toolrt import Runtime
from toolrt.audit import read_records
from toolrt.errors import StoreError
from toolrt.store import AuditQuery, open_store, session_id
from toolrt.store.migrations import LATEST, MIGRATIONS

Factory = Callable[..., Path]

TOOLS = {
    "echo": """
        id: echo
        description: Prints its text.
        parameters: {type: object, properties: {text: {type: string}}, required: [text]}
        handler: {python: "handlers:echo"}
        permission: {patterns: ["{{ text }}"]}
    """
}
HANDLERS = {"handlers": "def echo(args, ctx):\n    return args['text']\n"}
PERMISSIONS = """
permission:
  "*": allow
  echo: {"*": allow, "no*": deny}
"""
TOKEN = "tok_8f2c1d0e9b7a6f5e4d3c2b1a"


def project(make_project: Factory, monkeypatch: pytest.MonkeyPatch, store: str) -> Runtime:
    monkeypatch.setenv("TOOLRT_STORE", store)
    return Runtime.load(make_project(TOOLS, permissions=PERMISSIONS, modules=HANDLERS))


def test_a_persistent_store_holds_each_record_before_the_result_returns(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = project(make_project, monkeypatch, "sqlite")
    try:
        assert rt.call_sync("echo", {"text": "hello"}, session=TOKEN).output == "hello"
        # Another handle on the file (another process would see the same): the record is already there.
        reader = open_store("sqlite", rt.snapshot.data_dir)
        rows = reader.audit_records()
        assert [(r.session, r.tool, r.status, r.decision) for r in rows] == [(session_id(TOKEN), "echo", "ok", "allow")]
        assert TOKEN not in rows[0].record
        record = json.loads(rows[0].record)
        assert (record["session"], record["arguments"], record["status"]) == (
            session_id(TOKEN),
            {"text": "hello"},
            "ok",
        )
        denied = rt.call_sync("echo", {"text": "nope"}, session=TOKEN)
        assert denied.error is not None and "Denied" in denied.error
        assert [r.decision for r in reader.audit_records(AuditQuery(decision="deny"))] == ["deny"]
        reader.close()
        # The JSON-lines file is still written beside the store.
        lines, _ = read_records(rt.snapshot.data_dir / "audit.jsonl")
        assert [r["status"] for r in lines] == ["ok", "denied"]
    finally:
        rt.close()


def test_a_postgresql_store_holds_the_records_of_calls(
    make_project: Factory,
    monkeypatch: pytest.MonkeyPatch,
    postgres_uri: Callable[[], str],  # noqa: F811
) -> None:
    uri = postgres_uri()
    rt = project(make_project, monkeypatch, uri)
    try:
        assert rt.call_sync("echo", {"text": "to postgres"}, session=TOKEN).output == "to postgres"
        assert rt.store.engine == "postgresql"
        rows = rt.store.audit_records(AuditQuery(session=session_id(TOKEN)))
        assert [json.loads(r.record)["arguments"] for r in rows] == [{"text": "to postgres"}]
    finally:
        rt.close()


def test_a_record_the_store_refuses_fails_the_call_closed_and_the_store_recovers(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = project(make_project, monkeypatch, "sqlite")
    try:
        assert rt.call_sync("echo", {"text": "before"}).output == "before"
        path = rt.snapshot.data_dir / "state.sqlite3"
        with closing(
            sqlite3.connect(path, isolation_level=None)
        ) as other:  # another process drops the table under the server
            other.execute("DROP TABLE toolrt_audit")
        lost = rt.call_sync("echo", {"text": "secret output"})
        assert lost.output == ""
        assert lost.error == (
            "The call's audit record could not be stored, so its result is withheld (the server's log says why)."
        )
        with closing(sqlite3.connect(path, isolation_level=None)) as other:  # the store comes back
            other.execute(MIGRATIONS[0][2]("sqlite")[0])
        assert rt.call_sync("echo", {"text": "after"}).output == "after"
        assert [json.loads(r.record)["arguments"]["text"] for r in rt.store.audit_records()] == ["after"]
    finally:
        rt.close()


def test_the_memory_store_keeps_no_records_and_leaves_the_file_as_the_record(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = project(make_project, monkeypatch, "memory")
    try:
        assert rt.call_sync("echo", {"text": "x"}, session="s").output == "x"
        assert rt.store.persistent is False and rt.store.audit_records() == []
        lines, _ = read_records(rt.snapshot.data_dir / "audit.jsonl")
        assert [(r["session"], r["tool"]) for r in lines] == [(session_id("s"), "echo")]  # never the name
    finally:
        rt.close()


# --- toolrt audit ----------------------------------------------------------------------------------


def _calls(rt: Runtime) -> None:
    assert rt.call_sync("echo", {"text": "one"}, session=TOKEN).output == "one"
    assert rt.call_sync("echo", {"text": "nope"}, session="other").error is not None
    assert rt.call_sync("echo", {"text": "two"}, session="other").output == "two"


@pytest.mark.parametrize("store", ["sqlite", "memory"])
def test_toolrt_audit_filters_the_records_of_the_store_or_the_file(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    rt = project(make_project, monkeypatch, store)
    try:
        _calls(rt)
    finally:
        rt.close()
    root = str(rt.root)
    code, out, err = run("audit", "--root", root, "--json")
    assert (code, err) == (0, "")
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["arguments"]["text"] for r in records] == ["one", "nope", "two"]
    assert records[0]["session"] == session_id(TOKEN)  # the file too: never the token
    for session in (TOKEN, session_id(TOKEN)):
        code, out, _ = run("audit", "--root", root, "--json", "--session", session)
        assert [json.loads(line)["arguments"]["text"] for line in out.splitlines()] == ["one"]
    code, out, _ = run("audit", "--root", root, "--json", "--decision", "deny")
    assert [json.loads(line)["status"] for line in out.splitlines()] == ["denied"]
    code, out, _ = run("audit", "--root", root, "--json", "--tool", "echo", "--since", "10m")
    assert len(out.splitlines()) == 3
    code, out, _ = run("audit", "--root", root, "--since", "2999-01-01")
    assert (code, out) == (0, "")
    code, out, _ = run("audit", "--root", root, "--decision", "allow")
    lines = out.splitlines()
    assert len(lines) == 2 and all(line.endswith("  echo  ok  allow") for line in lines)


def test_toolrt_audit_refuses_a_bad_since_and_an_unknown_decision(tmp_path: Path) -> None:
    code, _, err = run("audit", "--root", str(tmp_path), "--since", "yesterday")
    assert code == 2
    assert (
        err == "toolrt: --since yesterday: not an age (30m, 12h, 7d) nor an ISO 8601 date or time (2026-11-28T09:00Z)\n"
    )
    code, _, err = run("audit", "--root", str(tmp_path), "--decision", "maybe")
    assert code == 2 and "invalid choice: 'maybe'" in err


def test_toolrt_audit_of_a_store_with_a_newer_schema_exits_2_naming_the_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = Path(os.environ["TOOLRT_DATA_DIR"])
    open_store("sqlite", data).close()
    with closing(sqlite3.connect(data / "state.sqlite3", isolation_level=None)) as db:
        db.execute("UPDATE toolrt_schema SET version = ?", (LATEST + 1,))
    monkeypatch.setenv("TOOLRT_STORE", "sqlite")
    code, out, err = run("audit", "--root", str(tmp_path))
    assert (code, out) == (2, "")
    assert err.startswith("toolrt: the store setting (sqlite): sqlite ")
    assert f"holds schema version {LATEST + 1}, newer than this toolrt's ({LATEST})" in err


# --- the setting: host-only, never shown with its password ----------------------------------------------


def test_toolrt_settings_shows_the_store_without_its_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRT_STORE", "postgresql://toolrt:hunter2@db.internal:5432/state")
    monkeypatch.setenv("TOOLRT_RETENTION__AUDIT_DAYS", "90")
    code, out, err = run("settings", "--root", str(tmp_path))
    assert code == 0 and "hunter2" not in out + err
    assert "environment TOOLRT_STORE" in out and "store=postgresql://toolrt:***@db.internal:5432/state" in out
    assert "retention.audit_days=90.0" in out and "retention.session_days=30.0" in out
    code, out, _ = run("settings", "--root", str(tmp_path), "--json")
    shown = json.loads(out)["settings"]["store"]
    assert shown == {"value": "postgresql://toolrt:***@db.internal:5432/state", "origin": "environment TOOLRT_STORE"}
    rt = Runtime.load(tmp_path)
    assert "hunter2" not in repr(rt.settings) and "hunter2" not in repr(rt.settings.values)


def test_a_project_env_file_may_not_choose_the_store(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("TOOLRT_STORE=postgresql://model:pw123@evil.example/db\n")
    code, out, _ = run("settings", "--root", str(tmp_path))
    assert code == 0 and "pw123" not in out
    assert "store=memory" in out
    assert "ignored: .env:1  store=postgresql://model:***@evil.example/db  (store is a host-only setting" in out


# --- toolrt serve over a store that cannot be opened ---------------------------------------------------


def _serve(root: Path, store: str | None, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **extra} | ({"TOOLRT_STORE": store} if store is not None else {})
    return subprocess.run(
        [sys.executable, "-m", "toolrt", "serve", "--root", str(root)],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_keeps_its_state_in_sqlite_unless_the_store_setting_says_otherwise(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = _serve(tmp_path, None, TOOLRT_DATA_DIR=str(data))  # stdio: the closed stdin ends it at once
    assert done.returncode == 0, done.stderr
    assert f"toolrt serve: store: SqliteStore({str(data / 'state.sqlite3')!r})" in done.stderr
    kept = open_store("sqlite", data)
    assert kept.schema_version() == LATEST  # made and migrated by the server
    kept.close()
    done = _serve(tmp_path, "memory", TOOLRT_DATA_DIR=str(tmp_path / "other"))
    assert "toolrt serve: store: MemoryStore()" in done.stderr
    assert not (tmp_path / "other" / "state.sqlite3").exists()


def test_serve_exits_2_when_the_store_is_unreachable_instead_of_waiting(tmp_path: Path) -> None:
    # `_serve`'s 60 s timeout is the hang guard. The 10 s this used to assert counted the interpreter's and
    # the MCP SDK's start, which a loaded machine stretched past it (13.5 s): no time goal in a test.
    done = _serve(tmp_path, "postgresql://toolrt:s3cret-pw@127.0.0.1:1/state")
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("toolrt: the store setting (postgresql://toolrt:***@127.0.0.1:1/state): postgresql store")
    assert "127.0.0.1" in last and "s3cret" not in done.stderr + done.stdout


def test_a_postgresql_server_that_accepts_and_never_answers_is_given_up_on_within_10_seconds(tmp_path: Path) -> None:
    # In this process, so the time is the store's alone (serve's exit adds only the interpreter's start):
    # a listener that takes the connection and says nothing holds libpq until its connect timeout.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(StoreError, match="postgresql store"):
            open_store(f"postgresql://toolrt:pw@127.0.0.1:{port}/state", tmp_path)
        assert time.monotonic() - started < 10


def test_serve_refuses_a_store_with_a_newer_schema_naming_the_version(tmp_path: Path) -> None:
    database = tmp_path / "elsewhere" / "state.db"
    open_store(f"sqlite://{database}", tmp_path).close()
    with closing(sqlite3.connect(database, isolation_level=None)) as db:
        db.execute("UPDATE toolrt_schema SET version = 7")
    done = _serve(tmp_path, f"sqlite://{database}")
    assert done.returncode == 2, done.stderr
    assert f"holds schema version 7, newer than this toolrt's ({LATEST}): it was written by a newer toolrt" in (
        done.stderr
    )


def test_a_session_state_is_written_when_a_call_changed_it_and_read_before_each_call(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = project(make_project, monkeypatch, "sqlite")
    path = rt.snapshot.data_dir / "state.sqlite3"

    def touched() -> list[float]:
        with closing(sqlite3.connect(path, isolation_level=None)) as db:
            return [
                row[0] for row in db.execute("SELECT touched FROM toolrt_sessions WHERE id = ?", (session_id(TOKEN),))
            ]

    try:
        assert rt.call_sync("echo", {"text": "a"}, session=TOKEN).output == "a"
        first = touched()
        assert len(first) == 1
        assert rt.call_sync("echo", {"text": "b"}, session=TOKEN).output == "b"
        assert touched() == first  # nothing changed: not written again
        other = open_store("sqlite", rt.snapshot.data_dir)  # another replica gives the session a todo list
        other.save_session(session_id(TOKEN), {"tools": {"todos": [{"content": "x"}]}, "agent": "plan"}, 1.0)
        other.close()
        assert rt.call_sync("echo", {"text": "c"}, session=TOKEN).output == "c"
        assert rt.sessions.state(TOKEN) == {"todos": [{"content": "x"}]}
        assert touched() != [1.0]  # read before the call, and the session counted as used after it
    finally:
        rt.close()


class Clock:
    """`time.time` of the session keeper, moved by the test (idle times without waiting)."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


def test_a_session_idle_on_every_replica_expires_for_all_of_them(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two Runtimes over one store (two replicas), sessions idle after 100 s: a session used on one stays
    known to the other while it is used, and once nobody used it for 100 s neither honours it."""
    from toolrt.call import persist

    clock = Clock()
    monkeypatch.setattr(persist, "time", clock)
    first = project(make_project, monkeypatch, "sqlite")
    second = Runtime.load(first.root)
    try:
        for rt in (first, second):
            rt.sessions.limit(idle_seconds=100, max_sessions=10)
        assert first.call_sync("echo", {"text": "a"}, session=TOKEN).output == "a"
        assert second.sessions.knows(TOKEN) is True
        for _ in range(3):  # used every 60 s on the first replica, its state unchanged: still known
            clock.now += 60
            assert first.call_sync("echo", {"text": "b"}, session=TOKEN).output == "b"
            assert second.sessions.knows(TOKEN) is True
        clock.now += 101  # nobody used it for longer than the idle time
        assert second.sessions.knows(TOKEN) is False
        assert first.store.load_session(session_id(TOKEN)) is None  # removed from the store, for every replica
        assert first.sessions.knows("never-issued") is False
    finally:
        first.close()
        second.close()
