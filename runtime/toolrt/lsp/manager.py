"""Language servers of one Runtime: started lazily per (server, root), kept alive, restarted with
back-off after a crash, and shut down with the Runtime.

pygls is asyncio-based, and a Runtime may be called from any event loop (asyncio, trio through
anyio, or a fresh loop per `call_sync`). So the servers live on a loop of their own, in one daemon
thread per Runtime, started on first use; a caller's coroutine hands work to it and awaits the
answer (on asyncio directly, on other loops through a worker thread). Nothing here blocks the
caller's loop, and a call that is cancelled cancels its work on the server loop.

Bad servers never break an edit: a server that fails to start, exits, sends malformed messages
or never answers leaves the edit's result without diagnostics (bounded by `lsp.wait`), is logged
(`toolrt.lsp`: start, crash, restart), and is tried again after a back-off of 0, 1, 2, 5, 10,
30, then 60 seconds (reset after a minute of running). Every server runs in a process session of
its own; `close` ends each one (LSP `shutdown`/`exit`, then SIGKILL to its process group) and an
`atexit` hook does the same for a Runtime nobody closed.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import logging
import os
import stat
import threading
import time
import weakref
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..beneath import is_within, open_checked
from ..errors import LspError, PathChanged
from ..sandbox.plan import SandboxPlan
from .client import ServerClient
from .report import Diagnostic
from .servers import ServerDef, find_root, resolve_program

__all__ = ["LspConfig", "LspManager", "ServerStatus"]

logger = logging.getLogger("toolrt.lsp")

_T = TypeVar("_T")
BACKOFF: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
"""Seconds before the next start after 1, 2, 3... failures in a row."""
_HEALTHY = 60.0
"""A server that ran this long before it crashed starts its back-off from the beginning again."""
_EAGER_RESTARTS = 5
"""Crashes in a row after which a server is restarted only when a file needs it again."""
START_TIMEOUT = 30.0
"""How long a start (process and `initialize`) may take before the server counts as failed."""


@dataclass(frozen=True, slots=True)
class LspConfig:
    """What the servers of one snapshot are: its settings, root, sandbox and environment."""

    servers: tuple[ServerDef, ...]
    root: Path
    env: Mapping[str, str]
    sandbox: SandboxPlan | None
    wait: float = 2.0
    path: str = ""
    """The PATH commands are looked up on."""


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """One server of a Runtime, for `Runtime.language_servers()` and `toolrt serve`'s log."""

    name: str
    root: Path
    state: str
    """`starting`, `running`, `failed` (waiting for its back-off) or `stopped`."""
    pid: int | None
    restarts: int
    last_error: str


@dataclass(eq=False)
class _Entry:
    server: ServerDef
    root: Path
    program: str
    config: LspConfig
    client: ServerClient | None = None
    starting: asyncio.Task[ServerClient] | None = None
    failures: int = 0
    retry_at: float = 0.0
    restarts: int = 0
    last_error: str = ""
    documents: set[Path] = field(default_factory=set)
    restart_handle: asyncio.TimerHandle | None = None


class LspManager:
    """The language servers of one Runtime (see the module docstring)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._entries: dict[tuple[str, Path], _Entry] = {}
        self._lock = threading.Lock()
        self._closed = False
        _live.add(self)

    # --- the server thread ------------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._closed:
                raise LspError("language servers are shut down: the runtime was closed")
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name="toolrt-lsp", daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            return self._loop

    async def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        """Run `coroutine` on the server loop and await it from the caller's loop, whatever that is."""
        try:
            loop = self._ensure_loop()
        except LspError:
            coroutine.close()
            raise
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            import sniffio

            library = sniffio.current_async_library()
        except Exception:
            library = ""
        try:
            if library == "asyncio":
                return await asyncio.wrap_future(future)
            import anyio.to_thread

            return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        except BaseException:
            future.cancel()
            raise

    # --- public, from any thread or loop ----------------------------------------------------------

    async def diagnostics(
        self, config: LspConfig, files: Sequence[Path], deleted: Sequence[Path] = ()
    ) -> Mapping[Path, list[Diagnostic]]:
        """Tell the servers of `files` their new content and wait at most `config.wait` seconds for their
        diagnostics; returns what the servers of those files know (every file with diagnostics, the
        changed ones first). Never raises for a server's failure: its files are simply missing."""
        if not config.servers or config.wait <= 0:
            return {}
        return await self._run(self._diagnostics(config, files, deleted))

    async def query(
        self, config: LspConfig, path: Path, operation: Any, timeout: float, text: str | None = None
    ) -> list[tuple[str, Any]]:
        """Open `path` in each server of it (with `text`, what the caller read from the descriptor it
        checked, or else read here as `_read_text` does) and run `operation(client)` (a coroutine
        function); returns (server name, result) per server that answered (`unsupported()` from one
        that lacks the feature).

        Raises:
            LspError: no server serves the file, or every server of it failed (the message names each).
        """
        return await self._run(self._query(config, path, operation, timeout, text))

    def warm(self, config: LspConfig, path: Path) -> None:
        """Start the servers of `path` and open it in them, without waiting for anything (a read does
        this, so the first edit after it finds the server running)."""
        try:
            loop = self._ensure_loop()
        except LspError:
            return
        asyncio.run_coroutine_threadsafe(self._warm(config, path), loop)

    def status(self) -> list[ServerStatus]:
        found = []
        for entry in list(self._entries.values()):
            client = entry.client
            if client is not None and client.alive:
                state = "running"
            elif entry.starting is not None and not entry.starting.done():
                state = "starting"
            elif entry.last_error:
                state = "failed"
            else:
                state = "stopped"
            pid = client.pid if client is not None and client.alive else None
            found.append(ServerStatus(entry.server.name, entry.root, state, pid, entry.restarts, entry.last_error))
        return found

    def close(self, timeout: float = 5.0) -> None:
        """Shut every server down and stop the thread (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            loop, thread = self._loop, self._thread
        _live.discard(self)
        if loop is None or thread is None:
            return
        if loop.is_running():
            future = asyncio.run_coroutine_threadsafe(self._stop_all(), loop)
            try:
                future.result(timeout)
            except Exception:
                self._kill_all()
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()

    def _kill_all(self) -> None:
        for entry in list(self._entries.values()):
            if entry.client is not None:
                entry.client.kill()

    # --- on the server loop -----------------------------------------------------------------------

    def _servers_for(self, config: LspConfig, path: Path) -> list[_Entry]:
        root = config.root
        if not is_within(path, root):
            return []
        found = []
        for server in config.servers:
            if not server.serves(path):
                continue
            program = resolve_program(server.command[0], root, path=config.path)
            if program is None:
                continue
            server_root = find_root(server, path, root)
            key = (server.name, server_root)
            entry = self._entries.get(key)
            if entry is not None and (entry.server != server or entry.config != config or entry.program != program):
                self._entries.pop(key)
                self._forget(entry)
                entry = None
            if entry is None:
                entry = self._entries[key] = _Entry(server, server_root, program, config)
            found.append(entry)
        return found

    def _forget(self, entry: _Entry) -> None:
        """An entry whose settings changed: stop its server in the background."""
        if entry.restart_handle is not None:
            entry.restart_handle.cancel()
        if entry.starting is not None:
            entry.starting.cancel()
        if entry.client is not None:
            asyncio.get_running_loop().create_task(entry.client.stop())

    async def _client(self, entry: _Entry, deadline: float) -> ServerClient:
        """The entry's running client, starting it if needed; waits for a start until `deadline`
        (the start goes on in the background past it).

        Raises:
            LspError: the server failed (and its back-off has not run out), or did not start in time.
        """
        loop = asyncio.get_running_loop()
        if entry.client is not None and entry.client.alive:
            return entry.client
        if entry.starting is None or entry.starting.done():
            if loop.time() < entry.retry_at:
                wait = entry.retry_at - loop.time()
                raise LspError(f"{entry.last_error} (toolrt tries it again in {wait:.0f} s)")
            entry.starting = loop.create_task(self._start(entry))
            entry.starting.add_done_callback(_consume)
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise LspError(f"language server {entry.server.name} is still starting")
        try:
            return await asyncio.wait_for(asyncio.shield(entry.starting), remaining)
        except asyncio.TimeoutError:
            raise LspError(
                f"language server {entry.server.name} is still starting (waited {remaining:.1f} s); try again"
            ) from None

    async def _start(self, entry: _Entry) -> ServerClient:
        loop = asyncio.get_running_loop()
        config = entry.config
        env = {**config.env, **dict(entry.server.env)}
        client = ServerClient(
            entry.server,
            entry.root,
            program=entry.program,
            env=env,
            sandbox=config.sandbox,
            on_exit=lambda client, code: self._exited(entry, client, code),
        )
        what = "restarting" if entry.restarts or entry.failures else "starting"
        logger.info("language server %s %s for %s", entry.server.name, what, entry.root)
        try:
            await client.start(START_TIMEOUT)
        except asyncio.CancelledError:
            client.stopping = True
            await asyncio.shield(client.stop(1.0))
            raise
        except BaseException as error:
            client.stopping = True
            await client.stop(1.0)
            message = str(error) if isinstance(error, LspError) else f"{type(error).__name__}: {error}"
            self._failed(entry, message or f"language server {entry.server.name} failed to start")
            if isinstance(error, LspError):
                raise
            raise LspError(entry.last_error) from None
        entry.client = client
        entry.last_error = ""
        logger.info("language server %s running (pid %s) for %s", entry.server.name, client.pid, entry.root)
        for path in sorted(entry.documents):  # what the server before it had open
            with contextlib.suppress(OSError, UnicodeDecodeError):
                client.touch(path, await loop.run_in_executor(None, _read_text, path))
        return client

    def _failed(self, entry: _Entry, message: str) -> None:
        loop = asyncio.get_running_loop()
        entry.failures += 1
        delay = BACKOFF[min(entry.failures - 1, len(BACKOFF) - 1)]
        entry.retry_at = loop.time() + delay
        entry.last_error = message
        logger.warning("%s; next try in %g s", message, delay)

    def _exited(self, entry: _Entry, client: ServerClient, code: int) -> None:
        if client.stopping or entry.client is not client:
            return
        loop = asyncio.get_running_loop()
        entry.client = None
        if time.monotonic() - client.started_at >= _HEALTHY:
            entry.failures = 0
        message = f"language server {entry.server.name} (pid {client.pid}) crashed with exit status {code}"
        self._failed(entry, message)
        entry.restarts += 1
        if entry.failures <= _EAGER_RESTARTS and not self._closed:
            delay = max(0.0, entry.retry_at - loop.time())
            entry.restart_handle = loop.call_later(delay, self._restart, entry)

    def _restart(self, entry: _Entry) -> None:
        entry.restart_handle = None
        if self._closed or self._entries.get((entry.server.name, entry.root)) is not entry:
            return
        if entry.client is None and (entry.starting is None or entry.starting.done()):
            entry.starting = asyncio.get_running_loop().create_task(self._start(entry))
            entry.starting.add_done_callback(_consume)

    async def _diagnostics(
        self, config: LspConfig, files: Sequence[Path], deleted: Sequence[Path]
    ) -> Mapping[Path, list[Diagnostic]]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + config.wait
        self._close_deleted(config, deleted)
        work = [(path, entry) for path in files for entry in self._servers_for(config, path)]
        if not work:
            return {}
        texts = await _read_texts(loop, {path for path, _ in work})

        async def one(path: Path, entry: _Entry) -> ServerClient | None:
            if path not in texts:
                return None
            # Kept before the wait: a server that finishes starting after `deadline` still opens the file
            # (`_start` opens every kept document), instead of never hearing of a file written meanwhile.
            entry.documents.add(path)
            try:
                client = await self._client(entry, deadline)
                since = client.touch(path, texts[path])
                await client.wait_diagnostics(path.as_uri(), since, deadline)
            except LspError as error:
                logger.debug("no diagnostics for %s: %s", path, error)
                return None
            return client

        answered = await asyncio.gather(*(one(path, entry) for path, entry in work))
        return _collected(files, list(dict.fromkeys(c for c in answered if c is not None)))

    def _close_deleted(self, config: LspConfig, deleted: Sequence[Path]) -> None:
        """Close the deleted files in every server that has them open."""
        for path in deleted:
            for entry in self._servers_for(config, path):
                entry.documents.discard(path)
                if entry.client is not None and entry.client.alive:
                    entry.client.close_document(path)

    async def _warm(self, config: LspConfig, path: Path) -> None:
        loop = asyncio.get_running_loop()
        for entry in self._servers_for(config, path):
            try:
                client = await self._client(entry, loop.time() + START_TIMEOUT)
                text = await loop.run_in_executor(None, _read_text, path)
            except (LspError, OSError, UnicodeDecodeError) as error:
                logger.debug("could not open %s in %s: %s", path, entry.server.name, error)
                continue
            if path.as_uri() not in client.open_documents:  # an edit that came meanwhile sent newer text
                entry.documents.add(path)
                client.touch(path, text)

    async def _query(
        self, config: LspConfig, path: Path, operation: Any, timeout: float, text: str | None
    ) -> list[tuple[str, Any]]:
        loop = asyncio.get_running_loop()
        entries = self._servers_for(config, path)
        if not entries:
            configured = ", ".join(s.name for s in config.servers if s.serves(path))
            detail = (
                f" (configured for it but not installed: {configured})"
                if configured
                else " (no server is configured for it)"
            )
            raise LspError(f"No LSP server available for this file type{detail}.")
        if text is None:
            text = await loop.run_in_executor(None, _read_text, path)
        deadline = loop.time() + START_TIMEOUT
        results: list[tuple[str, Any]] = []
        errors: list[str] = []
        for entry in entries:
            try:
                client = await self._client(entry, deadline)
                entry.documents.add(path)
                client.touch(path, text)
                result = await operation(client, timeout)
            except LspError as error:
                errors.append(str(error))
                continue
            results.append((entry.server.name, result))
        if not results and errors:
            raise LspError("; ".join(errors))
        return results

    async def _stop_all(self) -> None:
        entries = list(self._entries.values())
        for entry in entries:
            if entry.restart_handle is not None:
                entry.restart_handle.cancel()
            if entry.starting is not None and not entry.starting.done():
                entry.starting.cancel()
        await asyncio.gather(*(e.starting for e in entries if e.starting is not None), return_exceptions=True)
        clients = [e.client for e in entries if e.client is not None]
        await asyncio.gather(*(c.stop() for c in clients), return_exceptions=True)
        for entry in entries:
            if entry.client is not None:
                entry.client.kill()
                entry.client = None
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)


_UNSUPPORTED: Any = object()
"""What an operation returns for a server that lacks the capability."""


def unsupported() -> Any:
    return _UNSUPPORTED


def _consume(task: asyncio.Task[Any]) -> None:
    if not task.cancelled():
        task.exception()  # logged by `_failed`; nobody awaits a background restart


async def _read_texts(loop: asyncio.AbstractEventLoop, paths: set[Path]) -> dict[Path, str]:
    """The text of each of `paths` that can be read (read off the event loop)."""
    texts: dict[Path, str] = {}
    for path in paths:
        try:
            texts[path] = await loop.run_in_executor(None, _read_text, path)
        except (OSError, UnicodeDecodeError):
            continue
    return texts


def _collected(files: Sequence[Path], clients: list[ServerClient]) -> dict[Path, list[Diagnostic]]:
    """Every client's diagnostics of `files` (each listed, empty or not), then those they published for other files."""
    found: dict[Path, list[Diagnostic]] = {}
    for path in files:
        for client in clients:
            found.setdefault(path, []).extend(client.diagnostics.get(path.as_uri(), ()))
    for client in clients:
        for uri, items in client.diagnostics.items():
            other = _uri_path(uri)
            if other is not None and other not in files and items:
                found.setdefault(other, []).extend(items)
    return found


def _read_text(path: Path) -> str:
    """The text of the regular file at the real `path`, opened as `beneath` opens (no symlink followed,
    the descriptor's path compared): a name swapped for a link to another file since a tool checked it
    sends nothing to a server (an OSError, which every caller skips)."""
    try:
        fd = open_checked(path, os.O_RDONLY | os.O_NONBLOCK)
    except PathChanged as error:
        raise OSError(errno.ELOOP, str(error), str(path)) from error
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return stream.read().decode("utf-8")


def _uri_path(uri: str) -> Path | None:
    if not uri.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(uri).path))


_live: weakref.WeakSet[LspManager] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """A Runtime nobody closed still leaves no server behind when the interpreter exits."""
    for manager in list(_live):
        with contextlib.suppress(Exception):
            manager.close(timeout=2.0)


def process_alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (for tests and `toolrt lsp check`)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
