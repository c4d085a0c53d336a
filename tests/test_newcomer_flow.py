"""The issue-6 walk-through, as a newcomer does it: in a scratch git repository, read a file, edit it,
grep for the change and run the tests through bash, every step a `toolrt call` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def toolrt(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolrt", "call", *args, "--root", str(repo), "--session", "walkthrough"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


@pytest.mark.slow
def test_read_edit_grep_and_test_through_toolrt_call(repo: Path, tmp_path: Path) -> None:
    env = {**os.environ, "TOOLRT_DATA_DIR": str(tmp_path / "data")}
    read = toolrt(repo, env, "read", '{"filePath": "calc.py"}')
    assert read.returncode == 0 and "00002|     return a - b" in read.stdout
    edit = toolrt(repo, env, "edit", '{"filePath": "calc.py", "oldString": "a - b", "newString": "a + b"}')
    assert edit.returncode == 0, edit.stderr
    assert edit.stdout.strip() == "Edit applied successfully."
    grep = toolrt(repo, env, "grep", '{"pattern": "a \\\\+ b"}')
    assert grep.returncode == 0 and "Line 2:     return a + b" in grep.stdout
    command = json.dumps({"command": f"{sys.executable} -m pytest -q -p no:cacheprovider", "description": "Run tests"})
    tests = toolrt(repo, env, "bash", command)
    assert tests.returncode == 0, tests.stderr
    assert "1 passed" in tests.stdout


@pytest.mark.slow
def test_opencode_defaults_ask_before_leaving_the_project(repo: Path, tmp_path: Path) -> None:
    env = {**os.environ, "TOOLRT_DATA_DIR": str(tmp_path / "data")}
    outside = toolrt(repo, env, "read", json.dumps({"filePath": str(tmp_path / "secret.txt")}))
    assert outside.returncode == 1
    assert "needs approval (external_directory" in outside.stderr
    approved = toolrt(repo, env, "bash", '{"command": "ls ..", "description": "List the parent"}', "--yes")
    assert approved.returncode == 0, approved.stderr
    assert "repo" in approved.stdout
    dotenv = toolrt(repo, env, "read", '{"filePath": ".env"}', "--no")
    assert dotenv.returncode == 1
    assert "The user rejected permission to use this specific tool call." in dotenv.stderr
