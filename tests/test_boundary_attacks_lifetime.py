"""Attack on issue 25 items 1 and 3: a sandboxed process outliving the toolrt that started it.

A process's lifetime is journalled from spawn to the `end` record toolrt writes when its last
descendant ended. When toolrt itself is killed (SIGKILL, or SIGHUP when the person closes the terminal:
Python's default action ends it without cleanup), no `end` is written and the span ends at its deadline
(twice the timeout plus a minute after the start). A process that survives toolrt keeps the call's
sandbox and, once past that deadline, changes files that the journal then takes for the person's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

PERMISSIONS = 'permission:\n  "*": allow\n  bash: {"*": allow}\n  webfetch: deny\n'


@pytest.mark.xfail(
    strict=True,
    reason=(
        "the thread launch starts the PID namespace's init with subprocess.Popen and no parent-death signal "
        "(PR_SET_PDEATHSIG follows the parent thread, which ends at once), so the init outlives a SIGKILLed "
        "toolrt, and its writes after the span's deadline (no `end` record) are not attributed"
    ),
)
def test_a_sandboxed_process_ends_when_toolrt_is_killed(tmp_path: Path) -> None:
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
    call = json.dumps({"command": "bash stage.sh", "description": "outlive", "timeout": 20000})
    toolrt = subprocess.Popen(
        [sys.executable, "-m", "toolrt", "call", "bash", call, "--json"],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        give_up = time.monotonic() + 15
        while not started.exists():
            assert toolrt.poll() is None and time.monotonic() < give_up, "the call never started"
            time.sleep(0.01)
    finally:
        toolrt.send_signal(signal.SIGKILL)
        toolrt.wait(timeout=10)
    go.write_text("")
    give_up = time.monotonic() + 2  # the loop polls every 10 ms: a live process answers well within this
    while time.monotonic() < give_up and not survived.exists():
        time.sleep(0.01)
    assert not survived.exists(), "a sandboxed process outlived the toolrt that started it"
