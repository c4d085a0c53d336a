"""`toolrt chat` driven through a pseudo-terminal against a scripted OpenAI-compatible endpoint on 127.0.0.1."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pexpect
import pytest
from cli_helpers import run
from conftest import write_project
from fake_providers import FakeProvider, Reply, chat_stream, serve

import toolrt

PING_TOOL = """
id: ping
description: Answer pong after the person allows it.
parameters: {type: object, properties: {n: {type: integer}}, required: [n]}
handler: {python: "pinger:ping"}
permission: {patterns: ["{{ n }}"]}
"""
EXTRA_TOOL = """
id: extra
description: A tool added while the chat runs.
parameters: {type: object, properties: {}}
handler: {python: "pinger:ping"}
"""


@pytest.mark.slow
def test_chat_in_a_terminal_runs_calls_asks_and_reloads(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "project",
        tools={"ping": PING_TOOL},
        permissions='permission: {"*": allow, ping: ask}\n',
        modules={"pinger": "def ping(args, ctx):\n    return 'pong %s' % args.get('n')\n"},
        builtin_tools=True,
    )
    (project / "notes.txt").write_text("remember the milk\n", encoding="utf-8")
    calls = [("c1", "read", json.dumps({"filePath": "notes.txt"})), ("c2", "ping", json.dumps({"n": 7}))]
    replies: list[Reply] = [
        chat_stream(text="Reading.", calls=calls),
        chat_stream(text="Your notes say: remember the milk."),
        chat_stream(text="Now with extra."),
        chat_stream(text="Still fine."),
        {"error": {"message": "model overloaded", "type": "server_error"}},
        chat_stream(text="Back again."),
    ]
    provider = FakeProvider("openai", list(replies))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(OPENAI_API_KEY="test", PYTHONPATH=str(Path(toolrt.__file__).parent.parent), TERM="dumb")
    for fake in serve(provider):
        child = pexpect.spawn(
            sys.executable,
            ["-m", "toolrt", "chat", "--root", str(project), "--base-url", fake.url, "--model", "fake"],
            env=env,
            encoding="utf-8",
            timeout=30,
            dimensions=(50, 200),
        )
        child.logfile_read = transcript = io.StringIO()
        try:
            child.expect(r"toolrt chat with fake: \d+ tools")
            child.expect_exact("you> ")
            child.sendline("what do my notes say?")
            child.expect_exact("Reading.")
            child.expect_exact("allow? [o]nce / [a]lways / [r]eject: ")  # ping asks, at the terminal
            child.sendline("o")
            child.expect_exact("< ping: ")
            child.expect_exact("Your notes say: remember the milk.")
            child.expect_exact("you> ")

            (project / "tools.d" / "extra.yaml").write_text(EXTRA_TOOL, encoding="utf-8")
            child.sendline("and now?")
            child.expect_exact("[reloaded: +extra]")
            child.expect_exact("Now with extra.")
            child.expect_exact("you> ")

            (project / "tools.d" / "extra.yaml").write_text("id: [broken\n", encoding="utf-8")
            child.sendline("and now?")
            child.expect_exact("[config error, still using the last good tools: ")
            child.expect_exact("Still fine.")
            child.expect_exact("you> ")

            child.sendline("this one fails")
            child.expect_exact("[the endpoint failed: ")
            child.expect_exact("model overloaded")
            child.expect_exact("you> ")
            child.sendline("try again")
            child.expect_exact("Back again.")
            child.expect_exact("you> ")
            child.sendline("/exit")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    assert child.exitstatus == 0
    seen = transcript.getvalue()
    # The two calls run side by side, so their lines may interleave; each one is shown.
    for line in ('> read {"filePath": "notes.txt"}', "< read: Read notes.txt", '> ping {"n": 7}', "  ping: 7"):
        assert line in seen, seen
    assert provider.problems == []
    tools_of = [{t["function"]["name"] for t in body["tools"]} for _, body in provider.requests]
    assert "extra" not in tools_of[1] and "extra" in tools_of[2] and "extra" in tools_of[3]
    results = {m["tool_call_id"]: m["content"] for m in provider.requests[1][1]["messages"] if m["role"] == "tool"}
    assert "remember the milk" in results["c1"]
    assert results["c2"] == "pong 7"
    users = [m["content"] for m in provider.requests[-1][1]["messages"] if m["role"] == "user"]
    assert users == ["what do my notes say?", "and now?", "and now?", "try again"]  # the failed one was dropped


def test_chat_needs_an_endpoint_and_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, _, err = run("chat", "--root", str(tmp_path), "--model", "m")
    assert code == 2
    assert "--base-url is required (or set OPENAI_BASE_URL)" in err
    code, _, err = run("chat", "--root", str(tmp_path), "--base-url", "http://127.0.0.1:9/v1")
    assert code == 2
    assert "--model is required" in err
