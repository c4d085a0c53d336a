"""`toolrt serve`'s heap: what start-up built is taken out of the cyclic collector's rounds
(`settle_heap`), and settled again after each snapshot swap once the server is quiet (`HeapSettler`)."""

from __future__ import annotations

import gc
import time

import anyio

SETTLE_IDLE_SECONDS = 0.5
"""After a swap, the heap is settled (`settle_heap`) once no request has started for this long: a full
collection takes tens of milliseconds, which would otherwise delay the `list_changed` notification and
the `tools/list` the client sends on it."""
SETTLE_LATEST_SECONDS = 10.0
"""A server that never goes quiet settles this long after a swap all the same (the swapped-out snapshot's
cycles are frozen until a settle)."""


class HeapSettler:
    """Settles the heap after each swap's notifications, once requests pause; one per server."""

    def __init__(self) -> None:
        self.last_request = 0.0
        """When the last `tools/list` or `tools/call` started (`time.monotonic`): settling waits for quiet."""
        self._unsettled: anyio.Event | None = None
        """Set when a swap left a heap to settle (made by `settle_when_idle`, which waits on it)."""

    def swapped(self) -> None:
        """A swap's notifications have gone out: the heap is to settle."""
        if self._unsettled is not None:
            self._unsettled.set()

    async def settle_when_idle(self, idle: float = SETTLE_IDLE_SECONDS, latest: float = SETTLE_LATEST_SECONDS) -> None:
        """Settle the heap (`settle_heap`) after each swap's notifications have gone out, once no
        `tools/list` or `tools/call` has started (`last_request`) for `idle` seconds (or `latest` seconds after
        the swap on a server that never goes quiet): never on the path from a save to the notification and the new
        listing a client asks for on it. Several swaps in a row settle once."""
        while True:
            self._unsettled = unsettled = anyio.Event()
            await unsettled.wait()
            deadline = time.monotonic() + latest
            quiet = min(idle, latest)
            while quiet > 0:
                await anyio.sleep(quiet)
                now = time.monotonic()
                quiet = min(self.last_request + idle, deadline) - now
            settle_heap()


def settle_heap() -> None:
    """Take what is alive now out of the cyclic garbage collector's rounds (`gc.freeze`), after a
    collection; called once the server is built, and again after snapshot swaps once the server is
    idle (`HeapSettler.settle_when_idle`).

    A server's heap is mostly what start-up built and keeps for good (the SDK, pydantic's schemas,
    toolrt's modules and snapshot), yet every full collection walks all of it again: on the echo
    benchmark that made toolrt's server spend about a third more CPU per call than the SDK's, whose
    heap is smaller. Frozen objects are still freed by reference counting; only cycles among them
    wait for the next settle, whose `gc.unfreeze` and collection first release the swapped-out
    snapshot. `run_serve` unfreezes when it returns, so an embedding process gets its heap back.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()
