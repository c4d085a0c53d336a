"""Hot reload: watch the config sources of the current snapshot and swap in a rebuilt one.

```python
reloader = Reloader(rt)
await reloader.run(ready=event)      # until cancelled; `event` is set once the watch is registered
```
Every batch of file changes (debounced by watchfiles) becomes one `Runtime.reload()`, run in a
worker thread so that a storm of saves never blocks calls on the event loop. A broken save keeps
the last good snapshot serving; the error is logged once per distinct set of problems on the
`toolrt.reload` logger and held in `rt.status().last_error` until a save fixes it.

The change source is injectable (`Reloader(rt, changes=<async iterable of change sets>)`) so tests
and hosts can script reloads without a filesystem watcher. watchfiles is imported here only, and
only the long-lived faces (`toolrt watch`, `toolrt serve`) import this module.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterable, Callable, Set
from dataclasses import dataclass
from pathlib import Path

import anyio
import watchfiles

from .api import Runtime
from .build.changes import ReloadStatus, SnapshotChange
from .build.snapshot import Snapshot
from .config.layers import TOOLS_DIR
from .errors import ConfigError
from .host.deprecated import deprecated

__all__ = [
    "WATCH_DEBOUNCE_MS",
    "WATCH_STEP_MS",
    "ChangeSet",
    "ReloadEvent",
    "Reloader",
    "WatchTargets",
    "watch_targets",
]

ChangeSet = Set[tuple[int, str]]
"""One debounced batch as watchfiles yields it: (change kind, path) pairs."""

logger = logging.getLogger("toolrt.reload")

WATCH_DEBOUNCE_MS = 50
"""How long watchfiles gathers changes into one batch (its default): a save of several files is one reload."""
WATCH_STEP_MS = 10
"""How often watchfiles' thread checks for changes while gathering a batch: a save reaches the reload
within about debounce + step (watchfiles' default step, 50 ms, would add ~40 ms to every reload)."""


@dataclass(frozen=True, slots=True)
class ReloadEvent:
    """The outcome of one reload, as `toolrt watch` and the MCP server report it."""

    status: ReloadStatus
    change: SnapshotChange | None
    """What the swap changed; None when nothing was swapped (same digest, or a broken config)."""
    error: ConfigError | None
    repeated: bool = False
    """The error is the same as the previous reload's (already reported once)."""
    fixed: bool = False
    """The first good reload after a broken one."""
    initial: bool = False
    """Not a reload: the handler code in use failed to import when the reloader started (its tools fail
    until a save fixes it)."""


@dataclass(frozen=True, slots=True)
class WatchTargets:
    """What to watch for one snapshot: existing directories, and the config paths that matter inside them."""

    directories: frozenset[Path]
    files: frozenset[Path]
    """Watched single files (permissions.yaml, toolrt.yaml, the locked file), present or not."""
    trees: frozenset[Path]
    """Watched directories (tools.d/ and its subdirectories holding description files)."""

    def relevant(self, path: Path) -> bool:
        """Whether a change at `path` can alter the config (editor swap files in the root do not)."""
        if path in self.files or path in self.trees:
            return True
        return any(parent in self.trees for parent in path.parents)


def watch_targets(snapshot: Snapshot) -> WatchTargets:
    """The directories to hand to watchfiles for `snapshot`.

    Files are watched through their parent directory, so that a file deleted, renamed or replaced
    atomically (written elsewhere, then renamed over) is still seen; directories are watched with
    their parent too, so that removing or re-creating them is seen. Watching is not recursive:
    a project root can hold anything, and only its config items matter.
    """
    root = snapshot.root.absolute()
    files: set[Path] = set()
    trees: set[Path] = {root / TOOLS_DIR}
    for path in snapshot.watched:
        absolute = path if path.is_absolute() else root / path
        if absolute.is_dir():
            trees.add(absolute)
        else:
            files.add(absolute)
    directories: set[Path] = {root}
    for tree in list(trees):
        if tree.is_dir():
            directories.add(tree)
            # Description files may sit one level down (tools.d/docs/x.md).
            for child in _subdirectories(tree):
                trees.add(child)
                directories.add(child)
        directories.update(_existing_parent(tree))
    for file in files:
        directories.update(_existing_parent(file))
    return WatchTargets(frozenset(directories), frozenset(files), frozenset(trees))


def _subdirectories(directory: Path) -> list[Path]:
    try:
        with os.scandir(directory) as entries:  # d_type: no stat per entry (tools.d/ may hold thousands)
            return [Path(e.path) for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _existing_parent(path: Path) -> list[Path]:
    for parent in path.parents:
        if parent.is_dir():
            return [parent]
    return []


class Reloader:
    """Turns change batches into `Runtime.reload()` calls and reports each outcome.

    Reloads are serialised: one runs at a time, and a batch that arrives meanwhile waits for it.
    Listeners (`subscribe`) run on the event loop thread after each reload.
    """

    def __init__(
        self,
        rt: Runtime,
        *,
        changes: AsyncIterable[ChangeSet] | None = None,
        debounce_ms: int = WATCH_DEBOUNCE_MS,
        step_ms: int = WATCH_STEP_MS,
    ) -> None:
        self._rt = rt
        self._changes = changes
        self._debounce_ms = debounce_ms
        self._step_ms = step_ms
        self._listeners: list[Callable[[ReloadEvent], None]] = []
        self._reported: tuple[str, ...] | None = None
        self._lock = anyio.Lock()
        self._last_change: SnapshotChange | None = None

    @property
    def status(self) -> ReloadStatus:
        return self._rt.status()

    def subscribe(self, listener: Callable[[ReloadEvent], None]) -> Callable[[], None]:
        """Be told the outcome of every reload; returns an unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def on_reload(self, listener: Callable[[ReloadEvent], None]) -> Callable[[], None]:
        """Deprecated: `subscribe(listener)`."""
        deprecated("Reloader.on_reload", "Reloader.subscribe")
        return self.subscribe(listener)

    async def reload_once(self, *, report_unchanged: bool = True) -> ReloadEvent:
        """Rebuild from disk now (in a worker thread), swap on success, report the outcome.

        With `report_unchanged=False` listeners hear of it only when it swapped or failed.
        """
        async with self._lock:
            self._last_change = None
            unsubscribe = self._rt.subscribe(self._remember, to="swaps")
            try:
                before = self._rt.status().generation
                status = await anyio.to_thread.run_sync(self._rt.reload)
            finally:
                unsubscribe()
            change = self._last_change if status.generation != before else None
            event = self._report(status, change)
        if not report_unchanged and change is None and event.error is None:
            return event
        for listener in tuple(self._listeners):
            listener(event)
        return event

    def _remember(self, change: SnapshotChange) -> None:
        # Called from the worker thread that ran the reload; read after that thread has returned.
        self._last_change = change

    def _report(self, status: ReloadStatus, change: SnapshotChange | None) -> ReloadEvent:
        error = status.last_error
        if error is None:
            fixed = self._reported is not None
            if fixed:
                logger.info("configuration fixed; serving generation %d", status.generation)
            self._reported = None
            return ReloadEvent(status, change, None, fixed=fixed)
        key = tuple(str(problem) for problem in error.problems) or (str(error),)
        repeated = key == self._reported
        if not repeated:
            self._reported = key
            logger.error("configuration invalid, still serving generation %d:\n%s", status.generation, error)
        return ReloadEvent(status, change, error, repeated)

    async def run(self, *, ready: anyio.Event | None = None) -> None:
        """Reload on every change batch until cancelled (or until a scripted source ends).

        `ready` is set once changes made from now on will be seen. The project's handler code is imported
        first (its failures are the calls' to report), so that a save that breaks it keeps this code serving.
        """
        problems = await anyio.to_thread.run_sync(self._rt.import_code)
        if problems:
            status = self._rt.status()
            error = status.last_error or ConfigError(problems)
            self._reported = tuple(str(problem) for problem in error.problems)
            logger.error("handler code does not import; its tools fail until it is fixed:\n%s", ConfigError(problems))
            event = ReloadEvent(status, None, ConfigError(problems), initial=True)
            for listener in tuple(self._listeners):
                listener(event)
        if self._changes is not None:
            if ready is not None:
                ready.set()
            async for _batch in self._changes:
                await self.reload_once()
            return
        recheck = False
        while True:
            targets = watch_targets(self._rt.snapshot)
            await self._watch(targets, ready, recheck=recheck)
            ready, recheck = None, True

    async def _watch(self, targets: WatchTargets, ready: anyio.Event | None, *, recheck: bool) -> None:
        """Watch `targets` until a reload changes what must be watched (then return to re-arm).

        With `recheck`, reload once the watch is live: a save made while re-arming had no watcher.
        """
        stop = anyio.Event()
        send, receive = anyio.create_memory_object_stream[ChangeSet](1)

        async def pump() -> None:
            async with send:
                async for batch in watchfiles.awatch(
                    *sorted(targets.directories),
                    watch_filter=lambda _change, path: targets.relevant(Path(path)),
                    debounce=self._debounce_ms,
                    step=self._step_ms,
                    stop_event=stop,
                    recursive=False,
                    ignore_permission_denied=True,
                ):
                    try:
                        await send.send(batch)
                    except anyio.BrokenResourceError:
                        return  # the consumer left to re-arm the watch

        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            # The pump's first step registers the watch synchronously (before its first await), and
            # tasks start in order, so once this checkpoint returns the watch is live.
            await anyio.sleep(0)
            if ready is not None:
                ready.set()
            try:
                if recheck:
                    await self.reload_once(report_unchanged=False)
                    if watch_targets(self._rt.snapshot) != targets:
                        return
                async with receive:
                    async for _batch in receive:
                        await self.reload_once()
                        if watch_targets(self._rt.snapshot) != targets:
                            break
            finally:
                # The watcher thread only notices `stop` (not cancellation), so always set it; closing
                # the receiving end frees a pump blocked on sending a batch nobody will read.
                stop.set()
                receive.close()
