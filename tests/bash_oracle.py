"""bash as the oracle for the analyzer: run lines under real bash, confined, and compare.

`run_lines` starts `bash_oracle_driver.py` inside `unshare --user --map-root-user --mount --net`
(every mount read-only, a tmpfs over the workspace, no network) and returns what each line did:
the argv of every program bash executed and every workspace path outside the project that was
touched, as strace saw them. `oracle_action` is the action the rules give to what really ran;
`analyzer_action` the action the analyzer's requests get. The analyzer must never be weaker.
"""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from bash_oracle_driver import write_fixture

from toolrt.permissions.evaluate import decide
from toolrt.permissions.model import Action, CallSite, Rule, strictest
from toolrt.permissions.rules import Ruleset
from toolrt.shell import analyze_command

DRIVER = Path(__file__).with_name("bash_oracle_driver.py")

ALLOW_LIST = Ruleset(
    [
        Rule("bash", "*", "deny"),
        Rule("bash", "git status*", "allow"),
        Rule("bash", "ls*", "allow"),
        Rule("bash", "cat *", "allow"),
        Rule("bash", "echo *", "allow"),
        Rule("external_directory", "*", "ask"),
    ]
)
DENY_LIST = Ruleset(
    [
        Rule("bash", "*", "allow"),
        Rule("bash", "rm *", "deny"),
        Rule("bash", "git push*", "deny"),
        Rule("bash", "curl *", "deny"),
        Rule("external_directory", "*", "ask"),
    ]
)
RULESETS = {"allow_list": ALLOW_LIST, "deny_list": DENY_LIST}

# The workspace every line starts from (`->` makes a symlink, `/` a directory, `#!` an executable).
FIXTURE: dict[str, str] = {
    "project/a.txt": "alpha\nbeta\n",
    "project/f": "one\ntwo\nthree\n",
    "project/sub/": "/",
    "project/sub/b.txt": "b\n",
    "project/src/main.py": "print('main')\n",
    "project/src/util.py": "print('util')\n",
    "project/run.sh": "#!/bin/sh\necho run\n",
    "project/lnk": "->../outside",
    "project/.git/": "/",
    "outside/canary": "canary\n",
    "outside/secret": "secret\n",
    "home/.profile": "",
}
# Programs a line may name that this machine may lack: a stub that exits 0 lets strace see the exec.
SHIMS = ("curl", "sudo", "doas", "wget", "nc", "ssh", "scp", "rsync", "npm", "npx", "make", "python", "node")
_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}
_CONFINED = ("unshare", "--user", "--map-root-user", "--mount", "--net", "--fork")


@dataclass(frozen=True)
class Observation:
    """What bash did with one line."""

    line: str
    execs: tuple[tuple[str, ...], ...]
    outside: tuple[str, ...]
    timed_out: bool


@cache
def unavailable() -> str | None:
    """Why the oracle cannot run on this machine, or None when it can."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    if shutil.which("strace") is None:
        return "strace is not installed (.ci/run installs it)"
    probe = subprocess.run(
        [*_CONFINED, "true"],
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"unprivileged user namespaces are not available: {probe.stderr.decode(errors='replace').strip()}"
    return None


def make_workspace() -> tuple[Path, CallSite]:
    """A workspace on the real file system (the analyzer's view); the driver rebuilds it in tmpfs."""
    workspace = Path(tempfile.mkdtemp(prefix="toolrt-oracle-"))
    write_fixture(workspace, FIXTURE)
    project = workspace / "project"
    return workspace, CallSite(root=project, cwd=project, home=workspace / "home")


def run_lines(lines: Sequence[str], workspace: Path, *, timeout: float = 5.0) -> list[Observation]:
    """Run every line under confined bash; one namespace for the whole batch."""
    job = {
        "workspace": str(workspace),
        "fixture": FIXTURE,
        "lines": list(lines),
        "timeout": timeout,
        "strace": True,
        "shims": list(SHIMS),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(job, handle)
        job_path = handle.name
    try:
        done = subprocess.run(
            [*_CONFINED, sys.executable, str(DRIVER), job_path],
            capture_output=True,
            check=False,
            timeout=timeout * len(lines) + 60,
        )
    finally:
        os.unlink(job_path)
    if done.returncode != 0:
        raise RuntimeError(f"the oracle failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
    return [
        Observation(
            item["line"], tuple(tuple(argv) for argv in item["execs"]), tuple(item["outside"]), item["timed_out"]
        )
        for item in json.loads(done.stdout)
    ]


def oracle_action(observation: Observation, ruleset: Ruleset) -> Action:
    """What the rules say about what really ran: each program by its argv, outside paths ask."""
    action: Action = "allow"
    for argv in observation.execs:
        if not argv:
            continue
        text = " ".join([posixpath.basename(argv[0]), *argv[1:]])
        rule = ruleset.evaluate("bash", text)
        action = strictest(action, rule.action if rule is not None else "ask")
    if observation.outside:
        for path in observation.outside:
            rule = ruleset.evaluate("external_directory", posixpath.dirname(path) + "/*")
            action = strictest(action, rule.action if rule is not None else "ask")
    return action


def analyzer_action(line: str, site: CallSite, ruleset: Ruleset) -> Action:
    return decide(analyze_command(line, site), ruleset, locked=Ruleset()).action


def weaker(line: str, observation: Observation, site: CallSite) -> list[str]:
    """Where the analyzer's action is weaker than the oracle's, one message per ruleset."""
    problems = []
    for name, ruleset in RULESETS.items():
        truth = oracle_action(observation, ruleset)
        said = analyzer_action(line, site, ruleset)
        if _STRICTNESS[said] < _STRICTNESS[truth]:
            problems.append(
                f"{name}: analyzer {said}, bash ran {list(observation.execs)} touching {list(observation.outside)}"
                f" ({truth}): {line!r}"
            )
    return problems
