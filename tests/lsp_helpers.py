"""A real language server for the language-server tests (pylsp with pyflakes, from the test extra), and a
stand-in whose steps a test writes."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
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


_STAND_IN = """\
import json, os, subprocess, sys, time


def read():
    length = 0
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            sys.exit(0)
        if line in (b"\\r\\n", b"\\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(sys.stdin.buffer.read(length))


def send(message):
    data = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\\r\\n\\r\\n" % len(data) + data)
    sys.stdout.buffer.flush()


while True:
    message = read()
    method = message.get("method")
    if method == "initialize":
{before_initialize}
        send({{"jsonrpc": "2.0", "id": message["id"], "result": {{"capabilities": {{"textDocumentSync": 1}}}}}})
    elif method == "shutdown":
        send({{"jsonrpc": "2.0", "id": message["id"], "result": None}})
    elif method == "exit":
        sys.exit(0)
    elif method == "textDocument/didOpen":
{on_open}
"""


def stand_in_server(*, on_open: str, before_initialize: str = "pass") -> str:
    """The source of a minimal language server over stdio: it answers `initialize` (after running
    `before_initialize`), `shutdown` and `exit`, and runs `on_open` (statements; `message` is the
    notification) for each `didOpen`. For tests of what toolrt makes a server see or do."""
    return _STAND_IN.format(
        before_initialize=textwrap.indent(textwrap.dedent(before_initialize), " " * 8),
        on_open=textwrap.indent(textwrap.dedent(on_open), " " * 8),
    )
