"""A file the sandbox does not let a process write keeps its mode and times: Landlock governs writes, not
`chmod` or `utimes`, and the owner of a file may change both. Toolrt running as root (an agent's container)
runs its programs as root without capabilities, the owner of every system file: a mode change outside the
writable set is a write the person never allowed (`chmod u+s` on a root-owned binary, `chmod 666` on
`/etc/shadow`). Real processes, real files, both launchers (root only: a file of root's is the target).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from processes import sandboxed_bash

from toolrt.sandbox.masks import Masks
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import Launch, detect_support

SUPPORT = detect_support()
pytestmark = [
    pytest.mark.skipif(not SUPPORT.landlock_abi, reason=f"no Landlock: {SUPPORT.describe()}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the target is a file of root's, changed by a sandboxed root"),
]


@pytest.mark.xfail(
    strict=True,
    reason="Landlock does not govern chmod or utimes, and no mount outside the writable set is read-only: "
    "a sandboxed root changes the mode of any file of root's it can reach",
)
@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_process_cannot_change_the_mode_or_times_of_a_file_it_may_not_write(tmp_path: Path, launch: Launch) -> None:
    root = tmp_path / "project"
    root.mkdir()
    target = tmp_path / "system-file"  # outside every writable directory in the read-only mode
    target.write_text("kept\n")
    target.chmod(0o644)
    before = target.stat()
    plan = plan_sandbox(
        SandboxPolicy(mode="read-only"),
        replace(SUPPORT, launch=launch),
        root=root,
        output_dir=tmp_path / "out",
        masks=Masks(),
    )
    assert plan is not None
    output = sandboxed_bash(f"echo x >> {target}; chmod 4777 {target}; touch -d 2000-01-01 {target}", plan, root).output
    assert "Permission denied" in output, output  # the write itself is refused
    after = target.stat()
    assert target.read_text() == "kept\n"
    assert (after.st_mode, after.st_mtime_ns) == (before.st_mode, before.st_mtime_ns), output
