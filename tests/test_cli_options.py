"""The command line's shape: one set of selection options, help on every option, examples in every --help."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import anyio
from cli_helpers import run
from mcp import Client

from toolrt.api import Runtime
from toolrt.faces.cli import SELECTION_OPTIONS, _handler, _parser
from toolrt.faces.serve import build_server
from toolrt.scope import CallScope

SELECTING_COMMANDS = ("list", "specs", "check", "call", "serve")


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subparsers.choices)


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if not isinstance(a, argparse._HelpAction)}


def test_selecting_commands_share_one_set_of_options() -> None:
    commands = _commands()
    reference = {name: _options(commands["list"])[name] for name in SELECTION_OPTIONS}
    for command in SELECTING_COMMANDS:
        options = _options(commands[command])
        for name in SELECTION_OPTIONS:
            assert name in options, f"toolrt {command} lacks --{name}"
            theirs, ours = options[name], reference[name]
            assert (theirs.option_strings, theirs.help, theirs.metavar, theirs.default) == (
                ours.option_strings,
                ours.help,
                ours.metavar,
                ours.default,
            ), f"toolrt {command} --{name} differs from toolrt list --{name}"


def test_every_command_runs_a_function_of_its_own_module() -> None:
    handlers = {name: _handler(name) for name in _commands()}
    assert {name: handler.__name__ for name, handler in handlers.items()} == {
        name: f"cmd_{name}" for name in _commands()
    }
    assert all(handler.__module__.startswith("toolrt.faces.cli_") for handler in handlers.values())


def test_every_option_has_help_and_every_help_ends_with_examples() -> None:
    parser = _parser()
    missing = [a.dest for a in parser._actions if not a.help]
    assert not missing
    assert "examples:\n" in parser.format_help()
    for name, command in _commands().items():
        missing = [a.dest for a in command._actions if not a.help or not a.help.strip()]
        assert not missing, f"toolrt {name}: options without help: {missing}"
        text = command.format_help()
        tail = text[text.rindex("examples:") :]
        assert tail.count("toolrt ") >= 1 and "options:" not in tail, f"toolrt {name} --help does not end with examples"


def _project(root: Path) -> Path:
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "shout.yaml").write_text(
        "id: shout\n"
        "description: Print the text in capitals, for the CLI option tests; returns the shouted text.\n"
        "parameters: {type: object, properties: {text: {type: string}}, required: [text]}\n"
        "handler: {argv: [echo, '{{ text | upper }}']}\n",
        encoding="utf-8",
    )
    (root / "toolrt.yaml").write_text("toolsets:\n  reading: [read, glob]\n", encoding="utf-8")
    (root / "permissions.yaml").write_text("permission:\n  shout: allow\n", encoding="utf-8")
    return root


def test_toolset_reaches_list_specs_check_and_call(tmp_path: Path) -> None:
    root = str(_project(tmp_path / "p"))
    code, out, _ = run("list", "--root", root, "--toolset", "reading", "--json")
    assert code == 0 and sorted(t["name"] for t in json.loads(out)["tools"]) == ["glob", "read"]
    code, out, _ = run("specs", "--root", root, "--format", "anthropic", "--toolset", "reading")
    assert sorted(s["name"] for s in json.loads(out)) == ["glob", "read"]
    code, out, _ = run("check", "--root", root, "--tool", "shout", "--args", '{"text": "hi"}', "--toolset", "reading")
    assert code == 0
    assert "decision: allow" in out
    assert "note: shout is not offered for this selection: not in tool set 'reading'" in out
    code, out, _ = run("call", "--root", root, "shout", '{"text": "hi"}', "--json")
    assert code == 0 and json.loads(out)["output"].strip() == "HI"
    code, out, _ = run("call", "--root", root, "shout", '{"text": "hi"}', "--toolset", "reading", "--json")
    assert code == 1
    assert "unavailable tool 'shout'. Available tools: read, glob." in json.loads(out)["error"]
    code, _, err = run("list", "--root", root, "--toolset", "nope")
    assert code == 2 and "unknown tool set 'nope' (tool sets: reading)" in err


def test_serve_offers_the_selected_tool_set(tmp_path: Path) -> None:
    rt = Runtime.load(_project(tmp_path / "p"))
    server, face = build_server(rt, CallScope(toolset="reading"))

    async def main() -> tuple[list[str], bool]:
        with anyio.fail_after(30):
            async with Client(server) as client:
                names = sorted(t.name for t in (await client.list_tools()).tools)
                refused = False
                try:
                    await client.call_tool("shout", {"text": "hi"})
                except Exception as error:
                    refused = "Unknown tool: shout" in str(error)
                return names, refused

    names, refused = anyio.run(main)
    face.close()
    assert names == ["glob", "read"]
    assert refused
