"""Model input never breaks the pipeline: every built-in tool, fed schema-valid and arbitrary arguments.

Each call goes through `rt.call` under a ruleset that asks for everything and an asker that rejects,
so no handler runs (nothing is written, executed or fetched); webfetch URLs point at 127.0.0.1 only
all the same. Every call must give a ToolResult (no exception escapes) and exactly one new audit record.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schema_strategies import from_schema

from toolrt.api import Runtime
from toolrt.audit import read_records
from toolrt.build.selection import Offered
from toolrt.permissions.ask import AskRequest, Reply
from toolrt.result import ToolResult
from toolrt.specs.core import thaw

ASK_ALL = """
permission:
  "*": ask
"""

# Scopes that between them offer every built-in tool: the default one, and one that turns on what the
# default scope hides (apply_patch for GPT models, question for the cli client, the tools behind flags).
FLAGS = {"batch_tool": True, "list_tool": True, "todoread_tool": True, "lsp_tool": True, "plan_mode": True, "exa": True}
SCOPES: tuple[dict[str, Any], ...] = ({}, {"model": "gpt-5", "client": "cli", "flags": FLAGS})

# Built-in tools no scope offers, each with the reason it is left out.
NOT_OFFERED = {
    "invalid": "never offered to the model: the repair target of an unknown name (test_dispatch covers it)",
    "task": "offered only once the host registers a handler for it (the subagent runner is the host's)",
}

# Tools whose schema-valid arguments may still be refused before the permission step, and why.
CHECKED_BEFORE_ASKING = {"apply_patch": "the patch text is parsed first: a malformed patch is refused, never asked"}

LOCAL_URL = "http://127.0.0.1:9/"
"""The discard port: nothing listens there, and the rejecting asker stops the call before any fetch anyway."""

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory, project_writer: Callable[..., Path]) -> Iterator[Runtime]:
    # Module-scoped fixtures are set up before the per-test data directory: this one brings its own.
    root = project_writer(tmp_path_factory.mktemp("integrity") / "project", permissions=ASK_ALL, builtin_tools=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLRT_DATA_DIR", str(tmp_path_factory.mktemp("integrity-data")))
        rt = Runtime.load(root)
        assert rt.snapshot.data_dir.is_relative_to(tmp_path_factory.getbasetemp())
        yield rt


def offered_tools(rt: Runtime) -> dict[str, tuple[Offered, dict[str, Any]]]:
    tools: dict[str, tuple[Offered, dict[str, Any]]] = {}
    for scope in SCOPES:
        for offered in rt.tools(**scope).offered:
            tools.setdefault(offered.name, (offered, scope))
    return tools


BUILTIN_IDS = sorted(p.stem for p in (Path(__file__).parent.parent / "tools.d").glob("*.yaml"))


def test_every_builtin_tool_is_offered_by_a_scope_or_excluded_with_its_reason(runtime: Runtime) -> None:
    offered = {o.tool.id for o, _ in offered_tools(runtime).values()}
    assert sorted(offered | NOT_OFFERED.keys()) == BUILTIN_IDS
    assert not offered & NOT_OFFERED.keys()


ASKED: list[AskRequest] = []


async def reject(request: AskRequest) -> Reply:
    ASKED.append(request)
    return Reply("reject")


def local_urls(args: Any) -> Any:
    """`args` with every string under a key that looks like a URL's replaced by the 127.0.0.1 one."""
    if isinstance(args, dict):
        return {k: LOCAL_URL if "url" in k.lower() and isinstance(v, str) else local_urls(v) for k, v in args.items()}
    if isinstance(args, list):
        return [local_urls(v) for v in args]
    return args


def valid_arguments(offered: Offered) -> st.SearchStrategy[Any]:
    schema = thaw(offered.tool.definition.parameters)
    url = schema.get("properties", {}).get("url")
    if url is not None:
        url.clear()
        url.update({"type": "string", "pattern": "^" + re.escape(LOCAL_URL) + "[a-z0-9/]{0,8}$"})
    return from_schema(schema).map(local_urls)  # also a URL nested in batch's tool calls


def arbitrary_arguments() -> st.SearchStrategy[Any]:
    text = st.text(max_size=40).filter(lambda s: "url" not in s.lower() and "http" not in s.lower())
    return JSON_VALUES.map(local_urls) | text | st.dictionaries(st.text(max_size=10), JSON_VALUES).map(local_urls)


def call_once(rt: Runtime, name: str, scope: dict[str, Any], args: Any) -> ToolResult:
    log = rt.snapshot.data_dir / "audit.jsonl"
    if log.exists():
        os.truncate(log, 0)  # the log appends with O_APPEND: each call starts from empty, counting stays cheap
    result = anyio.run(lambda: rt.call(name, args, ask=reject, **scope))
    assert isinstance(result, ToolResult)
    assert result.error is not None, f"{name} ran under a rejecting asker with {args!r}"
    assert "failed unexpectedly" not in result.error, f"{name} with {args!r}: {result.error}"
    records, bad = read_records(log)
    assert bad == []
    assert len(records) == 1, f"{name} with {args!r} wrote {len(records)} audit records"
    assert records[-1]["tool"] == name
    return result


PROPERTY_SETTINGS = settings(
    max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.usefixtures("untraced")  # a property pass: see conftest.untraced
@pytest.mark.slow  # twenty calls per tool
@pytest.mark.parametrize("name", sorted(set(BUILTIN_IDS) - NOT_OFFERED.keys()))
def test_schema_valid_arguments_give_a_result_and_one_audit_record(runtime: Runtime, name: str) -> None:
    tools = offered_tools(runtime)
    offered, scope = next((o, s) for o, s in tools.values() if o.tool.id == name)

    @PROPERTY_SETTINGS
    @given(args=valid_arguments(offered))
    def check(args: Any) -> None:
        ASKED.clear()
        result = call_once(runtime, offered.name, scope, args)
        assert ASKED or name in CHECKED_BEFORE_ASKING, (
            f"{name} with schema-valid {args!r} never reached the permission step: {result.error}"
        )

    check()


@pytest.mark.usefixtures("untraced")  # a property pass: see conftest.untraced
@pytest.mark.slow  # twenty calls per tool
@pytest.mark.parametrize("name", sorted(set(BUILTIN_IDS) - NOT_OFFERED.keys()))
def test_arbitrary_arguments_give_a_result_and_one_audit_record(runtime: Runtime, name: str) -> None:
    tools = offered_tools(runtime)
    offered, scope = next((o, s) for o, s in tools.values() if o.tool.id == name)

    @PROPERTY_SETTINGS
    @given(args=arbitrary_arguments())
    def check(args: Any) -> None:
        call_once(runtime, offered.name, scope, args)

    check()


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read", {"filePath": "~no-such-user-toolrt/x"}),
        ("write", {"filePath": "~no-such-user-toolrt/x", "content": ""}),
        ("edit", {"filePath": "~0", "oldString": "", "newString": ""}),
        ("list", {"path": "~no-such-user-toolrt"}),
        ("list", {"path": "\x00"}),
        ("glob", {"pattern": "0", "path": "\x00"}),
    ],
)
def test_an_unknown_users_home_or_a_nul_byte_is_a_path_not_a_crash(runtime: Runtime, name: str, args: Any) -> None:
    # Found by the properties above: Path.expanduser raised RuntimeError for `~name` of no such user, and
    # realpath/resolve raised ValueError for a NUL byte, so the call failed unexpectedly.
    result = call_once(runtime, name, offered_tools(runtime)[name][1], args)
    assert result.error == "The user rejected permission to use this specific tool call."
