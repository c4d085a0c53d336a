"""The processes a test started: finding them by a marker in their command line, on the host's /proc,
and waiting until their lifetimes are over as the attribution journal sees them.

Sandboxed programs run in PID namespaces of their own, so `$$` and `$!` are not host pids: tests
give the programs they start a unique word and look for it here."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

from toolrt.attribution import _CLOCK_SLACK_NS
from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox import namespaces
from toolrt.sandbox.plan import SandboxPlan

__all__ = [
    "after_the_last_process",
    "before_the_next_process",
    "held_at",
    "holding",
    "sandboxed_bash",
    "until",
    "watched_by_warden",
]


def holding(marker: str) -> list[int]:
    """Host pids whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if entry.isdigit() and marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def watched_by_warden(parent: int) -> set[int]:
    """Host pids the warden of process `parent` holds a pidfd of (see `toolrt.sandbox.warden`): the
    processes it will kill when `parent` dies. Empty while `parent` has no warden."""
    watched: set[int] = set()
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rpartition(b")")[2].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                warden = ppid == parent and b"warden.py" in f.read()
            if not warden:
                continue
            for fd in os.listdir(f"/proc/{entry}/fdinfo"):
                with open(f"/proc/{entry}/fdinfo/{fd}", encoding="ascii") as f:
                    watched.update(int(line.split()[1]) for line in f if line.startswith("Pid:"))
        except (OSError, ValueError, IndexError):
            continue
    return watched


def until(condition: Callable[[], bool], what: str, timeout: float = 20) -> None:
    """Wait (`timeout` seconds at most, looking every 10 ms) for something a thread or process of toolrt's
    does in its own time (the keeper, the warden); `what` says what, for the failure."""
    waited, give_up = threading.Event(), time.monotonic() + timeout
    while not condition():
        if time.monotonic() > give_up:
            raise AssertionError(f"waited {timeout:g} s, and it never {what}")
        waited.wait(0.01)


def spares_made_ahead() -> dict[tuple[Any, ...], list[tuple[int, int | None]]]:
    """The covered namespaces the keeper has made ahead now, by key: (namespace fd, ruleset fd) each. Copied
    under the sandbox's lock, since the keeper adds and takes them in its own threads meanwhile."""
    with namespaces._lock:
        return {key: list(ready) for key, ready in namespaces._spares.items()}


def after_the_last_process() -> None:
    """Wait (20 s at most) until the kernel's file clock has passed the end of every process run so far:
    it runs up to a tick behind `time.time_ns()`, and only a change made after that is outside their
    lifetimes (the attribution journal's; a person's edit right after a call is the model's otherwise).

    The probe file lives in a directory of its own, never in a project: making it changes its
    directory's change time, which (a tick behind) can fall inside the last span, and a directory on
    the way to a file counts for the file."""
    ended, give_up = time.time_ns(), time.monotonic() + 20
    with tempfile.TemporaryDirectory(prefix="toolrt-clock-") as directory:
        probe = Path(directory) / "probe"
        while time.monotonic() < give_up:
            probe.write_text("tick")
            if probe.stat().st_ctime_ns > ended:
                return
    raise AssertionError("the file clock did not move in 20 s")


def before_the_next_process() -> None:
    """Wait (20 s at most) until a process started from now on cannot take the files made so far for its
    own: the journal starts a span `_CLOCK_SLACK_NS` before its spawn (the file clock runs up to a tick
    behind), so a file, or a directory on the way to it, made within that much of a call is the call's."""
    made = time.time_ns()
    with tempfile.TemporaryDirectory(prefix="toolrt-clock-") as directory:
        probe = Path(directory) / "probe"
        give_up = time.monotonic() + 20
        while time.monotonic() < give_up:
            probe.write_text("tick")
            if probe.stat().st_ctime_ns > made + _CLOCK_SLACK_NS:
                return
    raise AssertionError("the file clock did not move in 20 s")


@contextmanager
def held_at(fifo: Path, timeout: float = 30) -> Iterator[None]:
    """Enter once a process has opened the FIFO `fifo` to read (`read -r _ < FIFO`): it waits there while
    the body runs; on exit it reads a line and goes on."""
    opened = threading.Event()
    writer: list[int] = []

    def open_when_read() -> None:  # opening a FIFO to write blocks until the process opens it to read
        writer.append(os.open(fifo, os.O_WRONLY))
        opened.set()

    threading.Thread(target=open_when_read, daemon=True).start()
    assert opened.wait(timeout=timeout), "the process never opened the FIFO"
    try:
        yield
    finally:
        os.write(writer[0], b"go\n")
        os.close(writer[0])


def sandboxed_bash(command: str, plan: SandboxPlan | None, cwd: Path, timeout: float = 20) -> ProcessOutcome:
    """What real bash running `command` in `plan`'s sandbox (None: none) printed, and how it ended."""

    async def main() -> ProcessOutcome:
        return await run_process(["bash", "-c", command], cwd=cwd, env=build_env(), timeout=timeout, sandbox=plan)

    return anyio.run(main)
