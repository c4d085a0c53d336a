"""Timing helpers shared by the benchmark scripts (run as scripts: this directory is on sys.path)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    """The median wall time of `repeat` runs of `fn`, in milliseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)
