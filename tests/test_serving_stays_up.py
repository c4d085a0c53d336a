"""A broken project still serves what is valid, never more, and says why; broken rules or settings stop every call."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from cli_helpers import run
from conftest import ProjectFactory
from mcp import Client

from toolrt import Runtime
from toolrt.errors import ConfigError
from toolrt.faces.serve import build_server
from toolrt.reload import Reloader, ReloadEvent
from toolrt.scope import CallScope

ECHO = """\
id: echo
description: Echo the text back, for the tests of a broken project.
parameters: {type: object, properties: {text: {type: string}}, required: [text]}
handler: {argv: [echo, "{{ text }}"]}
"""
BROKEN_FILTER = """\
id: shout
description: Echo the text in capitals, for the tests of a broken project.
parameters: {type: object, properties: {text: {type: string}}}
handler: {argv: [echo, "{{ text | uper }}"]}
"""
NARROW_READ = """\
id: read
description: A project's own read tool, which replaces the built-in one; broken on purpose.
parameters: {type: object, properties: {filePath: {type: string}}}
handler: {argv: [cat, "{{ filePath | joinn }}"]}
"""


def _names(rt: Runtime) -> set[str]:
    return {offered.name for offered in rt.tools().offered}


def test_a_broken_tool_file_is_left_out_and_the_rest_serve(make_project: ProjectFactory) -> None:
    root = make_project({"echo": ECHO, "shout": BROKEN_FILTER})
    with pytest.raises(ConfigError, match="unknown filter 'uper'"):
        Runtime.load(root)  # the library's default stays strict
    rt = Runtime.load(root, partial=True)
    assert _names(rt) == {"echo"}
    assert set(rt.snapshot.withheld) == {"shout"}
    assert rt.snapshot.blocked is None
    status = rt.status()
    assert status.last_error is not None and "tools.d/shout.yaml:4:" in str(status.last_error)
    assert rt.call_sync("echo", {"text": "hi"}).output == "hi\n"
    refused = rt.call_sync("shout", {"text": "hi"})
    assert refused.error is not None
    assert "unavailable until its definition is fixed: tools.d/shout.yaml:4:" in refused.error


@pytest.mark.parametrize(
    ("file", "text"),
    [
        ("read.yaml", NARROW_READ),  # the id can be read: the built-in of that id is withheld
        ("read.yaml", "id: [\n"),  # it cannot: the built-in named by the file name is withheld
        ("read.yaml", "id: read\nenabled: false\ndescription: [\n"),  # meant to disable it
    ],
    ids=["replaces", "unreadable_id", "disables"],
)
def test_a_broken_file_never_brings_back_a_built_in(tmp_path: Path, file: str, text: str) -> None:
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "tools.d" / file).write_text(text, encoding="utf-8")
    rt = Runtime.load(tmp_path, partial=True)
    assert "read" not in _names(rt)
    assert "read" in rt.snapshot.withheld
    assert {"bash", "glob", "grep"} <= _names(rt)
    [hidden] = [h for h in rt.tools().hidden if h.id == "read"]
    assert hidden.reason.startswith("left out, its file is invalid: tools.d/read.yaml:")


def test_cli_list_call_and_validate_with_an_unrelated_broken_file(make_project: ProjectFactory) -> None:
    root = make_project({"echo": ECHO, "shout": BROKEN_FILTER})
    code, out, err = run("list", "--root", str(root))
    assert code == 0 and "Traceback" not in out + err
    assert out.startswith("echo ")
    assert "shout: left out, its file is invalid: tools.d/shout.yaml:4:" in out
    assert "toolrt: warning: tools.d/shout.yaml:4:" in err and "(tool 'shout' left out until this is fixed)" in err
    code, out, err = run("call", "echo", '{"text": "still here"}', "--root", str(root))
    assert (code, out) == (0, "still here\n")
    assert "unknown filter 'uper'" in err
    code, out, err = run("call", "shout", '{"text": "x"}', "--root", str(root))
    assert code == 1 and "unavailable until its definition is fixed" in err
    code, out, err = run("validate", "--root", str(root))
    assert code == 1 and "unknown filter 'uper'" in out


def test_a_tool_set_naming_a_left_out_tool_warns_while_serving(make_project: ProjectFactory) -> None:
    root = make_project({"echo": ECHO, "shout": BROKEN_FILTER}, settings="toolsets:\n  loud: [echo, shout]\n")
    rt = Runtime.load(root, partial=True)
    assert rt.snapshot.blocked is None
    [warning] = [w for w in rt.snapshot.warnings if "toolsets" in w.pointer]
    assert warning.severity == "warning" and "names 'shout', which is left out" in warning.message
    assert _names(rt) == {"echo"}
    code, out, _ = run("validate", "--root", str(root))
    # validate checks every file in one pass: the broken file's error, and the tool set that names its tool
    assert code == 1 and "unknown filter 'uper'" in out
    assert "toolrt.yaml:3:16: warning: tool set 'loud' names 'shout', which is left out (its file is invalid)" in out


BROKEN_SETTINGS = {
    "permissions": ("permissions.yaml", "permission:\n  bash: aks\n", "permissions.yaml:2:3"),
    "settings": ("toolrt.yaml", "builtin_tools: false\ndefaults: {timeout: soon}\n", "toolrt.yaml:2:"),
    "locked": ("locked.yaml", "permission: {echo: maybe}\n", "locked.yaml:1:"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN_SETTINGS))
def test_broken_permissions_or_settings_block_every_call(
    make_project: ProjectFactory, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    root = make_project({"echo": ECHO})
    name, text, where = BROKEN_SETTINGS[kind]
    (root / name).write_text(text, encoding="utf-8")
    if kind == "locked":
        monkeypatch.setenv("TOOLRT_LOCKED_PERMISSIONS", str(root / name))
    rt = Runtime.load(root, partial=True)
    assert rt.snapshot.blocked is not None
    assert "echo" in _names(rt)  # listed, so the client sees what would be there
    result = rt.call_sync("echo", {"text": "hi"})
    assert result.error is not None and result.output == ""
    assert "No tool can run" in result.error and where in result.error
    records = [json.loads(line) for line in (rt.snapshot.data_dir / "audit.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["error"] == result.error
    code, out, err = run("call", "echo", '{"text": "hi"}', "--root", str(root))
    assert code == 1 and out == "" and where in err
    code, _, err = run("check", "bash", "ls", "--root", str(root))
    assert code == 1 and where in err


def test_a_fixing_save_brings_everything_back(make_project: ProjectFactory) -> None:
    root = make_project({"echo": ECHO, "shout": BROKEN_FILTER})
    (root / "permissions.yaml").write_text("permission:\n  echo: alow\n", encoding="utf-8")
    rt = Runtime.load(root, partial=True)
    assert rt.snapshot.blocked is not None and _names(rt) == {"echo"}
    (root / "permissions.yaml").write_text("permission:\n  echo: allow\n", encoding="utf-8")
    status = rt.reload()
    assert rt.snapshot.blocked is None and status.generation == 2
    assert status.last_error is not None and "shout" in str(status.last_error)  # still one broken file
    assert rt.call_sync("echo", {"text": "back"}).output == "back\n"
    (root / "tools.d" / "shout.yaml").write_text(BROKEN_FILTER.replace("uper", "upper"), encoding="utf-8")
    status = rt.reload()
    assert status.last_error is None and _names(rt) == {"echo", "shout"}
    assert rt.call_sync("shout", {"text": "up"}).output == "UP\n"
    # healthy now: a broken save keeps this last good snapshot instead of leaving tools out
    (root / "tools.d" / "shout.yaml").write_text(BROKEN_FILTER, encoding="utf-8")
    status = rt.reload()
    assert status.last_error is not None and status.generation == 3 and _names(rt) == {"echo", "shout"}


def test_mcp_clients_hear_of_problems_at_initialize_and_on_reload(make_project: ProjectFactory) -> None:
    root = make_project({"echo": ECHO, "shout": BROKEN_FILTER})
    rt = Runtime.load(root, partial=True)
    server, face = build_server(rt, CallScope())
    logged: list[Any] = []
    arrived = anyio.Event()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)
        if len(logged) == 3:
            arrived.set()

    async def one_save() -> AsyncIterator[set[tuple[int, str]]]:
        (root / "toolrt.yaml").write_text("builtin_tools: nope\n", encoding="utf-8")
        yield {(2, str(root / "toolrt.yaml"))}

    async def main() -> None:
        with anyio.fail_after(30):
            async with Client(server, mode="legacy", logging_callback=on_log) as client:
                names = [tool.name for tool in (await client.list_tools()).tools]
                assert names == ["echo"]
                refused = await client.call_tool("shout", {"text": "x"})
                assert refused.is_error and "tools.d/shout.yaml:4:" in refused.content[0].text  # type: ignore[union-attr]
                async with anyio.create_task_group() as group:
                    group.start_soon(face.notify_changes)
                    reloader = Reloader(rt, changes=one_save())
                    reloader.subscribe(face.reload_listener())
                    events: list[ReloadEvent] = []
                    reloader.subscribe(events.append)
                    await reloader.run()
                    assert events[0].error is not None
                    blocked = await client.call_tool("echo", {"text": "x"})
                    assert blocked.is_error and "toolrt.yaml:1:" in blocked.content[0].text  # type: ignore[union-attr]
                    await arrived.wait()
                    group.cancel_scope.cancel()

    anyio.run(main)
    face.close()
    levels = [(p.level, p.logger) for p in logged]
    assert levels[0] == ("error", "toolrt")
    assert "tools.d/shout.yaml:4:" in str(logged[0].data) and "left out until this is fixed" in str(logged[0].data)
    reload_logs = [p for p in logged[1:] if p.level == "error"]
    assert reload_logs and "toolrt.yaml:1:" in str(reload_logs[-1].data)
