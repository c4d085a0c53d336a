"""Nothing outlives its call: every process a sandboxed call starts ends when the call ends, `setsid`,
`nohup`, double forks and `disown` included (issue 25, item 3). Real bash under both launchers; each
test looks for its own marker processes with a unique argument, and waits on events with timeouts."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from processes import holding

from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.pid_namespace), reason=f"no PID namespaces: {SUPPORT.describe()}"
)
LAUNCHES = ["thread", "forkserver"]
ESCAPES = {
    "setsid": "setsid sleep {t} >/dev/null 2>&1 < /dev/null &",
    "setsid -f": "setsid -f sleep {t} >/dev/null 2>&1 < /dev/null",
    "nohup": "nohup sleep {t} >/dev/null 2>&1 &",
    "double fork": "( ( sleep {t} >/dev/null 2>&1 & ) & )",
    "disown": "sleep {t} >/dev/null 2>&1 & disown",
    "daemon via python": (
        "python3 -c 'import os\nif os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\n"
        'os.execvp("sleep", ["sleep", "{t}"])\' &'
    ),
}


def _gone(marker: str, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not holding(marker):
            return True
        time.sleep(0.01)
    return False


def _run(command: str, root: Path, launch: str, timeout: float = 20) -> ProcessOutcome:
    async def main() -> ProcessOutcome:
        support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
        plan = plan_sandbox(SandboxPolicy(), support, root=root, output_dir=root / "out")
        return await run_process(["bash", "-c", command], cwd=root, env=build_env(), timeout=timeout, sandbox=plan)

    return anyio.run(main)


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("escape", list(ESCAPES))
def test_a_detached_process_ends_with_its_call(tmp_path: Path, launch: str, escape: str) -> None:
    seconds = f"3{uuid.uuid4().int % 10**6:06d}"  # a unique sleep length: the marker in its command line
    line = ESCAPES[escape].format(t=seconds)
    # The call itself waits until the escaped process is running (an event, not a sleep), then returns.
    command = (
        f"{line}\nfor i in $(seq 500); do pgrep -f 'sleep {seconds}' >/dev/null && break; sleep 0.01; done; echo up"
    )
    result = _run(command, tmp_path, launch)
    assert result.exit_code == 0 and "up" in result.output, result.output
    assert _gone(seconds), f"{escape}: {holding(seconds)} outlived the call"


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_timed_out_call_ends_everything_it_started(tmp_path: Path, launch: str) -> None:
    seconds = f"4{uuid.uuid4().int % 10**6:06d}"
    result = _run(f"setsid sleep {seconds} >/dev/null 2>&1 & sleep {seconds}", tmp_path, launch, timeout=0.5)
    assert result.timed_out
    assert _gone(seconds), holding(seconds)


@pytest.mark.parametrize("launch", LAUNCHES)
def test_the_program_is_its_namespaces_init_and_its_exit_status_is_kept(tmp_path: Path, launch: str) -> None:
    result = _run("echo pid=$$; exit 7", tmp_path, launch)
    assert result.output.strip() == "pid=1" and result.exit_code == 7
    # As for every init, a signal it sends itself without a handler is dropped; one it handles is not.
    assert _run("kill -TERM $$; echo still here", tmp_path, launch).output == "still here\n"
    handled = _run("trap 'echo got TERM; exit 3' TERM; kill -TERM $$; echo not reached", tmp_path, launch)
    assert handled.output == "got TERM\n" and handled.exit_code == 3


# The init itself leaves its process group (which toolrt kills whole) and clears the parent-death
# signal it was given: only a kill aimed at it, not at its group or through its parent, ends it.
LEAVING_INIT = (
    "import ctypes, os, sys, time\n"
    "ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"  # PR_SET_PDEATHSIG: none
    "os.setsid()\n"
    "print('left', flush=True)\n"
    "while True: time.sleep(0.01)\n"
)


@pytest.mark.parametrize("launch", LAUNCHES)
def test_an_init_that_leaves_its_group_ends_with_its_call(tmp_path: Path, launch: str) -> None:
    seconds = f"5{uuid.uuid4().int % 10**6:06d}"
    command = f'exec python3 -c "$1" {seconds}'

    async def main() -> ProcessOutcome:
        support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
        plan = plan_sandbox(SandboxPolicy(), support, root=tmp_path, output_dir=tmp_path / "out")
        argv = ["bash", "-c", command, "bash", LEAVING_INIT]
        return await run_process(argv, cwd=tmp_path, env=build_env(), timeout=1, sandbox=plan)

    result = anyio.run(main)
    if launch == "thread":  # the init is a session leader there: setsid fails, and it exits at once
        assert "PermissionError" in result.output and not result.timed_out, result.output
    else:
        assert result.output == "left\n" and result.timed_out, result.output
    assert _gone(seconds), f"{holding(seconds)} outlived the call"
