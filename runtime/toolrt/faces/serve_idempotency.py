"""A retried `tools/call` never runs twice: the call is recorded as started in the state store before it
runs, under its session and a key, and a retry with the same key gets what became of it.

The key is the request's `_meta["toolrt/idempotencyKey"]` (any protocol version; a client retrying after
a replica died sends the same request again, to another replica). The JSON-RPC request id is not a key:
clients of the stateless 2026-07-28 protocol reuse ids across requests (many send `1` every time), and a
repeated identical call would get an old result. A retry gets:

- the finished call's result, as it was returned (its `_meta` included);
- an error result saying the call may have run, when it started and has no result (the replica running it
  died, or it still runs): it is never run a second time;
- an error result when the key names a call of other arguments (an explicit key was reused).

A key is held for `CALL_CLAIM_SECONDS`; a call that waits for the client's input (2026-07-28
input-required) releases its key, so its retry with the answers runs it. With a store that cannot take
the claim, the call does not run (fail closed).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..errors import StoreError
from ..store import Store, session_id

__all__ = ["IDEMPOTENCY_META_KEY", "CallClaims", "Retry"]

IDEMPOTENCY_META_KEY = "toolrt/idempotencyKey"
MAX_KEY_LENGTH = 200

logger = logging.getLogger("toolrt.store")


@dataclass(frozen=True, slots=True)
class Retry:
    """What a claimed call's request gets instead of a run: a result in wire form, or a protocol error."""

    wire: dict[str, Any] | None = None
    error: Mapping[str, Any] | None = None


def _error(text: str, token_meta: Mapping[str, Any]) -> Retry:
    return Retry({"content": [{"type": "text", "text": text}], "isError": True, **token_meta})


class CallClaims:
    """Claims and finishes calls by key in one Runtime's store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @staticmethod
    def key(meta: Mapping[str, Any]) -> str | None:
        """The call's key: the client's idempotency key (a string of 1 to 200 characters), else None.

        Raises:
            MCPError: the key is not such a string (the call does not run).
        """
        if IDEMPOTENCY_META_KEY not in meta:
            return None
        key = meta[IDEMPOTENCY_META_KEY]
        if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_LENGTH:
            raise MCPError(
                INVALID_PARAMS, f"_meta[{IDEMPOTENCY_META_KEY!r}] must be a string of 1 to {MAX_KEY_LENGTH} characters"
            )
        return key

    @staticmethod
    def fingerprint(name: str, arguments: Mapping[str, Any] | None) -> str:
        text = json.dumps([name, arguments or {}], sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()

    def claim(self, session: str, key: str, fingerprint: str, token_meta: Mapping[str, Any]) -> Retry | None:
        """None: the call is claimed, run it. Else what its request gets instead."""
        try:
            claim = self._store.claim_call(session_id(session), key, fingerprint, time.time())
        except StoreError as error:
            logger.error("a call could not be recorded as started, so it did not run: %s", error)
            return _error(
                "The call could not be recorded as started, so it did not run (the server's log says why).", token_meta
            )
        if claim.state == "new":
            return None
        if claim.state == "conflict":
            return _error(
                "This idempotency key was given to another call (other tool or arguments); the call did not run.",
                token_meta,
            )
        if claim.state == "started" or claim.result is None:
            return _error(
                "This call was started before under the same key and may have run (or may still run); its result "
                "is not known, so it was not run again.",
                token_meta,
            )
        kept = json.loads(claim.result)
        if isinstance(kept, dict) and "protocolError" in kept:
            return Retry(error=kept["protocolError"])
        return Retry(kept if isinstance(kept, dict) else None)

    def finish(self, session: str, key: str, wire: Mapping[str, Any] | None) -> None:
        """Keep the call's result for its retries (None: release the key, the call did not finish)."""
        try:
            text = None if wire is None else json.dumps(wire, separators=(",", ":"), ensure_ascii=False)
            self._store.finish_call(session_id(session), key, text)
        except (StoreError, TypeError, ValueError) as error:  # a retry then reads "may have run": still no rerun
            logger.error("a call's result could not be kept for its retries: %s", error)
