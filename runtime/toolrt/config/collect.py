"""Pausing the cyclic garbage collector while a config is built, where the host process opts in.

Loading thousands of tool files allocates millions of small containers and almost no reference
cycles; the collector's generation passes then walk everything built so far again and again (a
quarter of a 10,000-file load). Reference counting still frees what the build drops; the collector
runs again, as usual, once the build is over. The collector is the whole process's, so a library
leaves it alone: only a host that opts in (`pause_collector_during_builds`, as the `toolrt` command
and `toolrt serve` do) has its builds pause it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "pause_collector_during_builds"]

_lock = threading.Lock()
_depth = 0  # process-wide on purpose: the cyclic collector is the process's, not a Runtime's
_was_enabled = False
_opted_in = False


def pause_collector_during_builds(enabled: bool = True) -> bool:
    """Let builds pause the process's cyclic garbage collector (`enabled`), or stop letting them; returns
    the previous choice (to put back)."""
    global _opted_in
    previous, _opted_in = _opted_in, enabled
    return previous


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable `gc` inside the block when the host opted in; nested and concurrent blocks re-enable it when
    the last one ends. Without the opt-in the block changes nothing."""
    global _depth, _was_enabled
    if not _opted_in:
        yield
        return
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
