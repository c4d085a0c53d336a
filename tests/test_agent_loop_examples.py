"""Every script of examples/agent-loop/ runs to the end against a scripted fake of its provider's API."""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_providers import (
    FakeProvider,
    chat_stream,
    generate_content,
    message_stream,
    response,
    serve,
)
from provider_project import make_provider_project

pytestmark = pytest.mark.slow  # each example runs a whole agent loop against a fake provider, with its SDK

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "agent-loop"
CALLS = [
    ("call_meet_a", "meet", '{"name": "a"}'),
    ("call_meet_b", "meet", '{"name": "b"}'),
    ("call_notes", "read", '{"filePath": "notes.txt"}'),
    ("call_pixel", "read", '{"filePath": "pixel.png"}'),
]
OBJECT_CALLS = [(i, n, json.loads(a)) for i, n, a in CALLS]

SCRIPTS: dict[str, tuple[str, list[Any], dict[str, str]]] = {
    "openai_chat.py": (
        "openai",
        [chat_stream(text="Reading.", calls=CALLS), chat_stream(text="The notes say: remember the milk.")],
        {"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": "{url}"},
    ),
    "openai_responses.py": (
        "openai-responses",
        [response(calls=CALLS), response(text="The notes say: remember the milk.")],
        {"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": "{url}"},
    ),
    "anthropic_messages.py": (
        "anthropic",
        [message_stream(text="Reading.", calls=CALLS), message_stream(text="The notes say: remember the milk.")],
        {"ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": "{url}"},
    ),
    "gemini.py": (
        "gemini",
        [generate_content(calls=OBJECT_CALLS), generate_content(text="The notes say: remember the milk.")],
        {"GEMINI_API_KEY": "test", "GOOGLE_GEMINI_BASE_URL": "{url}"},
    ),
}


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_agent_loop_example_runs_to_the_end(
    script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kind, replies, variables = SCRIPTS[script]
    project = make_provider_project(tmp_path / "project")
    provider = FakeProvider(kind, list(replies))
    for name in [k for k in os.environ if k.startswith(("OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(project)
    monkeypatch.setattr(sys, "argv", [script, "What do my notes say?"])
    monkeypatch.setenv("MODEL", "fake")
    for fake in serve(provider):
        for name, value in variables.items():
            monkeypatch.setenv(name, value.format(url=fake.url))
        # In-process, as `python script.py` would run it: the SDKs are imported once for the whole suite.
        runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    assert provider.problems == []
    assert len(provider.requests) == 2
    assert "The notes say: remember the milk." in capsys.readouterr().out
    second = str(provider.requests[1][1])
    assert "met a" in second and "met b" in second and "remember the milk" in second
    assert "iVBORw0KGgo" in second  # the image went back
