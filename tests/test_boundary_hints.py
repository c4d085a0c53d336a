"""The model is told why: after a real program the sandbox stopped, toolrt's last line names what was
refused, by which sandbox rule, and what to do instead, also when the program printed nothing
(issue 25, item 6). Real bash and python under the real sandbox."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt import Runtime
from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox import seccomp
from toolrt.sandbox.masks import Masks
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.mount_namespace), reason=f"no Landlock + mounts: {SUPPORT.describe()}"
)


def _last_line(argv: list[str], root: Path, **policy: Any) -> tuple[str, ProcessOutcome]:
    masks = policy.pop("masks", Masks())

    async def main() -> ProcessOutcome:
        plan = plan_sandbox(SandboxPolicy(**policy), SUPPORT, root=root, output_dir=root / "out", masks=masks)
        return await run_process(argv, cwd=root, env=build_env(), timeout=20, sandbox=plan)

    outcome = anyio.run(main)
    return outcome.output.rstrip().splitlines()[-1], outcome


def test_mknod_is_explained(tmp_path: Path) -> None:
    line, _ = _last_line(["bash", "-c", "mknod disk b 7 0"], tmp_path)
    assert line.startswith("toolrt: the sandbox refuses to make device nodes (mknod b/c)"), line


@pytest.mark.skipif(not seccomp.supported(), reason="no seccomp filter for this architecture")
def test_a_refused_unix_socket_is_explained(tmp_path: Path) -> None:
    client = "import socket; socket.socket(socket.AF_UNIX).connect('/run/docker.sock')"
    line, _ = _last_line([sys.executable, "-c", client], tmp_path)
    assert line.startswith("toolrt: the sandbox refuses UNIX sockets (a seccomp filter on socket(AF_UNIX))"), line


def test_a_protected_path_is_explained_whatever_the_error_says(tmp_path: Path) -> None:
    (tmp_path / "toolrt.yaml").write_text("flags: {}\n")
    (tmp_path / "w.sh").write_text("echo pwned > toolrt.yaml\n")
    line, _ = _last_line(["sh", "./w.sh"], tmp_path, protected=(tmp_path / "toolrt.yaml",))
    assert line.startswith(f"toolrt: {tmp_path / 'toolrt.yaml'} is protected: it is read-only inside the sandbox")
    assert (tmp_path / "toolrt.yaml").read_text() == "flags: {}\n"


def test_a_masked_file_is_explained(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("KEY=secret\n")
    masks = Masks(files=(str(tmp_path / ".env"),))
    line, _ = _last_line(["sh", "-c", "echo x > .env"], tmp_path, masks=masks)
    assert line.startswith(f"toolrt: {tmp_path / '.env'} is hidden in the sandbox because the read rules deny it")


def test_a_silent_failure_gets_its_status_and_what_the_sandbox_refuses(tmp_path: Path) -> None:
    silent = "import socket, sys\ntry:\n socket.socket(socket.AF_UNIX)\nexcept OSError:\n sys.exit(3)"
    line, outcome = _last_line([sys.executable, "-c", silent], tmp_path, network=False)
    assert outcome.exit_code == 3
    assert line.startswith("toolrt: the program failed (exit status 3) without printing why."), line
    assert "UNIX sockets" in line and "every network connection" in line and "device nodes" in line


@pytest.mark.parametrize("program", ["true", "false"])
def test_a_silent_success_or_plain_no_gets_nothing(tmp_path: Path, program: str) -> None:
    async def main() -> ProcessOutcome:
        plan = plan_sandbox(SandboxPolicy(), SUPPORT, root=tmp_path, output_dir=tmp_path / "out")
        return await run_process([program], cwd=tmp_path, env=build_env(), timeout=20, sandbox=plan)

    assert anyio.run(main).output == ""  # `grep` finding nothing, `test`, `false`: status 1 is an answer


def test_the_bash_tool_shows_the_model_the_hint(tmp_path: Path) -> None:
    (tmp_path / "permissions.yaml").write_text("permission:\n  '*': allow\n", encoding="utf-8")

    async def main() -> Any:
        rt = Runtime.load(tmp_path)
        return await rt.call("bash", {"command": "mknod disk c 1 1", "description": "make a node"})

    result = anyio.run(main)
    assert "toolrt: the sandbox refuses to make device nodes" in result.output
    assert not (tmp_path / "disk").exists()
