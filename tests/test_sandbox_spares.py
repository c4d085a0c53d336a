"""Covered mount namespaces made ahead (`namespaces.covered_namespace`): a process whose spare is still being
made when it starts (a busy machine: the last process ended a moment ago) waits for that one instead of making
a second beside it, which would take the CPU the first needs, on the call's path, and leave one to throw away.
Real namespaces, real overlays, the thread launcher (root only)."""

from __future__ import annotations

import os
import subprocess
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from toolrt.sandbox import launch_request, namespaces
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = [
    pytest.mark.skipif(
        not (SUPPORT.landlock_abi and SUPPORT.mount_namespace), reason=f"no mount namespace: {SUPPORT.describe()}"
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="the thread launcher makes namespaces itself only as root"),
]


def _arguments(root: Path) -> tuple[Any, ...]:
    """`covered_namespace`'s arguments for a covered plan of `root`, as `enter_from_thread` makes them."""
    plan = plan_sandbox(
        SandboxPolicy(protected=(root / "tools.d",)),
        replace(SUPPORT, launch="thread"),
        root=root,
        output_dir=root / "o",
    )
    assert plan is not None and plan.covered
    request = plan.request()
    return (
        [str(p) for p in request["read_only"]],  # type: ignore[attr-defined]
        launch_request.request_masks(request),
        bool(request["dev"]),
        request["cover"],
        [str(p) for p in request["pinned"]],  # type: ignore[attr-defined]
        launch_request.landlock_rules(request),
    )


def test_a_process_waits_for_the_spare_being_made_instead_of_making_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    arguments = _arguments(root)
    os.close(namespaces.own_ruleset(arguments[5]))  # its template kept, as a call's first process leaves it
    made: list[int] = []
    gate = threading.Event()
    gate.set()
    real_make = namespaces._make_covered

    making = threading.Event()

    def make_at_the_gate(mounts: Any, cover: Any) -> None:
        made.append(threading.get_ident())
        making.set()
        assert gate.wait(10), "the gate never opened"
        real_make(mounts, cover)

    waiting = threading.Event()

    class Watched(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            waiting.set()
            return super().wait(timeout)

    monkeypatch.setattr(namespaces, "_make_covered", make_at_the_gate)
    monkeypatch.setattr(namespaces, "_built", Watched(namespaces._lock))
    first, _ = namespaces.covered_namespace(*arguments)  # no spare yet: made here
    assert len(made) == 1
    gate.clear()  # the successor is held half-made, as on a busy machine
    making.clear()
    ended = subprocess.Popen(["true"])
    namespaces.release_after(ended.pid, first)  # starts making the successor
    outcome: list[tuple[int, int | None]] = []
    second = threading.Thread(target=lambda: outcome.append(namespaces.covered_namespace(*arguments)))
    second.start()
    try:
        assert waiting.wait(10), "the next process did not wait for the spare being made"
        assert making.wait(10), "the spare was never made"
        assert len(made) == 2 and not outcome  # the one being made, and nothing returned yet
    finally:
        gate.set()
        second.join(20)
        ended.wait()
    fd, ruleset = outcome[0]
    try:
        assert len(made) == 2, "a second namespace was made beside the spare"
        assert ruleset is not None  # the spare's own ruleset, made ahead with it: it was the spare
        assert os.readlink(f"/proc/self/fd/{fd}").startswith("mnt:")
    finally:
        if ruleset is not None:
            os.close(ruleset)
        namespaces._forget(fd)
