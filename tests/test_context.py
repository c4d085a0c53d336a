"""`ToolContext`: a read-only view of the call a handler serves, with methods for what the handler does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from toolrt import DetachedCall, Runtime, ToolContext
from toolrt.errors import ToolFailure
from toolrt.sandbox.policy import SandboxPolicy
from toolrt.scope import CallScope

Factory = Callable[..., Path]

HOSTED = {"id": "hosted", "description": "A host tool.", "parameters": {"type": "object"}, "handler": {"host": "h"}}
PERMISSIONS = 'permission:\n  "*": allow\n  read: {"*": allow, "*.env": deny}\n'


def _runtime(make_project: Factory) -> Runtime:
    return Runtime.load(make_project({"hosted": yaml.safe_dump(HOSTED)}, permissions=PERMISSIONS))


def test_a_handler_reads_the_call_it_serves_through_its_context(make_project: Factory) -> None:
    rt = _runtime(make_project)
    seen: list[dict[str, Any]] = []

    def read(args: Any, ctx: ToolContext) -> str:
        ctx.session_state["calls"] = ctx.session_state.get("calls", 0) + 1
        ctx.metadata(title="Reading the call", metadata={"step": 1})
        seen.append(
            {
                "ids": (ctx.tool, ctx.call_id, ctx.message_id, ctx.session, ctx.agent, ctx.scope.model),
                "where": (ctx.root, ctx.data_dir, ctx.resolve("a/../b.txt")),
                "extra": dict(ctx.extra),
                "calls": ctx.session_state["calls"],
                "tools": ctx.available_tools,
                "permits": (ctx.permits("read", str(ctx.root / "a.py")), ctx.permits("read", str(ctx.root / "a.env"))),
                "sandbox": ctx.sandbox,
                "live": dict(ctx.live_metadata),
                "client": ctx.client.name,
            }
        )
        return "read"

    rt.register_handler("h", read)
    scope = CallScope(session="s1", model="m1")
    for number in (1, 2):
        result = rt.call_sync("hosted", {}, scope, call_id=f"c{number}", message_id="m", extra={"k": "v"})
        assert (result.title, result.output, result.error) == ("Reading the call", "read", None)
    first, second = seen
    root = rt.snapshot.root
    assert first["ids"] == ("hosted", "c1", "m", "s1", "build", "m1") and second["ids"][1] == "c2"
    assert first["where"] == (root, rt.snapshot.data_dir, root / "b.txt")
    assert first["extra"] == {"k": "v"} and (first["calls"], second["calls"]) == (1, 2)
    assert first["tools"] == ("hosted",) and first["permits"] == (True, False)
    assert first["sandbox"] == rt.snapshot.sandbox_for("hosted") and first["live"] == {"step": 1}
    assert first["client"] is None


@pytest.mark.parametrize(
    ("assignment", "member"),
    [
        (lambda ctx: setattr(ctx, "root", Path("/")), "root"),
        (lambda ctx: setattr(ctx, "sandbox", None), "sandbox"),
        (lambda ctx: setattr(ctx, "title", "mine"), "title"),
        (lambda ctx: setattr(ctx, "agent", "plan"), "agent"),
    ],
)
def test_a_handler_that_assigns_to_its_context_gets_an_error_that_says_why(
    make_project: Factory, assignment: Callable[[ToolContext], None], member: str
) -> None:
    rt = _runtime(make_project)

    def assign(args: Any, ctx: ToolContext) -> str:
        assignment(ctx)
        return "changed"

    rt.register_handler("h", assign)
    error = rt.call_sync("hosted", {}).error
    assert error is not None
    assert error.startswith(f"The hosted tool failed: AttributeError: ToolContext.{member} is read-only:")
    assert "ctx.metadata(title=..., metadata=...)" in error


def test_a_context_takes_no_attribute_of_its_own(tmp_path: Path) -> None:
    ctx = ToolContext(DetachedCall(tool_id="t", root=tmp_path, data_dir=tmp_path / "data"))
    with pytest.raises(AttributeError, match="'ToolContext' object has no attribute 'notes'"):
        ctx.notes = "kept"  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="ToolContext.session_state is read-only"):
        ctx.session_state = {}  # type: ignore[misc]


def test_a_detached_context_fails_closed(tmp_path: Path) -> None:
    ctx = ToolContext(DetachedCall(tool_id="t", root=tmp_path, data_dir=tmp_path / "data", call_id="c1"))
    assert repr(ctx) == "ToolContext(tool='t', call_id='c1', session='default')"
    assert not ctx.permits("read", str(tmp_path / "a.py"))
    assert ctx.sandbox == SandboxPolicy() and ctx.lsp is None and ctx.reads is None
    with pytest.raises(ToolFailure, match="This call cannot switch agents: it runs outside a session."):
        ctx.switch_agent("plan")
    with pytest.raises(ToolFailure, match="This context cannot run other tools: it runs outside a Runtime."):
        anyio.run(ctx.batch, [("read", {})])
