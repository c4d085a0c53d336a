"""Files the `read` rules deny are masked in the OS sandbox: attacks through real bash, the real kernel.

The bash analyzer asks `read` only for paths a line names; these lines reach a denied file by walking
the tree, by an archive, through git, or by a name built at run time, and must print nothing of it.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from processes import held_at

from toolrt import Runtime
from toolrt.errors import ToolFailure
from toolrt.permissions.denied_reads import read_denies
from toolrt.permissions.model import Rule
from toolrt.permissions.rules import Ruleset
from toolrt.sandbox import masks as masks_module
from toolrt.sandbox.bwrap import bwrap_argv
from toolrt.sandbox.masks import Masks, denied_paths
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.seatbelt import seatbelt_profile
from toolrt.sandbox.support import detect_support

SUPPORT = detect_support()
needs_mounts = pytest.mark.skipif(
    not (SUPPORT.landlock_abi and SUPPORT.mount_namespace),
    reason=f"no Landlock with a mount namespace on this machine: {SUPPORT.describe()}",
)
SECRET = "sk-live-7f3a9c"

PERMISSIONS = """\
    permission:
      "*": allow
      read:
        "*": allow
        "*.env": deny
        "*/private": deny
    """

ATTACKS = [
    "grep -r sk-live .",
    "grep -ra sk-live /proc/self/cwd/",
    "tar -c . | cat",
    "find . -type f -exec cat {} +",
    "git grep --no-index --no-exclude-standard sk-live",
    "python3 r.py",
    "sh ./s.sh",
]
"""Lines the bash analyzer allows (checked first): only the kernel's masks stand in the way."""
SCRIPT = (
    "cat */*; cat sub/*; ln -s .env alias; cat alias; cat private/key.txt; cp -r . ../copy; grep -r sk-live ../copy\n"
)


def _project(writer: Callable[..., Path], root: Path) -> Path:
    root = writer(root, permissions=PERMISSIONS, builtin_tools=True)
    (root / ".env").write_text(f"API_KEY={SECRET}\n")
    (root / "sub").mkdir()
    (root / "sub" / "app.env").write_text(f"TOKEN={SECRET}\n")
    (root / "sub" / "notes.txt").write_text("ordinary notes\n")
    (root / "private").mkdir()
    (root / "private" / "key.txt").write_text(f"{SECRET}\n")
    (root / ".gitignore").write_text("*.env\nprivate/\n")
    (root / "r.py").write_text('print(open(".e" + "nv").read())\n')
    (root / "s.sh").write_text(SCRIPT)
    (root / "w.sh").write_text("echo X=1 >> sub/app.env\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=root, check=True)
    return root


def _analyzer_allows(rt: Runtime, command: str) -> None:
    decision, _ = rt.check_call("bash", {"command": command, "description": "test"})
    assert decision.action == "allow", f"the bash analyzer now stops {command!r}: write a line it cannot see"


def _bash(rt: Runtime, command: str) -> dict[str, Any]:
    result = anyio.run(lambda: rt.call("bash", {"command": command, "description": "test"}))
    return {"output": result.output, "error": result.error, "metadata": dict(result.metadata)}


@needs_mounts
@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_line_that_reaches_a_denied_file_without_naming_it_reads_nothing(
    tmp_path: Path, project_writer: Callable[..., Path], launch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if launch == "forkserver":
        monkeypatch.setattr("toolrt.sandbox.config.detect_support", lambda: replace(SUPPORT, launch="forkserver"))
    root = _project(project_writer, tmp_path / "project")
    rt = Runtime.load(root)
    for command in ATTACKS:
        _analyzer_allows(rt, command)
        result = _bash(rt, command)
        assert SECRET not in (result["output"] or "") + (result["error"] or ""), command
    ordinary = _bash(rt, "cat sub/notes.txt; grep -r ordinary .")
    assert ordinary["output"].count("ordinary notes") == 2
    assert "masked 3 denied paths" in ordinary["metadata"]["sandbox"]
    # Written through the mask: refused, and the file on disk is untouched.
    written = _bash(rt, "sh ./w.sh")
    # The mask is read-only (EROFS) and its mode 0444 (EACCES): root inside has no CAP_DAC_OVERRIDE to
    # skip the mode check, so which of the two the program reports depends on who runs toolrt.
    assert "Read-only file system" in written["output"] or "Permission denied" in written["output"]
    assert (root / "sub" / "app.env").read_text() == f"TOKEN={SECRET}\n"


@needs_mounts
def test_a_denied_file_made_after_an_earlier_call_is_masked_too(
    tmp_path: Path, project_writer: Callable[..., Path]
) -> None:
    root = _project(project_writer, tmp_path / "project")
    rt = Runtime.load(root)
    assert "masked 3 denied paths" in _bash(rt, "true")["metadata"]["sandbox"]
    (root / "sub" / "deeper").mkdir()
    (root / "sub" / "deeper" / "late.env").write_text(f"{SECRET}\n")
    (root / ".env").unlink()
    (root / ".env").write_text(f"NEW={SECRET}\n")  # a new inode: a kept namespace must not show it
    result = _bash(rt, "grep -r sk-live . ; python3 r.py")
    assert SECRET not in result["output"]
    assert "masked 4 denied paths" in result["metadata"]["sandbox"]


@needs_mounts
@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_denied_file_given_a_new_name_entry_for_its_inode_stays_masked(
    tmp_path: Path, project_writer: Callable[..., Path], launch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unlink of the old name entry detached the kept namespace's mask; the same device and inode
    at the name (a hard link renamed into place: an inode number handed out again looks the same) must
    get a fresh namespace with the mask, not that one."""
    if launch == "forkserver":
        monkeypatch.setattr("toolrt.sandbox.config.detect_support", lambda: replace(SUPPORT, launch="forkserver"))
    root = _project(project_writer, tmp_path / "project")
    rt = Runtime.load(root)
    assert SECRET not in _bash(rt, "python3 r.py")["output"]
    inode = (root / ".env").stat().st_ino
    (root / "relinked").hardlink_to(root / ".env")
    (root / ".env").unlink()
    (root / "relinked").rename(root / ".env")
    assert (root / ".env").stat().st_ino == inode
    result = _bash(rt, "python3 r.py; echo done")
    assert SECRET not in result["output"] and "done" in result["output"], result["output"]


PROTECTED_NAMES = (
    *(".bash_login", ".bash_logout", ".bash_profile", ".bashrc", ".envrc", ".gitconfig", ".gitmodules"),
    *(".inputrc", ".profile", ".zlogin", ".zprofile", ".zshenv", ".zshrc", "toolrt.yaml"),
)
"""The default protected files a project may lack (an absent one makes every process's namespace covered)."""


@needs_mounts
@pytest.mark.xfail(
    strict=True,
    reason="a mask goes with its file: a running process's namespace does not mask the file saved in its place "
    "(the next call's namespace does, by the change-time key)",
)
@pytest.mark.parametrize("launch", ["thread", "forkserver"])
def test_a_denied_file_the_person_saves_while_a_process_runs_stays_masked_to_it(
    tmp_path: Path, project_writer: Callable[..., Path], launch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process still running in a kept namespace when the person saves `.env` by renaming a new file over
    it: the mask went with the old file (detached), so the new one must not be readable to the process."""
    if launch == "forkserver":
        monkeypatch.setattr("toolrt.sandbox.config.detect_support", lambda: replace(SUPPORT, launch="forkserver"))
    root = _project(project_writer, tmp_path / "project")
    for name in PROTECTED_NAMES:  # every protected name exists: the namespace is kept, not covered per process
        (root / name).touch()
    for name in (".idea", ".vscode", "tools.d"):
        (root / name).mkdir()
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    rt = Runtime.load(root)
    results: list[dict[str, Any]] = []
    call = threading.Thread(target=lambda: results.append(_bash(rt, f"python3 r.py; read -r _ < {fifo}; python3 r.py")))
    call.start()
    with held_at(fifo):
        (root / ".env.new").write_text(f"NEW={SECRET}\n")
        os.rename(root / ".env.new", root / ".env")
    call.join(timeout=30)
    assert results, "the call never ended"
    assert "covered" not in results[0]["metadata"]["sandbox"], results[0]["metadata"]["sandbox"]
    assert SECRET not in results[0]["output"], results[0]["output"]


@needs_mounts
def test_an_ask_rule_is_not_masked(tmp_path: Path, project_writer: Callable[..., Path]) -> None:
    root = project_writer(
        tmp_path / "project",
        permissions='permission:\n  "*": allow\n  read:\n    "*": allow\n    "*.env": ask\n',
        builtin_tools=True,
    )
    (root / "a.env").write_text("visible\n")
    rt = Runtime.load(root)
    result = _bash(rt, "grep -r visible .")
    assert "visible" in result["output"]
    assert "masked" not in result["metadata"]["sandbox"]


def test_with_the_sandbox_off_nothing_is_masked(tmp_path: Path, project_writer: Callable[..., Path]) -> None:
    root = _project(project_writer, tmp_path / "project")
    rt = Runtime.load(root, settings={"sandbox.mode": "off"})
    # Not covered, and documented so: without a sandbox only the analyzer stands in the way.
    result = _bash(rt, "grep -r sk-live .")
    assert SECRET in result["output"]
    assert result["metadata"]["sandbox"] == "none"


def _rules(*rules: tuple[str, str, str]) -> Ruleset:
    return Ruleset(Rule(p, pattern, action) for p, pattern, action in rules)  # type: ignore[arg-type]


def test_no_walk_without_a_read_deny_and_the_walk_finds_files_and_directories(tmp_path: Path) -> None:
    assert read_denies(_rules(("*", "*", "allow"), ("bash", "rm *", "deny")), Ruleset()) is None
    rules = read_denies(
        _rules(("read", "*", "allow"), ("read", "*.env", "deny"), ("read", "*/vault", "deny")), Ruleset()
    )
    assert rules is not None
    (tmp_path / "a.env").write_text("x")
    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "b.env").write_text("x")  # inside a masked directory: not listed twice
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "c.env").write_text("x")  # git's store is not walked
    (tmp_path / "link.env").symlink_to(tmp_path / "a.env")  # a link is not masked; its target is
    found = denied_paths(tmp_path, rules)
    assert found == Masks((str(tmp_path / "a.env"),), (str(tmp_path / "vault"),))


def test_a_locked_deny_is_masked_whatever_the_agent_allows(tmp_path: Path) -> None:
    (tmp_path / "a.env").write_text("x")
    rules = read_denies(_rules(("read", "*", "allow")), _rules(("read", "*.env", "deny")))
    assert denied_paths(tmp_path, rules).files == (str(tmp_path / "a.env"),)


def test_more_denied_files_than_the_cap_refuses_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(masks_module, "MAX_MASKS", 3)
    for index in range(4):
        (tmp_path / f"{index}.env").write_text("x")
    rules = read_denies(_rules(("read", "*.env", "deny")), Ruleset())
    with pytest.raises(ToolFailure, match=r"deny more than 3 files .* nothing was run"):
        denied_paths(tmp_path, rules)


def test_masks_without_a_mount_namespace_refuse_to_run(tmp_path: Path) -> None:
    support = replace(SUPPORT, landlock_abi=SUPPORT.landlock_abi or 7, mount_namespace=False, launch="thread")
    with pytest.raises(ToolFailure, match="no mount namespace to hide them. Nothing was run"):
        plan_sandbox(
            SandboxPolicy(), support, root=tmp_path, output_dir=tmp_path / "out", masks=Masks((str(tmp_path / "a"),))
        )


def test_bubblewrap_and_seatbelt_hide_the_masked_paths(tmp_path: Path) -> None:
    (tmp_path / "a.env").write_text("x")
    (tmp_path / "vault").mkdir()
    masks = Masks((str(tmp_path / "a.env"),), (str(tmp_path / "vault"),))
    argv = bwrap_argv("bwrap", [], [], network=True, masks=masks, empty="/e")
    assert argv[-8:] == ["--tmpfs", str(tmp_path / "vault"), "--remount-ro", str(tmp_path / "vault"),
                         "--ro-bind", "/e", str(tmp_path / "a.env"), "--"]  # fmt: skip
    assert '(deny file-read* (subpath (param "MASKED_0")) (subpath (param "MASKED_1")))' in seatbelt_profile(
        1, 0, network=True, masked_count=2
    )
    (tmp_path / "token").write_text("y")
    masks = Masks((str(tmp_path / "a.env"), str(tmp_path / "token")), (), ((str(tmp_path / "token"), "/p"),))
    argv = bwrap_argv("bwrap", [], [], network=True, masks=masks, empty="/e")
    assert argv[-7:] == ["--ro-bind", "/e", str(tmp_path / "a.env"), "--ro-bind", "/p", str(tmp_path / "token"), "--"]


def test_a_masked_credential_file_gets_a_placeholder_file_only_when_its_content_fits_a_header(
    tmp_path: Path,
) -> None:
    from toolrt.sandbox.credentials import Credential, masked_files, sandbox_environment

    token, lines, bare = tmp_path / "token", tmp_path / "credentials", tmp_path / "hostless"
    token.write_text("tok-1\n")
    lines.write_text("[default]\nkey = 1\n")  # no single line a header could carry: reads as empty
    bare.write_text("tok-2")
    credentials = (
        Credential("", "mask", "API.test.", "X-Key", file=str(token)),
        Credential("", "mask", "api.test", file=str(lines)),
        Credential("", "mask", "", file=str(bare)),  # no host to send it to: reads as empty
        Credential("", "deny", file=str(tmp_path / "gone")),
    )
    files, sources = masked_files(credentials)
    assert files == (str(token), str(lines), str(bare)) and [path for path, _ in sources] == [str(token)]
    placeholder_file = sources[0][1]
    placeholder = Path(placeholder_file).read_text()
    assert placeholder.startswith("toolrt-masked-file-") and placeholder.endswith("\n")
    env, masked = sandbox_environment({"PATH": "/bin"}, credentials, {}, sources)
    assert [(m.host, m.header, m.placeholder, m.value) for m in masked] == [
        ("api.test", "X-Key", placeholder.strip(), "tok-1")
    ]
    assert env["SSL_CERT_FILE"].endswith("bundle.pem")  # the sandbox trusts the proxy's authority
    assert masked_files(credentials)[1] == sources  # the same file while it is untouched
    Path(placeholder_file).parent.chmod(0o755)  # as a sandboxed process that may write the temp dir could
    Path(placeholder_file).chmod(0o644)
    Path(placeholder_file).write_text("something else\n")
    ((_, renewed),) = masked_files(credentials)[1]
    assert renewed != placeholder_file and Path(renewed).read_text() == placeholder
    token.write_text("tok-3\n")  # the host's file changed: a new placeholder for the new value
    ((_, changed),) = masked_files(credentials)[1]
    assert Path(changed).read_text() != placeholder
    assert sandbox_environment({}, (), {}, ((str(token), changed),))[1][0].value == "tok-3"


def test_the_host_credentials_are_kept_out_of_a_process_bubblewrap_starts(tmp_path: Path) -> None:
    """The exec launchers' plan carries the host's credentials list, so the process's environment is
    built from it as under Landlock (it did not: a denied variable reached the process). bubblewrap is a
    stand-in here that runs what follows its `--`, so the environment toolrt hands over is what is seen."""
    from toolrt.execute import build_env, run_process
    from toolrt.sandbox.credentials import Credential
    from toolrt.sandbox.support import Support

    stand_in = tmp_path / "bwrap"
    stand_in.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')
    stand_in.chmod(0o755)
    support = Support(landlock_abi=0, mount_namespace=False, net_namespace=False, launch="exec", bwrap=str(stand_in))
    policy = SandboxPolicy(credentials=(Credential("TOOLRT_TEST_DENIED"), Credential("TOOLRT_TEST_MASKED", "mask")))
    plan = plan_sandbox(policy, support, root=tmp_path, output_dir=tmp_path / "out")
    assert plan is not None and plan.launch == "exec" and plan.credentials == policy.credentials
    env = build_env(set={"TOOLRT_TEST_DENIED": "s3cret-1", "TOOLRT_TEST_MASKED": "s3cret-2"})  # as `env_allow` would

    async def main() -> Any:
        return await run_process(["sh", "-c", "env"], cwd=tmp_path, env=env, timeout=30, sandbox=plan)

    outcome = anyio.run(main)
    assert "s3cret" not in outcome.output and "TOOLRT_TEST_DENIED" not in outcome.output
