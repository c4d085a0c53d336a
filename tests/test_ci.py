"""Drop-in CI, run offline on a sample repository: the pre-commit manifest, the hook its `files:` selects,
the documented pre-commit config (run by pre-commit itself) and the documented GitHub workflow's commands."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from doc_blocks import REPO, Block, blocks, sample_repository, tool_environment

MANIFEST = REPO / ".pre-commit-hooks.yaml"
SARIF_SCHEMA = Path(__file__).parent / "fixtures" / "sarif" / "sarif-schema-2.1.0.json"
TYPO = 'agent/permissions.yaml:3:3: warning: permission "bahs" is not used by any tool; check the spelling'

HELLO = """\
id: hello
description: Say hello to someone by name and return the greeting; the CI sample repository's tool.
parameters: {type: object, properties: {name: {type: string}}, required: [name]}
handler: {argv: [echo, "hello {{ name }}"]}
"""


def _block(marker: str, argument: str = "", *, local: bool | None = None) -> Block:
    """The one block of docs/ci.md with `marker` (and `argument`); for pre-commit configs, the local hook's
    (`local=True`) or the one that installs toolrt from its repository (`local=False`)."""
    [block] = [
        b
        for b in blocks(REPO / "docs" / "ci.md")
        if b.marker == marker and b.argument == argument and (local is None or ("repo: local" in b.text) == local)
    ]
    return block


def _shown_output(after: str) -> str:
    """The text of the first output-like block (marked `skip`) of docs/ci.md after the sentence `after`."""
    page = REPO / "docs" / "ci.md"
    text = page.read_text(encoding="utf-8")
    line = text[: text.index(after)].count("\n") + 1
    return next(b for b in blocks(page) if b.line > line and b.marker == "skip").text


def _git(repo: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return tool_environment(tmp_path / "home")


@pytest.fixture
def repo(tmp_path: Path, env: dict[str, str]) -> Path:
    """A repository with a toolrt project in agent/ (rules with a misspelt key), another in bot/, other files."""
    repo = sample_repository(tmp_path / "repo", env)
    files = {
        "agent/tools.d/hello.yaml": HELLO,
        "agent/permissions.yaml": "permission:\n  hello: allow\n  bahs: ask\n",
        "agent/tools.d/README.txt": "not a tool\n",
        "bot/toolrt.yaml": "toolsets:\n  reading: [read, grep]\n",
        "config/settings.yaml": "not: toolrt\n",
        "README.md": "# sample\n",
    }
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    _git(repo, env, "add", "-A")
    _git(repo, env, "commit", "-q", "-m", "sample")
    return repo


def _fix_typo(repo: Path, env: dict[str, str]) -> None:
    (repo / "agent" / "permissions.yaml").write_text("permission:\n  hello: allow\n", encoding="utf-8")
    _git(repo, env, "commit", "-qam", "fix the typo")


def test_manifest_is_valid_for_pre_commit() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", str(MANIFEST)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    [hook] = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    assert hook["id"] == "toolrt-validate" and hook["entry"].split()[:2] == ["toolrt", "validate"]


@pytest.mark.slow
def test_manifest_hook_runs_on_the_files_it_selects(repo: Path, env: dict[str, str]) -> None:
    [hook] = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))
    selected = [name for name in _git(repo, env, "ls-files").split() if re.search(hook["files"], name)]
    assert selected == ["agent/permissions.yaml", "agent/tools.d/hello.yaml", "bot/toolrt.yaml"]
    command = [*shlex.split(hook["entry"]), *hook.get("args", [])]
    result = subprocess.run([*command, *selected], cwd=repo, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert TYPO in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1] == "agent, bot: valid (0 error(s), 1 warning(s))"
    strict = subprocess.run([*command, "--strict", *selected], cwd=repo, env=env, capture_output=True, text=True)
    assert strict.returncode == 1


@pytest.mark.slow  # pre-commit itself, offline: a local hook with language: system
def test_documented_pre_commit_config_runs_the_hook(repo: Path, env: dict[str, str]) -> None:
    block = _block("pre-commit-config", local=True)
    (repo / ".pre-commit-config.yaml").write_text(block.text, encoding="utf-8")
    _git(repo, env, "add", ".pre-commit-config.yaml")
    _git(repo, env, "commit", "-qm", "pre-commit")
    run = [sys.executable, "-m", "pre_commit", "run", "--all-files"]
    failed = subprocess.run(run, cwd=repo, env=env, capture_output=True, text=True)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "- hook id: toolrt-validate" in failed.stdout and TYPO in failed.stdout
    _fix_typo(repo, env)
    passed = subprocess.run(run, cwd=repo, env=env, capture_output=True, text=True)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert re.search(r"toolrt validate\.+Passed", passed.stdout)


def _offline_pip(env: dict[str, str]) -> dict[str, str]:
    """pre-commit's own pip, offline: no index, no dependencies, no isolated build; the dependencies and
    the build backend come from this test environment's site-packages (not its toolrt: an editable
    install is a .pth file there, which PYTHONPATH does not read)."""
    import sysconfig

    return {
        **env,
        "PYTHONPATH": sysconfig.get_paths()["purelib"],
        "PIP_NO_INDEX": "1",
        "PIP_NO_DEPS": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip's spelling of --no-build-isolation
        "PIP_NO_COMPILE": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "VIRTUALENV_NO_SETUPTOOLS": "1",  # the hook's environment needs pip alone: hatchling builds toolrt
        "VIRTUALENV_NO_WHEEL": "1",
        "VIRTUALENV_NO_PERIODIC_UPDATE": "1",
    }


def _version_at(repository: Path, ref: str) -> str:
    pyproject = _git(repository, {}, "show", f"{ref}:pyproject.toml")
    match = re.search(r'^version = "([^"]+)"$', pyproject, re.M)
    assert match is not None, f"no version in pyproject.toml at {ref}"
    return match.group(1)


def _release_repository(path: Path, rev: str) -> Path:
    """A bare copy of this repository in which `rev` is the release tag pre-commit clones.

    The docs must name the release this checkout is (`rev` is `v` + pyproject's version). Where the
    checkout has the tag, it must point at a commit of that version; a clone that carries no tags (CI
    clones the branch alone) gets the tag on its HEAD, in the copy only."""
    assert rev == f"v{_version_at(REPO, 'HEAD')}", f"docs/ci.md's pre-commit rev {rev} is not this release"
    _git(REPO, {}, "clone", "-q", "--bare", "--no-hardlinks", str(REPO), str(path))
    tagged = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "-q", "--verify", f"refs/tags/{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if tagged.returncode == 0:
        assert _version_at(path, rev) == rev.removeprefix("v"), f"the tag {rev} is on a commit of another version"
    else:
        _git(path, {}, "tag", rev, "HEAD")
    return path


@pytest.mark.slow  # pre-commit clones this repository at the tag and pip-installs toolrt from it, offline
def test_documented_hook_installs_toolrt_from_the_tag_and_prints_what_the_page_shows(
    tmp_path: Path, env: dict[str, str]
) -> None:
    block = _block("pre-commit-config", local=False)
    config = yaml.safe_load(block.text)
    [entry] = config["repos"]
    rev = entry["rev"]
    origin = _release_repository(tmp_path / "toolrt.git", rev)
    # the workflow installs the same release
    workflow = yaml.safe_load(_block("workflow").text)
    installs = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    assert any(run.startswith("pip install") and f"@{rev}" in run for run in installs), installs
    repo = sample_repository(tmp_path / "sample", env)
    (repo / "agent").mkdir()
    (repo / "agent" / "permissions.yaml").write_text(_block("file", "agent/permissions.yaml").text, encoding="utf-8")
    (repo / ".pre-commit-config.yaml").write_text(block.text.replace(entry["repo"], str(origin)), encoding="utf-8")
    _git(repo, env, "add", "-A")
    _git(repo, env, "commit", "-qm", "sample")
    run = [sys.executable, "-m", "pre_commit", "run", "--all-files"]
    failed = subprocess.run(run, cwd=repo, env=_offline_pip(env), capture_output=True, text=True)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    printed = "".join(line + "\n" for line in failed.stdout.splitlines() if not line.startswith("[INFO]"))
    assert printed.strip("\n") + "\n" == _shown_output("every commit that touches a config file is validated")
    (repo / "agent" / "permissions.yaml").write_text("permission:\n  bash: ask\n", encoding="utf-8")
    _git(repo, env, "commit", "-qam", "fix the typo")
    passed = subprocess.run(run, cwd=repo, env=_offline_pip(env), capture_output=True, text=True)
    assert passed.returncode == 0 and re.search(r"toolrt validate\.+Passed", passed.stdout), passed.stdout


def _workflow_commands() -> list[str]:
    workflow = yaml.safe_load(_block("workflow").text)
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    # `pip install toolrt` is the one step left out: the test runs this checkout, without a registry.
    return [step["run"] for step in steps if "run" in step and not step["run"].startswith("pip install")]


def _annotations(output: str) -> list[tuple[str, str, int, int]]:
    found = []
    for line in output.splitlines():
        if line.startswith("::error title=toolrt validate --strict::"):
            continue  # the run's summary: no file to attach to
        match = re.match(r"::(error|warning) file=([^,]+),line=(\d+),col=(\d+)::", line)
        assert match, f"not an annotation: {line}"
        found.append((match.group(1), match.group(2), int(match.group(3)), int(match.group(4))))
    return found


@pytest.mark.slow  # runs the documented workflow's commands
def test_documented_workflow_commands_attach_annotations(repo: Path, env: dict[str, str]) -> None:
    commands = _workflow_commands()
    assert len(commands) == 2 and "--format github" in commands[0] and "--format sarif" in commands[1]
    results = [
        subprocess.run(["bash", "-eo", "pipefail", "-c", c], cwd=repo, env=env, capture_output=True, text=True)
        for c in commands
    ]
    assert results[0].returncode == 1  # --strict: the misspelt key fails the job
    assert results[0].stdout.splitlines()[-1] == (
        "::error title=toolrt validate --strict::1 warning(s) fail the run under --strict (no errors)"
    )
    annotations = _annotations(results[0].stdout)
    assert annotations == [("warning", "agent/permissions.yaml", 3, 3)]
    for _, file, line, column in annotations:  # GitHub attaches them: the file exists at that line
        text = (repo / file).read_text(encoding="utf-8").splitlines()
        assert text[line - 1][column - 1 :].startswith("bahs")
    log: dict[str, Any] = json.loads((repo / "toolrt.sarif").read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text(encoding="utf-8"))).validate(log)
    [result] = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "agent/permissions.yaml",
        "uriBaseId": "%SRCROOT%",
    }
    _fix_typo(repo, env)
    for command in commands:
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", command], cwd=repo, env=env, capture_output=True)
        assert done.returncode == 0, done
    assert json.loads((repo / "toolrt.sarif").read_text(encoding="utf-8"))["runs"][0]["results"] == []
