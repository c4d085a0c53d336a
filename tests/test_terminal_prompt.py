"""`toolrt call`'s prompt at a real terminal (a pty), and `toolrt serve --transport http` saying where it is."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from cli_helpers import run
from conftest import ProjectFactory
from mcp import Client

REPO = Path(__file__).resolve().parent.parent
ECHO = """\
id: echo
description: Echo the text back, for the terminal prompt tests.
parameters: {type: object, properties: {text: {type: string}}, required: [text]}
handler: {argv: [echo, "{{ text }}"]}
permission: {always: ["*"]}
"""
PERMISSIONS = 'permission:\n  "*": allow\n  echo: ask\n'


def _env(data: Path) -> dict[str, str]:
    return {**os.environ, "TOOLRT_DATA_DIR": str(data), "PYTHONPATH": str(REPO / "runtime")}


class Terminal:
    """`toolrt call …` with its stdin and stderr on a pty, as a person at a terminal runs it."""

    def __init__(self, root: Path, data: Path, *args: str) -> None:
        self.master, slave = pty.openpty()
        argv = [sys.executable, "-m", "toolrt", "call", "echo", '{"text": "hi"}', "--root", str(root), *args]
        self.process = subprocess.Popen(
            argv, stdin=slave, stderr=slave, stdout=subprocess.PIPE, env=_env(data), cwd=root
        )
        os.close(slave)
        self.seen = ""

    def wait_for(self, text: str, timeout: float = 30, *, count: int = 1) -> None:
        deadline = time.monotonic() + timeout
        while self.seen.count(text) < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"never saw {text!r} in:\n{self.seen}"
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    self.seen += os.read(self.master, 4096).decode(errors="replace")
                except OSError:  # the child closed the terminal
                    assert text in self.seen, f"never saw {text!r} in:\n{self.seen}"

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def finish(self, timeout: float = 30) -> tuple[int, str]:
        out, _ = self.process.communicate(timeout=timeout)
        try:
            while select.select([self.master], [], [], 0.2)[0]:
                self.seen += os.read(self.master, 4096).decode(errors="replace")
        except OSError:
            pass
        os.close(self.master)
        return self.process.returncode, out.decode()


@pytest.fixture
def project(make_project: ProjectFactory) -> Path:
    return make_project({"echo": ECHO}, permissions=PERMISSIONS)


@pytest.mark.slow  # each test runs `toolrt call` in a process of its own
def test_ctrl_c_at_the_prompt_exits_130_at_once(project: Path, tmp_path: Path) -> None:
    terminal = Terminal(project, tmp_path / "data")
    terminal.wait_for("allow? [o]nce / [a]lways / [r]eject: ")
    started = time.monotonic()
    terminal.process.send_signal(signal.SIGINT)
    code, out = terminal.finish(timeout=10)
    assert code == 130 and out == ""
    assert time.monotonic() - started < 10
    assert "Traceback" not in terminal.seen


INTERRUPTED_READER = """
import signal, sys, threading, time
import anyio
from toolrt.faces.prompts import PROMPTS_WAITING, _read_line

def interrupt_the_reader() -> None:
    while not PROMPTS_WAITING:
        time.sleep(0.01)
    time.sleep(0.2)  # blocked in its read by now
    signal.pthread_kill(next(iter(PROMPTS_WAITING)), signal.SIGINT)  # the kernel may pick this thread itself

threading.Thread(target=interrupt_the_reader, daemon=True).start()
anyio.run(_read_line, "allow? ")
sys.exit(3)  # the line came, or the read ended: never, with nothing typed
"""


def test_ctrl_c_handed_to_the_thread_reading_the_line_still_exits_130() -> None:
    """A Ctrl-C is the whole process's: the kernel hands it to any thread that does not block it, the one
    blocked reading the answer included. toolrt exited only when the main thread got it (a bare handler
    waited for the main thread, asleep in the event loop's wait), so the person's Ctrl-C hung it."""
    master, slave = pty.openpty()
    started = time.monotonic()
    reader = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_READER], stdin=slave, stderr=slave, env=_env(Path("/nonexistent"))
    )
    os.close(slave)
    try:
        assert reader.wait(timeout=10) == 130
    finally:
        reader.kill()
        os.close(master)
    assert time.monotonic() - started < 10


@pytest.mark.slow
def test_ctrl_d_rejects(project: Path, tmp_path: Path) -> None:
    terminal = Terminal(project, tmp_path / "data")
    terminal.wait_for("allow? ")
    terminal.type(b"\x04")
    code, out = terminal.finish()
    assert code == 1 and out == ""
    assert "end of input: rejected" in terminal.seen and "rejected permission" in terminal.seen
    assert "Traceback" not in terminal.seen


@pytest.mark.slow
def test_an_unrecognised_answer_asks_again(project: Path, tmp_path: Path) -> None:
    terminal = Terminal(project, tmp_path / "data")
    terminal.wait_for("allow? ")
    terminal.type(b"maybe\n")
    terminal.wait_for("answer o (once), a (always) or r (reject), not 'maybe'")
    terminal.wait_for("allow? ", count=2)
    terminal.type(b"o\n")
    assert terminal.finish() == (0, "hi\n")


def _headless(project: Path, data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`toolrt call echo` with nobody to ask: an ask is denied."""
    argv = [sys.executable, "-m", "toolrt", "call", "echo", '{"text": "again"}', "--root", str(project), *args]
    return subprocess.run(argv, env=_env(data), cwd=project, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_always_is_kept_across_runs_of_a_session_and_agent(project: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    terminal = Terminal(project, data, "--session", "s1")
    terminal.wait_for("allow? ")
    terminal.type(b"a\n")
    assert terminal.finish() == (0, "hi\n")

    again = _headless(project, data, "--session", "s1")
    assert (again.returncode, again.stdout) == (0, "again\n"), again.stderr
    other_session = _headless(project, data, "--session", "s2")
    assert other_session.returncode == 1 and "approval" in other_session.stderr
    other_agent = _headless(project, data, "--session", "s1", "--agent", "plan")
    assert other_agent.returncode == 1 and "approval" in other_agent.stderr


@pytest.mark.slow
def test_always_under_another_agent_is_kept_for_that_agent_and_no_other(project: Path, tmp_path: Path) -> None:
    """`--agent plan`'s "always" is put back as plan's on the next `--agent plan` run (it used to be put back
    as the default agent's, so plan asked again), and never becomes the default agent's."""
    data = tmp_path / "data"
    terminal = Terminal(project, data, "--session", "s1", "--agent", "plan")
    terminal.wait_for("allow? ")
    terminal.type(b"a\n")
    assert terminal.finish() == (0, "hi\n")

    again = _headless(project, data, "--session", "s1", "--agent", "plan")
    assert (again.returncode, again.stdout) == (0, "again\n"), again.stderr
    default_agent = _headless(project, data, "--session", "s1")
    assert default_agent.returncode == 1 and "approval" in default_agent.stderr


def test_serve_on_a_port_in_use_is_one_line_and_exit_2(project: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out, err = run("serve", "--transport", "http", "--port", str(port), "--root", str(project))
    assert code == 2 and out == "" and "Traceback" not in err
    expected = f"toolrt: port {port} on 127.0.0.1 is already in use; choose another with --port"
    assert err.strip().splitlines()[-1] == expected and err.count("in use") == 1


@pytest.mark.slow  # spawns `toolrt serve`; importing the mcp SDK takes seconds
def test_serve_over_http_says_its_url_on_stderr(project: Path, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "toolrt", "serve", "--transport", "http", "--port", "0", "--root", str(project)]
    process = subprocess.Popen(
        argv, env=_env(tmp_path / "data"), cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while not any("http://" in line for line in lines):
            assert time.monotonic() < deadline and process.poll() is None, "".join(lines)
            lines.append(process.stderr.readline())
        [url] = re.findall(r"http://127\.0\.0\.1:\d+/mcp", "".join(lines))
        assert lines[-1].strip() == f"toolrt: serving MCP over streamable HTTP at {url}"

        async def elicit(context: Any, params: Any) -> Any:
            raise AssertionError("nothing is called")

        async def names() -> list[str]:
            with anyio.fail_after(30):
                # echo asks: offered to a client that declares elicitation (and to no other).
                async with Client(url, mode="legacy", elicitation_callback=elicit) as client:
                    return [tool.name for tool in (await client.list_tools()).tools]

        assert "echo" in anyio.run(names)
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()
