"""A new project starts safe: `toolrt init`'s rules ask for bash, edits and webfetch; its schemas resolve
locally; `toolrt call` and `toolrt serve` say which tools run without asking."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from cli_helpers import run
from mcp import Client

from toolrt.api import Runtime
from toolrt.config.resources import SCHEMA_NAMES, schema
from toolrt.faces.serve import build_server
from toolrt.scope import CallScope


@pytest.fixture
def starter(tmp_path: Path) -> Path:
    code, out, _ = run("init", str(tmp_path / "new"))
    assert code == 0, out
    return tmp_path / "new"


def test_starter_rules_ask_for_bash_edits_and_webfetch(starter: Path) -> None:
    code, out, _ = run("validate", "--root", str(starter), "--strict")
    assert code == 0, out  # its permission tests pass and it has no warning of its own
    for permission, pattern in [("bash", "ls"), ("edit", "src/app.py"), ("webfetch", "https://example.com/")]:
        code, out, _ = run("check", "--root", str(starter), permission, pattern, "--json")
        decision = json.loads(out)
        assert decision["action"] == "ask", (permission, decision)
        assert decision["requests"][0]["rule"]["source"].startswith("permissions.yaml:")
    code, out, _ = run("check", "--root", str(starter), "--tool", "write", "--args", '{"filePath": "a", "content": ""}')
    assert "decision: ask" in out
    code, out, _ = run("check", "--root", str(starter), "edit", "src/app.py", "--agent", "plan")
    assert "decision: deny" in out  # the starter's global ask does not loosen plan mode
    text = (starter / "permissions.yaml").read_text(encoding="utf-8")
    assert "allow every tool" in text and '"git status*": allow' in text  # says how to allow more


def test_starter_turns_the_sandboxs_network_off(starter: Path) -> None:
    assert Runtime.load(starter).snapshot.sandbox.network is False
    text = (starter / "toolrt.yaml").read_text(encoding="utf-8")
    assert "sandbox:\n  network: false\n" in text and "set `network: true`" in text  # says how to allow more


def test_init_points_every_schema_modeline_at_a_local_copy(starter: Path) -> None:
    files = [starter / "permissions.yaml", starter / "toolrt.yaml", *sorted((starter / "tools.d").glob("*.yaml"))]
    for file in files:
        first = file.read_text(encoding="utf-8").splitlines()[0]
        match = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
        assert match, f"{file.name}: {first}"
        target = (file.parent / match.group(1)).resolve()
        assert target.is_relative_to(starter.resolve()) and "://" not in match.group(1)
        assert json.loads(target.read_text(encoding="utf-8")) == schema(
            {v: k for k, v in SCHEMA_NAMES.items()}[target.name]
        )


def test_schema_write_and_out_of_date_copies(starter: Path, tmp_path: Path) -> None:
    code, out, _ = run("schema", "--write", str(tmp_path / "s"))
    assert code == 0 and sorted(p.name for p in (tmp_path / "s").iterdir()) == sorted(SCHEMA_NAMES.values())
    code, out, _ = run("schema", "project", "--write", str(tmp_path / "one"))
    assert [p.name for p in (tmp_path / "one").iterdir()] == ["project.schema.json"]
    assert run("schema")[0] == 2
    copy = starter / ".toolrt" / "schemas" / "tool.schema.json"
    old = json.loads(copy.read_text(encoding="utf-8"))
    del old["properties"]["when"]
    copy.write_text(json.dumps(old), encoding="utf-8")
    (starter / ".toolrt" / "schemas" / "project.schema.json").unlink()
    code, out, _ = run("validate", "--root", str(starter), "--strict")
    assert code == 1
    assert re.search(
        r"tools.d/git_log.yaml:1:1: warning: \$schema points at \.\./\.toolrt/schemas/tool.schema.json, "
        r"an out-of-date copy of the tool schema .* `toolrt schema --write .toolrt/schemas`",
        out,
    ), out
    assert (
        "toolrt.yaml:1:1: warning: $schema points at ./.toolrt/schemas/project.schema.json, which does not exist" in out
    )
    assert out.count("tool.schema.json") == 1  # one warning per copy, not per file pointing at it
    assert run("schema", "--root", str(starter), "--write", ".toolrt/schemas")[0] == 0
    assert run("validate", "--root", str(starter), "--strict")[0] == 0


def test_call_says_once_per_session_which_tools_run_unasked(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n", encoding="utf-8")
    code, _, err = run("call", "--root", str(tmp_path), "read", '{"filePath": "a.txt"}')
    assert code == 0
    [notice] = [line for line in err.splitlines() if "run without asking" in line]
    assert re.search(r"\(including bash, edit, write, webfetch\): .*\bbash\b.*\bread\b", notice)
    assert "permissions.yaml" in notice
    code, _, err = run("call", "--root", str(tmp_path), "read", '{"filePath": "a.txt"}')
    assert "run without asking" not in err  # said once for the session
    code, _, err = run("call", "--root", str(tmp_path), "read", '{"filePath": "a.txt"}', "--session", "s2")
    assert "run without asking" in err
    (tmp_path / "permissions.yaml").write_text("permission:\n  bash: ask\n", encoding="utf-8")
    code, _, err = run("call", "--root", str(tmp_path), "read", '{"filePath": "a.txt"}')
    [notice] = [line for line in err.splitlines() if "run without asking" in line]  # the list changed: said again
    assert "bash" not in notice.split(": ", 2)[-1].split(".")[0].split(", ")


def test_serve_tells_mcp_clients_in_instructions_and_a_log_message(tmp_path: Path) -> None:
    rt = Runtime.load(tmp_path)
    server, face = build_server(rt, CallScope())
    logged: list[Any] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    async def main() -> str | None:
        with anyio.fail_after(30):
            async with Client(server, mode="legacy", logging_callback=on_log) as client:
                assert client.server_capabilities is not None and client.server_capabilities.logging is not None
                await client.list_tools()  # a round trip: the log notification has arrived by now
                return client.instructions

    instructions = anyio.run(main)
    face.close()
    assert instructions is not None and "run without asking" in instructions and "bash" in instructions
    assert [(p.level, p.logger) for p in logged] == [("warning", "toolrt")]
    assert "run without asking for permission (including bash, edit, write, webfetch)" in str(logged[0].data)


def test_serve_with_every_tool_asking_says_nothing(starter: Path) -> None:
    (starter / "permissions.yaml").write_text('permission:\n  "*": ask\n', encoding="utf-8")
    rt = Runtime.load(starter)
    server, face = build_server(rt, CallScope())
    assert face.unasked_notice() is None
    face.close()
