"""Which of the suite's subprocesses coverage measures.

pyproject's `patch = ["subprocess"]` measures every Python process a test starts, and each pays for it:
coverage starts, traces and writes a data file, about a tenth of a second before any branch is counted.
That is spent well on a `toolrt` process whose code paths only it takes; it is wasted on a process that
runs no toolrt code (mypy), runs a copy of toolrt other than the source tree coverage reports on (an
installed one), or re-runs what other tests measure (the docs' examples)."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["unmeasured"]


def unmeasured(environment: Mapping[str, str]) -> dict[str, str]:
    """`environment` without the variables that make coverage measure a Python process started with it."""
    return {key: value for key, value in environment.items() if not key.startswith("COVERAGE_")}
