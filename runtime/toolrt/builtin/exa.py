"""`websearch` and `codesearch`: OpenCode's Exa tools, each one MCP `tools/call` over HTTP.

As OpenCode does, the call is a JSON-RPC 2.0 request POSTed to Exa's MCP endpoint
(`https://mcp.exa.ai/mcp`, or the host's `TOOLRT_EXA_URL`), answered as JSON or as server-sent events;
the first text content is the result. An `EXA_API_KEY` from the environment travels in the endpoint's
query (`exaApiKey`), as OpenCode sends it, and is never written into a result, its metadata, an error
or the audit record. Both variables come from the host's environment only: a project's `.env` never
reaches `os.environ`, so a model cannot point the key at another server.

httpx2 is imported inside the call: loading this module for a snapshot must not cost its import time.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus, urlencode

from ..errors import ToolFailure

if TYPE_CHECKING:  # imported for annotations only: a build loads this module for its describe hook
    from ..build.compiled import DescribeInfo
    from ..call.context import ToolContext

__all__ = ["DEFAULT_URL", "call_exa", "codesearch", "describe_websearch", "parse_response", "websearch"]

DEFAULT_URL = "https://mcp.exa.ai/mcp"
URL_VARIABLE = "TOOLRT_EXA_URL"
KEY_VARIABLE = "EXA_API_KEY"
SEARCH_TIMEOUT = 25.0
"""Seconds a web search may take (OpenCode's)."""
CODE_TIMEOUT = 30.0
"""Seconds a code search may take (OpenCode's)."""
MAX_RESPONSE = 5 * 1024 * 1024
"""Bytes of a response read at most (the results are text for the model, already cut by Exa)."""


def describe_websearch(description: str, info: DescribeInfo) -> str:
    """OpenCode's `{{year}}`: the current year, so the model searches for this year's news."""
    return description.replace("{{year}}", str(datetime.date.today().year))


async def websearch(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Exa's `web_search_exa` with OpenCode's defaults (auto search, 8 results, live crawl as fallback)."""
    query = args["query"]
    arguments: dict[str, Any] = {
        "query": query,
        "type": args.get("type") or "auto",
        "numResults": args.get("numResults") or 8,
        "livecrawl": args.get("livecrawl") or "fallback",
    }
    if args.get("contextMaxCharacters") is not None:
        arguments["contextMaxCharacters"] = args["contextMaxCharacters"]
    text = await call_exa("web_search_exa", arguments, timeout=SEARCH_TIMEOUT, what="Search")
    return {
        "title": f"Web search: {query}",
        "output": text or "No search results found. Please try a different query.",
        "metadata": {},
    }


async def codesearch(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Exa's `get_code_context_exa` (5000 tokens unless asked otherwise)."""
    query = args["query"]
    arguments = {"query": query, "tokensNum": args.get("tokensNum") or 5000}
    text = await call_exa("get_code_context_exa", arguments, timeout=CODE_TIMEOUT, what="Code search")
    return {
        "title": f"Code search: {query}",
        "output": text
        or (
            "No code snippets or documentation found. Please try a different query, be more specific about "
            "the library or programming concept, or check the spelling of framework names."
        ),
        "metadata": {},
    }


async def call_exa(tool: str, arguments: Mapping[str, Any], *, timeout: float, what: str) -> str | None:
    """One `tools/call` of `tool` at the Exa endpoint: its first text content, or None when it has none.

    Raises:
        ToolFailure: the endpoint failed, answered an error or took longer than `timeout` seconds; the
            message never holds the API key.
    """
    import anyio  # here, as httpx2: a build imports this module for its describe hook
    import httpx2

    key = os.environ.get(KEY_VARIABLE, "")
    url = os.environ.get(URL_VARIABLE) or DEFAULT_URL
    if key:
        url = f"{url}{'&' if '?' in url else '?'}{urlencode({'exaApiKey': key})}"
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    try:
        with anyio.fail_after(timeout):
            async with (
                httpx2.AsyncClient(timeout=None, trust_env=False) as client,
                client.stream("POST", url, json=request, headers=headers) as response,
            ):
                body = await _read_capped(response, what)
                if not response.is_success:
                    detail = _hide(body.decode("utf-8", "replace").strip()[:500], key)
                    raise ToolFailure(
                        f"{what} error ({response.status_code}): {detail or 'no details'}. Try again later, or "
                        "search another way (webfetch a known documentation page)."
                    )
    except TimeoutError:
        raise ToolFailure(
            f"{what} request timed out after {timeout:g} seconds. Try again with a narrower query."
        ) from None
    except httpx2.HTTPError as error:
        message = _hide(str(error), key) or "no details"
        raise ToolFailure(f"{what} failed: {type(error).__name__}: {message}") from None
    return parse_response(body.decode("utf-8", "replace"), what, key)


async def _read_capped(response: Any, what: str) -> bytes:
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_RESPONSE:
            raise ToolFailure(f"{what} failed: the response was larger than {MAX_RESPONSE // (1024 * 1024)} MB.")
    return bytes(body)


def parse_response(body: str, what: str = "Search", key: str = "") -> str | None:
    """The first text content of a JSON-RPC result sent as JSON or as server-sent events (`data:` lines;
    frames that are not the result, such as progress notifications, are skipped).

    Raises:
        ToolFailure: the endpoint answered a JSON-RPC error.
    """
    text = _payload(body.strip(), what, key)
    if text:
        return text
    for line in body.splitlines():
        if line.startswith("data:"):
            text = _payload(line[5:].removeprefix(" "), what, key)
            if text:
                return text
    return None


def _payload(payload: str, what: str, key: str) -> str | None:
    if not payload.startswith("{"):
        return None
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict):
        message = _hide(str(error.get("message", "no details")), key)
        raise ToolFailure(f"{what} failed: {message}. Try again later, or search another way.")
    result = data.get("result")
    content = result.get("content") if isinstance(result, dict) else None
    for item in content if isinstance(content, list) else ():
        if isinstance(item, dict) and isinstance(item.get("text"), str) and item["text"]:
            return str(item["text"])
    return None


def _hide(text: str, key: str) -> str:
    """`text` without the API key (an endpoint may echo the URL it was called at)."""
    if not key:
        return text
    return text.replace(key, "<EXA_API_KEY>").replace(quote_plus(key), "<EXA_API_KEY>")
