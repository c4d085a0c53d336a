"""Pausing the cyclic garbage collector while a config is built, where the host process opts in.

Loading thousands of tool files allocates millions of small containers and almost no reference
cycles; the collector's generation passes then walk everything built so far again and again (a
quarter of a 10,000-file load). Reference counting still frees what the build drops; the collector
runs again, as usual, once the build is over, with what the build kept already in its oldest generation.
The collector is the whole process's, so a library leaves it alone: only a host that opts in
(`pause_collector_during_builds`, as the `toolrt` command and `toolrt serve` do) has its builds pause it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "keep_heap_until_exit", "pause_collector_during_builds"]

_lock = threading.Lock()
_depth = 0  # process-wide on purpose: the cyclic collector is the process's, not a Runtime's
_was_enabled = False
_opted_in = False
_age = False


def pause_collector_during_builds(enabled: bool = True) -> bool:
    """Let builds pause the process's cyclic garbage collector (`enabled`), or stop letting them; returns
    the previous choice (to put back)."""
    global _opted_in
    previous, _opted_in = _opted_in, enabled
    return previous


@contextmanager
def collector_paused(*, age: bool = False) -> Iterator[None]:
    """Disable `gc` inside the block when the host opted in; nested and concurrent blocks re-enable it when
    the last one ends. Without the opt-in the block changes nothing.

    `age`: what the blocks kept goes to the oldest generation when the last one ends (`_age_young`); for
    a cold build (a new Runtime), whose result is what a process keeps. A reload does not ask: checking
    whether the heap is frozen walks the frozen objects, which `toolrt serve` keeps many of."""
    global _depth, _was_enabled, _age
    if not _opted_in:
        yield
        return
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
        _age = _age or age
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _was_enabled and _age:
                    _age_young()
                _age = False
                if _was_enabled:
                    gc.enable()


def keep_heap_until_exit() -> None:
    """Put every object alive now in the permanent generation (`gc.freeze()`) when the host opted in: the
    `toolrt` command calls this once a command's work is done and its process is about to end.

    The interpreter's shutdown runs full collections, which would walk every module, tool and rule the
    command loaded (a seventh of a `toolrt validate`) to free nothing the exit does not free anyway.
    What is allocated afterwards (the report) is collected as usual. Without the opt-in (a library, a
    test calling `main(argv)`) it does nothing."""
    if _opted_in:
        gc.freeze()


def _age_young() -> None:
    """Move what the block left alive into the oldest generation without a collector pass.

    Everything allocated while paused is still young: the first young collection after `gc.enable()`
    would walk all of it, the next middle one again, and only then hand it to the oldest generation
    (a tenth of a 10,000-file load). `gc.freeze()` then `gc.unfreeze()` moves it there directly; a
    cycle among it is freed by the next full collection, as any old object's is. Skipped while a
    process keeps its heap frozen (`toolrt serve`'s `settle_heap`), whose frozen objects must stay so.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
