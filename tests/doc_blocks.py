"""The code blocks of README.md and docs/, with the marker that says how the docs test treats each.

Every fenced block is preceded by an HTML comment (invisible on GitHub) naming what to do with it:

| marker | the test |
|---|---|
| `<!-- test: run -->` | runs the block (bash: `bash -euo pipefail`; python: `python`) in the page's sample repository |
| `<!-- test: output -->` | what the `run` block before it printed (stdout and stderr, in order): compared exactly |
| `<!-- test: file PATH -->` | writes the block to PATH in the sample repository (later `run` blocks use it) |
| `<!-- test: syntax -->` | parses it: YAML, JSON, TOML, Python (compile), bash (`bash -n`) |
| `<!-- test: workflow -->` | a GitHub Actions workflow: YAML with jobs and steps (test_ci runs its `run:` steps) |
| `<!-- test: pre-commit-config -->` | `pre-commit validate-config`; test_ci runs the hook it declares |
| `<!-- test: skip REASON -->` | not run; REASON must say why (it installs packages, reaches a provider, shows output) |

Each page gets one sample repository (an empty git repository), and its blocks run in page order,
so a page can write a file in one block and use it in the next. `toolrt` on the PATH runs this
checkout (`python -m toolrt`); the network is not used.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
MARKERS = ("run", "output", "file", "syntax", "workflow", "pre-commit-config", "skip")

_MARKER = re.compile(r"<!--\s*test:\s*(?P<kind>[a-z-]+)\s*(?P<argument>.*?)\s*-->")
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<lang>[^`\s]*)")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    """1-based line of the opening fence."""
    language: str
    text: str
    marker: str | None
    """run, output, file, syntax, workflow, pre-commit-config or skip; None when the block has no marker."""
    argument: str
    """The marker's argument: the PATH of `file`, the REASON of `skip`."""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    """The fenced code blocks of a Markdown page, each with the marker comment just above it (if any)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening.group("fence"), len(opening.group("indent"))
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][indent:] if lines[end][:indent].strip() == "" else lines[end])
            end += 1
        previous = index - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        marker = _MARKER.fullmatch(lines[previous].strip()) if previous >= 0 else None
        yield Block(
            page=page,
            line=index + 1,
            language=opening.group("lang").lower(),
            text="\n".join(body) + "\n",
            marker=marker.group("kind") if marker else None,
            argument=marker.group("argument") if marker else "",
        )
        index = end + 1


def tool_environment(home: Path) -> dict[str, str]:
    """An environment where `toolrt` runs this checkout, with its own data directory and no proxies."""
    bin_dir = home / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "toolrt"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m toolrt "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TOOLRT_", "PRE_COMMIT", "GIT_")) and key.lower() not in ("http_proxy", "https_proxy")
    }
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(REPO / "runtime"),
        TOOLRT_DATA_DIR=str(home / "data"),
        PRE_COMMIT_HOME=str(home / "pre-commit"),
        GIT_AUTHOR_NAME="docs",
        GIT_AUTHOR_EMAIL="docs@example.invalid",
        GIT_COMMITTER_NAME="docs",
        GIT_COMMITTER_EMAIL="docs@example.invalid",
        GIT_CONFIG_GLOBAL=os.devnull,
        NO_COLOR="1",
    )
    return env


def sample_repository(path: Path, env: dict[str, str]) -> Path:
    """An empty git repository (the docs' examples start from nothing, as a reader does)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=env)
    return path
