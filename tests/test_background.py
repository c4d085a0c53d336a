"""`background: true` (issue 25, item 3): a tool that must leave a server running declares it, the host
approves it, its processes are listed and end when their session or the Runtime closes, or when their
owner ends them. Unapproved, the declaration is a located warning and the process ends with its call.
Real bash in the real sandbox; processes are found by a unique marker in their command line."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from processes import holding

from toolrt import Runtime, ToolFailure
from toolrt.attribution import journal_for
from toolrt.execute import background, build_env
from toolrt.execute.confinement import confinement
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import Launch, detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.pid_namespace), reason=f"no PID namespaces: {SUPPORT.describe()}"
)
PERMISSIONS = 'permission:\n  "*": allow\n  bash: {"*": allow}\n'
SERVER = """\
id: serve
description: Start the development server.
parameters:
  type: object
  properties:
    marker: {type: string}
  required: [marker]
handler:
  shell: |
    setsid sleep 3{{ marker }} >/dev/null 2>&1 < /dev/null &
    echo "ready {{ marker }}"
    exec sleep 2{{ marker }}
  background: true
"""


def _project(root: Path) -> Path:
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "serve.yaml").write_text(SERVER, encoding="utf-8")
    (root / "permissions.yaml").write_text(PERMISSIONS, encoding="utf-8")
    return root


def _marker() -> str:
    return str(uuid.uuid4().int % 10**8).rjust(8, "1")


def _wait(condition: object, timeout: float = 10.0) -> bool:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def _gone(marker: str) -> bool:
    """Every process of `marker` ended (within 5 s: a killed namespace's last members take a moment to
    leave /proc after the process toolrt waits for, the fork server's stand-in, was reaped)."""
    return _wait(lambda: not any(_running(marker)), 5.0)


def _running(marker: str) -> tuple[list[int], list[int]]:
    """(the server's host pids, its escaped child's)."""
    return holding(f"sleep\x002{marker}"), holding(f"sleep\x003{marker}")


def test_an_approved_server_outlives_its_call_is_listed_and_ends_with_the_runtime(tmp_path: Path) -> None:
    rt = Runtime.load(_project(tmp_path), settings={"background": ["serve"]})
    marker = _marker()
    try:
        result = rt.call_sync("serve", {"marker": marker}, session="s1")
        assert result.error is None, result.error
        assert result.output.startswith("Started in the background (pid "), result.output
        assert result.metadata["background"] is True
        assert _wait(lambda: all(_running(marker))), "the server and its child did not start"
        [listed] = rt.background_processes()
        assert (listed.tool, listed.session, listed.pid) == ("serve", "s1", result.metadata["pid"])
        assert listed.output == Path(result.metadata["outputPath"])
        assert _wait(lambda: listed.output.read_text() == f"ready {marker}\n")
        assert rt.background_processes(session="other") == ()
    finally:
        rt.close()
    assert _gone(marker), "a background process outlived its Runtime"
    assert rt.background_processes() == ()
    after = rt.call_sync("serve", {"marker": _marker()}, session="s1")
    assert after.error is not None and "This Runtime is closed: it starts no background process" in after.error


def test_the_owner_of_a_call_ends_its_processes_and_a_released_session_ends_its_own(tmp_path: Path) -> None:
    with Runtime.load(_project(tmp_path), settings={"background": ["serve"]}) as rt:
        first, second, third = _marker(), _marker(), _marker()
        ended = rt.call_sync("serve", {"marker": first}, session="a", call_id="call-1")
        rt.call_sync("serve", {"marker": second}, session="a", call_id="call-2")
        rt.call_sync("serve", {"marker": third}, session="b", call_id="call-3")
        assert _wait(lambda: all(all(_running(m)) for m in (first, second, third)))
        assert [p.call_id for p in rt.background_processes(session="a")] == ["call-1", "call-2"]

        [gone] = rt.end_processes(call_id="call-1")
        assert gone.pid == ended.metadata["pid"] and _gone(first)
        assert all(_running(second)) and all(_running(third))

        rt.sessions.release("a")
        assert _gone(second), "a released session's server kept running"
        assert all(_running(third))
        assert [p.call_id for p in rt.background_processes()] == ["call-3"]


def test_without_the_hosts_approval_it_is_a_located_warning_and_the_process_ends_with_its_call(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    server = root / "tools.d" / "serve.yaml"
    server.write_text(SERVER.replace("exec sleep 2{{ marker }}", "echo done"), encoding="utf-8")
    (root / ".env").write_text('TOOLRT_BACKGROUND=["serve"]\n', encoding="utf-8")  # a project cannot approve it
    with Runtime.load(root) as rt:
        warnings = [str(w) for w in rt.snapshot.warnings]
        [located] = [w for w in warnings if "background: true needs the host's approval" in w]
        assert located.startswith("tools.d/serve.yaml:13:3: background: true needs the host's approval"), located
        assert any("background is a host-only setting" in w for w in warnings), warnings
        marker = _marker()
        result = rt.call_sync("serve", {"marker": marker})
        assert result.output == f"ready {marker}\ndone\n"  # it ran as every call does, to its end
        assert _gone(marker), "an unapproved background process outlived its call"
        assert rt.background_processes() == ()


def _records(path: Path, span_call: str) -> list[dict[str, object]]:
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    spans = {r["id"] for r in records if r["kind"] == "span" and r["call"] == span_call}
    return [r for r in records if r.get("id") in spans]


def test_its_journalled_lifetime_stays_open_while_it_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A span whose end is not written ends at its deadline; a background process's is moved on while it
    runs (here every 0.1 s), so what it writes an hour later is still the model's."""
    monkeypatch.setattr(background, "RENEW_SECONDS", 0.2)
    with Runtime.load(_project(tmp_path), settings={"background": ["serve"]}) as rt:
        marker = _marker()
        rt.call_sync("serve", {"marker": marker}, call_id="journalled")
        journal = rt.snapshot.data_dir / "attribution" / "journal.jsonl"
        assert _wait(lambda: sum(r["kind"] == "extend" for r in _records(journal, "journalled")) >= 2)
        [span] = [r for r in _records(journal, "journalled") if r["kind"] == "span"]
        extended = [r for r in _records(journal, "journalled") if r["kind"] == "extend"]
        assert extended[-1]["deadline"] > span["deadline"]  # type: ignore[operator]
        assert not [r for r in _records(journal, "journalled") if r["kind"] == "end"]
        rt.end_processes(call_id="journalled")
        [end] = [r for r in _records(journal, "journalled") if r["kind"] == "end"]
        assert _gone(marker)


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_under_either_launcher_a_background_process_runs_until_ended(tmp_path: Path, launch: Launch) -> None:
    marker = _marker()
    plan = plan_sandbox(SandboxPolicy(), replace(SUPPORT, launch=launch), root=tmp_path, output_dir=tmp_path / "o")
    processes = background.BackgroundProcesses()
    script = f"setsid sleep 3{marker} >/dev/null 2>&1 </dev/null &\necho ready\nexec sleep 2{marker}"

    async def start() -> background.BackgroundProcess:
        return await processes.start(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=build_env(),
            sandbox=plan,
            output=tmp_path / "o" / "log",
            journal=journal_for(tmp_path / "data"),
            approved=(),
            confined=confinement(plan),
            tool="t",
            call_id="c",
            session="s",
            command="script",
        )

    started = anyio.run(start)
    assert _wait(lambda: all(_running(marker))) and processes.running() == (started,)
    assert _wait(lambda: started.output.read_text() == "ready\n")
    assert processes.end(pid=started.pid) == (started,)
    assert processes.running() == () and _gone(marker)
    processes.close()
    with pytest.raises(ToolFailure, match="This Runtime is closed: it starts no background process"):
        anyio.run(start)
