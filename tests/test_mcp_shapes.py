"""What an MCP client receives for a result with attachments: images as image content, audio as audio
content, PDFs and other binary files as embedded resources (a blob), never base64 pasted into the text;
an attachment with its own URI an embedded resource with that URI, a link a resource link."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import mcp_types as types

from toolrt import Runtime
from toolrt.faces.serve_wire import to_mcp

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n"


def test_a_read_pdf_is_an_embedded_resource_and_an_image_is_image_content(
    tmp_path: Path, project_writer: Callable[..., Path]
) -> None:
    root = project_writer(tmp_path / "p", builtin_tools=True)
    (root / "my report.pdf").write_bytes(PDF)
    (root / "dot.png").write_bytes(PNG_1X1)
    rt = Runtime.load(root)

    pdf = to_mcp(rt.call_sync("read", {"filePath": "my report.pdf"}))
    assert not pdf.is_error
    text, resource = pdf.content
    assert isinstance(text, types.TextContent) and text.text == "PDF read successfully"
    assert isinstance(resource, types.EmbeddedResource)
    assert isinstance(resource.resource, types.BlobResourceContents)
    assert resource.resource.uri == "toolrt://attachment/my%20report.pdf"
    assert resource.resource.mime_type == "application/pdf"
    assert base64.b64decode(resource.resource.blob) == PDF

    image = to_mcp(rt.call_sync("read", {"filePath": "dot.png"}))
    _, picture = image.content
    assert isinstance(picture, types.ImageContent)
    assert (picture.mime_type, base64.b64decode(picture.data)) == ("image/png", PNG_1X1)


WAV = base64.b64decode("UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=")


def _data(mime: str, raw: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(raw).decode()}"


def test_audio_resources_with_their_own_uri_and_links_are_their_mcp_content() -> None:
    from toolrt import ToolResult

    attachments = (
        {"mime": "audio/wav", "url": _data("audio/wav", WAV)},
        {"uri": "test://notes", "mime": "text/markdown", "text": "# Notes"},
        {"uri": "test://blob", "mime": "application/pdf", "url": _data("application/pdf", PDF)},
        {"link": "file:///srv/report.pdf", "name": "report.pdf", "mime": "application/pdf"},
    )
    audio, text, blob, link = to_mcp(ToolResult(title="t", output="", attachments=attachments)).content
    assert isinstance(audio, types.AudioContent)
    assert (audio.mime_type, base64.b64decode(audio.data)) == ("audio/wav", WAV)
    assert isinstance(text, types.EmbeddedResource) and isinstance(text.resource, types.TextResourceContents)
    assert (str(text.resource.uri), text.resource.mime_type, text.resource.text) == (
        "test://notes",
        "text/markdown",
        "# Notes",
    )
    assert isinstance(blob, types.EmbeddedResource) and isinstance(blob.resource, types.BlobResourceContents)
    assert str(blob.resource.uri) == "test://blob" and base64.b64decode(blob.resource.blob) == PDF
    assert isinstance(link, types.ResourceLink)
    assert (str(link.uri), link.name, link.mime_type) == ("file:///srv/report.pdf", "report.pdf", "application/pdf")

    with_text = to_mcp(ToolResult(title="t", output="Two files:", attachments=attachments[3:])).content
    assert [block.type for block in with_text] == ["text", "resource_link"], "the text leads when there is one"
    assert [block.type for block in to_mcp(ToolResult(title="t", output="")).content] == ["text"]
