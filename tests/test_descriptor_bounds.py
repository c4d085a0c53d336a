"""A process that loads many projects keeps a bounded number of descriptors: the sandbox's kept rule
templates (a descriptor per rule path each) and an audit log's file are let go, not kept per project.

Before: every project a process had run a sandboxed call for kept about a dozen descriptors (its rule
template, up to 64 of them, and its audit log's file, never closed), so a long-lived host or a test worker
ran past a thousand, where `select()` gives up (`ValueError: filedescriptor out of range`).
"""

from __future__ import annotations

import gc
import os

import pytest
from conftest import ProjectFactory
from processes import after_the_last_process, before_the_next_process

from toolrt import Runtime
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(not SUPPORT.landlock_abi, reason=f"no Landlock: {SUPPORT.describe()}")
PERMISSIONS = "permission:\n  bash: allow\n"


def _open_descriptors() -> int:
    gc.collect()  # a Runtime nobody holds is gone, and with it what it alone kept
    return len(os.listdir("/proc/self/fd"))


def _run_in_new_projects(make_project: ProjectFactory, count: int) -> None:
    for _ in range(count):
        after_the_last_process()  # the person's project, not the last call's (which could write in /tmp)
        root = make_project(permissions=PERMISSIONS, builtin_tools=True)
        rt = Runtime.load(root)
        before_the_next_process()
        result = rt.call_sync("bash", {"command": "true", "description": "nothing"})
        assert result.error is None, result.error
        rt.close()


def test_projects_after_the_first_few_add_no_descriptors_beyond_one_each(make_project: ProjectFactory) -> None:
    _run_in_new_projects(make_project, 10)  # the caches' steady state
    before = _open_descriptors()
    _run_in_new_projects(make_project, 12)
    # At most one kept ruleset per project (bounded too, at 64), never a dozen per project.
    assert _open_descriptors() - before <= 12 + 6
