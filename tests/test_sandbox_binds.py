"""The sandbox's bind mounts (`toolrt.sandbox.binds`) attacked with real renames, real processes and the
real kernel: a name moved while it is being mounted, descriptors left open by many setups, and the
path-based fallback (`binds._descriptor_api = False`, as where a container's filter refuses
`open_tree`). The rename happens at a chosen point of the setup (between the open and the attach) so
the race is decided every run, never by luck."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from processes import held_at, sandboxed_bash

from toolrt.errors import ToolFailure
from toolrt.execute import ProcessOutcome
from toolrt.sandbox import binds
from toolrt.sandbox.plan import SandboxPlan, plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.mount_namespace), reason=f"no mount namespace here: {SUPPORT.describe()}"
)


def _plan(root: Path, launch: str = "thread") -> SandboxPlan:
    policy = SandboxPolicy(protected=(root / "toolrt.yaml", root / ".git"))
    plan = plan_sandbox(policy, replace(SUPPORT, launch=launch), root=root, output_dir=root / "tool-output")  # type: ignore[arg-type]
    assert plan is not None
    return plan


@contextmanager
def _renaming_aside(
    monkeypatch: pytest.MonkeyPatch, name: Path, replace_with: Callable[[Path], object], times: int = 1
) -> Iterator[list[str]]:
    """Between the open of `name` and the attach of its mount, rename it aside (`name.aside`, then
    `name.aside2` ...) and put another in its place (`replace_with`): real renames, the first `times`
    times it is mounted, made by a thread started here, in the host's mount namespace (an editor keeping
    a backup, a process the name's directory is writable to; a thread the setup thread started would
    share the namespace being made). Yields the names it was renamed to."""
    real: Callable[[int, int, str, bool], None] = binds._bind
    asks: queue.Queue[bool] = queue.Queue()
    answers: queue.Queue[BaseException | None] = queue.Queue()
    done: list[str] = []

    def rename_when_asked() -> None:
        while asks.get(timeout=30):
            try:
                aside = f"{name}.aside{len(done) + 1 if done else ''}"
                os.rename(name, aside)
                replace_with(name)
                done.append(aside)
                answers.put(None)
            except BaseException as error:
                answers.put(error)

    def bind(source_fd: int, target_fd: int, target: str, read_only: bool) -> None:
        if target == str(name) and len(done) < times:
            asks.put(True)
            assert answers.get(timeout=30) is None, "the host thread could not rename"
        real(source_fd, target_fd, target, read_only)

    host = threading.Thread(target=rename_when_asked)
    host.start()
    monkeypatch.setattr(binds, "_bind", bind)
    try:
        yield done
    finally:
        asks.put(False)
        host.join(timeout=30)


@pytest.mark.parametrize("covered", [False, True], ids=["kept", "covered"])
@pytest.mark.parametrize("descriptors", [True, False], ids=["open_tree", "mount"])
def test_a_read_only_name_renamed_aside_while_it_is_mounted_stays_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, descriptors: bool, covered: bool
) -> None:
    """The mount is attached to the file opened, wherever it now is: the name must still be read-only
    (the file put in its place), not the file moved aside only."""
    monkeypatch.setattr(binds, "_descriptor_api", descriptors)
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n")
    if not covered:  # every protected name exists: a kept namespace; else a covered one, per process
        (tmp_path / ".git").mkdir()
    plan = _plan(tmp_path)
    with _renaming_aside(monkeypatch, tmp_path / "toolrt.yaml", lambda name: name.write_text("swapped in\n")) as done:
        script = "echo x >> toolrt.yaml; mv toolrt.yaml elsewhere; echo y >> toolrt.yaml.aside; echo done"
        result = sandboxed_bash(script, plan, tmp_path)
    assert done == [f"{tmp_path}/toolrt.yaml.aside"], "the setup never mounted toolrt.yaml"
    assert result.output.splitlines() == [
        "bash: line 1: toolrt.yaml: Read-only file system",
        "mv: cannot move 'toolrt.yaml' to 'elsewhere': Device or resource busy",
        "done",
    ], result.output
    assert (tmp_path / "toolrt.yaml").read_text() == "swapped in\n"
    assert not (tmp_path / "elsewhere").exists()
    # No mount is left on the file moved aside: an ordinary file of the project now, as outside.
    assert (tmp_path / "toolrt.yaml.aside").read_text() == "builtin_tools: true\ny\n"


@pytest.mark.parametrize("descriptors", [True, False], ids=["open_tree", "mount"])
def test_a_pinned_directory_renamed_aside_while_it_is_mounted_is_pinned_at_its_name_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, descriptors: bool
) -> None:
    """The tool-output directory is bound writable beneath the read-only data directory: renamed aside
    mid-setup, the directory put in its place is the writable one, and the one moved aside is read-only
    with the rest of the data directory (no writable mount left on it)."""
    monkeypatch.setattr(binds, "_descriptor_api", descriptors)
    data = tmp_path / "data"
    (data / "tool-output").mkdir(parents=True)
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n")
    (tmp_path / ".git").mkdir()
    policy = SandboxPolicy(protected=(tmp_path / "toolrt.yaml", tmp_path / ".git", data), essential=(data,))
    plan = plan_sandbox(policy, replace(SUPPORT, launch="thread"), root=tmp_path, output_dir=data / "tool-output")
    assert plan is not None and str(data / "tool-output") in plan.pinned
    output = data / "tool-output"
    with _renaming_aside(monkeypatch, output, Path.mkdir) as done:
        result = sandboxed_bash(
            "echo a > data/tool-output/mine.txt; echo b > data/tool-output.aside/mine.txt; echo done", plan, tmp_path
        )
    assert done == [f"{output}.aside"], "the setup never mounted the tool-output directory"
    assert result.output.splitlines() == [
        "bash: line 1: data/tool-output.aside/mine.txt: Read-only file system",
        "done",
    ], result.output
    assert (output / "mine.txt").read_text() == "a\n"
    assert not (data / "tool-output.aside" / "mine.txt").exists()


@pytest.mark.parametrize("descriptors", [True, False], ids=["open_tree", "mount"])
def test_a_name_renamed_aside_at_every_attempt_fails_the_setup_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, descriptors: bool
) -> None:
    """A name renamed aside every time it is mounted (a swapper racing each attempt) fails the setup after
    a few attempts with a message that says what happened, and nothing runs."""
    monkeypatch.setattr(binds, "_descriptor_api", descriptors)
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n")
    (tmp_path / ".git").mkdir()
    plan = _plan(tmp_path)
    marker = tmp_path / "ran"
    with (
        _renaming_aside(monkeypatch, tmp_path / "toolrt.yaml", lambda name: name.write_text("again\n"), 99) as done,
        pytest.raises(
            ToolFailure, match=r"could not be set up: .*toolrt.yaml: renamed (over )?while it was being mounted"
        ),
    ):
        sandboxed_bash(f"touch {marker}", plan, tmp_path)
    assert len(done) == 8 and not marker.exists()


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_read_only_file_given_a_new_name_entry_for_the_same_inode_is_read_only_in_the_next_call(
    tmp_path: Path, launch: str
) -> None:
    """Unlinking a file detaches the mounts on it in every other namespace, a kept one's too; a file put
    at its name with the same device and inode (a hard link renamed into place, or an inode number the
    file system hands out again, as ext4 does after `git checkout` rewrites a file) must not be taken
    for the file that kept namespace protects."""
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n")
    (tmp_path / ".git").mkdir()  # every protected name exists: the namespace is kept between calls
    plan = _plan(tmp_path, launch)
    first = sandboxed_bash("echo x >> toolrt.yaml; echo done", plan, tmp_path)
    assert first.output.splitlines()[0] == "bash: line 1: toolrt.yaml: Read-only file system", first.output
    before = os.stat(tmp_path / "toolrt.yaml")
    os.link(tmp_path / "toolrt.yaml", tmp_path / "relinked")
    os.unlink(tmp_path / "toolrt.yaml")
    os.rename(tmp_path / "relinked", tmp_path / "toolrt.yaml")
    after = os.stat(tmp_path / "toolrt.yaml")
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    second = sandboxed_bash("echo x >> toolrt.yaml; echo done", _plan(tmp_path, launch), tmp_path)
    assert second.output.splitlines()[0] == "bash: line 1: toolrt.yaml: Read-only file system", second.output
    assert (tmp_path / "toolrt.yaml").read_text() == "builtin_tools: true\n"


def test_a_pinned_directory_swapped_for_a_link_after_its_check_does_not_remount_what_the_link_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path-based calls bind, check the name still leads to what was bound, and remount: the tool-output
    directory swapped for a link to `.git` between the check and the remount (from the host's namespace)
    must not make `.git`'s read-only mount writable."""
    monkeypatch.setattr(binds, "_descriptor_api", False)
    data = tmp_path / "data"
    output = data / "tool-output"
    output.mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n")
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n")
    policy = SandboxPolicy(protected=(tmp_path / "toolrt.yaml", tmp_path / ".git", data), essential=(data,))
    plan = plan_sandbox(policy, replace(SUPPORT, launch="thread"), root=tmp_path, output_dir=output)
    assert plan is not None and str(output) in plan.pinned
    real_bind: Callable[[int, int, str, bool], None] = binds._bind
    real_mount: Callable[[bytes | None, bytes, int], None] = binds._mount
    binding: list[str] = []
    asked, swapped = threading.Event(), threading.Event()

    def swap_when_asked() -> None:
        if asked.wait(timeout=30) and not swapped.is_set():
            os.rename(output, data / "aside")
            output.symlink_to(tmp_path / ".git")
        swapped.set()

    def bind(source_fd: int, target_fd: int, target: str, read_only: bool) -> None:
        binding[:] = [target]
        real_bind(source_fd, target_fd, target, read_only)

    def mount(source: bytes | None, target: bytes, flags: int) -> None:
        if flags & 32 and binding == [str(output)] and not asked.is_set():  # MS_REMOUNT: the check is behind
            asked.set()
            assert swapped.wait(timeout=30), "the host thread never swapped"
        real_mount(source, target, flags)

    host = threading.Thread(target=swap_when_asked)
    host.start()
    monkeypatch.setattr(binds, "_bind", bind)
    monkeypatch.setattr(binds, "_mount", mount)
    try:
        result = sandboxed_bash("echo x >> .git/config; echo done", plan, tmp_path)
    finally:
        swapped.set()
        asked.set()
        host.join(timeout=30)
    assert asked.is_set(), "the setup never remounted the tool-output directory"
    assert result.output.splitlines() == ["bash: line 1: .git/config: Read-only file system", "done"], result.output
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n"


def _save_by_rename_over(name: Path) -> None:
    """An editor's or git's save: the new content written to a temporary file renamed over the name."""
    temporary = name.with_name(name.name + ".new")
    temporary.write_text(name.read_text())
    os.rename(temporary, name)


def _save_keeping_a_backup(name: Path) -> None:
    """An editor's save that keeps the old file as a backup: renamed aside, a new file made at the name."""
    os.rename(name, name.with_name(name.name + "~"))
    name.write_text(name.with_name(name.name + "~").read_text())


@pytest.mark.xfail(
    strict=True,
    reason="a bind mount goes with its file: a running process's namespace does not protect the file saved in its "
    "place (the next call's namespace does, by the change-time key)",
)
@pytest.mark.parametrize("save", [_save_by_rename_over, _save_keeping_a_backup], ids=["rename-over", "backup"])
@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_read_only_file_the_person_saves_while_a_process_runs_stays_read_only_to_it(
    tmp_path: Path, launch: str, save: Callable[[Path], None]
) -> None:
    """A process still running in a kept namespace (a long call) when the person saves `toolrt.yaml` (the
    old file renamed over, or aside): its read-only mount went with the old file (detached, or moved to the
    backup), so the file now at the name must not be writable to it."""
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n")
    (tmp_path / ".git").mkdir()  # every protected name exists: the namespace is kept between calls
    fifo = tmp_path.parent / f"{tmp_path.name}-go"
    os.mkfifo(fifo)
    plan = _plan(tmp_path, launch)
    outcome: list[ProcessOutcome] = []
    call = threading.Thread(
        target=lambda: outcome.append(
            sandboxed_bash(f"read -r _ < {fifo}; echo x >> toolrt.yaml; echo done", plan, tmp_path)
        )
    )
    call.start()
    with held_at(fifo):
        save(tmp_path / "toolrt.yaml")
    call.join(timeout=30)
    assert outcome, "the sandboxed process never ended"
    assert outcome[0].output.splitlines()[0] == "bash: line 1: toolrt.yaml: Read-only file system", outcome[0].output
    assert (tmp_path / "toolrt.yaml").read_text() == "builtin_tools: true\n"


@pytest.mark.parametrize("descriptors", [True, False], ids=["open_tree", "mount"])
def test_a_name_renamed_aside_at_each_attempt_but_the_last_leaves_one_mount_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, descriptors: bool
) -> None:
    """Each attempt whose file was renamed aside takes its mount off that file again: the kept namespace holds
    one mount of toolrt.yaml, at its name, and the files moved aside are ordinary files there (no mount
    point: a process can move them)."""
    monkeypatch.setattr(binds, "_descriptor_api", descriptors)
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n")
    (tmp_path / ".git").mkdir()  # every protected name exists: a kept namespace
    plan = _plan(tmp_path)
    with _renaming_aside(monkeypatch, tmp_path / "toolrt.yaml", lambda name: name.write_text("new\n"), times=7) as done:
        script = "grep -c toolrt.yaml /proc/self/mountinfo; mv toolrt.yaml.aside7 moved && echo moved"
        result = sandboxed_bash(script, plan, tmp_path)
    assert len(done) == 7, done
    assert result.output.splitlines() == ["1", "moved"], result.output


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_read_only_link_whose_file_is_saved_by_a_rename_is_read_only_in_the_next_call(
    tmp_path: Path, launch: str
) -> None:
    """A read-only name that is a symlink is followed: its mount is on the file it names. That file saved by
    a rename over it (the link left as it is) detaches the kept namespace's mount; the next call must get a
    namespace with the new file read-only, not that one, keyed by the link alone."""
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "toolrt.yaml").write_text("builtin_tools: true\n")
    (tmp_path / "toolrt.yaml").symlink_to("shared/toolrt.yaml")
    (tmp_path / ".git").mkdir()  # every protected name exists: the namespace is kept between calls
    first = sandboxed_bash("echo x >> toolrt.yaml; echo done", _plan(tmp_path, launch), tmp_path)
    assert first.output.splitlines()[0] == "bash: line 1: toolrt.yaml: Read-only file system", first.output
    _save_by_rename_over(tmp_path / "shared" / "toolrt.yaml")
    second = sandboxed_bash("echo x >> toolrt.yaml; echo done", _plan(tmp_path, launch), tmp_path)
    assert second.output.splitlines()[0] == "bash: line 1: toolrt.yaml: Read-only file system", second.output
    assert (tmp_path / "shared" / "toolrt.yaml").read_text() == "builtin_tools: true\n"
