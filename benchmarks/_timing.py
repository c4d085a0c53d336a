"""Timing helpers shared by the benchmark scripts (run as scripts: this directory is on sys.path)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Sequence


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    """The median wall time of `repeat` runs of `fn`, in milliseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def interleaved_medians(
    ours: Callable[[int], Awaitable[object]], base: Callable[[int], Awaitable[object]], loops: int, repeats: int
) -> tuple[float, float]:
    """Median seconds per run of `ours(i)` and `base(i)`, each timed over `loops` runs, `repeats` times.

    Both are warmed first (imports, caches); the timed loops alternate so machine drift hits both alike.
    """

    async def per_run(fn: Callable[[int], Awaitable[object]], count: int) -> float:
        start = time.perf_counter()
        for index in range(count):
            await fn(index)
        return (time.perf_counter() - start) / count

    for fn in (ours, base):
        await per_run(fn, max(10, loops // 10))
    ours_times, base_times = [], []
    for _ in range(repeats):
        ours_times.append(await per_run(ours, loops))
        base_times.append(await per_run(base, loops))
    return statistics.median(ours_times), statistics.median(base_times)


def print_table(rows: Sequence[tuple[str, str]]) -> None:
    """Label and value columns, the labels padded to the longest."""
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value:>12}")
