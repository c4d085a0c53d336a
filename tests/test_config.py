"""Loading config: located YAML, layers, flags with their precedence, the snapshot digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolrt.api import Runtime
from toolrt.build.snapshot import build_snapshot
from toolrt.config.loader import load_yaml_text
from toolrt.errors import ConfigError, UsageError

TOOL = """\
id: {id}
description: A tool for tests ({id}).
handler: {{argv: [echo, "{id}"]}}
{extra}"""


def project(root: Path, *, tools: dict[str, str] | None = None, settings: str = "", env: str = "") -> Path:
    (root / "tools.d").mkdir(parents=True, exist_ok=True)
    for name, text in (tools or {}).items():
        (root / "tools.d" / f"{name}.yaml").write_text(text)
    if settings:
        (root / "toolrt.yaml").write_text(settings)
    if env:
        (root / ".env").write_text(env)
    return root


def test_loader_locates_every_value_and_keeps_documents_apart() -> None:
    text = "# comment\nid: a\nparameters:\n  properties:\n    n: {type: integer}\n---\nid: b\n"
    first, second = load_yaml_text(text, path=Path("t.yaml"), display="t.yaml")
    assert first.data == {"id": "a", "parameters": {"properties": {"n": {"type": "integer"}}}}
    assert first.locate("") == (2, 1)
    assert first.locate("/parameters/properties/n/type") == (5, 9)
    assert first.locate("/parameters/missing") == (3, 1)  # the nearest ancestor
    assert second.data == {"id": "b"} and second.locate("/id") == (7, 1)
    assert first.source("/parameters") == "t.yaml:3"


def test_loader_rejects_duplicate_keys_with_both_lines() -> None:
    with pytest.raises(ConfigError, match=r"t.yaml:3:3: duplicate key 'b' \(first at line 2\)"):
        load_yaml_text("a:\n  b: 1\n  b: 2\n", path=Path("t.yaml"), display="t.yaml")


def test_loader_keeps_dates_as_written() -> None:
    [document] = load_yaml_text("when: 2024-05-01\n", path=Path("t.yaml"), display="t.yaml")
    assert document.data == {"when": "2024-05-01"}


def test_project_tool_replaces_builtin_and_enabled_false_removes(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        tools={
            "read": TOOL.format(id="read", extra=""),
            "glob": "id: glob\nenabled: false\n",
        },
    )
    snapshot = build_snapshot(root)
    assert snapshot.tools["read"].definition.layer == "project"
    assert snapshot.tools["read"].description == "A tool for tests (read)."
    assert "glob" not in snapshot.tools
    assert snapshot.tools["grep"].definition.layer == "builtin"


def test_builtin_tools_list_keeps_only_those(tmp_path: Path) -> None:
    root = project(tmp_path, tools={"mine": TOOL.format(id="mine", extra="")}, settings="builtin_tools: [read]\n")
    assert sorted(build_snapshot(root).tools) == ["mine", "read"]


FLAGGED = TOOL.format(id="fancy", extra="when: {flags: [fancy]}\n")
FLAGS = "builtin_tools: false\nflags:\n  - {name: fancy, description: Offer the fancy tool., default: false}\n"


@pytest.mark.parametrize(
    ("env_file", "environ", "cli", "visible"),
    [
        ("", None, None, False),  # toolrt.yaml default
        ("TOOLRT_FLAG_FANCY=true\n", None, None, True),  # .env beats the default
        ("TOOLRT_FLAG_FANCY=true\n", "false", None, False),  # the environment beats .env
        ("", "false", {"fancy": True}, True),  # the command line beats the environment
    ],
)
def test_flag_precedence(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env_file: str,
    environ: str | None,
    cli: dict[str, bool] | None,
    visible: bool,
) -> None:
    root = project(tmp_path, tools={"fancy": FLAGGED}, settings=FLAGS, env=env_file)
    if environ is not None:
        monkeypatch.setenv("TOOLRT_FLAG_FANCY", environ)
    rt = Runtime.load(root, flags=cli)
    assert ("fancy" in rt.tools().names()) is visible


def test_a_project_turns_a_default_off_builtin_on_by_its_flags_default(tmp_path: Path) -> None:
    root = project(tmp_path, settings="flags:\n  - {name: list_tool, default: true}\n")
    rt = Runtime.load(root)
    names = rt.tools().names()
    assert "list" in names and "todoread" not in names
    assert rt.snapshot.settings.flags["list_tool"].description.startswith("Offer the `list` tool")
    assert "todoread" in rt.tools(flags={"todoread_tool": True}).names()


def test_a_new_flag_without_a_description_is_a_located_problem(tmp_path: Path) -> None:
    root = project(
        tmp_path, settings="flags:\n  - {name: list_tool, default: true}\n  - {name: turbo, default: true}\n"
    )
    with pytest.raises(ConfigError, match=r"toolrt.yaml:3:5: flag 'turbo' has no description: a new flag says what"):
        Runtime.load(root)


def test_unknown_flag_on_the_command_line_is_a_usage_error(tmp_path: Path) -> None:
    root = project(tmp_path, tools={"fancy": FLAGGED}, settings=FLAGS)
    with pytest.raises(
        UsageError,
        match=r"unknown flag 'fancie' \(declared flags: batch_tool, exa, fancy, list_tool, lsp_tool, plan_mode, "
        r"todoread_tool\)",
    ):
        Runtime.load(root, flags={"fancie": True})


def test_unknown_flag_in_the_environment_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project(tmp_path, tools={"fancy": FLAGGED}, settings=FLAGS)
    monkeypatch.setenv("TOOLRT_FLAG_TURBO", "1")
    with pytest.raises(ConfigError, match=r"TOOLRT_FLAG_TURBO names an unknown flag 'turbo'"):
        build_snapshot(root)


def test_model_groups_and_toolsets(tmp_path: Path) -> None:
    settings = "builtin_tools: false\nmodel_groups:\n  openai: [{model: 'gpt-*'}]\ntoolsets:\n  small: [plain]\n"
    tools = {
        "plain": TOOL.format(id="plain", extra=""),
        "gpt_only": TOOL.format(id="gpt_only", extra="when: {models: openai}\n"),
    }
    rt = Runtime.load(project(tmp_path, tools=tools, settings=settings))
    assert rt.tools(model="gpt-5").names() == ("gpt_only", "plain")
    assert rt.tools(model="claude-sonnet-4").names() == ("plain",)
    assert rt.tools(model="gpt-5", toolset="small").names() == ("plain",)
    with pytest.raises(UsageError, match=r"unknown tool set 'big' \(tool sets: small\)"):
        rt.tools(toolset="big")


def test_unknown_model_group_is_reported(tmp_path: Path) -> None:
    tools = {"t": TOOL.format(id="t", extra="when: {models: nobody}\n")}
    with pytest.raises(ConfigError, match=r"tools.d/t.yaml:4:\d+: unknown model group 'nobody'"):
        build_snapshot(project(tmp_path, tools=tools, settings="builtin_tools: false\n"))


def test_digest_changes_with_content(tmp_path: Path) -> None:
    root = project(tmp_path, tools={"t": TOOL.format(id="t", extra="")}, settings="builtin_tools: false\n")
    first = build_snapshot(root).digest
    assert build_snapshot(root).digest == first
    (root / "tools.d" / "t.yaml").write_text(TOOL.format(id="t", extra="timeout: 5\n"))
    assert build_snapshot(root).digest != first


def test_when_any_offers_a_tool_when_one_alternative_holds(tmp_path: Path) -> None:
    extra = "when:\n  clients: [cli]\n  any:\n    - {providers: [opencode]}\n    - {flags: [fancy]}\n"
    root = project(tmp_path, tools={"either": TOOL.format(id="either", extra=extra)}, settings=FLAGS)
    rt = Runtime.load(root)
    assert "either" in rt.tools(client="cli", provider="opencode").names()
    assert "either" in rt.tools(client="cli", flags={"fancy": True}).names()
    assert "either" not in rt.tools(provider="opencode").names()  # the filters beside `any` still hold
    hidden = {h.id: h.reason for h in rt.tools(client="cli", provider="openai").hidden}
    assert (
        hidden["either"]
        == "none of its alternatives holds (provider openai is not one of: opencode; flag fancy is off)"
    )


def test_an_unknown_flag_or_group_inside_any_is_located(tmp_path: Path) -> None:
    extra = "when:\n  any:\n    - {models: fast}\n    - {flags: [nope]}\n"
    root = project(tmp_path, tools={"either": TOOL.format(id="either", extra=extra)}, settings=FLAGS)
    with pytest.raises(ConfigError) as caught:
        Runtime.load(root)
    text = str(caught.value)
    assert "tools.d/either.yaml:7:16: unknown flag 'nope'" in text
    assert "tools.d/either.yaml:6:8: unknown model group 'fast'" in text
