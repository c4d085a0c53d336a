"""Whether a `toolrt serve` replica is ready, and which snapshot it serves: `GET /healthz` and the store.

A replica is ready when its snapshot is valid (the config loaded without a problem: no tool file withheld,
no broken permissions or settings) and, with a persistent store, its last write to the store went through.
`GET /healthz` answers 200 with `{"ready": true, ...}`, else 503 with the problems, so a load balancer
sends requests only to replicas that serve a valid config.

With a persistent store each HTTP replica reports itself there (`Store.report_replica`) when it starts,
within a second of every snapshot swap, and every `HEARTBEAT_SECONDS`, and is forgotten when it stops; `toolrt status`
lists the replicas seen within `STALE_SECONDS` and says when they serve different snapshots.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import time
from typing import Any

import anyio
import anyio.to_thread

from ..api import Runtime
from ..errors import StoreError
from ..store import Replica
from .asgi import App, Receive, Scope, Send

__all__ = ["HEALTH_PATH", "HEARTBEAT_SECONDS", "STALE_SECONDS", "Health"]

HEALTH_PATH = "/healthz"
HEARTBEAT_SECONDS = 5.0
"""How often a replica reports itself to the store (and checks that the store answers)."""
STALE_SECONDS = 3 * HEARTBEAT_SECONDS
"""A replica that has not reported for this long is taken as gone (killed, or cut off from the store)."""


logger = logging.getLogger("toolrt.store")


class Health:
    """One replica's readiness, its reports to the store, and its `GET /healthz` (`wrap` the HTTP app)."""

    def __init__(self, rt: Runtime, endpoint: str) -> None:
        self._rt = rt
        self.runtime = rt
        self.replica = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self._detail = f"{socket.gethostname()} pid {os.getpid()} {endpoint}"
        self._store_error: str | None = None
        """Why the last report to a persistent store failed; None once one went through."""

    def problems(self) -> list[str]:
        """Why the replica is not ready (empty: ready)."""
        rt = self._rt
        last_error = rt.status().last_error
        found = [str(problem) for problem in last_error.problems] if last_error is not None else []
        if rt.snapshot.blocked is not None and not found:
            found = [str(rt.snapshot.blocked)]
        if self._store_error is not None:
            found.append(f"the store cannot be reached: {self._store_error}")
        return found

    def state(self) -> dict[str, Any]:
        """What `GET /healthz` answers; `digest` is the snapshot's `config_digest` (the same on every replica
        serving the same config, whatever its path, port or file times)."""
        status = self._rt.status()
        problems = self.problems()
        return {
            "ready": not problems,
            "digest": self._rt.snapshot.config_digest,
            "generation": status.generation,
            "replica": self.replica,
            "store": self._rt.store.engine,
            "problems": problems,
        }

    async def report(self) -> None:
        """Report this replica to a persistent store now, within a second of every swap and every
        `HEARTBEAT_SECONDS`, until cancelled; then forget it there."""
        if not self._rt.store.persistent:
            return
        reported, at = "", 0.0
        try:
            while True:
                digest = self._rt.snapshot.config_digest
                if digest != reported or time.monotonic() - at >= HEARTBEAT_SECONDS:
                    reported, at = digest, time.monotonic()
                    await anyio.to_thread.run_sync(self._report_once, digest)
                await anyio.sleep(1.0)
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await anyio.to_thread.run_sync(self._forget)

    def _report_once(self, digest: str) -> None:
        failed, self._store_error = self._store_error, None
        try:
            ready = not self.problems()
            self._rt.store.report_replica(Replica(self.replica, digest, ready, self._detail, time.time()))
        except StoreError as error:
            if failed is None:
                logger.error("cannot report this replica to the store: %s", error)
            self._store_error = str(error)
        else:
            if failed is not None:
                logger.error("the store answers again")

    def _forget(self) -> None:
        try:
            self._rt.store.drop_replica(self.replica)
        except StoreError as error:
            logger.warning("cannot remove this replica from the store: %s", error)

    def wrap(self, app: App) -> App:
        """`app` with `GET /healthz` answered here (200 ready, 503 not)."""

        async def with_health(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope.get("path") != HEALTH_PATH:
                await app(scope, receive, send)
                return
            if scope.get("method") not in ("GET", "HEAD"):
                await _answer(send, 405, {"error": "GET /healthz"})
                return
            state = self.state()
            await _answer(send, 200 if state["ready"] else 503, state)

        return with_health


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body, ensure_ascii=False).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
