"""Feedback at a terminal: `toolrt call` streams a process tool's output as it runs, colour follows `--color` and
`NO_COLOR`, and `toolrt chat` with piped input refuses asks and never sends an ask answer to the model."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from cli_helpers import run
from fake_providers import FakeProvider, Reply, chat_stream, serve

from toolrt import Runtime
from toolrt.faces.cli import main
from toolrt.faces.terminal import LiveOutput

Factory = Callable[..., Path]

TOOL = """\
id: {id}
description: Runs a fixed command for the terminal feedback tests and returns what it printed.
parameters: {{type: object, properties: {{}}}}
handler: {{argv: [sh, -c, "{script}"]}}
"""


class Terminal(io.StringIO):
    """Text written to what claims to be a terminal."""

    def isatty(self) -> bool:
        return True


def _project(make_project: Factory, **scripts: str) -> Path:
    tools = {name: TOOL.format(id=name, script=script) for name, script in scripts.items()}
    return make_project(tools, permissions="permission:\n  '*': allow\n  deny_me: deny\n")


def test_a_process_tools_output_is_shown_while_it_runs(make_project: Factory, tmp_path: Path) -> None:
    # The gate is a FIFO beside the project, not in it: in the sandbox the project is an overlay, where a
    # FIFO is another pipe than the one the host opens.
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    root = _project(make_project, waits=f"echo first; read line < {gate}; echo second $line")
    rt = Runtime.load(root)
    screen = io.StringIO()
    live = LiveOutput(screen, "live_1")
    rt.subscribe(live.listen)

    async def main_() -> None:
        async with anyio.create_task_group() as group:
            results = []

            async def call() -> None:
                results.append(await rt.call("waits", {}, call_id="live_1"))

            group.start_soon(call)
            with anyio.fail_after(20):
                while "first" not in screen.getvalue():  # shown while the process still waits on the gate
                    await anyio.sleep(0.01)
            await anyio.to_thread.run_sync(lambda: gate.write_text("open\n"))
        (result,) = results
        assert result.output == "first\nsecond open\n" and live.rest(result.output) == ""

    anyio.run(main_)
    assert screen.getvalue() == "first\nsecond open\n"


def test_call_at_a_terminal_shows_the_output_once_and_the_rest_after(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    root = _project(make_project, hello="echo hello", fails="echo partial; exit 3")
    out, err = Terminal(), io.StringIO()
    assert main(["call", "hello", "{}", "--root", str(root)], out=out, err=err) == 0
    assert out.getvalue() == "hello\n"
    out, err = Terminal(), io.StringIO()
    assert main(["call", "fails", "{}", "--root", str(root)], out=out, err=err) == 1
    assert out.getvalue() == "partial\n", "the output is on stdout once, as it came"
    assert (
        err.getvalue().startswith("<toolrt_metadata>\nThe command exited with status 3")
        and "partial" not in err.getvalue()
    )
    assert "\033[" not in out.getvalue() + err.getvalue()


@pytest.mark.parametrize(
    ("no_color", "option", "coloured"),
    [(None, "auto", True), ("1", "auto", False), ("1", "always", True), (None, "never", False)],
)
def test_colour_follows_the_terminal_no_color_and_the_option(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch, no_color: str | None, option: str, coloured: bool
) -> None:
    monkeypatch.delenv("TERM", raising=False)
    if no_color is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", no_color)
    root = _project(make_project, fails="echo partial; exit 3")
    out = Terminal()
    assert main(["check", "deny_me", "x", "--root", str(root), "--color", option], out=out, err=io.StringIO()) == 0
    assert ("decision: \033[31mdeny\033[0m" in out.getvalue()) is coloured
    assert ("\033[" in out.getvalue()) is coloured
    plain, err = io.StringIO(), Terminal()
    assert main(["call", "fails", "{}", "--root", str(root), "--color", option], out=plain, err=err) == 1
    assert ("\033[31mpartial" in err.getvalue()) is coloured, "the error result, red on the terminal"


def test_validate_colours_problem_locations(make_project: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_project({"bad": "id: bad\ndescription: A tool with a misspelt key for the colour test.\nhandlr: {}\n"})
    out = Terminal()
    assert main(["validate", "--root", str(root), "--color", "always"], out=out, err=io.StringIO()) == 1
    assert "\033[31m" in out.getvalue() and "tools.d/bad.yaml:3:1\033[0m: " in out.getvalue()
    assert run("validate", "--root", str(root))[1].count("\033[") == 0, "not a terminal: no colour"


PING = """\
id: ping
description: Answers pong once the person allows it, for the piped chat test.
parameters: {type: object, properties: {}}
handler: {argv: [echo, pong]}
"""


def test_chat_with_piped_input_refuses_asks_and_never_sends_an_answer(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("openai")
    root = make_project({"ping": PING}, permissions="permission:\n  ping: ask\n")
    replies: list[Reply] = [chat_stream(calls=[("c1", "ping", "{}")]), chat_stream(text="It needs approval.")]
    provider = FakeProvider("openai", list(replies))
    monkeypatch.setattr(sys, "stdin", io.StringIO("ping please\nonce\nyes\n"))
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    for fake in serve(provider):
        code, out, _ = run("chat", "--root", str(root), "--base-url", fake.url + "/v1", "--model", "fake")
    assert code == 0 and provider.problems == []
    assert "[input is not a terminal: calls that ask for approval are refused" in out
    assert "ping: asks for approval, refused: input is not a terminal" in out
    assert "['once' answers an ask, and asks are refused here: not sent to the model]" in out
    assert "['yes' answers an ask" in out, "right after a refused ask, yes is an answer too"
    users = [m["content"] for m in provider.requests[-1][1]["messages"] if m["role"] == "user"]
    assert users == ["ping please"] and len(provider.requests) == 2
    tool_results = [m["content"] for m in provider.requests[-1][1]["messages"] if m["role"] == "tool"]
    assert "no one is available to approve it" in json.dumps(tool_results)
