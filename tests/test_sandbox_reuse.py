"""Covered mount namespaces across processes: each process gets one of its own, made ahead of it, and none
is handed to a later process (`namespaces.covered_namespace`), since what a process leaves behind (descriptors
in flight over a socket pair) keeps its overlay's entries looked up after it ended.

An overlay does not see changes made beside it to names it has looked up: the attacks here make each such
change on the host between two processes (a name looked up and absent, then created; a directory looked up,
then renamed away and made anew; a file read, then removed; a directory held in flight, then moved out of the
project) and the next process must see the real tree. Real processes, real namespaces, real overlays, the
thread launcher (root only).
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from processes import sandboxed_bash, spares_made_ahead, until

from toolrt.sandbox import namespaces
from toolrt.sandbox.masks import Masks
from toolrt.sandbox.plan import SandboxPlan, plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
pytestmark = [
    pytest.mark.skipif(
        not (SUPPORT.landlock_abi and SUPPORT.mount_namespace and SUPPORT.pid_namespace),
        reason=f"no mount or PID namespace: {SUPPORT.describe()}",
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="the thread launcher makes namespaces itself only as root"),
]


def _plan(root: Path, masks: Masks | None = None) -> SandboxPlan:
    plan = plan_sandbox(
        SandboxPolicy(protected=(root / "tools.d",)),
        replace(SUPPORT, launch="thread"),
        root=root,
        output_dir=root.parent / "out",
        masks=masks if masks is not None else Masks(),
    )
    assert plan is not None and plan.covered == ("tools.d",) and plan.pid_namespace
    return plan


def _ready(root: Path) -> int:
    """How many namespaces covering `root` wait for their next process."""
    return sum(len(ready) for key, ready in spares_made_ahead().items() if repr(str(root)) in key[1])


def _run(command: str, plan: SandboxPlan, root: Path) -> tuple[str, str]:
    """(the process's mount namespace, its output after that line), once the one it used is ready again."""
    output = sandboxed_bash(f"readlink /proc/self/ns/mnt; {command}", plan, root).output
    until(lambda: _ready(root) >= 1 and not namespaces._building, "made the next process's namespace ahead")
    namespace, _, rest = output.partition("\n")
    return namespace, rest


def test_the_next_process_sees_every_change_made_beside_the_last_one(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_text("v0\n")
    (root / "gone0").write_text("here\n")
    plan = _plan(root)
    seen: list[str] = []
    for step in range(6):
        # This process looks up a name not there yet, a file in a directory, and a file the host removes next.
        namespace, output = _run(
            f"cat absent{step} d/f gone{step} 2>&1; mkdir tools.d/x 2>&1 || echo refused", plan, root
        )
        seen.append(namespace)
        assert f"absent{step}: No such file or directory" in output, output
        assert f"v{step}\nhere\n" in output and output.endswith("refused\n"), output
        (root / f"absent{step}").write_text("made later\n")  # must not stay absent for the next process
        (root / "d").rename(root / f"old{step}")  # the directory looked up goes, another takes its name
        (root / "d").mkdir()
        (root / "d" / "f").write_text(f"v{step + 1}\n")
        (root / f"gone{step}").unlink()  # read by this process, gone now
        (root / f"gone{step + 1}").write_text("here\n")
        namespace, output = _run(f"cat absent{step} d/f gone{step} 2>&1; ls", plan, root)
        seen.append(namespace)
        assert f"made later\nv{step + 1}\n" in output, output
        assert f"gone{step}: No such file or directory" in output and f"old{step}\n" in output, output
    assert not (root / "tools.d").exists()


def test_a_directory_moved_above_a_mask_gives_a_namespace_that_sees_the_new_one(tmp_path: Path) -> None:
    """A denied directory's mask holds the overlay's entry of each directory above it while the namespace
    lasts: moving one of them away and the masked directory (the same inode) into a new one in its place
    must not leave a namespace made ahead showing the old directory under the name."""
    root = tmp_path / "project"
    (root / "sub" / "vault").mkdir(parents=True)
    (root / "sub" / "vault" / "key").write_text("SECRET\n")
    (root / "sub" / "before.txt").write_text("old\n")
    plan = _plan(root, Masks((), (str(root / "sub" / "vault"),)))
    _, output = _run("ls sub sub/vault; cat sub/vault/key 2>&1", plan, root)
    assert "before.txt" in output and "SECRET" not in output, output
    _, output = _run("ls sub", plan, root)  # a second process, from a reused namespace (or the one made ahead)
    assert "before.txt" in output, output
    (root / "sub").rename(root / "moved")
    (root / "sub").mkdir()
    (root / "moved" / "vault").rename(root / "sub" / "vault")  # the same directory, the same mask key
    (root / "sub" / "after.txt").write_text("new\n")
    plan = _plan(root, Masks((), (str(root / "sub" / "vault"),)))
    for _ in range(3):
        _, output = _run("ls sub; cat sub/vault/key 2>&1; touch sub/made && echo made", plan, root)
        assert "after.txt" in output and "before.txt" not in output and "SECRET" not in output, output
        assert (root / "sub" / "made").exists() and not (root / "moved" / "made").exists()


def test_a_directory_above_a_mask_made_stricter_by_the_host_is_refused_to_the_next_process(tmp_path: Path) -> None:
    """The overlay checks a process's access against the mode it copied when it looked the directory up; the
    entries a mask holds keep that copy. A sandboxed process has no capability, so mode 000 keeps even root's
    out: the next process must meet the mode of now, not the one the namespace's last process saw."""
    root = tmp_path / "project"
    (root / "sub" / "vault").mkdir(parents=True)
    (root / "sub" / "open.txt").write_text("readable\n")
    plan = _plan(root, Masks((), (str(root / "sub" / "vault"),)))
    for _ in range(2):
        _, output = _run("cat sub/open.txt 2>&1", plan, root)
        assert output == "readable\n", output
    (root / "sub").chmod(0)
    try:
        for _ in range(2):
            _, output = _run("cat sub/open.txt 2>&1", plan, root)
            assert "Permission denied" in output and "readable" not in output, output
    finally:
        (root / "sub").chmod(0o755)


def test_a_process_cannot_change_the_mode_of_the_terminals_or_proc_for_the_next(
    tmp_path: Path,
) -> None:
    """A procfs outlives the process (every covered namespace copied from one base shares it, every process of a
    kept namespace too), and so did a covered namespace's devpts while the namespace served the next process
    of its key. Landlock does not govern a mode change: a sandboxed root, owner of their roots, could `chmod
    000` them and leave every later process without terminals, `/proc/self` or `/dev/fd`. Each is mounted
    read-only, so the change is refused."""
    root = tmp_path / "project"
    root.mkdir()
    plan = _plan(root)
    targets = "/dev/pts /dev/pts/ptmx /proc"
    _, before = _run(f"stat -c %a {targets}", plan, root)
    for _ in range(2):
        _, output = _run(f"chmod 000 {targets} 2>&1; chmod 777 {targets} 2>&1; echo done", plan, root)
        assert output.count("Read-only file system") == 6 and output.endswith("done\n"), output
        terminal = "python3 -c 'import os, pty; print(os.ttyname(pty.openpty()[1]))'"
        _, after = _run(f"stat -c %a {targets}; ls /proc/self/fd; {terminal}", plan, root)
        assert after.startswith(before) and re.search(r"\n/dev/pts/[0-9]+\n$", after), after
        assert after.removeprefix(before).startswith("0\n1\n2\n"), after


_PIN = """python3 -c "
import array, os, socket
held = array.array('i', [os.open('d', os.O_RDONLY), os.open('d/f', os.O_RDONLY)])
a, b = socket.socketpair()  # each end sent over the other with the files: in flight after every process ended
a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [a.fileno(), b.fileno(), *held]))])
b.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [a.fileno(), b.fileno(), *held]))])
print('pinned')
"
"""


def test_a_directory_a_process_left_in_flight_is_not_the_next_process_s_once_the_person_moved_it_away(
    tmp_path: Path,
) -> None:
    """A process can leave descriptors behind it: sent over a socket pair whose ends are in flight over each
    other, they outlive every process of its PID namespace until the kernel's garbage collector finds them,
    and keep the overlay's entries for their names looked up. The person then moves the directory out of
    the project (a private place) and makes another under its name: the next process must see the new one,
    and neither read nor write the one moved away, which is outside every rule's reach now."""
    root = tmp_path / "project"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f").write_text("v0\n")
    private = tmp_path / "private"
    private.mkdir()
    plan = _plan(root)
    for step in range(4):
        assert sandboxed_bash(_PIN, plan, root).output == "pinned\n"
        until(lambda: _ready(root) >= 1 and not namespaces._building, "made the next namespace ready")
        (root / "d").rename(private / f"moved{step}")
        (root / "d").mkdir()
        (root / "d" / "f").write_text(f"v{step + 1}\n")
        output = sandboxed_bash(f"cat d/f; ls d; echo x > d/written{step}; echo $?", plan, root).output
        assert output == f"v{step + 1}\nf\n0\n", output
        assert not (private / f"moved{step}" / f"written{step}").exists()
        assert (root / "d" / f"written{step}").read_text() == "x\n"
