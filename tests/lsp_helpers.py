"""A real language server for the language-server tests: pylsp with pyflakes, from the test extra."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from toolrt import Runtime
from toolrt.lsp.manager import process_alive


def pylsp_command() -> list[str]:
    """pylsp installed beside this interpreter (the test extra's `python-lsp-server[pyflakes]`)."""
    found = shutil.which("pylsp", path=os.path.dirname(sys.executable))
    assert found, "pylsp is missing: install the test extra (pip install -e '.[test]')"
    return [found]


def lsp_settings(command: list[str] | None = None, *, wait: float = 20.0, **more: Any) -> dict[str, Any]:
    """Host settings that switch language servers on with pylsp as the only Python server."""
    return {
        "lsp.enabled": True,
        "lsp.wait": wait,
        "lsp.servers.pylsp.command": command or pylsp_command(),
        "lsp.servers.pyright.disabled": True,
        **more,
    }


def load(root: Path, settings: Mapping[str, Any], **options: Any) -> Runtime:
    return Runtime.load(root, settings=dict(settings), **options)


def wait_until(condition: Callable[[], bool], timeout: float = 30.0, message: str = "") -> None:
    """Poll `condition` (a process state nothing signals) until it holds or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(message or "condition did not hold in time")
        time.sleep(0.05)


def all_gone(pids: list[int]) -> bool:
    return not any(process_alive(pid) for pid in pids)
