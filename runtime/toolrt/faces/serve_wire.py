"""A call's result in MCP's wire form for `toolrt serve`: its text and attachments as content blocks, the
session token in `_meta`, and a task's result or protocol error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import mcp_types as types
from mcp.shared.exceptions import MCPError

from ..call.pipeline import PROTOCOL_ERROR
from ..result import ToolResult
from .serve_sessions import SESSION_META_KEY


def task_result(result: ToolResult, token: str | None) -> dict[str, Any] | MCPError:
    """A task's call result as its `tools/call` result (wire form), or the protocol error it raised."""
    protocol = result.metadata.get(PROTOCOL_ERROR)
    if isinstance(protocol, Mapping):
        return MCPError(int(protocol["code"]), str(protocol["message"]), protocol.get("data"))
    wire: dict[str, Any] = to_mcp(result, token).model_dump(by_alias=True, mode="json", exclude_none=True)
    return wire


def wire_form(result: types.CallToolResult | dict[str, Any]) -> dict[str, Any]:
    if isinstance(result, dict):
        return result
    wire: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return wire


def token_meta(token: str | None) -> dict[str, Any]:
    return {"_meta": {SESSION_META_KEY: token}} if token is not None else {}


def to_mcp(result: ToolResult, token: str | None = None) -> types.CallToolResult:
    """A result as MCP content: its text (left out when empty and something else is attached), then each
    attachment (`attachment_content`)."""
    content: list[types.ContentBlock] = []
    text = result.error if result.error is not None else result.output
    attached = [block for block in map(attachment_content, result.attachments) if block is not None]
    if text or not attached:
        content.append(types.TextContent(type="text", text=text))
    content.extend(attached)
    meta: dict[str, Any] = {"toolrt/title": result.title}
    if token is not None:
        meta[SESSION_META_KEY] = token
    structured = dict(result.structured) if result.structured is not None and result.error is None else None
    return types.CallToolResult(
        content=content, structured_content=structured, is_error=result.error is not None, _meta=meta
    )


def attachment_content(attachment: Mapping[str, Any]) -> types.ContentBlock | None:
    """One attachment as MCP content:

    - `{"link": uri, "name", "mime"}`: a resource link;
    - `{"uri", "mime", "text" | "url"}`: an embedded resource with that URI (a `data:` URL's bytes as a blob);
    - `{"mime", "url": "data:…;base64,…"}`: an image for `image/*`, audio for `audio/*`, else an embedded
      blob resource named after its `filename`;
    - another URL: a line of text naming it.
    """
    mime = str(attachment.get("mime") or "")
    link = attachment.get("link")
    if isinstance(link, str) and link:
        name = str(attachment.get("name") or attachment.get("filename") or link)
        return types.ResourceLink(type="resource_link", uri=link, name=name, mime_type=mime or None)
    url = str(attachment.get("url", ""))
    data = url.split(";base64,", 1)[1] if url.startswith("data:") and ";base64," in url else None
    uri = attachment.get("uri")
    if isinstance(uri, str) and uri:
        text = attachment.get("text")
        resource: types.TextResourceContents | types.BlobResourceContents
        if isinstance(text, str):
            resource = types.TextResourceContents(uri=uri, mime_type=mime or "text/plain", text=text)
        elif data is not None:
            resource = types.BlobResourceContents(uri=uri, mime_type=mime or "application/octet-stream", blob=data)
        else:
            return types.ResourceLink(type="resource_link", uri=uri, name=uri, mime_type=mime or None)
        return types.EmbeddedResource(type="resource", resource=resource)
    if data is not None:
        if mime.startswith("image/"):
            return types.ImageContent(type="image", data=data, mime_type=mime)
        if mime.startswith("audio/"):
            return types.AudioContent(type="audio", data=data, mime_type=mime)
        # A PDF or another binary file: an embedded resource, not megabytes of base64 text.
        name = quote(str(attachment.get("filename") or "attachment"))
        blob = types.BlobResourceContents(
            uri=f"toolrt://attachment/{name}", mime_type=mime or "application/octet-stream", blob=data
        )
        return types.EmbeddedResource(type="resource", resource=blob)
    if url:
        return types.TextContent(type="text", text=f"attachment: {url}")
    return None
