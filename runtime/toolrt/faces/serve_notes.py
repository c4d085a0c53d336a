"""A call's notifications to its MCP client (`toolrt serve`): the handler's log and progress and its live
metadata as progress, sent in order from the event loop whichever thread posts them."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.exceptions import MCPDeprecationWarning

from ..call.events import CallEvent
from .serve_client import ClientNote, RequestContext


class LoopBridge:
    """Runs a callback on the event loop thread, from it or from a worker thread.

    Swap listeners run in the Reloader's worker thread, and a blocking handler's live metadata
    arrives from its worker thread; MCP sends must happen on the loop.
    """

    def __init__(self) -> None:
        self._token = anyio.lowlevel.current_token()
        self._thread = threading.get_ident()

    def call(self, function: Callable[[], None]) -> None:
        if threading.get_ident() == self._thread:
            function()
        else:
            anyio.from_thread.run_sync(function, token=self._token)


def offer(send: MemoryObjectSendStream[Any], item: Any) -> None:
    # Progress and change notices may be dropped when a slow client lets them pile up; the next
    # one carries the news just as well.
    try:
        send.send_nowait(item)
    except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass


def wants_progress_token(ctx: RequestContext) -> bool:
    meta: Mapping[str, Any] | None = ctx.meta
    if not meta:
        return False
    return meta.get("progressToken", meta.get("progress_token")) is not None


class CallNotes:
    """A call's notifications to its client (the handler's log and progress, and its live metadata as
    progress when the client sent a token), sent in order by a task started with the first one: a call
    that sends none costs no task. `post` may be called from a handler's worker thread."""

    def __init__(self, ctx: RequestContext, wants_progress: bool) -> None:
        self._ctx = ctx
        self.wants_progress = wants_progress
        self._bridge = LoopBridge()
        self._queue: deque[ClientNote] = deque()
        self._wake: anyio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def post(self, note: ClientNote) -> None:
        self._bridge.call(lambda: self._put(note))

    def metadata_listener(self, call_id: str) -> Callable[[CallEvent], None]:
        def listen(event: CallEvent) -> None:
            if event.call_id == call_id and event.kind == "metadata":
                self.post(("metadata", progress_text(event)))

        return listen

    def _put(self, note: ClientNote) -> None:
        if self._closed or len(self._queue) >= 256:  # dropped when a slow client lets them pile up
            return
        self._queue.append(note)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._drain())
        elif self._wake is not None:
            self._wake.set()

    async def _drain(self) -> None:
        count = 0.0
        while True:
            while self._queue:
                kind, note = self._queue.popleft()
                try:
                    count = await self._send(kind, note, count)
                except Exception:  # the client went away: the call's result is what matters
                    self._closed = True
                    self._queue.clear()
                    return
            if self._closed:
                return
            self._wake = anyio.Event()
            await self._wake.wait()

    async def _send(self, kind: str, note: Any, count: float) -> float:
        """Send one note; the progress count after it."""
        import warnings

        session, request_id = self._ctx.session, self._ctx.request_id
        if kind == "log":
            level, data, logger = note
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await session.send_log_message(level, data, logger=logger, related_request_id=request_id)
        elif not self.wants_progress:
            pass
        elif kind == "progress":
            progress, total, message = note
            count = max(count, float(progress))
            await session.report_progress(progress, total, message)
        else:
            count += 1
            await session.report_progress(count, None, note)
        return count

    async def finish(self) -> None:
        """Send what is queued; notes posted later are dropped."""
        self._closed = True
        if self._task is not None:
            if self._wake is not None:
                self._wake.set()
            await self._task

    def cancel(self) -> None:
        """Stop sending (the call was cancelled or failed)."""
        self._closed = True
        if self._task is not None and not self._task.done():
            self._task.cancel()


def progress_text(event: CallEvent) -> str | None:
    title = event.data.get("title")
    metadata = event.data.get("metadata") or {}
    output = event.data.get("output") or (metadata.get("output") if isinstance(metadata, Mapping) else None)
    if isinstance(output, str) and output.strip():
        return output.strip().splitlines()[-1][:200]
    return title if isinstance(title, str) else None
