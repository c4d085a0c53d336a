"""No host terminal in the sandbox (issue 25, "/dev leftovers"): a sandboxed process can neither read what
the person types into a terminal nor write to it, and still gets terminals of its own. Real bash and
python under both launchers against the real kernel, with a real host pseudo-terminal.

Before: the minimal `/dev` bound the host's `/dev/pts` back in, and Landlock let every process write
there: a program opened the person's `/dev/pts/N`, read the line typed into it (a password at a
prompt) and wrote into the person's screen.
"""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.mount_namespace), reason=f"no mount namespace: {SUPPORT.describe()}"
)
TYPED = b"hunter2-typed\n"
# Read the person's next line from their terminal, then write over their screen.
STEAL = """timeout 2 head -c 8 "$1" && echo " <- read"
printf 'SPOOFED' > "$1" && echo wrote
python3 -c 'import os; m, s = os.openpty(); os.write(s, b"own\\n"); print(os.ttyname(s), os.read(m, 9))'
"""


@pytest.fixture
def terminal() -> Iterator[tuple[int, str]]:
    """The person's terminal: its controlling side (what the screen shows) and the device's name."""
    controller, device = os.openpty()
    yield controller, os.ttyname(device)
    os.close(device)
    os.close(controller)


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_the_persons_terminal_is_not_in_the_sandbox(tmp_path: Path, terminal: tuple[int, str], launch: str) -> None:
    controller, name = terminal
    support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
    plan = plan_sandbox(SandboxPolicy(), support, root=tmp_path, output_dir=tmp_path / "o")
    assert plan is not None
    os.write(controller, TYPED)  # the person types a line, waiting to be read

    async def main() -> ProcessOutcome:
        argv = ["bash", "-c", STEAL, "bash", name]
        return await run_process(argv, cwd=tmp_path, env=build_env(), timeout=20, sandbox=plan)

    output = anyio.run(main).output
    assert "<- read" not in output and "hunter2" not in output, output
    assert "wrote" not in output, output
    assert f"cannot open '{name}' for reading: No such file or directory" in output, output
    assert "/dev/pts/0 b'own\\r\\n'" in output, output  # a terminal of its own works
    seen = b""
    while select.select([controller], [], [], 0.2)[0]:
        seen += os.read(controller, 1024)
    assert b"SPOOFED" not in seen, seen
