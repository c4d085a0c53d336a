"""`toolrt init`: a starter project a newcomer can run and edit."""

from __future__ import annotations

from pathlib import Path

from .errors import UsageError

__all__ = ["write_starter"]

_SCHEMA = "https://toolrt.dev/schemas"

_FILES: dict[str, str] = {
    "tools.d/word_count.yaml": f"""# yaml-language-server: $schema={_SCHEMA}/tool.schema.json
id: word_count
title: "Count words in {{{{ filePath }}}}"
description: |
  Count the lines, words and characters of a text file in the project.
  Returns one line: "<lines> lines, <words> words, <chars> characters".
  Use it to size a file before reading it; do not use it on binary files.
  Parameters: filePath — path relative to the project root (e.g. "README.md").
  Example: {{"filePath": "README.md"}}
parameters:
  type: object
  properties:
    filePath: {{type: string, description: "File to count, relative to the project root", minLength: 1}}
  required: [filePath]
  additionalProperties: false
handler:
  python: "starter_tools:word_count"
permission:
  key: read
  patterns: ["{{{{ filePath | abspath }}}}"]
  always: ["*"]
  paths: [filePath]
annotations: {{read_only: true, idempotent: true}}
examples:
  valid: [{{filePath: README.md}}]
  invalid: [{{}}]
""",
    "tools.d/git_log.yaml": f"""# yaml-language-server: $schema={_SCHEMA}/tool.schema.json
id: git_log
title: "git log -n {{{{ count }}}}"
description: |
  Show the most recent commits of the project's git repository, one per line (hash and subject).
  Use it to see what changed lately; use bash for anything more elaborate.
  Parameters: count — how many commits (1–50, default 10).
  Example: {{"count": 5}}
parameters:
  type: object
  properties:
    count: {{type: integer, minimum: 1, maximum: 50, default: 10, description: "Number of commits"}}
  additionalProperties: false
handler:
  argv: [git, log, --oneline, -n, "{{{{ count }}}}"]
timeout: 10
permission:
  key: git_log
annotations: {{read_only: true}}
examples:
  valid: [{{count: 3}}]
  invalid: [{{count: 0}}]
""",
    "starter_tools.py": '''"""Python handlers of this project's tools (imported with the project root on sys.path)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolrt.context import ToolContext
from toolrt.errors import ToolFailure


def word_count(args: Mapping[str, Any], ctx: ToolContext) -> str:
    path = ctx.resolve(args["filePath"])
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ToolFailure(f"File not found: {path}") from None
    return f"{text.count(chr(10))} lines, {len(text.split())} words, {len(text)} characters"
''',
    "permissions.yaml": f"""# yaml-language-server: $schema={_SCHEMA}/permissions.schema.json
# Rules are appended after the built-in defaults; the last matching rule wins.
permission:
  git_log: allow
tests:
  - {{permission: git_log, pattern: "*", expect: allow}}
  - {{permission: read, pattern: /project/.env, expect: ask}}
""",
    "toolrt.yaml": f"""# yaml-language-server: $schema={_SCHEMA}/project.schema.json
toolsets:
  readonly: [read, grep, glob, list, word_count]
defaults:
  timeout: 60
""",
}


def write_starter(directory: Path) -> list[Path]:
    """Write the starter files; refuses to overwrite an existing file."""
    existing = [directory / name for name in _FILES if (directory / name).exists()]
    if existing:
        raise UsageError(f"refusing to overwrite {', '.join(map(str, existing))}")
    written = []
    for name, text in _FILES.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
