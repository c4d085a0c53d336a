"""websearch and codesearch against a local MCP endpoint on 127.0.0.1 that answers as Exa's does
(`exa_endpoint`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from exa_endpoint import KEY, Endpoint, serve_endpoint

from toolrt import Runtime
from toolrt.audit import read_records
from toolrt.builtin import exa

EXA: dict[str, Any] = {"flags": {"exa": True}}


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    with serve_endpoint(monkeypatch) as state:
        yield state


@pytest.fixture
def rt(make_project: Callable[..., Path]) -> Runtime:
    return Runtime.load(make_project({}, builtin_tools=True))


def test_offered_for_the_opencode_provider_or_under_the_exa_flag(rt: Runtime) -> None:
    for scope in ({"provider": "opencode"}, EXA, {"provider": "openai", **EXA}):
        names = rt.tools(**scope).names()
        assert names[names.index("todowrite") + 1 : names.index("skill")] == ("websearch", "codesearch")
    hidden = {h.id: h.reason for h in rt.tools(provider="openai").hidden}
    assert hidden["websearch"] == (
        "none of its alternatives holds (provider openai is not one of: opencode; flag exa is off)"
    )
    spec = rt.tools(**EXA).spec("websearch", "anthropic")
    assert spec is not None
    assert sorted(spec["input_schema"]["properties"]) == [
        "contextMaxCharacters",
        "livecrawl",
        "numResults",
        "query",
        "type",
    ]
    assert "{{year}}" not in spec["description"] and "The current year is 20" in spec["description"]


def test_websearch_is_one_mcp_tools_call_with_opencodes_defaults(rt: Runtime, endpoint: Endpoint) -> None:
    result = rt.call_sync("websearch", {"query": "AI news 2026"}, **EXA)
    assert result.error is None
    assert (result.title, result.output) == ("Web search: AI news 2026", "Found: AI news 2026")
    [call] = endpoint.calls
    assert call["body"] == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "web_search_exa",
            "arguments": {"query": "AI news 2026", "type": "auto", "numResults": 8, "livecrawl": "fallback"},
        },
    }
    assert call["query"] == {"exaApiKey": [KEY]} and call["accept"] == "application/json, text/event-stream"
    args = {"query": "json", "numResults": 3, "type": "deep", "livecrawl": "preferred", "contextMaxCharacters": 500}
    assert rt.call_sync("websearch", args, **EXA).output == "Found: json"
    assert endpoint.calls[1]["body"]["params"]["arguments"] == args


def test_codesearch_asks_for_5000_tokens_unless_told(rt: Runtime, endpoint: Endpoint) -> None:
    result = rt.call_sync("codesearch", {"query": "pandas filtering"}, provider="opencode")
    assert (result.title, result.output) == ("Code search: pandas filtering", "Found: pandas filtering")
    assert endpoint.calls[0]["body"]["params"] == {
        "name": "get_code_context_exa",
        "arguments": {"query": "pandas filtering", "tokensNum": 5000},
    }
    rt.call_sync("codesearch", {"query": "json", "tokensNum": 20000}, provider="opencode")
    assert endpoint.calls[1]["body"]["params"]["arguments"]["tokensNum"] == 20000
    too_few = rt.call_sync("codesearch", {"query": "x", "tokensNum": 10}, provider="opencode")
    assert too_few.error is not None and "1000" in too_few.error and len(endpoint.calls) == 2


def test_failures_say_what_to_do_and_never_show_the_key(rt: Runtime, endpoint: Endpoint) -> None:
    empty = rt.call_sync("websearch", {"query": "nothing"}, **EXA)
    assert empty.output == "No search results found. Please try a different query."
    code = rt.call_sync("codesearch", {"query": "nothing"}, **EXA)
    assert code.output.startswith("No code snippets or documentation found. Please try a different query")
    http = rt.call_sync("websearch", {"query": "http error"}, **EXA)
    assert http.error is not None and http.error.startswith("Search error (502): upstream failed for /mcp?exaApiKey=")
    assert "<EXA_API_KEY>" in http.error and "Try again later" in http.error
    rpc = rt.call_sync("codesearch", {"query": "rpc error"}, **EXA)
    assert rpc.error == "Code search failed: quota for <EXA_API_KEY> used up. Try again later, or search another way."
    path = rt.audit.path
    assert path is not None
    records, _ = read_records(path)
    assert len(records) == 4
    text = path.read_text(encoding="utf-8")
    assert KEY not in text and "websearch" in text


def test_an_unreachable_or_silent_endpoint_is_an_error_result(
    rt: Runtime, endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(exa, "SEARCH_TIMEOUT", 0.5)
    hung = rt.call_sync("websearch", {"query": "hang"}, **EXA)
    endpoint.release.set()
    assert hung.error == "Search request timed out after 0.5 seconds. Try again with a narrower query."
    monkeypatch.setenv("TOOLRT_EXA_URL", "http://127.0.0.1:9/mcp")  # the discard port: nothing listens
    down = rt.call_sync("websearch", {"query": "anything"}, **EXA)
    assert down.error is not None and down.error.startswith("Search failed: ConnectError")
    assert KEY not in down.error


def test_the_default_endpoint_is_exas() -> None:
    assert exa.DEFAULT_URL == "https://mcp.exa.ai/mcp"
    assert exa.parse_response('event: message\ndata: {"result": {"content": [{"type": "text", "text": "hi"}]}}') == "hi"
    assert exa.parse_response("data: not json\n\n") is None
