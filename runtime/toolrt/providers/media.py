"""Attachments (images, PDFs) of tool results, checked against what each provider takes in a request.

A `ToolResult` attachment is `{"type": "file", "mime", "url", "filename"}` with a `data:` URL (the
`read` and `webfetch` tools make them). Each adapter takes the ones its provider accepts through a
`MediaBudget` shared by the whole turn; the others become a sentence in the tool's result text, so
the model knows what it did not get and why. Sizes are counted as sent: base64 characters.
Limits are per request as each provider documents them (see docs/providers.md); earlier turns
still in the history count too, which a budget of one turn cannot see.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MB", "Media", "MediaBudget", "MediaLimits"]

MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Media:
    """One attachment a provider will receive: its type, base64 text and file name."""

    mime: str
    encoded: str
    """The bytes, base64-encoded (what the request carries)."""
    filename: str

    @property
    def data_url(self) -> str:
        return f"data:{self.mime};base64,{self.encoded}"

    @property
    def raw(self) -> bytes:
        return base64.b64decode(self.encoded)

    @property
    def is_image(self) -> bool:
        return self.mime.startswith("image/")


@dataclass(frozen=True, slots=True)
class MediaLimits:
    """What one provider takes in one request, as its documentation states it."""

    provider: str
    images: frozenset[str]
    """Image MIME types accepted."""
    documents: frozenset[str]
    """Other MIME types accepted (PDF, and plain text where the provider takes it)."""
    max_image_bytes: int
    max_document_bytes: int
    max_request_bytes: int
    """All attachments of the turn together."""
    max_images: int

    def kinds(self) -> str:
        names = sorted(m.split("/", 1)[1].upper() for m in self.images)
        documents = sorted("PDF" if m == "application/pdf" else m for m in self.documents)
        return f"images ({', '.join(names)}) and {', '.join(documents)}"


def _size(count: int) -> str:
    return f"{count / MB:.1f} MB" if count >= MB / 10 else f"{count / 1024:.0f} KB"


class MediaBudget:
    """Hands out the attachments of one turn that fit `limits`; explains each one left out."""

    def __init__(self, limits: MediaLimits) -> None:
        self.limits = limits
        self._bytes = 0
        self._images = 0

    def take(self, attachments: Iterable[Mapping[str, Any]]) -> tuple[list[Media], list[str]]:
        """(attachments to send, sentences for the result text about the rest)."""
        sent: list[Media] = []
        notes: list[str] = []
        for attachment in attachments:
            media, note = self._one(attachment)
            if media is not None:
                sent.append(media)
            if note is not None:
                notes.append(note)
        return sent, notes

    def _one(self, attachment: Mapping[str, Any]) -> tuple[Media | None, str | None]:
        limits = self.limits
        url = str(attachment.get("url") or "")
        mime = str(attachment.get("mime") or "").lower()
        name = str(attachment.get("filename") or "") or "attachment"
        if not url.startswith("data:"):
            return None, f"[Attachment {name} ({mime or 'unknown type'}) is at {url}]" if url else None
        header, _, encoded = url.partition(",")
        mime = mime or header[5:].split(";", 1)[0].lower()
        if not header.endswith(";base64"):
            encoded = base64.b64encode(encoded.encode()).decode("ascii")
        try:
            base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return None, f"[Attachment {name} was not sent: its data is not valid base64]"
        size = len(encoded)
        what = f"{name} ({mime}, {_size(size)})"
        image = mime in limits.images
        if not image and mime not in limits.documents:
            return None, f"[Attachment {what} was not sent: {limits.provider} takes {limits.kinds()}]"
        cap = limits.max_image_bytes if image else limits.max_document_bytes
        if size > cap:
            kind = "images" if image else "files of this type"
            return None, f"[Attachment {what} was not sent: {limits.provider} takes {kind} up to {_size(cap)}]"
        if self._bytes + size > limits.max_request_bytes:
            return None, (
                f"[Attachment {what} was not sent: with the other attachments of this turn it would pass the "
                f"{_size(limits.max_request_bytes)} {limits.provider} takes in one request]"
            )
        if image and self._images >= limits.max_images:
            return (
                None,
                f"[Attachment {what} was not sent: {limits.provider} takes at most {limits.max_images} images "
                "in one request]",
            )
        self._bytes += size
        self._images += image
        return Media(mime, encoded, name), None
