"""`call_sync` takes `call`'s own keywords, and `check_call` tells the caller's mistakes (a `UsageError` whose
cause is kept) from a bug (raised as itself)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt import InvalidArgumentsError, Reply, Runtime, ToolContext, UsageError
from toolrt.permissions.ask import AskRequest

Factory = Callable[..., Path]
ECHO = """
id: echo
description: Say what the host passed.
parameters: {type: object, properties: {text: {type: string}}, required: [text]}
handler: {host: echo}
permission: {key: echo, patterns: ["{{ text }}"]}
"""


def _runtime(make_project: Factory) -> Runtime:
    rt = Runtime.load(make_project({"echo": ECHO}, permissions='permission:\n  "*": allow\n  echo: ask\n'))

    def echo(args: Mapping[str, Any], ctx: ToolContext) -> str:
        said = f"{args['text']} {ctx.call_id} {ctx.message_id} {dict(ctx.extra)} {ctx.session} {ctx.agent}"
        return f"{said} aborted" if ctx.abort.is_set() else said

    rt.register_handler("echo", echo)
    return rt


def test_call_sync_takes_the_keywords_call_takes(make_project: Factory) -> None:
    rt = _runtime(make_project)
    asked: list[str] = []

    async def ask(request: AskRequest) -> Reply:
        asked.append(request.pending[0].pattern)
        return Reply("once")

    result = rt.call_sync(
        "echo", {"text": "hi"}, ask=ask, call_id="c1", message_id="m1", extra={"k": 1}, session="s9", agent="plan"
    )
    assert (result.error, result.output, asked) == (None, "hi c1 m1 {'k': 1} s9 plan", ["hi"])
    unasked = rt.call_sync("echo", {"text": "hi"})
    assert unasked.error is not None and "no one is available to approve it" in unasked.error
    aborted = anyio.Event()
    aborted.set()
    assert rt.call_sync("echo", {"text": "hi"}, ask=ask, abort=aborted).output.endswith(" aborted")
    with pytest.raises(UsageError, match='unknown agent "nobody"; agents: build, explore, general, plan'):
        rt.call_sync("echo", {"text": "hi"}, agent="nobody")


def test_check_call_turns_the_callers_bad_arguments_into_a_usage_error_that_keeps_its_cause(
    make_project: Factory,
) -> None:
    rt = _runtime(make_project)
    with pytest.raises(
        UsageError, match=r'echo tool was called with invalid arguments: \n- \(root\): "text" is a required property'
    ) as bad:
        rt.check_call("echo", {})
    assert isinstance(bad.value.__cause__, InvalidArgumentsError)
    with pytest.raises(
        UsageError, match=r"not valid JSON \(Expecting property name enclosed in double quotes at position 1\)"
    ):
        rt.check_call("echo", "{oops")
    with pytest.raises(UsageError, match="unknown tool 'nope' \\(tools: echo"):
        rt.check_call("nope", {})


class _BrokenArguments(Mapping[str, Any]):
    """A host's mapping with a bug: reading it fails."""

    def __getitem__(self, key: str) -> Any:
        raise LookupError(key)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("the host's arguments object is broken")

    def __len__(self) -> int:
        return 1


def test_check_call_raises_a_bug_as_itself_not_as_a_usage_error(make_project: Factory) -> None:
    rt = _runtime(make_project)
    with pytest.raises(RuntimeError, match="the host's arguments object is broken"):
        rt.check_call("echo", _BrokenArguments())


@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        ('{"text": ' + "[" * 300 + "]" * 300 + "}", "/text"),  # the validator cannot report an error this deep
        ('{"more": ' + '{"a": ' * 300 + "1" + "}" * 300 + "}", "/more"),
        ('{"text": ' + "[" * 100_000 + "]" * 100_000 + "}", "(root)"),  # json.loads runs out of stack
        ("[" * 100_000 + "]" * 100_000, "(root)"),
    ],
)
def test_arguments_nested_past_what_is_read_are_the_models_mistake_not_a_crash(
    make_project: Factory, arguments: str, where: str
) -> None:
    """The model writes the arguments: nesting them hundreds or thousands deep is a refusal it can
    read (in the pipeline and in `check_call`), never the validator's or the parser's `ValueError` /
    `RecursionError` as an unexpected failure."""
    rt = _runtime(make_project)
    expected = rf"echo tool was called with invalid arguments: \n- {re.escape(where)}: nested more than 200 deep"
    with pytest.raises(UsageError, match=expected) as refused:
        rt.check_call("echo", arguments)
    assert isinstance(refused.value.__cause__, InvalidArgumentsError)
    result = rt.call_sync("echo", arguments)
    assert result.error is not None and re.search(expected, result.error), result.error
    assert "unexpectedly" not in result.error
