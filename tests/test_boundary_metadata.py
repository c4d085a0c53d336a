"""A file the sandbox does not let a process write keeps its mode and times: Landlock governs writes, not
`chmod` or `utimes`, and the owner of a file may change both. Toolrt running as root (an agent's container)
runs its programs as root without capabilities, the owner of every system file: a mode change outside the
writable set is a write the person never allowed (`chmod u+s` on a root-owned binary, `chmod 666` on
`/etc/shadow`). Every mount outside the writable directories is read-only in the process's namespace
(`binds.read_only_elsewhere`), and no file anywhere gets a set-user-ID or set-group-ID bit (the seccomp
filter, `seccomp`). Real processes, real files, both launchers (root only: a file of root's is the target).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path

import pytest
from processes import sandboxed_bash

from toolrt.attribution import _CLOCK_SLACK_NS, Journal, journal_for
from toolrt.execute.confinement import confinement
from toolrt.sandbox import plan as plan_module
from toolrt.sandbox.masks import Masks
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.seccomp import supported as seccomp_supported
from toolrt.sandbox.support import Launch, Support, detect_support

SUPPORT = detect_support()
pytestmark = [
    pytest.mark.skipif(not SUPPORT.landlock_abi, reason=f"no Landlock: {SUPPORT.describe()}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the target is a file of root's, changed by a sandboxed root"),
]


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
    output = sandboxed_bash(f"echo x >> {target}; chmod 777 {target}; touch -d 2000-01-01 {target}", plan, root).output
    assert output.count("Read-only file system") == 3, output  # the write, the mode and the times: EROFS
    after = target.stat()
    assert target.read_text() == "kept\n"
    assert (after.st_mode, after.st_mtime_ns) == (before.st_mode, before.st_mtime_ns), output


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_in_the_default_mode_only_the_writable_directories_change_mode_times_or_attributes(
    tmp_path: Path, launch: Launch
) -> None:
    """The default mode, a file of root's in a directory outside every writable one (root's home): its mode,
    times and extended attributes stay; the same changes inside the project and in /tmp go through."""
    root = tmp_path / "project"
    root.mkdir()
    home = Path(tempfile.mkdtemp(prefix=".toolrt-metadata-test-", dir=Path.home()))
    try:
        target = home / "system-file"
        target.write_text("kept\n")
        target.chmod(0o644)
        mine, temporary = root / "mine", tmp_path / "temporary"
        for path in (mine, temporary):
            path.write_text("x\n")
        before = target.stat()
        plan = plan_sandbox(
            SandboxPolicy(), replace(SUPPORT, launch=launch), root=root, output_dir=tmp_path / "out", masks=Masks()
        )
        assert plan is not None and not any(str(home).startswith(w) for w in plan.writable)
        set_attribute = shlex.quote("import os, sys; os.setxattr(sys.argv[1], 'user.toolrt', b'1')")
        script = "; ".join(
            f"chmod 755 {path}; touch -d 2000-01-01 {path}; python3 -c {set_attribute} {path} 2>&1 | tail -1"
            for path in (target, mine, temporary)
        )
        output = sandboxed_bash(script, plan, root).output
        assert output.count("Read-only file system") == 3, output  # all three on the file outside, none inside
        after = target.stat()
        assert (after.st_mode, after.st_mtime_ns) == (before.st_mode, before.st_mtime_ns), output
        assert "user.toolrt" not in os.listxattr(target)
        for path in (mine, temporary):
            assert path.stat().st_mode & 0o7777 == 0o755 and os.getxattr(path, "user.toolrt") == b"1", output
    finally:
        shutil.rmtree(home)


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_the_dev_null_a_process_reads_from_is_its_namespaces_not_the_hosts(tmp_path: Path, launch: Launch) -> None:
    """A process without input reads /dev/null: one opened outside its namespace (by toolrt, handed to the
    fork server) is the host's, on a mount no namespace made read-only, and a `chmod 000` through
    `/proc/self/fd/0` would take every program's /dev/null away. The mode asked is the one it has, the
    owner the one it has: a change that got through changes nothing."""
    root = tmp_path / "project"
    root.mkdir()
    plan = plan_sandbox(
        SandboxPolicy(), replace(SUPPORT, launch=launch), root=root, output_dir=tmp_path / "out", masks=Masks()
    )
    assert plan is not None
    null = os.stat("/dev/null")
    mode = f"{null.st_mode & 0o7777:o}"
    script = f"chmod {mode} /proc/self/fd/0; chown {null.st_uid}:{null.st_gid} /proc/self/fd/0; head -c 1 /dev/stdin"
    outcome = sandboxed_bash(script, plan, root)
    assert outcome.output.count("Read-only file system") == 2, outcome.output
    assert "head" not in outcome.output, outcome.output  # still /dev/null: read, empty


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_link_put_above_a_writable_directory_makes_nothing_it_leads_to_changeable(
    tmp_path: Path, launch: Launch
) -> None:
    """A host-declared writable directory `ext/a/bin`, and a call the person let write `ext` (an approved
    `external_directory`) that puts a link to `sys` in the place of `ext/a`: from then on the declared
    name leads to `sys/bin`. Landlock's rule is left out (a link on the way, `kernel._open_rule_path`);
    the mount must be too, or `sys/bin`, outside every writable directory, gets a writable mount in the
    next call's namespace and its files' mode and times change (a `chmod u+s` on a binary of root's)."""
    root, out = tmp_path / "project", tmp_path / "out"
    root.mkdir()
    support = replace(SUPPORT, launch=launch)
    with _declared_and_elsewhere() as (ext, target):
        target.chmod(0o755)
        before = target.stat()
        declared = SandboxPolicy(writable=(ext / "a" / "bin",))
        plan = plan_sandbox(declared, support, root=root, output_dir=out, masks=Masks())
        assert plan is not None and str(ext / "a" / "bin") in plan.writable
        assert "wrote" in sandboxed_bash(f"touch {ext}/a/bin/new && echo wrote", plan, root).output
        _put_the_link(ext, target.parent.parent, support, root, out)
        plan = plan_sandbox(declared, support, root=root, output_dir=out, masks=Masks())
        assert plan is not None
        named = ext / "a" / "bin" / "tool"
        output = sandboxed_bash(f"chmod 700 {named}; touch -d 2000-01-01 {named}", plan, root).output
        assert output.count("Read-only file system") == 2, output
        after = target.stat()
        assert (after.st_mode, after.st_mtime_ns) == (before.st_mode, before.st_mtime_ns), output


@contextmanager
def _declared_and_elsewhere() -> Iterator[tuple[Path, Path]]:
    """In a fresh directory of root's home (outside every writable directory): `ext/a/bin`, to be declared
    writable, and `sys/bin/tool`, a file of root's elsewhere; yields `ext` and that file."""
    home = Path(tempfile.mkdtemp(prefix=".toolrt-metadata-test-", dir=Path.home()))
    try:
        ext, system = home / "ext", home / "sys"
        (ext / "a" / "bin").mkdir(parents=True)
        (system / "bin").mkdir(parents=True)
        target = system / "bin" / "tool"
        target.write_text("kept\n")
        yield ext, target
    finally:
        shutil.rmtree(home)


def _put_the_link(
    ext: Path, system: Path, support: Support, root: Path, out: Path, journal: Journal | None = None
) -> None:
    """A call the person let write `ext` (an approved `external_directory`) puts a link to `system` in the
    place of `ext/a`: the declared `ext/a/bin` leads to `system/bin` from then on. With `journal`, the call's
    process is journalled as `rt.call` journals it (its span, what its sandbox let it write)."""
    approved = SandboxPolicy(writable=(ext / "a" / "bin", ext))
    widened = plan_sandbox(approved, support, root=root, output_dir=out, masks=Masks(), granted=(ext,))
    assert widened is not None
    swap = f"mv {ext}/a {ext}/a.old && ln -s {system} {ext}/a && echo swapped"
    with journal.process("call-that-plants", timeout=60, confined=confinement(widened)) if journal else nullcontext():
        assert "swapped" in sandboxed_bash(swap, widened, root).output


@pytest.mark.skipif(not seccomp_supported(), reason="no seccomp filter on this architecture")
@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_process_makes_no_set_user_or_group_id_file_even_where_it_may_write(tmp_path: Path, launch: Launch) -> None:
    """/tmp and the project are writable and the host's mounts of them honour set-user-ID bits: a root
    without capabilities owns what it makes, so `cp /bin/sh /tmp/x; chmod u+s /tmp/x` would leave a
    root shell for any user of the machine (and a person's toolrt, a shell of the person's). No route
    sets the bit, or set-group-ID: chmod, install, `cp -p` of a set-user-ID program, a file created
    with the bit, mknod; a plain mode change still works."""
    root = tmp_path / "project"
    root.mkdir()
    plan = plan_sandbox(
        SandboxPolicy(), replace(SUPPORT, launch=launch), root=root, output_dir=tmp_path / "out", masks=Masks()
    )
    assert plan is not None and plan.no_unix_sockets
    made = tmp_path / "made"
    made.mkdir()
    suid = shutil.which("su") or shutil.which("passwd") or shutil.which("mount")
    assert suid is not None and os.stat(suid).st_mode & 0o4000
    create = shlex.quote("import os, sys; os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o4755)")
    node = shlex.quote("import os, stat, sys; os.mknod(sys.argv[1], stat.S_IFREG | 0o4755)")
    routes = [
        f"cp /bin/true {made}/chmod && chmod 4755 {made}/chmod",
        f"cp /bin/true {made}/chmod-g && chmod g+s {made}/chmod-g",
        "cp /bin/true mine && chmod u+s mine",
        f"install -m 4755 /bin/true {made}/install",
        f"cp -p {suid} {made}/copied",
        f"python3 -c {create} {made}/created",
        f"python3 -c {create.replace('O_WRONLY', 'O_WRONLY | os.O_TRUNC')} {made}/created2",
        f"python3 -c {node} {made}/node",
    ]
    script = (
        "; ".join(f"( {route} ) 2>&1" for route in routes) + f"; cp /bin/true {made}/plain && chmod 700 {made}/plain"
    )
    output = sandboxed_bash(script, plan, root).output
    setting = {p.name: oct(p.stat().st_mode) for p in (*made.iterdir(), root / "mine") if p.stat().st_mode & 0o6000}
    assert not setting, output
    assert "Operation not permitted" in output, output
    assert (made / "plain").stat().st_mode & 0o7777 == 0o700, output


@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_an_approved_directory_changes_for_its_call_only_and_host_mounts_keep_their_flags(
    tmp_path: Path, launch: Launch
) -> None:
    """An `external_directory` the person approved for one call: its files' mode changes in that call,
    and in the next one it is read-only again. A host's read-only mount inside the project stays
    read-only; a host's writable mount outside every writable directory is read-only."""
    root = tmp_path / "project"
    inside = root / "read-only-mount"
    inside.mkdir(parents=True)
    home = Path(tempfile.mkdtemp(prefix=".toolrt-metadata-test-", dir=Path.home()))
    mounted: list[Path] = []
    try:
        approved, outside = home / "approved", home / "writable-mount"
        approved.mkdir()
        outside.mkdir()
        for target, options in ((inside, "ro,size=64k"), (outside, "size=64k")):
            subprocess.run(["mount", "-t", "tmpfs", "-o", options, "toolrt-test", str(target)], check=True)
            mounted.append(target)
        (outside / "file").write_text("kept\n")
        (approved / "file").write_text("x\n")
        support = replace(SUPPORT, launch=launch)
        out = tmp_path / "out"
        widened = SandboxPolicy(writable=(approved,))
        plan = plan_sandbox(widened, support, root=root, output_dir=out, masks=Masks(), granted=(approved,))
        assert plan is not None
        output = sandboxed_bash(f"chmod 700 {approved}/file && echo CHANGED", plan, root).output
        assert "CHANGED" in output and (approved / "file").stat().st_mode & 0o777 == 0o700, output
        plan = plan_sandbox(SandboxPolicy(), support, root=root, output_dir=out, masks=Masks())
        assert plan is not None
        script = f"chmod 755 {approved}/file; touch {inside}/new; chmod 700 {inside}; chmod 700 {outside}/file"
        output = sandboxed_bash(script, plan, root).output
        assert output.count("Read-only file system") == 4, output
        assert (approved / "file").stat().st_mode & 0o777 == 0o700
        assert (outside / "file").stat().st_mode & 0o777 == 0o644
        assert not (inside / "new").exists()
    finally:
        for target in mounted:
            subprocess.run(["umount", str(target)], check=True)
        shutil.rmtree(home)


def test_a_link_put_above_a_declared_writable_directory_widens_nothing_for_a_later_toolrt(tmp_path: Path) -> None:
    """As `test_a_link_put_above_a_writable_directory_makes_nothing_it_leads_to_changeable`, but the next
    call is planned by a toolrt started after the link was put (its resolution of the declared directory not
    cached): the host's links are followed, this one is not, since the attribution journal holds the span of
    the call that put it there, which could write where it is."""
    root, out = tmp_path / "project", tmp_path / "out"
    root.mkdir()
    journal = journal_for(tmp_path / "data")
    with _declared_and_elsewhere() as (ext, target):
        _put_the_link(ext, target.parent.parent, SUPPORT, root, out, journal)
        _a_toolrt_started_now()
        declared = SandboxPolicy(writable=(ext / "a" / "bin",))
        plan = plan_sandbox(declared, SUPPORT, root=root, output_dir=out, masks=Masks(), journal=journal)
        assert plan is not None
        assert str(target.parent) not in plan.writable, plan.writable
        output = sandboxed_bash(f"echo changed > {ext}/a/bin/tool; touch {ext}/a/bin/new", plan, root).output
        assert target.read_text() == "kept\n" and not (target.parent / "new").exists(), output
        assert output.count("Read-only file system") == 2, output


def test_a_declared_writable_directory_behind_a_link_of_the_host_s_stays_writable(tmp_path: Path) -> None:
    """The same layout with the link made by the host (no process a tool started was running): the
    declared directory is where the host pointed it, and writable there."""
    root, out = tmp_path / "project", tmp_path / "out"
    root.mkdir()
    journal = journal_for(tmp_path / "data")
    with _declared_and_elsewhere() as (ext, target):
        (ext / "a").rename(ext / "a.old")
        (ext / "a").symlink_to(target.parent.parent)
        _a_toolrt_started_now()
        declared = SandboxPolicy(writable=(ext / "a" / "bin",))
        plan = plan_sandbox(declared, SUPPORT, root=root, output_dir=out, masks=Masks(), journal=journal)
        assert plan is not None
        assert str(target.parent) in plan.writable, plan.writable
        output = sandboxed_bash(f"echo changed > {ext}/a/bin/tool", plan, root).output
        assert target.read_text() == "changed\n", output


def _a_toolrt_started_now() -> None:
    """Forget what this process resolved of the host's declared directories, as a toolrt started now has."""
    plan_module._fixed_writable.cache_clear()
    plan_module._declared_links.cache_clear()


def test_a_link_made_in_one_call_and_moved_above_a_declared_directory_in_another_widens_nothing(
    tmp_path: Path,
) -> None:
    """The link is made in a call that could write `stage` only, inside a directory `stage/d`; a second
    call, let write `stage` and `ext`, renames `stage/d` into the place of `ext/d`. Renaming a directory
    leaves the ctime of what is in it as it was: the link's ctime falls in the first call's span, whose
    sandbox could not write where the link is now, and in no span of the second call. The declared
    `ext/d/a/bin` now leads to `sys/bin`: a toolrt started after both calls must not make that writable."""
    root, out = tmp_path / "project", tmp_path / "out"
    root.mkdir()
    journal = journal_for(tmp_path / "data")
    with _declared_and_elsewhere() as (ext, target):
        (ext / "d" / "a" / "bin").mkdir(parents=True)
        stage = ext / "stage"
        stage.mkdir()
        first = plan_sandbox(SandboxPolicy(writable=(stage,)), SUPPORT, root=root, output_dir=out, masks=Masks())
        assert first is not None
        make = f"mkdir {stage}/d && ln -s {target.parent.parent} {stage}/d/a && echo made"
        with journal.process("call-that-makes", timeout=60, confined=confinement(first)):
            assert "made" in sandboxed_bash(make, first, root).output
        _clock_past(time.time_ns() + 2 * _CLOCK_SLACK_NS)  # calls a person answers are seconds apart
        second = plan_sandbox(SandboxPolicy(writable=(ext,)), SUPPORT, root=root, output_dir=out, masks=Masks())
        assert second is not None
        move = f"mv {ext}/d {ext}/d.old && mv {stage}/d {ext}/d && echo moved"
        with journal.process("call-that-moves", timeout=60, confined=confinement(second)):
            assert "moved" in sandboxed_bash(move, second, root).output
        _a_toolrt_started_now()
        declared = SandboxPolicy(writable=(ext / "d" / "a" / "bin",))
        plan = plan_sandbox(declared, SUPPORT, root=root, output_dir=out, masks=Masks(), journal=journal)
        assert plan is not None
        assert str(target.parent) not in plan.writable, plan.writable
        output = sandboxed_bash(f"echo changed > {ext}/d/a/bin/tool", plan, root).output
        assert target.read_text() == "kept\n", output


def _clock_past(moment_ns: int) -> None:
    """Return once the clock is past `moment_ns` (what the journal's spans are measured by)."""
    while (left := moment_ns - time.time_ns()) > 0:
        threading.Event().wait(left / 1e9)


def test_a_directory_holding_a_link_of_the_host_s_renamed_above_a_declared_directory_widens_nothing(
    tmp_path: Path,
) -> None:
    """The host's own link `ext/lib/bin` (to `sys/bin`, for reading) is moved by a call allowed to write
    `ext`, which renames `ext/lib` into the place of `ext/a`: the link's change time stays the host's, but
    the declared `ext/a/bin` is now that link. The renamed directory's change time is the call's, at a
    place it could write: a toolrt started after it must not make `sys/bin` writable."""
    root, out = tmp_path / "project", tmp_path / "out"
    root.mkdir()
    journal = journal_for(tmp_path / "data")
    with _declared_and_elsewhere() as (ext, target):
        (ext / "lib").mkdir()
        (ext / "lib" / "bin").symlink_to(target.parent)
        _clock_past(time.time_ns() + 2 * _CLOCK_SLACK_NS)  # the host's link, made before any call
        approved = plan_sandbox(SandboxPolicy(writable=(ext,)), SUPPORT, root=root, output_dir=out, masks=Masks())
        assert approved is not None
        move = f"mv {ext}/a {ext}/a.old && mv {ext}/lib {ext}/a && echo moved"
        with journal.process("call-that-moves", timeout=60, confined=confinement(approved)):
            assert "moved" in sandboxed_bash(move, approved, root).output
        _a_toolrt_started_now()
        declared = SandboxPolicy(writable=(ext / "a" / "bin",))
        plan = plan_sandbox(declared, SUPPORT, root=root, output_dir=out, masks=Masks(), journal=journal)
        assert plan is not None
        assert str(target.parent) not in plan.writable, plan.writable
        output = sandboxed_bash(f"echo changed > {ext}/a/bin/tool", plan, root).output
        assert target.read_text() == "kept\n", output


def test_a_file_made_beside_a_link_of_the_host_s_leaves_the_declared_directory_behind_it_writable(
    tmp_path: Path,
) -> None:
    """The host's `ext/a` is a link to `sys`, and a call allowed to write `ext` makes a file in `ext`
    (changing `ext`'s change time, not moving anything onto the way): `ext` is the root of what that call
    could write, which it cannot rename, so the declared `ext/a/bin` stays writable where the host
    pointed it for a toolrt started after the call."""
    root, out = tmp_path / "project", tmp_path / "out"
    root.mkdir()
    journal = journal_for(tmp_path / "data")
    with _declared_and_elsewhere() as (ext, target):
        (ext / "a").rename(ext / "a.old")
        (ext / "a").symlink_to(target.parent.parent)
        _clock_past(time.time_ns() + 2 * _CLOCK_SLACK_NS)  # the host's link, made before any call
        approved = plan_sandbox(SandboxPolicy(writable=(ext,)), SUPPORT, root=root, output_dir=out, masks=Masks())
        assert approved is not None
        with journal.process("call-that-writes", timeout=60, confined=confinement(approved)):
            assert "made" in sandboxed_bash(f"echo x > {ext}/notes && echo made", approved, root).output
        _a_toolrt_started_now()
        declared = SandboxPolicy(writable=(ext / "a" / "bin",))
        plan = plan_sandbox(declared, SUPPORT, root=root, output_dir=out, masks=Masks(), journal=journal)
        assert plan is not None
        assert str(target.parent) in plan.writable, plan.writable
        output = sandboxed_bash(f"echo changed > {ext}/a/bin/tool", plan, root).output
        assert target.read_text() == "changed\n", output
