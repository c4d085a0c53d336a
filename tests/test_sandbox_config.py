"""Sandbox settings: tighten-only from the project and tool files, host loosening, the locked file fixing them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from toolrt import Runtime
from toolrt.errors import ConfigError
from toolrt.sandbox.bwrap import bwrap_argv
from toolrt.sandbox.config import concrete_protected, sandbox_problems, sandbox_status
from toolrt.sandbox.hint import refusal_hint
from toolrt.sandbox.plan import plan_sandbox
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.seatbelt import seatbelt_argv, seatbelt_profile
from toolrt.sandbox.support import Support

Writer = Callable[..., Path]

TOOL = """\
    id: runner
    description: Runs a fixed command for the sandbox tests, with enough words to pass the checks.
    handler: {{argv: [echo, hi]}}
    {extra}
    """


def load(writer: Writer, root: Path, *, settings: str = "", tool_extra: str = "", locked: str | None = None) -> Runtime:
    tools = {"runner": TOOL.format(extra=tool_extra)}
    writer(root, tools, settings=settings)
    if locked is not None:
        (root.parent / "locked.yaml").write_text(locked)
    return Runtime.load(root)


def problems_of(error: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return [f"{Path(p.file).name}:{p.line}:{p.pointer}: {p.message}" for p in error.value.problems]


def test_defaults_are_workspace_write_with_network_and_the_protected_config(
    tmp_path: Path, project_writer: Writer
) -> None:
    rt = load(project_writer, tmp_path / "p")
    policy = rt.snapshot.sandbox
    assert (policy.mode, policy.network, policy.writable, policy.required) == ("workspace-write", True, (), False)
    root = tmp_path / "p"
    # The protected list of the permissions files, as paths a read-only mount can cover.
    for name in ("toolrt.yaml", "permissions.yaml", "tools.d", ".git", ".env", ".envrc", ".vscode"):
        assert root / name in policy.protected


def test_protected_patterns_become_mountable_paths(tmp_path: Path) -> None:
    found = concrete_protected(
        tmp_path, ["./toolrt.yaml", ".git", "*.pem", "/etc/hosts", "conf/app.ini", "~/x?"], [tmp_path / "h.py"]
    )
    expected = [tmp_path / "toolrt.yaml", tmp_path / ".git", Path("/etc/hosts"), tmp_path / "conf" / "app.ini"]
    assert found == (*expected, tmp_path / "h.py")


def test_a_project_that_sets_mode_off_is_refused_at_the_line(tmp_path: Path, project_writer: Writer) -> None:
    with pytest.raises(ConfigError) as error:
        load(project_writer, tmp_path / "p", settings="sandbox:\n  mode: off\n")
    assert problems_of(error) == [
        "toolrt.yaml:3:/sandbox/mode: sandbox mode 'off' would loosen 'workspace-write': a project may only "
        "tighten the sandbox; set a looser mode on the host (--sandbox, TOOLRT_SANDBOX__MODE, the user settings file)"
    ]


def test_a_project_may_tighten(tmp_path: Path, project_writer: Writer) -> None:
    (tmp_path / "p" / "build").mkdir(parents=True)
    rt = load(
        project_writer, tmp_path / "p", settings="sandbox:\n  mode: read-only\n  network: false\n  writable: [build]\n"
    )
    policy = rt.snapshot.sandbox
    assert (policy.mode, policy.network, policy.writable) == ("read-only", False, (tmp_path / "p" / "build",))


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("writable: [/opt]", "sandbox writable path '/opt' is outside the project root"),
        ("writable: [missing]", "sandbox writable path '{root}/missing' does not exist or is not a directory"),
        ("mode: sideways", "a string ('sideways') is not one of: read-only, workspace-write, off"),
        ("colour: red", "colour"),
    ],
)
def test_bad_project_sandbox_values_are_located_problems(
    tmp_path: Path, project_writer: Writer, block: str, message: str
) -> None:
    root = tmp_path / "p"
    with pytest.raises(ConfigError) as error:
        load(project_writer, root, settings=f"sandbox:\n  {block}\n")
    found = problems_of(error)
    assert len(found) == 1 and found[0].startswith("toolrt.yaml:3:/sandbox")
    assert message.format(root=root) in found[0]


def test_the_host_may_loosen_and_the_project_may_not_turn_the_network_back_on(
    tmp_path: Path, project_writer: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "pip-cache"
    cache.mkdir()
    monkeypatch.setenv("TOOLRT_SANDBOX__MODE", "off")
    monkeypatch.setenv("TOOLRT_SANDBOX__WRITABLE", json.dumps([str(cache)]))
    rt = load(project_writer, tmp_path / "p")
    assert (rt.snapshot.sandbox.mode, rt.snapshot.sandbox.writable) == ("off", (cache,))
    monkeypatch.setenv("TOOLRT_SANDBOX__MODE", "workspace-write")
    monkeypatch.setenv("TOOLRT_SANDBOX__NETWORK", "false")
    with pytest.raises(ConfigError) as error:
        load(project_writer, tmp_path / "q", settings="sandbox:\n  network: true\n")
    assert problems_of(error) == [
        "toolrt.yaml:3:/sandbox/network: sandbox network: true would turn the network back on: a project may only "
        "turn it off; enable it on the host (TOOLRT_SANDBOX__NETWORK=true, the user settings file)"
    ]


def test_a_bad_host_value_is_reported(tmp_path: Path, project_writer: Writer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRT_SANDBOX__MODE", "loose")
    with pytest.raises(
        ConfigError,
        match="environment TOOLRT_SANDBOX__MODE: sandbox.mode: Input should be 'read-only', 'workspace-write' or 'off'",
    ):
        load(project_writer, tmp_path / "p")


def test_a_tool_file_tightens_its_own_processes_only(tmp_path: Path, project_writer: Writer) -> None:
    rt = load(project_writer, tmp_path / "p", tool_extra="sandbox: {network: false, mode: read-only}")
    assert rt.snapshot.sandbox_for("runner").network is False
    assert rt.snapshot.sandbox_for("runner").mode == "read-only"
    assert rt.snapshot.sandbox.network is True
    with pytest.raises(ConfigError) as error:
        load(project_writer, tmp_path / "q", tool_extra="sandbox: {mode: 'off'}")
    assert [re.sub(r":\d+:", ":N:", p) for p in problems_of(error)] == [
        "runner.yaml:N:/sandbox/mode: sandbox mode 'off' would loosen 'workspace-write': a project may only "
        "tighten the sandbox; set a looser mode on the host (--sandbox, TOOLRT_SANDBOX__MODE, the user settings file)"
    ]


def test_the_locked_file_fixes_the_sandbox_and_the_host_cannot_loosen_it(
    tmp_path: Path, project_writer: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = "sandbox:\n  required: true\n  mode: read-only\n  network: false\n  writable: []\n"
    monkeypatch.setenv("TOOLRT_LOCKED_PERMISSIONS", str(tmp_path / "locked.yaml"))
    monkeypatch.setenv("TOOLRT_SANDBOX__MODE", "off")
    monkeypatch.setenv("TOOLRT_SANDBOX__NETWORK", "true")
    monkeypatch.setenv("TOOLRT_SANDBOX__WRITABLE", str(tmp_path))  # PATH-style works too
    rt = load(project_writer, tmp_path / "p", locked=locked)
    policy = rt.snapshot.sandbox
    assert (policy.mode, policy.network, policy.writable, policy.required) == ("read-only", False, (), True)
    warnings = [w.message for w in rt.snapshot.warnings]
    assert "host settings: sandbox mode 'off' ignored: the locked file fixes 'read-only'" in warnings
    assert "host settings: sandbox network ignored: the locked file turns the network off" in warnings
    assert "host settings: sandbox writable paths ignored: the locked file fixes them" in warnings
    # An allowed external_directory does not widen a writable set the locked file fixed.
    assert policy.widened_for_call((tmp_path / "elsewhere",)) is policy


def test_the_locked_file_requiring_the_sandbox_overrides_a_host_off(
    tmp_path: Path, project_writer: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLRT_LOCKED_PERMISSIONS", str(tmp_path / "locked.yaml"))
    monkeypatch.setenv("TOOLRT_SANDBOX__MODE", "off")
    rt = load(project_writer, tmp_path / "p", locked="sandbox: {required: true}\n")
    assert (rt.snapshot.sandbox.mode, rt.snapshot.sandbox.required) == ("workspace-write", True)


def test_sandbox_in_a_project_permissions_file_is_refused(tmp_path: Path, project_writer: Writer) -> None:
    root = tmp_path / "p"
    project_writer(root, {"runner": TOOL.format(extra="")}, permissions="sandbox: {mode: 'off'}\n")
    with pytest.raises(ConfigError, match='"sandbox" belongs in toolrt.yaml .* or in the locked file'):
        Runtime.load(root)


def test_widening_for_a_call_adds_exactly_the_allowed_directories(tmp_path: Path) -> None:
    policy = SandboxPolicy(writable=(tmp_path / "cache",))
    widened = policy.widened_for_call((tmp_path / "a", tmp_path / "cache"))
    assert widened.writable == (tmp_path / "cache", tmp_path / "a")
    assert SandboxPolicy(mode="read-only").widened_for_call((tmp_path / "a",)).writable == ()


# --- mechanisms other than Landlock: the generated commands ----------------------------------------


def test_the_seatbelt_profile_writes_only_where_allowed_and_keeps_paths_out_of_the_profile() -> None:
    profile = seatbelt_profile(2, 1, network=False)
    assert profile == (
        "(version 1)\n(allow default)\n(deny file-write*)\n"
        '(allow file-write* (require-all (require-any (subpath (param "WRITABLE_0")) (subpath (param "WRITABLE_1")))'
        ' (require-not (subpath (param "PROTECTED_0")))))\n'
        '(allow file-write* (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty") '
        '(literal "/dev/dtracehelper") (regex #"^/dev/ttys[0-9]+$"))\n'
        "(deny network*)\n(allow network* (remote unix-socket))\n"
    )
    argv = seatbelt_argv(['/w/a "quoted")', "/tmp"], ["/w/a/.git"], network=True)
    assert argv[:2] == ["/usr/bin/sandbox-exec", "-p"]
    assert "quoted" not in argv[2] and "(deny network*)" not in argv[2]
    assert argv[3:] == ["-D", 'WRITABLE_0=/w/a "quoted")', "-D", "WRITABLE_1=/tmp", "-D", "PROTECTED_0=/w/a/.git", "--"]


def test_bubblewrap_binds_the_writable_set_then_the_protected_paths_read_only(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    argv = bwrap_argv("/usr/bin/bwrap", [str(tmp_path), "/nonexistent"], [str(tmp_path / ".git")], network=False)
    assert argv == [
        "/usr/bin/bwrap", "--new-session", "--die-with-parent", "--ro-bind", "/", "/", "--dev", "/dev",
        "--bind", str(tmp_path), str(tmp_path), "--ro-bind", f"{tmp_path}/.git", f"{tmp_path}/.git",
        "--unshare-net", "--",
    ]  # fmt: skip


def test_without_landlock_the_plan_falls_back_to_bubblewrap_or_to_nothing(tmp_path: Path) -> None:
    bwrap = Support(0, True, True, "exec", "/usr/bin/bwrap")
    plan = plan_sandbox(SandboxPolicy(network=False), bwrap, root=tmp_path, output_dir=tmp_path / "out")
    assert plan is not None and plan.launch == "exec" and plan.prefix[0] == "/usr/bin/bwrap"
    assert plan.description == "bubblewrap workspace-write + netns"
    none = Support(0, False, False, "none", None, "no Landlock, no bwrap")
    assert plan_sandbox(SandboxPolicy(), none, root=tmp_path, output_dir=tmp_path) is None
    assert none.describe() == "none (no Landlock, no bwrap)"


def test_the_hint_names_a_protected_path(tmp_path: Path) -> None:
    support = Support(7, True, True, "thread")
    (tmp_path / ".git").mkdir()
    policy = SandboxPolicy(protected=(tmp_path / ".git",))
    plan = plan_sandbox(policy, support, root=tmp_path, output_dir=tmp_path / "out")
    assert plan is not None
    hint = refusal_hint("sh: 1: cannot create .git/config: Read-only file system\n", plan, tmp_path)
    assert hint is not None and hint.startswith(f"toolrt: {tmp_path}/.git/config is protected: it is read-only")
    assert refusal_hint("grep: no match\n", plan, tmp_path) is None


def test_no_mechanism_is_a_warning_and_a_required_sandbox_says_process_tools_are_refused() -> None:
    none = Support(0, False, False, "none", None, "the kernel has no Landlock and bwrap is not installed")
    (warning,) = sandbox_problems(SandboxPolicy(), none)
    assert warning.severity == "warning"
    assert warning.message.startswith(
        "no OS sandbox on this machine: the kernel has no Landlock and bwrap is not installed; bash, argv and shell "
        "tools run with the user's full rights."
    )
    assert sandbox_status(SandboxPolicy(required=True), none).endswith(
        "process tools are refused: the locked file requires a sandbox"
    )
    assert sandbox_problems(SandboxPolicy(mode="off"), none) == []
    assert sandbox_status(SandboxPolicy(mode="off"), none) == "off (a host setting turned it off)"


def test_the_host_sandbox_comes_from_the_user_file_and_the_command_line_and_never_from_dotenv(
    tmp_path: Path, project_writer: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    user = tmp_path / "config" / "toolrt" / "settings.yaml"
    user.parent.mkdir(parents=True)
    user.write_text(f"sandbox:\n  network: false\n  writable: [{cache}]\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    root = tmp_path / "p"
    project_writer(root, {"runner": TOOL.format(extra="")})
    (root / ".env").write_text("TOOLRT_SANDBOX__MODE=off\n")
    rt = Runtime.load(root)
    policy = rt.snapshot.sandbox
    assert (policy.mode, policy.network, policy.writable) == ("workspace-write", False, (cache,))
    (ignored,) = [w for w in rt.snapshot.warnings if "sandbox.mode" in w.message]
    assert ignored.file == ".env" and "sandbox.mode is a host-only setting" in ignored.message
    assert Runtime.load(root, settings={"sandbox.mode": "off"}).snapshot.sandbox.mode == "off"
