"""todowrite/todoread, question, skill, batch, invalid, task's describe hook, and the YAML of all of them."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import jsonschema  # type: ignore[import-untyped,unused-ignore]
import pytest
import yaml

from toolrt.build.compiled import DescribeInfo
from toolrt.builtin import task_describe
from toolrt.builtin.batch import batch
from toolrt.builtin.invalid import invalid
from toolrt.builtin.question import question
from toolrt.builtin.skill import describe as describe_skills
from toolrt.builtin.skill import discover_skills, skill
from toolrt.builtin.todo import todo_path, todoread, todowrite
from toolrt.call.context import ToolContext
from toolrt.call.detached import DetachedCall
from toolrt.errors import ToolFailure
from toolrt.result import ToolResult
from toolrt.scope import CallScope

TOOLS_DIR = Path(__file__).resolve().parent.parent / "tools.d"
MY_TOOLS = (
    "glob",
    "grep",
    "list",
    "webfetch",
    "todowrite",
    "todoread",
    "question",
    "skill",
    "batch",
    "task",
    "invalid",
)

Handler = Callable[[Mapping[str, Any], ToolContext], Awaitable[dict[str, Any]]]


def make_ctx(tmp_path: Path, **fields: Any) -> ToolContext:
    return ToolContext(DetachedCall(tool_id="t", root=tmp_path / "project", data_dir=tmp_path / "data", **fields))


def call(handler: Handler, args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        with anyio.fail_after(10):
            return await handler(args, ctx)

    return anyio.run(main)


# ---------------------------------------------------------------- todo

TODOS = [
    {"id": "1", "content": "Reproduce the crash", "status": "completed", "priority": "high"},
    {"id": "2", "content": "Fix the parser", "status": "in_progress", "priority": "high"},
    {"id": "3", "content": "Écrire la doc", "status": "pending", "priority": "low"},
    {"id": "4", "content": "Old idea", "status": "cancelled", "priority": "medium"},
]


def test_todo_round_trip(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, scope=CallScope(session="ses_1"))
    written = call(todowrite, {"todos": TODOS}, ctx)
    assert written["title"] == "3 todos"
    assert written["output"] == json.dumps(TODOS, indent=2, ensure_ascii=False)
    assert written["metadata"] == {"todos": TODOS}
    assert todo_path(ctx) == tmp_path / "data" / "todos" / "ses_1.json"
    assert call(todoread, {}, ctx) == written
    assert [p.name for p in todo_path(ctx).parent.iterdir()] == ["ses_1.json"]  # no temp file left behind


def test_todo_lists_are_per_session(tmp_path: Path) -> None:
    call(todowrite, {"todos": TODOS}, make_ctx(tmp_path, scope=CallScope(session="a")))
    other = call(todoread, {}, make_ctx(tmp_path, scope=CallScope(session="b")))
    assert (other["title"], other["output"], other["metadata"]) == ("0 todos", "[]", {"todos": []})


def test_todowrite_replaces_the_whole_list(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    call(todowrite, {"todos": TODOS}, ctx)
    call(todowrite, {"todos": []}, ctx)
    assert call(todoread, {}, ctx)["output"] == "[]"


@pytest.mark.parametrize("session", ["../../etc/passwd", "/abs/path", "..", ".", "a/b", "x" * 300, "nul\0byte", ""])
def test_hostile_session_ids_stay_inside_the_data_dir(tmp_path: Path, session: str) -> None:
    ctx = make_ctx(tmp_path, scope=CallScope(session=session))
    call(todowrite, {"todos": TODOS[:1]}, ctx)
    path = todo_path(ctx)
    assert path.parent == tmp_path / "data" / "todos"
    assert path.is_file()
    assert len(path.stem) == 64


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"The todo list at .*ses\.json cannot be read .*Write a fresh list with todowrite\."),
        ('{"a": 1}', r"The todo list at .*ses\.json is not a list of todos\. Write a fresh list with todowrite\."),
    ],
)
def test_todoread_reports_a_corrupt_file(tmp_path: Path, content: str, message: str) -> None:
    ctx = make_ctx(tmp_path, scope=CallScope(session="ses"))
    todo_path(ctx).parent.mkdir(parents=True)
    todo_path(ctx).write_text(content, encoding="utf-8")
    with pytest.raises(ToolFailure, match=message):
        call(todoread, {}, ctx)


# ---------------------------------------------------------------- question

QUESTIONS = [
    {"question": "Which database?", "header": "DB", "options": [{"label": "Postgres", "description": "server"}]},
    {"question": "Which features?", "header": "Features", "options": [], "multiple": True},
    {"question": "Ship today?", "header": "Ship", "options": []},
]


@pytest.mark.parametrize(
    ("answers", "summary"),
    [
        (
            [["Postgres"], ["a", "b"], ["yes"]],
            '"Which database?"="Postgres", "Which features?"="a, b", "Ship today?"="yes"',
        ),
        (
            [["Postgres"], [], ["no"]],
            '"Which database?"="Postgres", "Which features?"="Unanswered", "Ship today?"="no"',
        ),
        ([["Postgres"]], '"Which database?"="Postgres", "Which features?"="Unanswered", "Ship today?"="Unanswered"'),
    ],
)
def test_question_summarises_the_answers(tmp_path: Path, answers: list[list[str]], summary: str) -> None:
    asked: list[Sequence[Mapping[str, Any]]] = []

    async def questioner(questions: Sequence[Mapping[str, Any]]) -> list[list[str]]:
        asked.append(questions)
        return answers

    result = call(question, {"questions": QUESTIONS}, make_ctx(tmp_path, questioner=questioner))
    assert asked == [QUESTIONS]
    assert result["title"] == "Asked 3 questions"
    assert result["output"] == (
        f"User has answered your questions: {summary}. You can now continue with the user's answers in mind."
    )
    assert result["metadata"] == {"answers": answers}


def test_question_without_a_questioner_fails(tmp_path: Path) -> None:
    with pytest.raises(ToolFailure, match=r"^No one can answer questions here: .*Make a reasonable assumption"):
        call(question, {"questions": QUESTIONS[:1]}, make_ctx(tmp_path))


# ---------------------------------------------------------------- skill


def write_skill(base: Path, folder: str, frontmatter: str, body: str = "Do the thing.\n") -> Path:
    path = base / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{frontmatter}---\n{body}", encoding="utf-8")
    return path


@pytest.fixture
def skill_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    root, home = tmp_path / "project", tmp_path / "home"
    project_skills, user_skills = root / ".toolrt" / "skills", home / ".config" / "toolrt" / "skills"
    write_skill(project_skills, "release", "name: release\ndescription: Cut a release <tag> & publish\n", "# Steps\n")
    write_skill(user_skills, "review", "name: review\ndescription: >\n  Review a change\n  carefully\n")
    write_skill(user_skills, "release-old", "name: release\ndescription: the user's older release steps\n")
    write_skill(project_skills, "no-name", "description: missing its name\n")
    write_skill(project_skills, "bad-yaml", "name: [unclosed\n")
    (project_skills / "no-frontmatter").mkdir()
    (project_skills / "no-frontmatter" / "SKILL.md").write_text("name: x\n", encoding="utf-8")
    secret = write_skill(tmp_path / "elsewhere", "stolen", "name: stolen\ndescription: outside the project\n")
    (project_skills / "stolen").mkdir()
    (project_skills / "stolen" / "SKILL.md").symlink_to(secret)
    monkeypatch.setenv("HOME", str(home))
    return root, home


def test_skill_discovery(skill_dirs: tuple[Path, Path]) -> None:
    root, home = skill_dirs
    skills = discover_skills(root, home)
    assert sorted(skills) == ["release", "review"]
    assert skills["release"].directory == root / ".toolrt" / "skills" / "release"  # the project wins
    assert skills["review"].description == "Review a change carefully"


def test_skill_describe_lists_the_skills(skill_dirs: tuple[Path, Path]) -> None:
    root, home = skill_dirs
    info = DescribeInfo(root=root, home=home, subagents={})
    assert describe_skills("Load a skill.\n\n{skills}\n\nMore.", info) == (
        "Load a skill.\n\n<available_skills>\n"
        "  <skill>\n    <name>release</name>\n    <description>Cut a release &lt;tag&gt; &amp; publish</description>\n"
        "  </skill>\n"
        "  <skill>\n    <name>review</name>\n    <description>Review a change carefully</description>\n  </skill>\n"
        "</available_skills>\n\nMore."
    )


@pytest.mark.parametrize(
    ("description", "expected"),
    [
        ("Load a skill.\n{skills}", "Load a skill.\nNo skills are currently available."),
        ("Load a skill.\n", "Load a skill.\n\nNo skills are currently available."),
    ],
)
def test_skill_describe_without_skills(tmp_path: Path, description: str, expected: str) -> None:
    info = DescribeInfo(root=tmp_path, home=tmp_path, subagents={})
    assert describe_skills(description, info) == expected


def test_skill_returns_the_content_with_its_base_directory(skill_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    root, _ = skill_dirs
    result = call(skill, {"name": "release"}, make_ctx(tmp_path))
    base = root / ".toolrt" / "skills" / "release"
    assert result["output"] == f"## Skill: release\n\n**Base directory**: {base}\n\n# Steps"
    assert result["title"] == "Loaded skill: release"


@pytest.mark.parametrize("name", ["stolen", "missing", "no-name", "../release", ""])
def test_skill_unknown_name_lists_the_available_ones(skill_dirs: tuple[Path, Path], tmp_path: Path, name: str) -> None:
    with pytest.raises(ToolFailure, match=r"not found\. Available skills: release, review\. Call skill with one"):
        call(skill, {"name": name}, make_ctx(tmp_path))


def test_skill_when_none_are_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(
        ToolFailure, match=r"^Skill 'x' not found: no skills are installed .*Continue without a skill\.$"
    ):
        call(skill, {"name": "x"}, make_ctx(tmp_path))


# ---------------------------------------------------------------- batch

AVAILABLE = ("invalid", "read", "grep", "glob", "batch", "bash")


def batch_ctx(tmp_path: Path, seen: list[list[tuple[str, Mapping[str, Any]]]]) -> ToolContext:
    async def run(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[ToolResult]:
        seen.append(list(calls))
        return [
            ToolResult(title=tool, output="", error=f"{tool} broke")
            if parameters.get("fail")
            else ToolResult(title=tool, output=f"{tool} output", attachments=({"type": "file", "url": f"data:{tool}"},))
            for tool, parameters in calls
        ]

    return make_ctx(tmp_path, batch=run, available_tools=AVAILABLE)


def test_batch_all_successful(tmp_path: Path) -> None:
    seen: list[list[tuple[str, Mapping[str, Any]]]] = []
    calls = [{"tool": "read", "parameters": {"filePath": "a"}}, {"tool": "grep", "parameters": {"pattern": "x"}}]
    result = call(batch, {"tool_calls": calls}, batch_ctx(tmp_path, seen))
    assert seen == [[("read", {"filePath": "a"}), ("grep", {"pattern": "x"})]]
    assert result["output"] == (
        "All 2 tools executed successfully.\n\n"
        "Keep using the batch tool for optimal performance in your next response!\n\n"
        '<result index="1" tool="read" status="success">\nread output\n</result>\n\n'
        '<result index="2" tool="grep" status="success">\ngrep output\n</result>'
    )
    assert result["title"] == "Batch execution (2/2 successful)"
    assert result["attachments"] == [{"type": "file", "url": "data:read"}, {"type": "file", "url": "data:grep"}]
    assert result["metadata"]["details"] == [
        {"tool": "read", "success": True, "status": "success", "title": "read"},
        {"tool": "grep", "success": True, "status": "success", "title": "grep"},
    ]


def test_batch_mixed_success_nested_and_unknown(tmp_path: Path) -> None:
    seen: list[list[tuple[str, Mapping[str, Any]]]] = []
    calls = [
        {"tool": "read", "parameters": {}},
        {"tool": "batch", "parameters": {"tool_calls": []}},
        {"tool": "mcp_fetch", "parameters": {}},
        {"tool": "grep", "parameters": {"fail": True}},
    ]
    result = call(batch, {"tool_calls": calls}, batch_ctx(tmp_path, seen))
    assert seen == [[("read", {}), ("grep", {"fail": True})]]
    assert result["output"].split("\n\n")[0] == "Executed 1/4 tools successfully. 3 failed."
    assert result["title"] == "Batch execution (1/4 successful)"
    assert result["attachments"] == [{"type": "file", "url": "data:read"}]
    errors = [detail.get("error") for detail in result["metadata"]["details"]]
    assert errors == [
        None,
        "Tool 'batch' is not allowed in batch. Disallowed tools: batch",
        "Tool 'mcp_fetch' not in registry. External tools (MCP, environment) cannot be batched - call them "
        "directly. Available tools: read, grep, glob, bash",
        "grep broke",
    ]
    assert '<result index="4" tool="grep" status="error">\nError: grep broke\n</result>' in result["output"]
    assert result["metadata"]["tools"] == ["read", "batch", "mcp_fetch", "grep"]
    assert (result["metadata"]["successful"], result["metadata"]["failed"]) == (1, 3)


def test_batch_runs_25_and_fails_the_rest(tmp_path: Path) -> None:
    seen: list[list[tuple[str, Mapping[str, Any]]]] = []
    calls = [{"tool": "read", "parameters": {"n": n}} for n in range(27)]
    result = call(batch, {"tool_calls": calls}, batch_ctx(tmp_path, seen))
    assert [parameters["n"] for _, parameters in seen[0]] == list(range(25))
    assert result["output"].startswith("Executed 25/27 tools successfully. 2 failed.\n\n")
    assert [d.get("error") for d in result["metadata"]["details"][24:]] == [
        None,
        "Maximum of 25 tools allowed in batch",
        "Maximum of 25 tools allowed in batch",
    ]


def test_batch_with_nothing_runnable_does_not_call_dispatch(tmp_path: Path) -> None:
    seen: list[list[tuple[str, Mapping[str, Any]]]] = []
    result = call(batch, {"tool_calls": [{"tool": "nope", "parameters": {}}]}, batch_ctx(tmp_path, seen))
    assert seen == []
    assert result["output"].startswith("Executed 0/1 tools successfully. 1 failed.")


# ---------------------------------------------------------------- invalid, task


@pytest.mark.parametrize(
    "error",
    ["Unknown tool 'Reed'. Available tools: read, grep", "", "multi\nline <xml> & stuff"],
)
def test_invalid_reports_the_error(tmp_path: Path, error: str) -> None:
    result = call(invalid, {"tool": "Reed", "error": error}, make_ctx(tmp_path))
    assert result == {
        "title": "Invalid Tool",
        "output": f"The arguments provided to the tool are invalid: {error}",
        "metadata": {},
    }


@pytest.mark.parametrize(
    ("description", "subagents", "expected"),
    [
        (
            "Agents:\n{agents}\nEnd.",
            {"general": "General work", "explore": " Fast search \n"},
            "Agents:\n- explore: Fast search\n- general: General work\nEnd.",
        ),
        ("Agents:", {"manual": ""}, "Agents:\n\n- manual: This subagent should only be called manually by the user."),
        ("Agents: {agents}", {}, "Agents: No subagents are available."),
    ],
)
def test_task_describe_lists_subagents(description: str, subagents: dict[str, str], expected: str) -> None:
    info = DescribeInfo(root=Path("/r"), home=Path("/h"), subagents=subagents)
    assert task_describe.describe(description, info) == expected


# ---------------------------------------------------------------- the YAML


def load(tool: str) -> dict[str, Any]:
    data = yaml.safe_load((TOOLS_DIR / f"{tool}.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def resolve(reference: str) -> Any:
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


@pytest.mark.parametrize("tool", MY_TOOLS)
def test_yaml_handlers_and_examples(tool: str) -> None:
    definition = load(tool)
    assert definition["id"] == tool
    parameters = definition["parameters"]
    jsonschema.Draft202012Validator.check_schema(parameters)
    validator = jsonschema.Draft202012Validator(parameters)
    for example in definition["examples"]["valid"]:
        validator.validate(example)
    for example in definition["examples"]["invalid"]:
        assert not validator.is_valid(example), example
    handler = definition["handler"]
    if "python" in handler:
        assert callable(resolve(handler["python"]))
    else:
        assert handler == {"host": "task"}
    if "describe" in definition:
        assert callable(resolve(definition["describe"]))


@pytest.mark.parametrize(
    ("tool", "handler"),
    [
        ("glob", "toolrt.builtin.glob:glob"),
        ("grep", "toolrt.builtin.grep:grep"),
        ("list", "toolrt.builtin.ls:list_directory"),
        ("webfetch", "toolrt.builtin.webfetch:webfetch"),
        ("todowrite", "toolrt.builtin.todo:todowrite"),
        ("todoread", "toolrt.builtin.todo:todoread"),
        ("question", "toolrt.builtin.question:question"),
        ("skill", "toolrt.builtin.skill:skill"),
        ("batch", "toolrt.builtin.batch:batch"),
        ("invalid", "toolrt.builtin.invalid:invalid"),
    ],
)
def test_yaml_names_the_right_handler(tool: str, handler: str) -> None:
    assert load(tool)["handler"]["python"] == handler


@pytest.mark.parametrize("tool", [t for t in MY_TOOLS if t != "invalid"])
def test_descriptions_are_written_for_the_model(tool: str) -> None:
    description = load(tool)["description"]
    assert len(description.splitlines()) >= 8
    assert "Example" in description


@pytest.mark.parametrize(
    ("tool", "key", "patterns", "always", "paths"),
    [
        ("glob", "glob", ["{{ pattern }}"], ["*"], [{"arg": "path", "kind": "directory"}]),
        ("grep", "grep", ["{{ pattern }}"], ["*"], [{"arg": "path", "kind": "directory"}]),
        (
            "list",
            "list",
            ["{{ path | abspath }}", "{{ path | realpath }}"],
            ["*"],
            [{"arg": "path", "kind": "directory"}],
        ),
        ("skill", "skill", ["{{ name }}"], None, None),
        ("task", "task", ["{{ subagent_type }}"], None, None),
    ],
)
def test_yaml_permissions(
    tool: str, key: str, patterns: list[str], always: list[str] | None, paths: list[dict[str, str]] | None
) -> None:
    permission = load(tool)["permission"]
    assert (permission["key"], permission["patterns"]) == (key, patterns)
    assert (permission.get("always"), permission.get("paths")) == (always, paths)


def test_webfetch_permission_comes_from_its_analyzer() -> None:
    # `webfetch` on the URL with always `*`, plus `private_network` for local hosts (test_tool_webfetch.py).
    assert load("webfetch")["permission"] == {"analyzer": "toolrt.builtin.webfetch:permission_requests"}


@pytest.mark.parametrize(
    ("tool", "field", "value"),
    [
        ("batch", "when", {"flags": ["batch_tool"]}),
        ("question", "when", {"clients": ["app", "cli", "desktop"]}),
        ("invalid", "internal", True),
        ("invalid", "description", "Do not use"),
    ],
)
def test_yaml_availability(tool: str, field: str, value: object) -> None:
    assert load(tool)[field] == value


def test_yaml_files_have_the_schema_modeline() -> None:
    for tool in MY_TOOLS:
        first = (TOOLS_DIR / f"{tool}.yaml").read_text(encoding="utf-8").splitlines()[0]
        assert first == "# yaml-language-server: $schema=../schemas/tool.schema.json", tool


def test_session_files_are_not_world_writable(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, scope=CallScope(session="perm"))
    call(todowrite, {"todos": TODOS}, ctx)
    assert not os.stat(todo_path(ctx)).st_mode & 0o022
