"""Three real `toolrt serve` replicas over one real PostgreSQL store, shared by this module's tests (one
start): a retried call never runs twice (the replica running it killed mid-call, a finished call's retry
on another replica), each replica's `GET /healthz` and its report in the store (`toolrt status` names
replicas serving different snapshots, `toolrt serve --health` probes one), the store lost while serving
(calls fail closed, the servers stay up and recover), and requests that did not come from a local client
directly are refused without authentication."""

from __future__ import annotations

import http.client
import itertools
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import pytest
from cli_helpers import run
from conftest import write_project
from pg_server import postgres_server, postgres_uri  # noqa: F401  (fixtures)
from test_serve_input_required import ECHO, _approve, rpc
from test_store_sessions import _start, _stop, _wait_listening

from toolrt.faces.serve_idempotency import IDEMPOTENCY_META_KEY
from toolrt.faces.serve_sessions import SESSION_META_KEY

# Three servers start (each importing the MCP SDK) once per test worker; under `-n` every test of this
# module runs on one worker (tests/conftest.py's `_ONE_WORKER`), so once per run.
pytestmark = pytest.mark.slow

HANDLERS = """\
import time
from pathlib import Path


def count(args, ctx):
    marker = Path(args["marker"])
    with marker.open("a") as runs:
        runs.write("run\\n")
    return f"{args['word']} {len(marker.read_text().splitlines())}"


def slow(args, ctx):
    with Path(args["marker"]).open("a") as runs:
        runs.write("run\\n")
    time.sleep(120)  # killed long before
    return "finished"
"""
TOOL = """\
id: {name}
description: Appends a line to a marker file ({name}).
parameters: {{type: object, properties: {{marker: {{type: string}}, word: {{type: string}}}}, required: [marker]}}
handler: {{python: "handlers:{name}"}}
"""


@dataclass
class Replicas:
    """The served replicas: (URL, process) each; `start(i)` brings a killed one back."""

    roots: list[Path]
    data: Path
    store: str
    application_name: str
    """The name the replicas' connections give the server (in its pg_stat_activity)."""
    served: list[tuple[str, subprocess.Popen[bytes], BinaryIO]] = field(default_factory=list)

    def start(self, *indices: int) -> None:
        """Start the replicas `indices` together (their imports overlap), then wait until each listens."""
        starting = [(index, *_start(self.roots[index], self.data, self.store)) for index in indices]
        for index, port, process, log in starting:
            entry = (f"http://127.0.0.1:{port}/mcp", process, log)
            if index < len(self.served):
                self.served[index] = entry
            else:
                self.served.append(entry)
        for _, port, process, _ in starting:
            _wait_listening(port, process, self.data / f"serve-{port}.log")

    def url(self, index: int) -> str:
        return self.served[index][0]

    def kill(self, index: int) -> None:
        _, process, log = self.served[index]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        log.close()


@pytest.fixture(scope="session")  # not torn down when a worker runs another module's tests in between
def replicas(tmp_path_factory: pytest.TempPathFactory, postgres_server: Any) -> Iterator[Replicas]:  # noqa: F811
    """Replicas 0 and 1 serve one project; replica 2 a copy of it at another path (another snapshot)."""
    import psycopg

    base = tmp_path_factory.mktemp("replicas")
    tools = {name: TOOL.format(name=name) for name in ("count", "slow")} | {"guarded": ECHO}
    permissions = 'permission:\n  "*": allow\n  guarded: ask\n'
    settings = "builtin_tools: [read, edit]\n"
    root = write_project(base / "project", tools, permissions, settings, {"handlers": HANDLERS}, builtin_tools=True)
    copy = base / "copy"
    shutil.copytree(root, copy)
    schema = f"replicas{os.getpid()}"
    with psycopg.connect(postgres_server.get_uri(), autocommit=True) as connection:
        connection.execute(f'CREATE SCHEMA "{schema}"')
    # Named, so that a test can end these replicas' connections and no other worker's.
    store = f"{postgres_server.get_uri()}&options=-csearch_path%3D{schema}&application_name={schema}"
    data = base / "data"
    data.mkdir()
    served = Replicas([root, root, copy], data, store, schema)
    try:
        served.start(0, 1, 2)
        yield served
    finally:
        for _, process, log in served.served:
            _stop(process, log)


def call(
    url: str,
    name: str,
    arguments: dict[str, Any],
    *,
    inputResponses: Any = None,
    requestState: Any = None,
    **meta: Any,
) -> tuple[int, dict[str, Any]]:
    """One 2026-07-28 `tools/call`; `meta`: its `_meta` members; the retry of an ask its answers and state."""
    extra = {"inputResponses": inputResponses, "requestState": requestState} if requestState is not None else {}

    async def one() -> tuple[int, dict[str, Any]]:
        with anyio.fail_after(30):
            return await rpc(url, name, arguments, meta=meta, **extra)

    return anyio.run(one)


def text(reply: dict[str, Any]) -> str:
    return str(reply["result"]["content"][0]["text"])


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20  # a hang guard
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


# First of the module's tests: a replica killed by a later test stays listed in the store (and by
# `toolrt status`) until its report goes stale, which this one would wait out.
def test_replicas_report_their_snapshot_in_health_and_store_and_status_names_those_that_differ(
    replicas: Replicas, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = [_health(replicas.url(index)) for index in range(3)]
    assert [status for status, _ in states] == [200, 200, 200]
    assert all(state["ready"] is True and state["store"] == "postgresql" for _, state in states)
    digest = states[0][1]["digest"]
    assert all(state["digest"] == digest for _, state in states)  # one config, whatever its path and port
    monkeypatch.setenv("TOOLRT_STORE", replicas.store)
    wait_for(lambda: len(_status()["replicas"]) == 3, "the replicas never all reported")
    assert {r["id"]: r["digest"] for r in _status()["replicas"]} == {s["replica"]: digest for _, s in states}
    code, out, err = run("status", "--root", str(replicas.roots[0]))
    assert (code, out.count(f"ready  snapshot {digest[:12]}"), err) == (0, 3, "")

    tool = replicas.roots[2] / "tools.d" / "count.yaml"
    kept = tool.read_text()
    tool.write_text(kept.replace("Appends a line", "Adds a line"))  # replica 2's copy of the config changes
    try:
        wait_for(lambda: _health(replicas.url(2))[1]["digest"] != digest, "replica 2 never reloaded")
        changed = _health(replicas.url(2))[1]["digest"]
        wait_for(lambda: changed in {r["digest"] for r in _status()["replicas"]}, "replica 2 never reported")
        code, out, _ = run("status", "--root", str(replicas.roots[0]))
        assert code == 1
        assert f"replicas serve 2 different snapshots: {', '.join(sorted([digest[:12], changed[:12]]))}" in out

        tool.write_text("id: count\nparameters: [not, a, schema\n")  # broken: the last good tools go on
        wait_for(lambda: _health(replicas.url(2))[0] == 503, "the broken config never made the replica unready")
        status, state = _health(replicas.url(2))
        assert state["ready"] is False and any("count.yaml" in problem for problem in state["problems"]), state
        port = replicas.url(2).rsplit(":", 1)[1].split("/")[0]
        code, out, _ = run("serve", "--health", "--port", port, "--root", str(replicas.roots[2]))
        assert code == 1 and json.loads(out)["ready"] is False
    finally:
        tool.write_text(kept)
    wait_for(
        lambda: (
            _health(replicas.url(2))[1] == {**states[2][1], "generation": _health(replicas.url(2))[1]["generation"]}
        ),
        "never ready again",
    )
    code, out, _ = run("serve", "--health", "--port", port, "--root", str(replicas.roots[2]))
    assert code == 0 and json.loads(out)["ready"] is True and json.loads(out)["digest"] == digest


def test_replicas_over_one_store_serve_one_session_round_robin_when_the_one_that_asked_dies(
    replicas: Replicas, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("alpha\n", encoding="utf-8")
    status, asked = call(replicas.url(0), "guarded", {"word": "hi"}, **{SESSION_META_KEY: "new"})
    assert status == 200 and asked["result"]["resultType"] == "input_required", asked
    replicas.kill(0)  # the replica that asked dies before the answer comes
    try:
        turn = itertools.cycle([replicas.url(1), replicas.url(2)])  # each request to the next, no stickiness
        token, state = asked["result"]["_meta"][SESSION_META_KEY], asked["result"]["requestState"]
        session = {SESSION_META_KEY: token}
        always = _approve(asked, "always")
        status, done = call(next(turn), "guarded", {"word": "hi"}, inputResponses=always, requestState=state, **session)
        assert (status, text(done)) == (200, "hi\n"), done  # a living replica opened the state and resumed
        status, replayed = call(
            next(turn), "guarded", {"word": "hi"}, inputResponses=always, requestState=state, **session
        )
        assert status == 400 and "already used" in replayed["error"]["message"], replayed
        status, approved = call(next(turn), "guarded", {"word": "again"}, **session)  # approved elsewhere
        assert (status, text(approved)) == (200, "again\n"), approved
        status, read = call(next(turn), "read", {"filePath": str(notes)}, **session)
        assert status == 200 and read["result"].get("isError") is not True, read
        args = {"filePath": str(notes), "oldString": "alpha", "newString": "beta"}
        status, edited = call(next(turn), "edit", args, **session)  # the read stamp another replica made
        assert status == 200 and edited["result"].get("isError") is not True, edited
        status, tokenless = call(next(turn), "read", {"filePath": str(notes)})
        issued = tokenless["result"]["_meta"][SESSION_META_KEY]  # a new session, not a per-replica default
        assert isinstance(issued, str) and issued != token
        args = {**args, "oldString": "beta", "newString": "gamma"}
        status, unread = call(next(turn), "edit", args, **{SESSION_META_KEY: "new"})
        assert unread["result"]["isError"] is True and "read" in text(unread).lower()
        assert notes.read_text(encoding="utf-8") == "beta\n"
    finally:
        replicas.start(0)


def test_a_retried_call_never_runs_twice_even_when_its_replica_dies_mid_call(
    replicas: Replicas, tmp_path: Path
) -> None:
    marker = tmp_path / "slow.runs"
    status, opened = call(
        replicas.url(1), "count", {"marker": str(tmp_path / "open"), "word": "x"}, **{SESSION_META_KEY: "new"}
    )
    token = opened["result"]["_meta"][SESSION_META_KEY]
    meta = {SESSION_META_KEY: token, IDEMPOTENCY_META_KEY: "call-1"}
    mid_call = threading.Thread(target=_post_ignoring_the_end, args=(replicas.url(0), "slow", str(marker), meta))
    mid_call.start()
    try:
        wait_for(lambda: lines(marker) == 1, "the slow call never started")
        replicas.kill(0)  # mid-call: the call ran (part of the way) and has no result
    finally:
        mid_call.join(timeout=30)
    try:
        for index in (1, 2):  # the client retries on the other replicas
            status, retried = call(replicas.url(index), "slow", {"marker": str(marker)}, **meta)
            assert status == 200 and "result" in retried and retried["result"]["isError"] is True, retried
            assert "may have run" in text(retried) and "not run again" in text(retried)
        assert lines(marker) == 1

        counted = tmp_path / "count.runs"
        finished = {SESSION_META_KEY: token, IDEMPOTENCY_META_KEY: "call-2"}
        status, first = call(replicas.url(1), "count", {"marker": str(counted), "word": "once"}, **finished)
        assert (status, text(first)) == (200, "once 1"), first
        status, again = call(replicas.url(2), "count", {"marker": str(counted), "word": "once"}, **finished)
        assert again["result"] == first["result"]  # the finished result, as it was returned
        assert lines(counted) == 1
        status, other = call(replicas.url(2), "count", {"marker": str(counted), "word": "twice"}, **finished)
        assert other["result"]["isError"] is True and "another call" in text(other), other
        status, fresh = call(
            replicas.url(2),
            "count",
            {"marker": str(counted), "word": "new"},
            **{SESSION_META_KEY: token, IDEMPOTENCY_META_KEY: "call-3"},
        )
        assert text(fresh) == "new 2"
        status, bad = call(replicas.url(2), "count", {"marker": str(counted)}, **{IDEMPOTENCY_META_KEY: ""})
        assert "must be a string of 1 to 200 characters" in bad["error"]["message"], bad
    finally:
        replicas.start(0)


def _post_ignoring_the_end(url: str, name: str, marker: str, meta: dict[str, Any]) -> None:
    """A call whose server is killed while it runs: the connection ends without an answer."""
    try:
        call(url, name, {"marker": marker}, **meta)
    except (OSError, http.client.HTTPException, urllib.error.URLError, TimeoutError):
        pass


def _health(url: str) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url.replace("/mcp", "/healthz"))
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _status() -> dict[str, Any]:
    code, out, err = run("status", "--json", "--root", ".")
    assert code in (0, 1), err
    parsed: dict[str, Any] = json.loads(out)
    return parsed


def test_the_store_lost_while_serving_fails_calls_closed_and_the_replicas_recover(
    replicas: Replicas,
    postgres_server: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    import psycopg

    marker = tmp_path / "runs"
    status, opened = call(replicas.url(0), "count", {"marker": str(marker), "word": "a"}, **{SESSION_META_KEY: "new"})
    token = opened["result"]["_meta"][SESSION_META_KEY]
    with psycopg.connect(postgres_server.get_uri(), autocommit=True) as admin:  # every replica's connection ends
        ended = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
            " AND backend_type = 'client backend' AND application_name = %s",
            (replicas.application_name,),
        ).fetchall()
    assert len(ended) >= 3, ended  # at least one connection of each replica
    answers = []
    for attempt in range(12):  # each replica's pool drops its dead connections as it meets them
        status, reply = call(
            replicas.url(attempt % 3), "count", {"marker": str(marker), "word": "b"}, **{SESSION_META_KEY: token}
        )
        answers.append(reply)
        if "result" in reply and reply["result"].get("isError") is not True:
            break
    failed, recovered = answers[:-1], answers[-1]
    assert failed, "no call met the lost store"
    assert text(recovered) == "b 2" and lines(marker) == 2, answers  # no failed call ran
    for reply in failed:  # fail closed: an error, and the call did not run
        message = reply["error"]["message"] if "error" in reply else text(reply)
        assert "store" in message, reply
    assert all(process.poll() is None for _, process, _ in replicas.served)  # every server stayed up


def test_without_authentication_a_proxied_or_foreign_host_request_is_refused(replicas: Replicas) -> None:
    url = replicas.url(1)
    for headers, why in (
        ({"X-Forwarded-For": "203.0.113.9"}, "X-Forwarded-For header"),
        ({"Forwarded": "for=203.0.113.9"}, "Forwarded header"),
        ({"Host": "tools.example.com"}, "Host (tools.example.com) is not a loopback name"),
    ):
        request = urllib.request.Request(url.replace("/mcp", "/healthz"), headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403
        assert why in json.loads(refused.value.read())["error"]
    assert _health(url)[0] == 200  # a local client directly: served


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1:8765", True),
        ("127.8.9.10", True),
        ("localhost:80", True),
        ("LOCALHOST", True),
        ("[::1]:8765", True),
        ("::1", True),
        ("app.localhost", True),
        ("tools.example.com", False),
        ("10.0.0.5:8765", False),
        ("[2001:db8::1]:443", False),
        ("127.0.0.1.nip.io", False),  # a public name that resolves to loopback: still a name someone else gave
        ("", False),
    ],
)
def test_only_loopback_names_and_addresses_count_as_a_local_host(host: str, local: bool) -> None:
    from toolrt.faces.serve_loopback import is_loopback_host

    assert is_loopback_host(host) is local
