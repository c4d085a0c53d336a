"""What an MCP client receives for a result with attachments: images as image content, PDFs and
other binary files as embedded resources (a blob), never base64 pasted into the text."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import mcp_types as types

from toolrt import Runtime
from toolrt.faces.serve import _to_mcp

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

    pdf = _to_mcp(rt.call_sync("read", {"filePath": "my report.pdf"}))
    assert not pdf.is_error
    text, resource = pdf.content
    assert isinstance(text, types.TextContent) and text.text == "PDF read successfully"
    assert isinstance(resource, types.EmbeddedResource)
    assert isinstance(resource.resource, types.BlobResourceContents)
    assert resource.resource.uri == "toolrt://attachment/my%20report.pdf"
    assert resource.resource.mime_type == "application/pdf"
    assert base64.b64decode(resource.resource.blob) == PDF

    image = _to_mcp(rt.call_sync("read", {"filePath": "dot.png"}))
    _, picture = image.content
    assert isinstance(picture, types.ImageContent)
    assert (picture.mime_type, base64.b64decode(picture.data)) == ("image/png", PNG_1X1)
