"""Root is not root inside the sandbox: no capability, no device node made, no block device reachable
(issue 25, item 4). Real bash under both launchers against the real kernel; toolrt runs as root here."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox.plan import SandboxPlan, plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.mount_namespace),
    reason=f"no Landlock + mount namespace: {SUPPORT.describe()}",
)
LAUNCHES = ["thread", "forkserver"]


def _plan(root: Path, launch: str, mode: str = "workspace-write") -> SandboxPlan:
    support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
    plan = plan_sandbox(SandboxPolicy(mode=mode), support, root=root, output_dir=root / "out")  # type: ignore[arg-type]
    assert plan is not None
    return plan


def _sh(command: str, root: Path, launch: str, mode: str = "workspace-write") -> ProcessOutcome:
    async def main() -> ProcessOutcome:
        plan = _plan(root, launch, mode)
        return await run_process(["bash", "-c", command], cwd=root, env=build_env(), timeout=20, sandbox=plan)

    return anyio.run(main)


def _host_block_devices() -> list[str]:
    found = []
    for entry in os.scandir("/dev"):
        try:
            if stat.S_ISBLK(entry.stat(follow_symlinks=False).st_mode):
                found.append(entry.name)
        except OSError:
            continue
    return found


@pytest.mark.parametrize("launch", LAUNCHES)
def test_every_capability_set_is_empty_inside(tmp_path: Path, launch: str) -> None:
    result = _sh("grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status", tmp_path, launch)
    sets = dict(line.split(":\t") for line in result.output.splitlines())
    assert sets == dict.fromkeys(("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), "0000000000000000"), result.output


@pytest.mark.parametrize("launch", LAUNCHES)
def test_every_sandboxed_process_starts_with_an_empty_bounding_set_not_only_the_first(
    tmp_path: Path, launch: str
) -> None:
    """The fork server empties its own bounding set once for all its children; a thread of the host
    empties its own each time (the bounding set is per thread)."""
    for _ in range(3):
        result = _sh("grep CapBnd /proc/self/status", tmp_path, launch)
        assert result.output.strip() == "CapBnd:\t0000000000000000", result.output


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
def test_mknod_of_a_block_or_char_device_is_refused_even_in_the_writable_root(
    tmp_path: Path, launch: str, mode: str
) -> None:
    result = _sh("mknod lo b 7 0; mknod mem c 1 1; mkfifo fifo; ls", tmp_path, launch, mode)
    assert not (tmp_path / "lo").exists() and not (tmp_path / "mem").exists()
    if mode == "read-only":  # the root is no writable directory: its mount is read-only
        assert "mknod: lo: Read-only file system" in result.output
    else:
        assert "mknod: lo: Permission denied" in result.output or "mknod: lo: Operation not permitted" in result.output
    assert (tmp_path / "fifo").exists() == (mode == "workspace-write")  # other node kinds are untouched


@pytest.mark.parametrize("launch", LAUNCHES)
def test_no_block_device_is_reachable_and_the_usual_devices_work(tmp_path: Path, launch: str) -> None:
    host = _host_block_devices()
    command = (
        "find /dev -type b; "
        + "".join(f"head -c 1 /dev/{name} >/dev/null 2>&1 && echo READ {name}; " for name in host)
        + "echo quiet >/dev/null && head -c 4 /dev/urandom | wc -c && head -c 3 /dev/zero | wc -c; "
        + "echo via-fd >/dev/fd/1; ls /dev"
    )
    result = _sh(command, tmp_path, launch)
    assert "READ " not in result.output, result.output
    lines = result.output.splitlines()
    assert lines[:3] == ["4", "3", "via-fd"], result.output  # find printed no block device
    listed = set(lines[3:])
    assert listed <= {
        "fd",
        "full",
        "null",
        "ptmx",
        "pts",
        "random",
        "shm",
        "stderr",
        "stdin",
        "stdout",
        "tty",
        "urandom",
        "zero",
    }, listed
    assert {"null", "zero", "urandom", "fd", "pts", "shm"} <= listed
