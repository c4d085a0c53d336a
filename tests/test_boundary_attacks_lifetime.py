"""Attack on issue 25 items 1 and 3: a sandboxed process outliving the toolrt that started it.

A process's lifetime is journalled from spawn to the `end` record toolrt writes when its last
descendant ended. When toolrt itself is killed (SIGKILL, or SIGHUP when the person closes the terminal:
Python's default action ends it without cleanup), no `end` is written and the span ends at its deadline
(twice the timeout plus a minute after the start). A process that survives toolrt keeps the call's
sandbox and, once past that deadline, changes files that the journal then takes for the person's.
Both launchers: the thread launcher (toolrt's `bash` tool, run as the tests' user) and the fork server
(which runs the processes of a user who cannot make namespaces from a thread).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from processes import holding

from toolrt.sandbox.support import detect_support

PERMISSIONS = 'permission:\n  "*": allow\n  bash: {"*": allow}\n  webfetch: deny\n'
FORK_SERVER = """\
import sys
from dataclasses import replace
from pathlib import Path

import anyio

from toolrt.build.snapshot import build_snapshot
from toolrt.execute import build_env, run_process
from toolrt.sandbox.config import call_plan
from toolrt.sandbox.support import detect_support

root = Path.cwd()
snapshot = build_snapshot(root, partial=True)
support = replace(detect_support(), launch="forkserver")
plan = call_plan(snapshot.sandbox, root=root, output_dir=snapshot.truncation_dir, support=support)
assert plan is not None and plan.launch == "forkserver" and plan.pid_namespace
anyio.run(lambda: run_process(["bash", "stage.sh", sys.argv[1]], cwd=root, env=build_env(), timeout=20, sandbox=plan))
"""


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_sandboxed_process_ends_when_toolrt_is_killed(tmp_path: Path, launch: str) -> None:
    if launch == "thread" and detect_support().launch != "thread":
        pytest.skip("this user's processes are started by the fork server")
    root = tmp_path / "proj"
    root.mkdir()
    (root / "permissions.yaml").write_text(PERMISSIONS, encoding="utf-8")
    signals = tmp_path / "signals"
    signals.mkdir()
    started, go, survived = signals / "started", signals / "go", signals / "survived"
    (root / "stage.sh").write_text(
        f"touch {started}\nwhile [ ! -f {go} ]; do sleep 0.01; done\necho alive > {survived}\n", encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    marker = f"outlive-{uuid.uuid4().hex}"
    call = json.dumps({"command": f"bash stage.sh {marker}", "description": "outlive", "timeout": 20000})
    argv = ["-m", "toolrt", "call", "bash", call, "--json"] if launch == "thread" else ["-c", FORK_SERVER, marker]
    toolrt = subprocess.Popen(
        [sys.executable, *argv], cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        give_up = time.monotonic() + 15
        while not started.exists():
            assert toolrt.poll() is None and time.monotonic() < give_up, "the call never started"
            time.sleep(0.01)
    finally:
        toolrt.send_signal(signal.SIGKILL)
        toolrt.wait(timeout=10)
    give_up = time.monotonic() + 2  # SIGKILL through a pidfd: the namespace ends well within this
    while time.monotonic() < give_up and holding(marker):
        time.sleep(0.01)
    go.write_text("")
    assert not holding(marker), "a sandboxed process outlived the toolrt that started it"
    time.sleep(0.05)  # what a live loop (polling every 10 ms) would have written by now
    assert not survived.exists(), "a sandboxed process outlived the toolrt that started it"
