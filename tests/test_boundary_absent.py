"""Absent protected names are as unwritable as existing ones, by the kernel, through every route.

The project has no `tools.d/`, `toolrt.yaml`, `permissions.yaml`, `.envrc`, `.vscode/`... Each route of
issue 25 tries to create one of them from inside the real sandbox (real bash, the real kernel, both
launchers), with the real snapshot's protected list and no rule in the way (the processes are started
directly, and once through `bash` with `bash: {"*": allow}` running a script the analyzer cannot read).
Afterwards none of them exists in the real tree, and nothing was created there for the cover either,
while ordinary new names at the root still work.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from toolrt import Runtime
from toolrt.build.snapshot import build_snapshot
from toolrt.execute import ProcessOutcome, build_env, run_process
from toolrt.sandbox.config import call_plan
from toolrt.sandbox.support import Launch, detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.mount_namespace), reason=f"no mount namespace here: {SUPPORT.describe()}"
)

ROUTES = {
    "install+link": "install -d tools.d && link stage.yaml tools.d/p.yaml",
    "shuf": "shuf -o toolrt.yaml stage.yaml",
    "iconv": "iconv -f utf-8 -t utf-8 -o permissions.yaml stage.yaml",
    "split": "split -n 1 --additional-suffix=.yaml stage.yaml .vscode/",
    "csplit": "csplit -s -f .idea/x stage.yaml 2",
    "git clone": "git clone -q . tools.d",
    "git init": "git init -q tools.d",
    "git checkout-index": "git checkout-index --prefix=tools.d/ -a",
    "git diff --output": "git diff --output=toolrt.yaml HEAD",
    "cpio -p": "echo stage.yaml | cpio -pd --quiet tools.d",
    "mkdir": "mkdir .vscode",
    "mv": "cp stage.yaml staged && mv staged toolrt.yaml",
    "ln": "ln stage.yaml .envrc",
    "ln -s": "ln -s stage.yaml .env",
    "rename": 'cp stage.yaml staged2 && python3 -c \'import os; os.rename("staged2", "permissions.yaml")\'',
    "rename a directory": "mkdir -p dir/sub && mv dir tools.d",
    # A directory renamed onto a placeholder (not into it): the overlay would make it the real name. Only
    # the bind over each placeholder (a mount point: EBUSY) stops these two; without it both got through.
    "rename a directory onto one": "mkdir -p onto/sub && mv -T onto tools.d",
    "rename(2) an empty directory onto one": ('mkdir empty && python3 -c \'import os; os.rename("empty", ".vscode")\''),
    # A placeholder's own metadata: overlayfs copies a lower directory up (into the real tree) before it
    # changes its attributes, and whites a removed one out there. The read-only bind over each placeholder
    # refuses all of them; an immutable placeholder would not (FS_IOC_SETFLAGS copies it up first).
    "chattr": (
        'python3 -c \'import fcntl, os, struct; fd = os.open(".vscode", os.O_RDONLY); flags = bytearray(4); '
        "fcntl.ioctl(fd, 0x80086601, flags); "
        'fcntl.ioctl(fd, 0x40086602, struct.pack("i", struct.unpack("i", flags)[0] | 0x80))\''
    ),
    "chmod": "chmod 700 .idea",
    "touch": "touch .envrc",
    "setxattr": 'python3 -c \'import os; os.setxattr(".env", "user.toolrt", b"1")\'',
    "rmdir": "rmdir .vscode",
    # At a placeholder: nothing writes into it, replaces it or reaches its inode.
    "write into one": "echo x > .envrc",
    "truncate": "truncate -s 0 toolrt.yaml",
    "a file beneath one": 'python3 -c \'open("tools.d/p.yaml", "w")\'',
    "chmod through an O_PATH descriptor": (
        'python3 -c \'import os; fd = os.open(".envrc", os.O_PATH); os.chmod(f"/proc/self/fd/{fd}", 0o777)\''
    ),
    "a hard link to one": "ln .envrc linked",
    "a FIFO in its place": "mkfifo .bashrc",
    "a socket bound at its name": ("python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\".profile\")'"),
    # renameat2's flags: a swap with a real file (RENAME_EXCHANGE), a rename that refuses an existing target
    # (RENAME_NOREPLACE), one that leaves a whiteout behind (RENAME_WHITEOUT); each is a route of its own.
    **{
        f"renameat2 {flag}": (
            f"cp stage.yaml staged3 && python3 -c 'import ctypes, sys; libc = ctypes.CDLL(None); "
            f'sys.exit(libc.renameat2(-100, b"staged3", -100, b"toolrt.yaml", {value}) != 0)\''
        )
        for flag, value in (("RENAME_EXCHANGE", 2), ("RENAME_NOREPLACE", 1), ("RENAME_WHITEOUT", 4))
    },
    "an O_TMPFILE file linked at its name": (
        'python3 -c \'import ctypes, os, sys; fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o644); '
        'sys.exit(ctypes.CDLL(None).linkat(-100, f"/proc/self/fd/{fd}".encode(), -100, b".envrc", 0x400) != 0)\''
    ),
    "unlink one": "python3 -c 'import os; os.unlink(\".idea\")'",
}
LEFT = {"ok.txt", "staged", "staged2", "staged3", "dir", "onto", "empty"}
"""What the refused routes leave behind, and the ordinary file."""
ORDINARY = "echo fine > ok.txt && mkdir d && mv d d2 && rm -r d2 && sed -i s/one/two/ stage.yaml && echo ORDINARY-OK"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "stage.yaml").write_text("id: p\none\n", encoding="utf-8")
    git = ["git", "-C", str(root), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "stage.yaml"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    return root


def _script() -> str:
    lines = [
        f"if ( {command} ) 2>/dev/null; then echo 'ROUTE {name}: got through'; fi" for name, command in ROUTES.items()
    ]
    return "\n".join([*lines, ORDINARY, ""])


def _check_nothing_got_through(root: Path, output: str, before: set[str]) -> None:
    assert "got through" not in output, output
    assert "ORDINARY-OK" in output, output
    protected = build_snapshot(root, partial=True).sandbox.protected
    names = {p.name for p in protected if p.parent == root}
    assert {"tools.d", "toolrt.yaml", "permissions.yaml", ".envrc", ".vscode", ".idea", ".env"} <= names
    created = set(os.listdir(root)) - before
    assert created == LEFT  # what the refused routes left, and the ordinary file
    assert not created & names
    assert (root / "stage.yaml").read_text() == "id: p\ntwo\n"


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_no_route_creates_an_absent_protected_name(project: Path, launch: Launch) -> None:
    before = set(os.listdir(project))
    snapshot = build_snapshot(project, partial=True)
    plan = call_plan(
        snapshot.sandbox, root=project, output_dir=snapshot.truncation_dir, support=replace(SUPPORT, launch=launch)
    )
    assert plan is not None and "absent protected covered" in plan.description

    async def main() -> ProcessOutcome:
        return await run_process(["bash", "-c", _script()], cwd=project, env=build_env(), timeout=30, sandbox=plan)

    outcome = anyio.run(main)
    _check_nothing_got_through(project, outcome.output, before)


def test_a_script_the_rules_cannot_read_is_stopped_by_the_kernel(project: Path) -> None:
    (project / "permissions.yaml").write_text('permission:\n  "*": allow\n  bash: {"*": allow}\n', encoding="utf-8")
    (project / "routes.sh").write_text(_script().replace("permissions.yaml", ".gitmodules"), encoding="utf-8")
    before = set(os.listdir(project))

    async def main() -> str:
        with Runtime.load(project, partial=True) as rt:
            result = await rt.call("bash", {"command": "bash routes.sh", "description": "routes"})
            assert result.error is None, result.error
            return result.output

    output = anyio.run(main)
    assert "got through" not in output and "ORDINARY-OK" in output, output
    assert not (project / "tools.d").exists() and not (project / "toolrt.yaml").exists()
    assert not (project / ".gitmodules").exists() and not (project / ".envrc").exists()
    assert set(os.listdir(project)) - before <= LEFT


def test_the_model_is_told_why_and_ordinary_directories_stay_its_own(project: Path) -> None:
    (project / "build" / "out").mkdir(parents=True)
    snapshot = build_snapshot(project, partial=True)
    plan = call_plan(snapshot.sandbox, root=project, output_dir=snapshot.truncation_dir)
    assert plan is not None

    def run(command: str) -> str:
        async def main() -> ProcessOutcome:
            return await run_process(["bash", "-c", command], cwd=project, env=build_env(), timeout=30, sandbox=plan)

        return anyio.run(main).output

    output = run("mkdir tools.d")
    assert "toolrt: tools.d is a protected name" in output and "`protected` question" in output
    output = run("rm -rf .vscode")
    assert "toolrt: .vscode is a protected name" in output
    output = run(
        "mkdir lib && mv stage.yaml lib/ && ln lib/stage.yaml hard && mv lib lib2 && rm -rf build && echo DONE"
    )
    assert output.strip() == "DONE"  # moves between directories and removals at the root work as outside
    assert (project / "lib2" / "stage.yaml").is_file() and not (project / "build").exists()


def test_whole_tree_copies_in_the_sandbox_pass_over_the_placeholders(project: Path) -> None:
    """Programs that copy or archive the whole project work in the sandbox: a placeholder copies as the
    empty directory it is (a socket file in its place stopped `shutil.copytree` and Node's `fs.cpSync`)."""
    snapshot = build_snapshot(project, partial=True)
    plan = call_plan(snapshot.sandbox, root=project, output_dir=snapshot.truncation_dir)
    assert plan is not None and "absent protected covered" in plan.description
    copy = "import shutil; shutil.copytree('.', 'copy', ignore=shutil.ignore_patterns('copy', '.git'))"
    command = f'python3 -c "{copy}" && tar -cf tree.tar --exclude=./tree.tar . && echo COPIED'

    async def main() -> ProcessOutcome:
        return await run_process(["bash", "-c", command], cwd=project, env=build_env(), timeout=30, sandbox=plan)

    outcome = anyio.run(main)
    assert outcome.output.strip() == "COPIED", outcome.output
    assert (project / "copy" / "stage.yaml").read_text() == "id: p\none\n"
    assert sorted(os.listdir(project / "copy" / "tools.d")) == []  # the placeholder, as an empty directory
    assert not (project / "tools.d").exists()


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_the_cover_holds_when_its_lower_directory_is_replaced_between_calls(project: Path, launch: Launch) -> None:
    """Covered namespaces are copied from a kept base holding the overlay's lower layer; a lower
    directory removed and made again (a data directory cleaned up) gets a fresh base, not a broken one."""
    snapshot = build_snapshot(project, partial=True)
    support = replace(SUPPORT, launch=launch)

    def attempt() -> str:
        plan = call_plan(snapshot.sandbox, root=project, output_dir=snapshot.truncation_dir, support=support)
        assert plan is not None and plan.covered

        async def main() -> ProcessOutcome:
            command = "mkdir .vscode && echo MADE; ls -d .vscode; echo DONE"
            return await run_process(["bash", "-c", command], cwd=project, env=build_env(), timeout=30, sandbox=plan)

        return anyio.run(main).output

    first = attempt()
    plan = call_plan(snapshot.sandbox, root=project, output_dir=snapshot.truncation_dir)
    assert plan is not None
    lower = Path(plan.cover_dirs[0])
    subprocess.run(["rm", "-rf", str(lower)], check=True)
    second, third = attempt(), attempt()
    for output in (first, second, third):
        assert "MADE" not in output and ".vscode\nDONE" in output, output
    assert not (project / ".vscode").exists()


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_read_only_paths_beneath_a_covered_root_are_the_real_tree_and_stay_read_only(
    project: Path, launch: Launch
) -> None:
    """`.git` (read-only) is bound from the real tree, not from the root's overlay: git's lookups below it
    skip the overlay. It is as read-only as before, cannot be moved away, and the root stays covered."""
    snapshot = build_snapshot(project, partial=True)
    plan = call_plan(
        snapshot.sandbox, root=project, output_dir=snapshot.truncation_dir, support=replace(SUPPORT, launch=launch)
    )
    assert plan is not None and plan.covered
    assert str(project / ".git") in plan.request()["read_only"]  # type: ignore[operator]
    command = (
        "stat -c 'root %d' . && stat -c 'git %d %i' .git && stat -c 'index %d %i' .git/index;"
        " touch .git/x 2>&1; echo x >> .git/config 2>&1; mv .git gone 2>&1; mkdir .vscode 2>&1; git status --short"
    )

    async def main() -> ProcessOutcome:
        return await run_process(["bash", "-c", command], cwd=project, env=build_env(), timeout=30, sandbox=plan)

    output = anyio.run(main).output
    real = os.stat(project / ".git")
    index = os.stat(project / ".git" / "index")
    assert f"git {real.st_dev} {real.st_ino}\n" in output, output  # the real directory, not the overlay's
    assert f"index {index.st_dev} {index.st_ino}\n" in output, output
    assert f"root {real.st_dev}\n" not in output, output  # the root itself is the overlay
    assert "touch: cannot touch '.git/x': Read-only file system" in output, output
    assert ".git/config: Read-only file system" in output, output
    assert "mv: cannot move '.git' to 'gone': Device or resource busy" in output, output
    assert "mkdir: cannot create directory '.vscode': File exists" in output.replace("‘", "'").replace("’", "'")
    assert not (project / ".git" / "x").exists() and not (project / "gone").exists()
    assert not (project / ".vscode").exists() and "x\n" not in (project / ".git" / "config").read_text()


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_covered_root_outside_every_other_writable_directory_is_writable(launch: Launch) -> None:
    """The project of a person is not under /tmp: a covered root in the home directory, whose only writable
    rule is its own, takes new files and directories as one under /tmp does. Landlock ignores a mount
    point another mount hides: the rule on the real root, under the overlay, lets nothing be written in
    the overlay (every other test's project is under /tmp, whose rule did)."""
    home = Path(tempfile.mkdtemp(prefix=".toolrt-covered-test-", dir=Path.home()))
    try:
        root = home / "proj"
        root.mkdir()
        (root / "stage.yaml").write_text("id: p\none\n", encoding="utf-8")
        subprocess.run(["git", "-C", str(root), "init", "-q"], check=True)
        snapshot = build_snapshot(root, partial=True)
        plan = call_plan(
            snapshot.sandbox, root=root, output_dir=snapshot.truncation_dir, support=replace(SUPPORT, launch=launch)
        )
        assert plan is not None and "absent protected covered" in plan.description
        assert not any(root.is_relative_to(w) for w in plan.writable if w != str(root))

        async def main(command: str) -> ProcessOutcome:
            return await run_process(["bash", "-c", command], cwd=root, env=build_env(), timeout=30, sandbox=plan)

        outcome = anyio.run(main, ORDINARY)
        assert "ORDINARY-OK" in outcome.output, outcome.output
        assert (root / "ok.txt").read_text() == "fine\n"
        # the next process, in the namespace made ahead for it (its ruleset made ahead too, thread launcher)
        outcome = anyio.run(main, "echo again > ok.txt && echo NEXT-OK")
        assert "NEXT-OK" in outcome.output, outcome.output
        assert (root / "ok.txt").read_text() == "again\n"
    finally:
        shutil.rmtree(home)
