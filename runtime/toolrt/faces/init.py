"""`toolrt init`: a starter project a newcomer can run and edit, safe before it is edited.

- The config schemas are written into the project (`.toolrt/schemas/`, as `toolrt schema --write`
  does) and every file's `$schema` modeline points at them by a relative path, so an editor with the
  YAML language server completes and checks keys offline. `toolrt validate` warns when the copies
  differ from the installed toolrt's.
- `permissions.yaml` makes `bash`, edits and `webfetch` ask (the built-in rules allow everything).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..config.resources import SCHEMA_NAMES, schema
from ..errors import UsageError
from ..sandbox.netrules import PRESETS

__all__ = ["SCHEMA_DIR", "write_schemas", "write_starter"]

SCHEMA_DIR = ".toolrt/schemas"
"""Where `toolrt init` puts the schemas, relative to the project root."""

_PRESET_LINES = "\n".join(f"  #   {name}: {', '.join(hosts)}" for name, hosts in PRESETS.items())
"""The presets `network: {allow: [...]}` accepts, and the hosts each stands for, as comments."""

_FILES: dict[str, str] = {
    "tools.d/word_count.yaml": f"""# yaml-language-server: $schema=../{SCHEMA_DIR}/tool.schema.json
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
    filePath: {{type: string, description: "File to count, relative to the project root"}}
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
    "tools.d/git_log.yaml": f"""# yaml-language-server: $schema=../{SCHEMA_DIR}/tool.schema.json
id: git_log
title: "git log -n {{{{ count }}}}"
description: |
  Show the most recent commits of the project's git repository, one per line (hash and subject).
  Use it to see what changed lately; use bash for anything more elaborate.
  Parameters: count — how many commits (1–50).
  Example: {{"count": 5}}
parameters:
  type: object
  properties:
    count: {{type: integer, minimum: 1, maximum: 50, description: "Number of commits, 1 to 50"}}
  required: [count]
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

from toolrt import ToolContext, ToolFailure


def word_count(args: Mapping[str, Any], ctx: ToolContext) -> str:
    path = ctx.resolve(args["filePath"])
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ToolFailure(f"File not found: {path}") from None
    return f"{text.count(chr(10))} lines, {len(text.split())} words, {len(text)} characters"
''',
    "permissions.yaml": f"""# yaml-language-server: $schema=./{SCHEMA_DIR}/permissions.schema.json
# This project's rules come after toolrt's built-in ones, which allow every tool (OpenCode's
# default). The last matching rule wins; no matching rule asks. `toolrt check bash "git push"`
# shows which rule decides a call, and `toolrt validate` runs the tests at the bottom.
permission:
  # Commands ask before they run. To let some run unasked, list them after "*", e.g.
  #   bash: {{"*": ask, "git status*": allow, "git diff*": allow, "rm *": deny}}
  bash: ask
  # Changing files asks (edit, write and apply_patch share the `edit` permission). To allow edits
  # under src/ only:  edit: {{"*": ask, "src/*": allow}}
  edit: ask
  # Fetching web pages asks. To allow one site:  webfetch: {{"*": ask, "https://docs.python.org/*": allow}}
  webfetch: ask
  # This project's own read-only tool runs unasked.
  git_log: allow
agents:
  # Project rules come after the agents' own, so `edit: ask` above would loosen the plan agent's
  # deny: say it again for plan (it writes only plan files).
  plan:
    permission:
      edit: {{"*": deny, ".toolrt/plans/*.md": allow, "$TOOLRT_DATA/plans/*.md": allow}}
tests:
  - {{permission: git_log, pattern: "*", expect: allow}}
  - {{permission: bash, pattern: "rm -rf build", expect: ask}}
  - {{permission: edit, pattern: src/app.py, expect: ask}}
  - {{agent: plan, permission: edit, pattern: src/app.py, expect: deny}}
  - {{permission: webfetch, pattern: "https://example.com/", expect: ask}}
  - {{permission: read, pattern: /project/.env, expect: ask}}
""",
    "toolrt.yaml": f"""# yaml-language-server: $schema=./{SCHEMA_DIR}/project.schema.json
# Project settings: tool sets, flags, model groups, defaults (docs/configuration.md lists them all).
toolsets:
  # `toolrt serve --toolset readonly` offers only these tools.
  readonly: [read, grep, glob, word_count]
defaults:
  timeout: 60
# Every process toolrt starts (bash, argv and shell tools) runs in an OS sandbox that may write only
# under the project root and temp. No network for them either: set `network: true` (or remove the
# line) when your tools need it, or give one tool `sandbox: {{network: true}}` (docs/sandbox.md).
sandbox:
  network: false
  # Or only the hosts the everyday install commands need (pip install, npm install, cargo build,
  # go get, git fetch), through toolrt's proxy, the network otherwise off; presets name them:
{_PRESET_LINES}
  # network:
  #   allow: [pypi, npm, crates, go, github]
""",
}


def write_schemas(directory: Path, names: tuple[str, ...] = tuple(SCHEMA_NAMES)) -> list[Path]:
    """Write the installed toolrt's config schemas into `directory` (created); returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        path = directory / SCHEMA_NAMES[name]
        path.write_text(json.dumps(schema(name), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written


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
    return [*written, *write_schemas(directory / SCHEMA_DIR)]
