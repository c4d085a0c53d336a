"""Terminals of one call out of another's reach (issue 25, "/dev leftovers"): each sandboxed process gets a
devpts instance of its own, and Landlock's rights on it, so a program of one call can neither list, read
nor write the terminal a program of another call opened. Real python and bash under both launchers
against the real kernel: two concurrent calls, one holding a pseudo-terminal with a secret typed into it.

Before: every process started from one kept mount namespace (the same protected paths, whatever its call's
network or mode) shared that namespace's devpts: `ls /dev/pts` listed the other call's terminal, and
`head` read the line typed into it.
"""

from __future__ import annotations

import os
import select
import time
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from processes import spares_made_ahead

from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox import kernel, namespaces
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.mount_namespace), reason=f"no mount namespace: {SUPPORT.describe()}"
)
SECRET = "hunter2-typed"
# Opens a terminal, types the secret into it (waiting there to be read), says which terminal it is, and
# holds it until told to stop; then shows what the other call may have written to its screen.
HOLD = f"""
import os, select, sys
controller, device = os.openpty()
os.write(controller, b"{SECRET}\\n")
with open(sys.argv[1], "w") as ready:
    ready.write(os.ttyname(device))
with open(sys.argv[2]) as done:
    done.read(1)
screen = b""
while select.select([controller], [], [], 0)[0]:
    screen += os.read(controller, 1024)
print("holder", os.ttyname(device), "screen", screen)
"""
# Lists the terminals it can see and tries to read and write each one.
STEAL = """ls /dev/pts
for f in /dev/pts/[0-9]*; do
  timeout 2 head -c 20 "$f" && echo " <- read $f"
  printf 'SPOOFED' > "$f" && echo "wrote $f"
done
python3 -c 'import os; m, s = os.openpty(); os.write(s, b"own\\n"); print("own", os.ttyname(s), os.read(m, 9))'
"""


def _wait_readable(fd: int) -> None:
    if not select.select([fd], [], [], 20)[0]:
        raise TimeoutError("the holding call never said which terminal it holds")


@pytest.mark.parametrize("covered", [False, True], ids=["kept", "covered"])
@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_call_cannot_reach_the_terminal_another_call_holds(tmp_path: Path, launch: str, covered: bool) -> None:
    support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
    # `covered`: an absent protected name, so each process gets a covered namespace copied from a kept base.
    root = tmp_path / "project"
    root.mkdir()
    protected = (root / "tools.d",) if covered else ()
    plan = plan_sandbox(SandboxPolicy(protected=protected), support, root=root, output_dir=root / "o")
    # The other call runs under stricter rules (no network; read-only where no name is covered), whose
    # processes were nonetheless started from the same kept namespace as the holder's.
    strict = SandboxPolicy(protected=protected, network=False, mode="workspace-write" if covered else "read-only")
    strict_plan = plan_sandbox(strict, support, root=root, output_dir=root / "o")
    assert plan is not None and strict_plan is not None
    assert bool(plan.covered) == covered and bool(strict_plan.covered) == covered
    # Outside the root: a FIFO seen through the covered root's overlay is another pipe than the real one.
    ready, done = tmp_path / "ready", tmp_path / "done"
    os.mkfifo(ready)
    os.mkfifo(done)
    ready_fd = os.open(ready, os.O_RDONLY | os.O_NONBLOCK)
    done_fd = os.open(done, os.O_RDWR)  # the holder stops at its first byte, or at EOF if the test fails
    outcomes: dict[str, ProcessOutcome] = {}
    held: list[str] = []

    async def hold() -> None:
        argv = ["python3", "-c", HOLD, str(ready), str(done)]
        outcomes["holder"] = await run_process(argv, cwd=root, env=build_env(), timeout=30, sandbox=plan)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(hold)
            await anyio.to_thread.run_sync(_wait_readable, ready_fd)
            held.append(os.read(ready_fd, 64).decode())
            argv = ["bash", "-c", STEAL]
            try:
                outcomes["thief"] = await run_process(argv, cwd=root, env=build_env(), timeout=30, sandbox=strict_plan)
            finally:
                os.write(done_fd, b"x")

    try:
        anyio.run(main)
    finally:
        os.close(ready_fd)
        os.close(done_fd)
    thief, holder = outcomes["thief"].output, outcomes["holder"].output
    assert held == ["/dev/pts/0"], held  # the first terminal of the holder's own instance
    assert SECRET not in thief and "<- read" not in thief and "wrote" not in thief, thief
    assert thief.startswith("ptmx\n"), thief  # nothing but its own instance's ptmx to list
    assert "own /dev/pts/0 b'own\\r\\n'" in thief, thief  # a terminal of its own still works
    assert "holder /dev/pts/0 screen" in holder and "SPOOFED" not in holder, holder


def _spare_with_ruleset(root: Path, deadline: float) -> None:
    """Wait until a covered namespace made ahead for `root` holds its own ruleset (made off the call's path)."""
    while not any(
        repr(str(root)) in key[1] and any(ruleset is not None for _, ruleset in ready)
        for key, ready in spares_made_ahead().items()
    ):
        if time.monotonic() > deadline:
            raise TimeoutError("no covered namespace was made ahead with its ruleset")
        time.sleep(0.005)


@pytest.mark.skipif(os.geteuid() != 0, reason="the thread launcher makes namespaces itself only as root")
def test_processes_made_ahead_each_get_their_own_terminal_granted(tmp_path: Path) -> None:
    """The covered namespace and Landlock ruleset made ahead for the next process (its devpts granted off
    the call's path): the holder and the thief both start from one, and each reaches its own terminal only."""
    support = replace(SUPPORT, launch="thread")
    root = tmp_path / "project"
    root.mkdir()
    plan = plan_sandbox(SandboxPolicy(protected=(root / "tools.d",)), support, root=root, output_dir=root / "o")
    assert plan is not None and plan.covered and plan.request().get("dev")
    ready, done = tmp_path / "ready", tmp_path / "done"
    os.mkfifo(ready)
    os.mkfifo(done)
    ready_fd = os.open(ready, os.O_RDONLY | os.O_NONBLOCK)
    done_fd = os.open(done, os.O_RDWR)
    outcomes: dict[str, ProcessOutcome] = {}
    built: list[int] = []
    real_own_ruleset = namespaces.own_ruleset

    def counted(rules: kernel.LandlockRules) -> int:
        built.append(1)
        return real_own_ruleset(rules)

    async def run(name: str, argv: list[str]) -> None:
        outcomes[name] = await run_process(argv, cwd=root, env=build_env(), timeout=30, sandbox=plan)

    async def main() -> None:
        await run("warm", ["true"])  # keeps the rules' template; the next namespace is made ahead
        namespaces.own_ruleset = counted
        async with anyio.create_task_group() as group:
            await anyio.to_thread.run_sync(_spare_with_ruleset, root, time.monotonic() + 20)
            group.start_soon(run, "holder", ["python3", "-c", HOLD, str(ready), str(done)])
            await anyio.to_thread.run_sync(_wait_readable, ready_fd)
            held.append(os.read(ready_fd, 64).decode())
            try:
                await anyio.to_thread.run_sync(_spare_with_ruleset, root, time.monotonic() + 20)
                await run("thief", ["bash", "-c", STEAL])
            finally:
                os.write(done_fd, b"x")

    held: list[str] = []
    try:
        anyio.run(main)
    finally:
        namespaces.own_ruleset = real_own_ruleset
        os.close(ready_fd)
        os.close(done_fd)
    assert built == [], "a ruleset was built on the call's path although one was made ahead"
    thief, holder = outcomes["thief"].output, outcomes["holder"].output
    assert held == ["/dev/pts/0"], held
    assert SECRET not in thief and "<- read" not in thief and "wrote" not in thief, thief
    assert thief.startswith("ptmx\n"), thief
    assert "own /dev/pts/0 b'own\\r\\n'" in thief, thief  # its ruleset grants its own instance
    assert "holder /dev/pts/0 screen" in holder and "SPOOFED" not in holder, holder
