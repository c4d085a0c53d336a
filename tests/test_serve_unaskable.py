"""Offer what the client can use: a client that cannot be asked (no elicitation) is not offered the tools whose
every call asks or is denied, unless the host says `--offer-unaskable`; `toolrt list --client-capabilities` shows
the same; hiding changes `tools/list` only (the official MCP client, in process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from cli_helpers import run as cli
from conftest import ProjectFactory
from test_serve_inprocess import run, serving

from toolrt import CallScope, Runtime

TOOL = """\
id: {id}
description: Echoes the word it is given, for the tests of which tools a client is offered.
parameters: {{type: object, properties: {{word: {{type: string}}}}, required: [word]}}
handler: {{argv: [echo, "{{{{ word }}}}"]}}
permission: {{patterns: ["{{{{ word }}}}"]}}
"""
RULES = """\
permission:
  free: allow
  asks: ask
  partly: {"*": ask, "safe": allow}
  covered: {"safe": allow, "*": ask}
"""


def _project(make_project: ProjectFactory) -> Path:
    tools = {name: TOOL.format(id=name) for name in ("free", "asks", "partly", "covered")}
    return make_project(tools, permissions=RULES)


async def _elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"decision": "once"})


def _names(result: types.ListToolsResult) -> list[str]:
    return sorted(tool.name for tool in result.tools)


def test_a_client_that_cannot_be_asked_is_offered_what_it_can_use(make_project: ProjectFactory) -> None:
    rt = Runtime.load(_project(make_project))

    async def main() -> None:
        async with serving(rt) as served:
            assert _names(await served.client.list_tools()) == ["free", "partly"]
            # Hidden from the listing only: the call is dispatched and decided by the rules.
            denied = await served.client.call_tool("asks", {"word": "hi"})
            assert denied.is_error and "no one is available to approve" in denied.content[0].text  # type: ignore[union-attr]
            covered = await served.client.call_tool("covered", {"word": "safe"})
            assert covered.is_error, "the catch-all ask after the allow covers it: this call asks too"
            partly = await served.client.call_tool("partly", {"word": "safe"})
            assert (partly.is_error, partly.content[0].text) == (False, "safe\n")  # type: ignore[union-attr]
        async with serving(rt, elicitation_callback=_elicit) as asking:
            assert _names(await asking.client.list_tools()) == ["asks", "covered", "free", "partly"]
            result = await asking.client.call_tool("asks", {"word": "hi"})
            assert (result.is_error, result.content[0].text) == (False, "hi\n")  # type: ignore[union-attr]

    run(main)


def test_a_2026_client_that_declares_elicitation_is_asked_through_input_required_results(
    make_project: ProjectFactory,
) -> None:
    rt = Runtime.load(_project(make_project))

    async def main() -> None:
        # A 2026-07-28 request cannot carry elicitation/create; toolrt answers with an input-required
        # result instead, so the client is offered the tools that ask, and its person is asked.
        async with serving(rt, mode="auto", elicitation_callback=_elicit) as served:
            assert served.client.protocol_version >= "2026"
            assert _names(await served.client.list_tools()) == ["asks", "covered", "free", "partly"]
            result = await served.client.call_tool("asks", {"word": "hi"})
            assert (result.is_error, result.content[0].text) == (False, "hi\n")  # type: ignore[union-attr]
        async with serving(rt, mode="auto") as unasked:
            assert _names(await unasked.client.list_tools()) == ["free", "partly"]

    run(main)


def test_the_host_may_offer_unaskable_tools_and_approvals_count_for_calls(make_project: ProjectFactory) -> None:
    rt = Runtime.load(_project(make_project))
    rt.sessions.restore_approvals("mcp", [("asks", "*")])  # the server's default session holds an "always"

    async def main() -> None:
        async with serving(rt, offer_unaskable=True) as served:
            assert _names(await served.client.list_tools()) == ["asks", "covered", "free", "partly"]
            result = await served.client.call_tool("asks", {"word": "approved"})
            assert (result.is_error, result.content[0].text) == (False, "approved\n")  # type: ignore[union-attr]

    run(main)


@pytest.mark.parametrize(
    ("capabilities", "extra", "offered"),
    [
        (None, [], ["asks", "covered", "free", "partly"]),
        ("{}", [], ["free", "partly"]),
        ('{"elicitation": {}}', [], ["asks", "covered", "free", "partly"]),
        ("{}", ["--offer-unaskable"], ["asks", "covered", "free", "partly"]),
    ],
)
def test_list_shows_the_choice_for_given_client_capabilities(
    make_project: ProjectFactory, capabilities: str | None, extra: list[str], offered: list[str]
) -> None:
    root = _project(make_project)
    options = [] if capabilities is None else ["--client-capabilities", capabilities]
    code, out, _ = cli("list", "--root", str(root), "--json", *options, *extra)
    listing = json.loads(out)
    assert code == 0 and sorted(tool["name"] for tool in listing["tools"]) == offered
    reasons = {hidden["id"]: hidden["reason"] for hidden in listing["hidden"]}
    if "asks" not in offered:
        assert "every call asks or is denied under the rules of agent build" in reasons["asks"]
        assert "--offer-unaskable" in reasons["asks"]


def test_list_refuses_capabilities_that_are_not_a_json_object(make_project: ProjectFactory) -> None:
    root = _project(make_project)
    assert cli("list", "--root", str(root), "--client-capabilities", "elicitation")[0] == 2
    code, _, err = cli("list", "--root", str(root), "--client-capabilities", "[]")
    assert code == 2 and "expected a JSON object" in err


def test_the_scope_agent_decides(make_project: ProjectFactory) -> None:
    rules = RULES + "agents:\n  strict:\n    permission:\n      free: ask\n"
    root = make_project({name: TOOL.format(id=name) for name in ("free", "asks")}, permissions=rules)
    rt = Runtime.load(root)

    async def main() -> None:
        async with serving(rt, scope=CallScope(agent="strict")) as served:
            assert _names(await served.client.list_tools()) == []

    run(main)


def test_a_reload_that_changes_the_rules_or_a_tool_changes_what_is_offered(make_project: ProjectFactory) -> None:
    """The answers kept across reloads (`build.verdicts`) are the answers under the rules now: a save of the
    rules, or a tool file saved anew, is seen in the next listing."""
    rt = Runtime.load(_project(make_project))

    async def main() -> None:
        async with serving(rt) as served:
            assert _names(await served.client.list_tools()) == ["free", "partly"]
            await served.save("permissions.yaml", RULES.replace("asks: ask", "asks: allow"))
            assert _names(await served.client.list_tools()) == ["asks", "free", "partly"]
            await served.save("tools.d/free.yaml", TOOL.format(id="free").replace("Echoes", "Repeats"))
            assert _names(await served.client.list_tools()) == ["asks", "free", "partly"]
            await served.save("permissions.yaml", RULES.replace("free: allow", "free: ask"))
            assert _names(await served.client.list_tools()) == ["partly"]
            await served.save("tools.d/gone.yaml", TOOL.format(id="gone"))  # no rule: allowed
            assert _names(await served.client.list_tools()) == ["gone", "partly"]

    run(main)


def test_a_save_asks_again_only_about_the_tool_it_changed(make_project: ProjectFactory) -> None:
    from toolrt.build.unaskable import only_asks, without_unaskable
    from toolrt.build.verdicts import ToolVerdicts

    root = make_project({f"t{i}": TOOL.format(id=f"t{i}") for i in range(20)}, permissions="permission:\n  t3: ask\n")
    rt = Runtime.load(root)
    asked: list[str] = []

    def counted(tool: Any, permissions: Any, agent: str | None) -> bool:
        asked.append(tool.id)
        return only_asks(tool, permissions, agent)

    verdicts = ToolVerdicts(counted)

    def offered() -> list[str]:
        return sorted(o.name for o in without_unaskable(rt.tools(), rt.snapshot, None, verdicts).offered)

    assert len(offered()) == 19 and len(asked) == 20
    asked.clear()
    assert len(offered()) == 19 and asked == [], "the same snapshot: nothing is asked again"
    (root / "tools.d" / "t5.yaml").write_text(TOOL.format(id="t5").replace("Echoes", "Repeats"))
    rt.reload()
    assert len(offered()) == 19 and asked == ["t5"]
    asked.clear()
    (root / "permissions.yaml").write_text("permission:\n  t3: allow\n  t4: ask\n")
    rt.reload()
    assert "t3" in offered() and "t4" not in offered() and len(asked) == 20, "new rules: every tool is asked again"


def test_the_unasked_notice_follows_the_rules_across_reloads(make_project: ProjectFactory) -> None:
    from toolrt.faces.serve_server import build_server

    root = make_project({name: TOOL.format(id=name) for name in ("a", "b")}, permissions="permission:\n  a: ask\n")
    rt = Runtime.load(root)
    _, face = build_server(rt, CallScope())
    try:
        assert "1 tool(s) run without asking for permission: b." in (face.unasked_notice() or "")
        (root / "permissions.yaml").write_text("permission:\n  b: ask\n")
        rt.reload()
        assert "1 tool(s) run without asking for permission: a." in (face.unasked_notice() or "")
        (root / "tools.d" / "c.yaml").write_text(TOOL.format(id="c"))
        rt.reload()
        assert "2 tool(s) run without asking for permission: a, c." in (face.unasked_notice() or "")
        (root / "permissions.yaml").write_text('permission:\n  "*": ask\n')
        rt.reload()
        assert face.unasked_notice() is None
    finally:
        face.close()
