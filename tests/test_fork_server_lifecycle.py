"""The sandbox's fork server outlives neither the Runtimes that use it nor the interpreter.

Each case runs in a fresh interpreter (the suite's own process holds Runtimes other tests left open),
with the launch forced to the fork server, and looks for the server's process in the real /proc.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from measured import unmeasured

from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = [
    pytest.mark.skipif(not SUPPORT.landlock_abi, reason=f"no Landlock on this machine: {SUPPORT.describe()}"),
    pytest.mark.slow,  # an interpreter per case
]

FORCE_FORK_SERVER = """
import dataclasses, json, os, sys

import toolrt.sandbox.config
from toolrt import Runtime
from toolrt.sandbox.support import detect_support

SUPPORT = dataclasses.replace(detect_support(), launch="forkserver")
toolrt.sandbox.config.detect_support = lambda: SUPPORT


def fork_servers():
    \"\"\"Our children in /proc whose command line is the fork server's.\"\"\"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat, open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                ppid, command = int(stat.read().rpartition(")")[2].split()[1]), cmdline.read()
        except OSError:
            continue
        if ppid == os.getpid() and b"import forkserver" in command:
            found.append(int(entry))
    return found


def bash(rt):
    result = rt.call_sync("bash", {"command": "echo served", "description": "d"})
    assert result.error is None and result.output.strip() == "served", result
"""


def _python(script: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", script, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_last_closed_runtime_ends_the_fork_server(tmp_path: Path) -> None:
    script = FORCE_FORK_SERVER + textwrap.dedent(
        """
        first, second = Runtime.load(sys.argv[1]), Runtime.load(sys.argv[1])
        bash(first)
        bash(second)
        running = fork_servers()
        first.close()
        after_first = fork_servers()
        second.close()
        print(json.dumps({
            "running": running,
            "after_first": after_first,
            "after_last": fork_servers(),
            "in_proc": [os.path.exists(f"/proc/{pid}") for pid in running],
        }))
        """
    )
    done = _python(script, tmp_path, str(tmp_path))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    report = json.loads(done.stdout)
    assert len(report["running"]) == 1, report  # one server for both Runtimes
    assert report["after_first"] == report["running"], report  # the second still holds it
    assert report["after_last"] == [] and report["in_proc"] == [False], report  # ended and reaped


def test_a_call_after_the_last_close_starts_a_new_server_and_exit_ends_it(tmp_path: Path) -> None:
    script = FORCE_FORK_SERVER + textwrap.dedent(
        """
        rt = Runtime.load(sys.argv[1])
        bash(rt)
        before = fork_servers()
        rt.close()
        bash(rt)  # calls after close still run
        print(json.dumps({"before": before, "again": fork_servers()}), flush=True)
        # left running: the interpreter's exit ends it, without a warning (-W error would print one)
        """
    )
    done = _python(script, tmp_path, str(tmp_path))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    report = json.loads(done.stdout)
    assert len(report["before"]) == 1 and len(report["again"]) == 1 and report["again"] != report["before"], report
    assert not os.path.exists(f"/proc/{report['again'][0]}")


def test_the_last_holder_letting_go_leaves_a_process_running_on_the_server_alone(tmp_path: Path) -> None:
    """Closing the server kills what it runs, so the last holder's release (a `Runtime.close`, or a
    Runtime collected in the middle of another test) waits for the processes running on it: here one
    started by `run_process` outside any Runtime."""
    script = FORCE_FORK_SERVER + textwrap.dedent(
        """
        import threading, time
        import anyio
        from pathlib import Path
        from toolrt.execute import build_env, run_process
        from toolrt.sandbox.plan import plan_sandbox
        from toolrt.sandbox.policy import SandboxPolicy

        root = Path(sys.argv[1])
        plan = plan_sandbox(SandboxPolicy(), SUPPORT, root=root, output_dir=root / "out")
        waiting = "touch started; while [ ! -e go ]; do sleep 0.01; done; echo survived"
        outcome = []
        thread = threading.Thread(target=lambda: outcome.append(anyio.run(
            lambda: run_process(["bash", "-c", waiting], cwd=root, env=build_env(), timeout=60, sandbox=plan)
        )))
        thread.start()
        give_up = time.monotonic() + 30
        while not (root / "started").exists() and time.monotonic() < give_up:
            time.sleep(0.01)
        server = fork_servers()
        rt = Runtime.load(root)
        bash(rt)  # holds the server
        rt.close()  # the last holder lets go while the process still runs
        kept = fork_servers()
        (root / "go").touch()
        thread.join(60)
        print(json.dumps({"output": outcome[0].output.strip(), "exit": outcome[0].exit_code, "server": server,
                          "kept": kept, "after": fork_servers()}))
        """
    )
    done = _python(script, tmp_path, str(tmp_path))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    report = json.loads(done.stdout)
    assert (report["output"], report["exit"]) == ("survived", 0), report
    assert report["kept"] == report["server"] != [], report  # not closed under the running process
    assert report["after"] == [], report  # closed once the process ended, as the holder asked


def test_nothing_is_printed_after_a_pytest_session_that_used_the_fork_server(tmp_path: Path) -> None:
    """A test leaves a Runtime open after its calls went through the fork server: pytest's session ends,
    then the interpreter's; with every warning an error nothing is printed after pytest's summary."""
    tests = tmp_path / "test_uses_the_fork_server.py"
    tests.write_text(
        FORCE_FORK_SERVER
        + textwrap.dedent(
            """

            def test_a_call_through_the_fork_server(tmp_path):
                rt = Runtime.load(tmp_path)
                bash(rt)
                assert len(fork_servers()) == 1
            """
        ),
        encoding="utf-8",
    )
    # Neither measured nor parallel: what matters is the interpreter's exit after pytest's.
    env = {key: value for key, value in unmeasured(os.environ).items() if not key.startswith("PYTEST_")}
    # Its own temporary tree: pytest's numbered ones are shared with every other run on the machine.
    options = ["-p", "no:cacheprovider", "-p", "no:cov", "-p", "no:xdist", "--basetemp", str(tmp_path / "tmp")]
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "pytest", "-q", *options, "-W", "error", tests.name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().splitlines()[-1].startswith("1 passed"), done.stdout
    assert done.stderr == "", done.stderr  # e.g. "Exception ignored in: <socket.socket ...> ResourceWarning"


def test_a_release_that_runs_while_the_server_starts_does_not_deadlock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting the server allocates, so the collector may run a collected Runtime's finalizer right there,
    in the same thread: its release takes the launcher's lock, which `fork_server` holds."""
    from toolrt.sandbox import launcher

    start = launcher.ForkServer.__init__
    release = launcher.hold_fork_server()

    def starting(self: launcher.ForkServer) -> None:
        release()  # what a finalizer collected at this moment does
        start(self)

    monkeypatch.setattr(launcher.ForkServer, "__init__", starting)
    launcher.close_fork_server()
    started: list[launcher.ForkServer] = []
    thread = threading.Thread(target=lambda: started.append(launcher.fork_server()), daemon=True)
    thread.start()
    thread.join(20)  # a hang guard
    assert not thread.is_alive(), "fork_server() deadlocked on a release from its own thread"
    assert started[0].alive()
    launcher.close_fork_server()
