"""No secrets through /proc (issue 25, item 5 and "no secrets"): a sandboxed process lists only its own
processes, and reads no other process's environment or command line, toolrt's and the fork server's
included. Real bash under both launchers against the real kernel, with a real host process whose
command line holds a secret.

Before: the sandbox showed the host's /proc (every process's command line: another agent's
`--token=…`), and under the fork server the program's stand-in (a fork of the server that never execs,
in the program's Landlock domain) gave away toolrt's whole environment through `/proc/PID/environ`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox.launcher import close_fork_server
from toolrt.sandbox.plan import SandboxPlan, plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.mount_namespace and SUPPORT.pid_namespace),
    reason=f"no Landlock, mount or PID namespace: {SUPPORT.describe()}",
)
LAUNCHES = ["thread", "forkserver"]
SECRET = "b25-token-5f0c1a"
# Every process /proc lists, with its command line, and whether its environment could be read.
LIST = r"""for p in /proc/[0-9]*; do
  if IFS= read -r -d '' first < "$p/cmdline" 2>/dev/null; then echo "listed ${p#/proc/} $first"; fi
done
echo "host: $(cat /proc/$1/cmdline 2>&1 | tr '\0' ' ')"
echo "toolrt: $(cat /proc/$2/environ 2>&1 | tr '\0' ' ' | head -c 60)"
"""
# The program's host pid (through /proc/self), then the environment of the processes started just
# before it: the fork server's stand-in, the thread launcher's thread.
NEIGHBOURS = r"""cd -P /proc/self; me=${PWD#/proc/}
for d in 1 2 3 4 5 6; do
  if tr '\0' '\n' < /proc/$((me-d))/environ 2>/dev/null | grep -q "^$1="; then echo "read $((me-d))"; fi
done
echo checked
"""

# Every task whose host pid comes just before the program's (started before it, so outside the call: the
# thread launcher's thread of toolrt is one) whose environment it could read, and whose process that is.
BEFORE_ME = r"""cd -P /proc/self; me=${PWD#/proc/}
for t in $(seq $((me-1)) -1 $((me-8))); do
  if IFS= read -r -d '' first 2>/dev/null < /proc/$t/environ; then
    while read -r key value; do
      [ "$key" = Tgid: ] && echo "read task $t of process $value: $first"
    done < /proc/$t/status
  fi
done
echo checked
"""


@pytest.fixture
def host_process() -> Iterator[int]:
    """A host process of the same user with a secret on its command line (a client's `--token=`)."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", f"--token={SECRET}"], stdin=subprocess.PIPE
    )
    yield process.pid
    assert process.stdin is not None
    process.stdin.close()
    process.wait(20)


def _plan(root: Path, launch: str) -> SandboxPlan:
    support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
    plan = plan_sandbox(SandboxPolicy(network=False), support, root=root, output_dir=root / "out")
    assert plan is not None
    return plan


def _bash(script: str, root: Path, plan: SandboxPlan, *args: str) -> ProcessOutcome:
    async def main() -> ProcessOutcome:
        argv = ["bash", "-c", script, "bash", *args]
        return await run_process(argv, cwd=root, env=build_env(), timeout=20, sandbox=plan)

    return anyio.run(main)


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_sandboxed_process_lists_only_its_own_processes(tmp_path: Path, host_process: int, launch: str) -> None:
    plan = _plan(tmp_path, launch)
    lines = _bash(LIST, tmp_path, plan, str(host_process), str(os.getpid())).output.splitlines()
    listed = [line for line in lines if line.startswith("listed ")]
    assert listed and all(line.endswith(" bash") for line in listed), lines  # the script and its subshells
    assert SECRET not in "\n".join(lines), lines
    assert lines[-2] == f"host: cat: /proc/{host_process}/cmdline: No such file or directory", lines
    assert lines[-1] == f"toolrt: cat: /proc/{os.getpid()}/environ: No such file or directory", lines


@pytest.mark.parametrize("launch", LAUNCHES)
def test_no_process_started_before_the_program_gives_away_toolrts_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launch: str
) -> None:
    """With and without the process's own /proc (the fork server in a user namespace keeps the host's)."""
    monkeypatch.setenv("TOOLRT_B25_SECRET", SECRET)  # build_env leaves it out of the program's environment
    if launch == "forkserver":  # a server started now holds it, as one started with toolrt would
        close_fork_server()
    plan = _plan(tmp_path, launch)
    for each in (plan, replace(plan, minimal_dev=False)):
        for _ in range(5):
            output = _bash(NEIGHBOURS, tmp_path, each, "TOOLRT_B25_SECRET").output
            assert output.splitlines()[-1] == "checked" and "read " not in output, output


@pytest.mark.parametrize("launch", LAUNCHES)
def test_another_calls_process_is_not_listed(tmp_path: Path, launch: str) -> None:
    """Each process enters a Landlock domain of its own, so a call running beside this one (the same
    rules, the same mount namespace's procfs) is as invisible as a host process."""
    plan = _plan(tmp_path, launch)
    ready = tmp_path / "ready"
    other = f'touch {ready}; (exec -a "worker --token={SECRET}" sleep 20)'

    async def main() -> ProcessOutcome:
        async with anyio.create_task_group() as group:
            group.start_soon(
                lambda: run_process(["bash", "-c", other], cwd=tmp_path, env=build_env(), timeout=30, sandbox=plan)
            )
            with anyio.fail_after(20):
                while not ready.exists():  # the other call has started
                    await anyio.sleep(0.01)
            argv = ["bash", "-c", LIST, "bash", "1", "1"]
            mine = await run_process(argv, cwd=tmp_path, env=build_env(), timeout=20, sandbox=plan)
            group.cancel_scope.cancel()
        return mine

    output = anyio.run(main).output
    listed = [line for line in output.splitlines() if line.startswith("listed ")]
    assert listed and all(line.endswith(" bash") for line in listed), output
    assert SECRET not in output, output


def test_the_launcher_thread_left_beside_the_program_gives_away_nothing(tmp_path: Path) -> None:
    """The thread launcher's thread is a thread of toolrt in the program's Landlock domain, alive until it
    has handed the process over; while toolrt is busy (another call's output, a reload) it waits for the
    GIL after the program started. Before: its `/proc/TID/environ` (toolrt's environment as it started:
    API keys) was read in 13 of 20 calls, and its `mem` by a faster program."""
    plan = _plan(tmp_path, "thread")
    busy = threading.Event()

    def hold_the_gil() -> None:
        while not busy.is_set():
            sum(range(1000))

    holder = threading.Thread(target=hold_the_gil, daemon=True)
    holder.start()
    try:
        outputs = [_bash(BEFORE_ME, tmp_path, plan).output for _ in range(20)]
    finally:
        busy.set()
        holder.join(10)
    assert all(out.splitlines()[-1] == "checked" for out in outputs), outputs
    assert not [out for out in outputs if "read task" in out], outputs


UNPRIVILEGED_THREAD = """
import ctypes, threading
from toolrt.sandbox import kernel
libc = ctypes.CDLL(None, use_errno=True)
def body():
    kernel.drop_capabilities()  # a thread with nothing left to keep, as an unprivileged toolrt's
    print("dumpable before", libc.prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE
    kernel.drop_capabilities(keep_permitted=True)
    print("dumpable after", libc.prctl(3, 0, 0, 0, 0))
thread = threading.Thread(target=body)
thread.start()
thread.join()
"""


def test_a_launcher_thread_with_no_capability_to_keep_makes_toolrt_undumpable() -> None:
    """The thread launcher's fallback without privilege: the thread has no permitted capability that would
    keep the program out of its /proc entry, so toolrt as a whole becomes untraceable instead."""
    done = subprocess.run([sys.executable, "-c", UNPRIVILEGED_THREAD], capture_output=True, text=True, timeout=30)
    assert done.stdout.splitlines() == ["dumpable before 1", "dumpable after 0"], done.stderr
