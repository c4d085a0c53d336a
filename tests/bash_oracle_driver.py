"""Runs command lines under real bash inside a confined namespace and reports what each one did.

Started by `bash_oracle.run_lines` as `unshare --user --map-root-user --mount --net --fork python3
THIS JOB.json`; never imported. Inside the namespace every mount is remounted read-only, a tmpfs
is mounted over the workspace (the only writable place), and the network has only a downed
loopback. For each line the workspace is rebuilt (project/, outside/ with a canary, home/), then
`strace -f` follows `bash --norc --noprofile -c LINE` under a timeout. The report lists the argv of
every program executed and every path under the workspace but outside the project that was
opened, created, renamed, linked or removed (after symlinks are resolved).
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

_SYSCALL = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()(.*)$")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_RESULT = re.compile(r"=\s+(-?\d+)")
_PATH_CALLS = frozenset(
    (
        "open",
        "openat",
        "creat",
        "mkdir",
        "mkdirat",
        "rename",
        "renameat",
        "renameat2",
        "unlink",
        "unlinkat",
        "rmdir",
        "link",
        "linkat",
        "symlink",
        "symlinkat",
        "truncate",
        "chdir",
    )
)
_FORKS = frozenset(("clone", "clone3", "fork", "vfork"))
SCRATCH = ".oracle"
"""Kept across lines: the trace log and the shims (stand-ins for programs this machine lacks)."""
_TRACED = sorted(_PATH_CALLS | _FORKS | {"execve"})


def confine(workspace: Path) -> None:
    """Every mount read-only, then a private tmpfs over the workspace."""
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for point in sorted(set(mounts), key=len):
        if point.startswith(("/proc", "/sys")):
            continue
        subprocess.run(["mount", "-o", "remount,bind,ro", point], capture_output=True, check=False)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "oracle", str(workspace)], check=True)


def build(workspace: Path, fixture: dict[str, str]) -> None:
    """The workspace as `bash_oracle.FIXTURE` describes it: files, directories, symlinks."""
    for child in workspace.iterdir():
        if child.name == SCRATCH:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    write_fixture(workspace, fixture)


def write_fixture(workspace: Path, fixture: dict[str, str]) -> None:
    """Create the fixture's files, directories and symlinks under `workspace`."""
    for relative, content in fixture.items():
        path = workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if content.startswith("->"):
            os.symlink(content[2:], path)
        elif content == "/":
            path.mkdir(exist_ok=True)
        else:
            path.write_text(content)
            if content.startswith("#!"):
                path.chmod(0o755)


def decode(escaped: str) -> str:
    """A string as strace -xx prints it (every byte as \\xHH), back to text."""
    raw = bytes(int(escaped[i + 2 : i + 4], 16) for i in range(0, len(escaped), 4) if escaped[i : i + 2] == "\\x")
    return raw.decode("utf-8", "surrogateescape")


def parse_trace(log: str, project: str) -> tuple[list[list[str]], list[str]]:
    """(argv of every successful execve, every path the processes touched), cwd followed per process."""
    cwd: dict[str, str] = {}
    pending: dict[str, tuple[str, str]] = {}
    execs: list[list[str]] = []
    touched: list[str] = []
    first_pid: str | None = None
    for line in log.splitlines():
        match = _SYSCALL.match(line)
        if match is None:
            continue
        pid, resumed, name, rest = match.groups()
        if first_pid is None:
            first_pid = pid
            cwd[pid] = project
        if resumed is not None:
            name, rest = pending.pop(pid, (resumed, ""))[0], pending.get(pid, ("", ""))[1] + rest
        elif rest.endswith("<unfinished ...>"):
            pending[pid] = (name, rest)
            continue
        result = _RESULT.search(rest.rsplit(")", 1)[-1] if ")" in rest else rest)
        ok = result is not None and int(result.group(1)) >= 0
        here = cwd.setdefault(pid, project)
        if name in _FORKS and ok and result is not None:
            cwd[result.group(1)] = here
            continue
        strings = [decode(s) for s in _STRING.findall(rest)]
        if name == "execve":
            if ok and strings:
                # The program is the file executed, not argv[0] (`exec -a rm /bin/echo` runs echo).
                execs.append([strings[0], *strings[2:]])
            continue
        if name not in _PATH_CALLS or not ok:
            continue  # a failed open or create reveals and changes nothing
        for path in strings[:2]:
            absolute = path if path.startswith("/") else os.path.join(here, path)
            touched.append(absolute)
        if name == "chdir" and ok and strings:
            cwd[pid] = os.path.normpath(strings[0] if strings[0].startswith("/") else os.path.join(here, strings[0]))
    return execs, touched


def outside(paths: list[str], workspace: Path, project: Path) -> list[str]:
    """The paths under the workspace but outside the project, lexically or through symlinks."""
    found: list[str] = []
    base = str(workspace)
    inside = str(project)
    for path in paths:
        for form in (os.path.normpath(path), os.path.realpath(path)):
            in_workspace = form == base or form.startswith(base + "/")
            if in_workspace and not (form == inside or form.startswith(inside + "/")):
                found.append(form)
    return sorted(set(found))


def _ended_within(process: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether the process ended within `timeout` seconds, woken by its pidfd when it does (Popen.wait's
    timeout polls with growing sleeps, which stretched every line's few milliseconds by up to half)."""
    with os.fdopen(os.pidfd_open(process.pid), "rb", buffering=0) as exited:
        return bool(select.select([exited], [], [], timeout)[0])


def run_line(line: str, job: dict[str, object], workspace: Path) -> dict[str, object]:
    project = workspace / "project"
    home = workspace / "home"
    env = {
        "PATH": f"/usr/local/bin:/usr/bin:/bin:{workspace / SCRATCH / 'shims'}",
        "HOME": str(home),
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
    }
    trace_path = str(workspace / SCRATCH / "trace")
    command = ["bash", "--norc", "--noprofile", "-c", line]
    if job["strace"]:
        # --seccomp-bpf: the processes stop only at the traced calls, not at every system call.
        trace = ["strace", "-f", "--seccomp-bpf", "-qq", "-xx", "-s", "4096", "-e", "trace=" + ",".join(_TRACED)]
        command = [*trace, "-o", trace_path, *command]
    timed_out = False
    try:
        process = subprocess.Popen(
            command,
            cwd=project,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if not _ended_within(process, float(job["timeout"])):  # type: ignore[arg-type]
            timed_out = True
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        log = Path(trace_path).read_text(errors="replace") if job["strace"] else ""
    finally:
        if os.path.exists(trace_path):
            os.unlink(trace_path)
    execs, touched = parse_trace(log, str(project))
    # The first execve is bash itself, started by the harness.
    return {"line": line, "execs": execs[1:], "outside": outside(touched, workspace, project), "timed_out": timed_out}


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    workspace = Path(str(job["workspace"]))
    confine(workspace)
    shims = workspace / SCRATCH / "shims"
    shims.mkdir(parents=True)
    for name in job["shims"]:
        if shutil.which(str(name), path="/usr/local/bin:/usr/bin:/bin") is None:
            shim = shims / str(name)
            shim.write_text("#!/bin/sh\nexit 0\n")
            shim.chmod(0o755)
    results = []
    for line in job["lines"]:
        build(workspace, job["fixture"])
        results.append(run_line(line, job, workspace))
    sys.stdout.write(json.dumps(results))


if __name__ == "__main__":
    main()
