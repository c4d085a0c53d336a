"""`toolrt serve` hides its start-up heap from the cyclic collector, and a settle releases what a
swap left behind."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from toolrt.faces.serve import settle_heap


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture
def thawed() -> Iterator[None]:
    yield
    gc.unfreeze()  # whatever a test froze goes back to the collector


@pytest.mark.usefixtures("thawed")
def test_a_settled_heap_is_frozen_and_the_next_settle_frees_its_dropped_cycles() -> None:
    node = _Node()
    alive = weakref.ref(node)
    settle_heap()
    assert gc.get_freeze_count() > 0
    del node
    gc.collect()
    assert alive() is not None, "a frozen cycle waits for the next settle"
    settle_heap()  # what a snapshot swap does: the old snapshot's cycles go
    assert alive() is None
    assert gc.get_freeze_count() > 0
