"""Golden transcripts: what the model reads when it calls each built-in tool, compared with reviewed files.

Every built-in tool is called with good, missing, mistyped, denied, oversized and repeated arguments
(those that apply to it); the text the model reads (the error when the call failed, else the output)
is written to `tests/transcripts/<tool>.txt` with the project root, the data directory, saved-output
names and numbers that change from run to run replaced by placeholders. A change of any text the
model reads is therefore a reviewed diff of those files.

Regenerate them after a deliberate change, then review `git diff tests/transcripts/`:

    TOOLRT_REGENERATE_TRANSCRIPTS=1 python -m pytest -q tests/test_transcripts.py
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from exa_endpoint import serve_endpoint

from toolrt import Runtime
from toolrt.truncate import tool_output_dir

TRANSCRIPTS = Path(__file__).resolve().parent / "transcripts"
REGENERATE = os.environ.get("TOOLRT_REGENERATE_TRANSCRIPTS") == "1"

PERMISSIONS = """\
permission:
  bash: {"*": allow, "rm *": deny}
  read: {"*": allow, "*.secret": deny}
  edit: {"*": allow, "locked/*": deny}
  glob: allow
  grep: allow
  list: allow
  webfetch: deny
  todowrite: allow
  todoread: allow
  skill: allow
  websearch: {"*": allow, "*password*": deny}
"""

Case = tuple[str, str, Any]
"""(label, tool name as the model sent it, arguments)."""

LONG_LINES = "\n".join(f"line {n}" for n in range(1, 3001))
PATCH = "*** Begin Patch\n{body}\n*** End Patch"
DATABASE = {
    "question": "Which database should the service use?",
    "header": "Database",
    "options": [
        {"label": "PostgreSQL (Recommended)", "description": "Already used by the billing service"},
        {"label": "SQLite", "description": "No server"},
    ],
}


def _person(*replies: str) -> Callable[[Sequence[Mapping[str, Any]]], Awaitable[list[list[str]]]]:
    """A questioner answering each question with the next reply."""
    queue = list(replies)

    async def questioner(questions: Sequence[Mapping[str, Any]]) -> list[list[str]]:
        return [[queue.pop(0)] for _ in questions]

    return questioner


CASES: dict[str, list[Case]] = {
    "bash": [
        ("good", "bash", {"command": "echo hello", "description": "Say hello"}),
        ("non-zero exit", "bash", {"command": "echo partial; exit 3", "description": "Fail"}),
        ("no output", "bash", {"command": "true", "description": "Nothing"}),
        ("timeout", "bash", {"command": "echo started; sleep 30", "description": "Wait", "timeout": 200}),
        ("missing", "bash", {"description": "No command"}),
        ("mistyped", "bash", {"command": "ls", "description": "List", "timeout": "10"}),
        ("denied", "bash", {"command": "rm -rf build", "description": "Remove build"}),
        ("oversized", "bash", {"command": "seq 1 3000", "description": "Count"}),
        ("bad workdir", "bash", {"command": "ls", "description": "List", "workdir": "nowhere"}),
    ],
    "read": [
        ("good", "read", {"filePath": "notes.txt"}),
        ("missing", "read", {}),
        ("mistyped", "read", {"filePath": "notes.txt", "offset": "2"}),
        ("not found", "read", {"filePath": "note.txt"}),
        ("past the end", "read", {"filePath": "notes.txt", "offset": 10}),
        ("binary", "read", {"filePath": "blob.bin"}),
        ("denied", "read", {"filePath": "keys.secret"}),
        ("oversized", "read", {"filePath": "long.txt", "limit": 3}),
        ("case repaired", "Read", {"filePath": "notes.txt", "limit": 1}),
    ],
    "edit": [
        ("not read first", "edit", {"filePath": "draft.txt", "oldString": "beta", "newString": "BETA"}),
        ("read it", "read", {"filePath": "draft.txt"}),
        ("good", "edit", {"filePath": "draft.txt", "oldString": "beta", "newString": "BETA"}),
        ("not found", "edit", {"filePath": "draft.txt", "oldString": "gamma ray", "newString": "x"}),
        ("same strings", "edit", {"filePath": "draft.txt", "oldString": "alpha", "newString": "alpha"}),
        ("missing", "edit", {"filePath": "draft.txt"}),
        ("denied", "edit", {"filePath": "locked/a.txt", "oldString": "a", "newString": "b"}),
    ],
    "write": [
        ("good", "write", {"filePath": "new.txt", "content": "fresh\n"}),
        ("missing", "write", {"filePath": "new2.txt"}),
        ("mistyped", "write", {"filePath": "new3.txt", "content": 42}),
        ("denied", "write", {"filePath": "locked/b.txt", "content": "x"}),
    ],
    "glob": [
        ("good", "glob", {"pattern": "**/*.py"}),
        ("nothing", "glob", {"pattern": "**/*.nope"}),
        ("missing", "glob", {}),
    ],
    "grep": [
        ("good", "grep", {"pattern": "def "}),
        ("nothing", "grep", {"pattern": "no such text anywhere"}),
        ("mistyped", "grep", {"pattern": 5}),
    ],
    "list": [
        ("good", "list", {"path": "src"}),
        ("mistyped", "list", {"path": ["src"]}),
    ],
    "todowrite": [
        (
            "good",
            "todowrite",
            {"todos": [{"id": "1", "content": "Fix it", "status": "in_progress", "priority": "high"}]},
        ),
        ("bad enum", "todowrite", {"todos": [{"id": "1", "content": "Fix", "status": "doing", "priority": "high"}]}),
    ],
    "todoread": [("good", "todoread", {})],
    "webfetch": [("denied", "webfetch", {"url": "https://example.com", "format": "text"})],
    "skill": [("unknown", "skill", {"name": "nope"})],
    "unknown": [
        ("misspelt", "reed", {"filePath": "notes.txt"}),
        ("empty name", "", {}),
        ("not json", "read", "{oops"),
    ],
    "repeated": [("same call", "glob", {"pattern": "*.md"})] * 3,
    "apply_patch": [
        ("good", "apply_patch", {"patchText": PATCH.format(body="*** Add File: added.txt\n+new line")}),
        ("update", "apply_patch", {"patchText": PATCH.format(body="*** Update File: notes.txt\n@@\n-beta\n+BETA")}),
        (
            "context not found",
            "apply_patch",
            {"patchText": PATCH.format(body="*** Update File: notes.txt\n@@\n-delta\n+x")},
        ),
        ("no envelope", "apply_patch", {"patchText": "*** Add File: x.txt\n+x"}),
        ("denied", "apply_patch", {"patchText": PATCH.format(body="*** Add File: locked/c.txt\n+x")}),
        ("missing", "apply_patch", {}),
    ],
    "question": [
        ("good", "question", {"questions": [DATABASE]}),
        (
            "header too long",
            "question",
            {"questions": [{**DATABASE, "header": "A header far longer than thirty characters"}]},
        ),
        ("no person", "question", {"questions": [DATABASE]}),
    ],
    "task": [
        (
            "good",
            "task",
            {"description": "Find clients", "prompt": "Find every HTTP client.", "subagent_type": "explore"},
        ),
        (
            "resumed",
            "task",
            {"description": "Add timeouts", "prompt": "Add timeouts.", "subagent_type": "general", "task_id": "ses_1"},
        ),
        ("missing", "task", {"description": "Find clients", "prompt": "Find every HTTP client."}),
    ],
    "batch": [
        (
            "good",
            "batch",
            {
                "tool_calls": [
                    {"tool": "read", "parameters": {"filePath": "notes.txt", "limit": 1}},
                    {"tool": "glob", "parameters": {"pattern": "*.md"}},
                ]
            },
        ),
        (
            "partly failed",
            "batch",
            {
                "tool_calls": [
                    {"tool": "read", "parameters": {"filePath": "note.txt"}},
                    {"tool": "nope", "parameters": {}},
                    {"tool": "batch", "parameters": {"tool_calls": []}},
                ]
            },
        ),
        ("empty", "batch", {"tool_calls": []}),
    ],
    "plan": [
        ("no person", "plan_enter", {}),
        ("declined", "plan_enter", {}),
        ("another call between", "read", {"filePath": "notes.txt", "limit": 1}),
        ("entered", "plan_enter", {}),
        ("exit declined", "plan_exit", {}),
        ("exited", "plan_exit", {}),
    ],
    "websearch": [
        ("good", "websearch", {"query": "AI news 2026"}),
        ("all parameters", "websearch", {"query": "json", "numResults": 3, "type": "fast", "livecrawl": "preferred"}),
        ("no results", "websearch", {"query": "nothing"}),
        ("endpoint failed", "websearch", {"query": "http error"}),
        ("error answer", "websearch", {"query": "rpc error"}),
        ("denied", "websearch", {"query": "admin password list"}),
        ("missing", "websearch", {"numResults": 3}),
        ("mistyped", "websearch", {"query": "x", "type": "slow"}),
    ],
    "codesearch": [
        ("good", "codesearch", {"query": "pandas dataframe filtering"}),
        ("no results", "codesearch", {"query": "nothing"}),
        ("too few tokens", "codesearch", {"query": "x", "tokensNum": 10}),
    ],
}


SCOPES: dict[str, dict[str, Any]] = {
    "list": {"flags": {"list_tool": True}},
    "todoread": {"flags": {"todoread_tool": True}},
    "apply_patch": {"model": "gpt-5"},
    "question": {"client": "cli"},
    "batch": {"flags": {"batch_tool": True}},
    "plan": {"client": "cli", "flags": {"plan_mode": True}},
    "websearch": {"flags": {"exa": True}},
    "codesearch": {"provider": "opencode"},
}
"""Scope fields of the transcripts whose tools the default scope does not offer."""

PEOPLE: dict[str, Callable[[], Any]] = {
    "question": lambda: _person("PostgreSQL (Recommended)"),
    "plan": lambda: _person("No", "Yes", "No", "Yes"),
}
"""The person answering each transcript's questions (a call labelled `no person` gets none)."""


async def _subagent(args: Mapping[str, Any], ctx: Any) -> str:
    """The host's task handler of the transcript: resumes `task_id`, or starts a new session."""
    session = args.get("task_id", "ses_2")
    return f"task_id: {session} (for resuming to continue this task if needed)\n\n<task_result>\nDone.\n</task_result>"


def _setup(root: Path) -> None:
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\n", encoding="utf-8")
    (root / "draft.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (root / "long.txt").write_text(LONG_LINES, encoding="utf-8")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02binary\x00" * 10)
    (root / "keys.secret").write_text("k", encoding="utf-8")
    (root / "locked").mkdir()
    (root / "locked" / "a.txt").write_text("a\n", encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("def main():\n    return 1\n", encoding="utf-8")
    (root / "README.md").write_text("# demo\n", encoding="utf-8")


def _normalise(text: str, root: Path, data_dir: Path) -> str:
    text = text.replace(str(tool_output_dir(data_dir, root)), "<data>/tool-output/<project>")
    text = text.replace(str(data_dir), "<data>").replace(str(root), "<root>")
    return re.sub(r"tool_[0-9a-f]{16}[0-9A-Za-z]{10}", "tool_<id>", text)


def _transcript(rt: Runtime, cases: list[Case], session: str, scope: dict[str, Any], person: Any = None) -> str:
    parts = []
    for label, tool, args in cases:
        result = rt.call_sync(tool, args, session=session, questioner=None if label == "no person" else person, **scope)
        read = f"ERROR: {result.error}" if result.error is not None else result.output
        call = json.dumps({"tool": tool, "args": args}, ensure_ascii=False)
        parts.append(f"### {label}\n> {call}\n{_normalise(read, rt.snapshot.root, rt.snapshot.data_dir)}\n")
    return "\n".join(parts)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, project_writer: Callable[..., Path]) -> Runtime:
    root = project_writer(
        tmp_path_factory.mktemp("transcripts") / "project", permissions=PERMISSIONS, builtin_tools=True
    )
    _setup(root)
    return Runtime.load(root)


@pytest.mark.parametrize("name", list(CASES))
def test_transcript_matches_the_reviewed_file(runtime: Runtime, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    person = PEOPLE[name]() if name in PEOPLE else None
    with contextlib.ExitStack() as stack:
        if name in ("websearch", "codesearch"):
            stack.enter_context(serve_endpoint(monkeypatch))
        if name == "task":  # a runtime of its own: the handler makes task offered, which other transcripts list
            runtime = Runtime.load(runtime.snapshot.root)
            runtime.register_handler("task", _subagent)
        text = _transcript(runtime, CASES[name], f"transcript-{name}", SCOPES.get(name, {}), person)
    path = TRANSCRIPTS / f"{name}.txt"
    if REGENERATE:
        TRANSCRIPTS.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: run with TOOLRT_REGENERATE_TRANSCRIPTS=1 and review it"
    assert text == path.read_text(encoding="utf-8")
