"""toolrt's own log messages over MCP (the official client, in process): a broken handler save reaches the client
located, at `error`; the fix at `info`; 2025-11-25 sessions get `warning` and above until `logging/setLevel`;
2026-07-28 clients only on requests and subscriptions whose `_meta` names a level; the unasked-tools notice once
per session."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from conftest import ProjectFactory
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from test_serve_inprocess import Served, run, serving

from toolrt import CallScope, Runtime

GREET = """\
id: greet
description: Says which version of its handler ran, for the MCP logging tests.
parameters: {type: object, properties: {}}
handler: {python: "greet_code:greet"}
"""
ECHO = """\
id: echo
description: Echoes a word, for the MCP logging tests; its rule allows it, so it runs without asking.
parameters: {type: object, properties: {}}
handler: {argv: ["echo", "hi"]}
"""
BROKEN = "def greet(args, ctx):\n    return 'two' +\n"


def _project(make_project: ProjectFactory) -> Path:
    return make_project(
        {"greet": GREET, "echo": ECHO},
        permissions="permission:\n  echo: allow\n  greet: allow\n",
        modules={"greet_code": "def greet(args, ctx):\n    return 'one'\n"},
    )


def _toolrt(served: Served) -> list[tuple[str, str]]:
    return [(p.level, str(p.data)) for p in served.logged if p.logger == "toolrt"]


async def _round_trip(served: Served) -> None:
    await served.client.list_tools()  # the log notifications sent before its answer have arrived


def test_a_broken_handler_save_is_an_error_message_and_the_old_code_answers(make_project: ProjectFactory) -> None:
    rt = Runtime.load(_project(make_project))

    async def main() -> None:
        async with serving(rt) as served:
            await _round_trip(served)
            notice = _toolrt(served)
            assert [level for level, _ in notice] == ["warning"] and "run without asking" in notice[0][1]
            assert (await served.client.call_tool("greet", {})).content[0].text == "one"  # type: ignore[union-attr]
            broken = await served.save("greet_code.py", BROKEN)
            assert broken.error is not None
            await served.save("greet_code.py", BROKEN + "\n")  # the same failure: told once
            result = await served.client.call_tool("greet", {})
            assert (result.is_error, result.content[0].text) == (False, "one")  # type: ignore[union-attr]
            await served.save("greet_code.py", "def greet(args, ctx):\n    return 'three'\n")
            await _round_trip(served)
            told = _toolrt(served)[1:]
            assert [level for level, _ in told] == ["error"], "the fix (info) is below the default level"
            assert "greet_code.py:2:" in told[0][1] and "SyntaxError" in told[0][1]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await served.client.set_logging_level("info")
            await served.save("greet_code.py", BROKEN)
            await served.save("greet_code.py", "def greet(args, ctx):\n    return 'four'\n")
            await _round_trip(served)
            levels = [level for level, text in _toolrt(served)[2:] if "configuration" in text]
            assert levels == ["error", "info"]
            assert not any(level == "warning" for level, _ in _toolrt(served)[1:]), "the notice went out once"
            result = await served.client.call_tool("greet", {})  # a third identical call, but of new code
            assert (result.is_error, result.content[0].text) == (False, "four")  # type: ignore[union-attr]

    run(main)


def test_a_2026_client_hears_only_where_its_meta_names_a_level(make_project: ProjectFactory) -> None:
    rt = Runtime.load(_project(make_project))

    async def main() -> None:
        async with serving(rt, mode="auto") as silent:
            assert silent.client.protocol_version >= "2026"
            await silent.save("greet_code.py", BROKEN)
            await silent.client.call_tool("echo", {})
            assert _toolrt(silent) == [], "no _meta log level: no log messages"
        async with serving(rt, mode="auto", log_level="error") as served:
            await served.client.call_tool("echo", {})  # the standing notice is a warning: below error
            assert _toolrt(served) == []
            async with served.client.listen(tools_list_changed=True):
                await served.save("greet_code.py", BROKEN + "# still broken\n")
                with anyio.fail_after(10):
                    while not _toolrt(served):
                        await anyio.sleep(0.01)
            ((level, text),) = _toolrt(served)
            assert level == "error" and "greet_code.py:2:" in text
        async with serving(rt, mode="auto", log_level="warning") as warned:
            for _ in range(2):
                await warned.client.call_tool("echo", {})
            assert [level for level, _ in _toolrt(warned)] == ["warning"], "the notice, once per session"

    run(main)


def test_set_level_is_honoured_for_the_notice_too(make_project: ProjectFactory) -> None:
    rt = Runtime.load(_project(make_project))

    async def main() -> None:
        async with serving(rt) as served:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await served.client.set_logging_level("error")
            await served.save("tools.d/other.yaml", ECHO.replace("id: echo", "id: other"))
            await served.changed.wait()
            await _round_trip(served)
            # The notice changed (a new tool runs unasked) but this client asked for errors only.
            assert [level for level, _ in _toolrt(served)] == ["warning"]

    run(main)


def test_a_client_connecting_later_hears_of_handler_code_that_did_not_import(make_project: ProjectFactory) -> None:
    root = _project(make_project)
    (root / "greet_code.py").write_text(BROKEN, encoding="utf-8")
    rt = Runtime.load(root)

    async def main() -> None:
        async with serving(rt) as served:
            await served.save("tools.d/echo.yaml", ECHO)  # a reload: the reloader has started
            logged: list[types.LoggingMessageNotificationParams] = []

            async def on_log(params: types.LoggingMessageNotificationParams) -> None:
                logged.append(params)

            async with Client(served.server, mode="legacy", logging_callback=on_log) as later:
                await later.list_tools()
            errors = [str(p.data) for p in logged if p.level == "error"]
            assert len(errors) == 1 and "greet_code.py:2:" in errors[0], logged

    run(main)


@pytest.mark.parametrize(
    ("scope", "saved", "gone", "unknown"),
    [
        (
            CallScope(agent="strict"),
            "permissions.yaml",
            "permission:\n  echo: allow\n",
            'unknown agent "strict"',
        ),
        (
            CallScope(toolset="mine"),
            "toolrt.yaml",
            "builtin_tools: false\n",
            "unknown tool set 'mine'",
        ),
    ],
)
def test_a_save_that_drops_the_served_agent_or_tool_set_is_an_error_message_not_the_end_of_the_server(
    make_project: ProjectFactory, scope: CallScope, saved: str, gone: str, unknown: str
) -> None:
    """`toolrt serve --agent strict` (or `--toolset mine`) and a save of the rules without that agent (or of
    toolrt.yaml without that tool set): the reload is valid, but nothing can be selected for the server's
    scope. The clients are told so at `error`, listing and calling fail, and the save that brings it back
    serves again (the notice worked out after the swap used to raise and end the server)."""
    rules = "permission:\n  echo: allow\nagents:\n  strict:\n    permission:\n      echo: allow\n"
    root = make_project({"echo": ECHO}, permissions=rules, settings="toolsets:\n  mine: [echo]\n")
    settings = (root / "toolrt.yaml").read_text(encoding="utf-8")
    rt = Runtime.load(root)
    back = rules if saved == "permissions.yaml" else settings

    async def main() -> None:
        async with serving(rt, scope=scope) as served:
            await _round_trip(served)
            assert [level for level, _ in _toolrt(served)] == ["warning"], "the notice: echo runs unasked"
            await served.save(saved, gone)
            while not any(level == "error" for level, _ in _toolrt(served)):
                await _round_trip_or_refusal(served)
            (error,) = [text for level, text in _toolrt(served) if level == "error"]
            assert unknown in error and "until a save" in error
            with pytest.raises(MCPError, match=unknown):
                await served.client.list_tools()
            with pytest.raises(MCPError, match=unknown):
                await served.client.call_tool("echo", {})
            await served.save(saved, back)
            while True:
                try:
                    listed = await served.client.list_tools()
                except MCPError:
                    continue
                break
            assert [tool.name for tool in listed.tools] == ["echo"]
            result = await served.client.call_tool("echo", {})
            assert (result.is_error, result.content[0].text) == (False, "hi\n")  # type: ignore[union-attr]

    run(main)


async def _round_trip_or_refusal(served: Served) -> None:
    with contextlib.suppress(MCPError):
        await served.client.list_tools()
