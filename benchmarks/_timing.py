"""Timing helpers shared by the benchmark scripts (run as scripts: this directory is on sys.path)."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager


@contextmanager
def own_data_home() -> Iterator[None]:
    """toolrt's default data directory in a temporary one (`XDG_DATA_HOME`) while a benchmark runs: each
    sandboxed call journals its process there, and thousands of them in the person's own attribution
    journal would slow every later `toolrt` start, which reads it whole (and would slow the next run's
    loads). `XDG_DATA_HOME`, unlike `TOOLRT_DATA_DIR`, brings in no settings layer to measure."""
    before = os.environ.get("XDG_DATA_HOME")
    with tempfile.TemporaryDirectory(prefix="toolrt-bench-data-") as home:
        os.environ["XDG_DATA_HOME"] = home
        try:
            yield
        finally:
            if before is None:
                del os.environ["XDG_DATA_HOME"]
            else:
                os.environ["XDG_DATA_HOME"] = before


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
