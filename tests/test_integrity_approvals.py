"""Approvals are scoped to (session, agent): an "always" given to the build agent does not carry over
to the plan agent of the same session (a deliberate difference from OpenCode, whose approvals are
project-wide). A project rule that weakens a built-in agent's restriction is a lint warning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from toolrt import Runtime
from toolrt.faces.project_checks import validate
from toolrt.permissions.ask import AskRequest, Reply


def test_an_always_for_build_does_not_carry_over_to_plan(tmp_path: Path) -> None:
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n", encoding="utf-8")
    (tmp_path / "permissions.yaml").write_text(
        "permission:\n  webfetch: ask\nagents:\n  plan:\n    permission: {webfetch: ask}\n", encoding="utf-8"
    )
    asked: list[AskRequest] = []

    async def always(request: AskRequest) -> Reply:
        asked.append(request)
        return Reply("always")

    async def main() -> list[Any]:
        rt = Runtime.load(tmp_path)
        args = {"url": "ftp://example.invalid/"}  # refused by the handler after the permission step
        results = [await rt.call("webfetch", args, agent="build", session="s", ask=always)]
        results.append(await rt.call("webfetch", args, agent="build", session="s"))  # approved: no ask
        results.append(await rt.call("webfetch", args, agent="plan", session="s"))  # headless: must ask
        return results

    first, again, plan = anyio.run(main)
    assert len(asked) == 1 and asked[0].agent == "build"
    assert first.error == again.error == "URL must start with http:// or https://"
    assert plan.error is not None and "approval" in plan.error.lower()


def test_a_project_rule_weakening_a_builtin_agent_restriction_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n", encoding="utf-8")
    (tmp_path / "permissions.yaml").write_text("permission:\n  '*': allow\n  edit: ask\n", encoding="utf-8")
    report = validate(tmp_path)
    problems = [*report.errors, *report.warnings]
    warnings = [p for p in problems if p.severity == "warning" and "plan" in p.message]
    assert warnings, [str(p) for p in problems]
    text = str(warnings[0])
    assert text.startswith("permissions.yaml:3:") and "edit" in text and "<builtin>/permissions.yaml:" in text
