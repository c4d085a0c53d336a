"""Real values of masked credentials starred out of a stream of bytes, the proxy's responses (see `proxy`)."""

from __future__ import annotations

__all__ = ["Starring"]


class Starring:
    """Each of `secrets` starred out of the bytes fed in (same length: the framing holds), also where one
    spans two chunks."""

    def __init__(self, secrets: list[bytes]) -> None:
        self.secrets = secrets
        self.keep = max(len(s) for s in secrets) - 1
        """Bytes held back after each chunk: they may begin a value the next chunk ends."""
        self.pending = b""
        """The bytes held back: sent as they are once the stream ends (shorter than any secret)."""

    def feed(self, chunk: bytes) -> bytes:
        """What of the bytes so far can go on: the real values starred out, the last `keep` bytes held back."""
        self.pending += chunk
        for secret in self.secrets:
            self.pending = self.pending.replace(secret, b"*" * len(secret))
        ready, self.pending = (
            (self.pending[: -self.keep], self.pending[-self.keep :]) if self.keep else (self.pending, b"")
        )
        return ready
