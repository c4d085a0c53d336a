"""The suite is the gate: lint, formatting and strict typing fail it like any other test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from measured import unmeasured

REPO = Path(__file__).resolve().parent.parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    """A checker run on the repository (no toolrt code runs in it: not measured)."""
    return subprocess.run(argv, cwd=REPO, env=unmeasured(os.environ), capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    lint = _run(sys.executable, "-m", "ruff", "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    formatting = _run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert formatting.returncode == 0, formatting.stdout + formatting.stderr


@pytest.mark.slow  # a cold mypy run checks the package, the tests and the SDKs they type against
def test_mypy_strict_finds_nothing() -> None:
    typing = _run(sys.executable, "-m", "mypy")
    assert typing.returncode == 0, typing.stdout + typing.stderr
    assert "Success: no issues found" in typing.stdout
