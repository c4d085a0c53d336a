"""One running language server: pygls's JSON-RPC client over the stdio of a sandboxed process.

pygls starts servers with `asyncio.create_subprocess_exec`, outside any sandbox; here the process
is started by `toolrt.execute.spawn.open_process` (the OS sandbox every tool process gets, network
off) and pygls's message loop reads and writes its pipes through two small adapters. Everything
in this module runs on the language-server thread's asyncio loop (`toolrt.lsp.manager`).

What toolrt sends is built from lsprotocol's typed models; what servers send back is kept as plain
JSON. Measured reason: lsprotocol 2025.0.0 cannot structure pylsp's own `initialize` result (its
`notebookDocumentSync` selector has no structure hook), so typed decoding made a working server
unusable; the few fields toolrt reads are checked where they are read instead.

A server that sends malformed messages is logged and otherwise ignored (the request it owed times
out); one that exits fails every pending request at once with its exit status and the last lines
it wrote to stderr.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from ..errors import LspError
from ..sandbox.plan import SandboxPlan
from .report import Diagnostic
from .servers import ServerDef, language_id

__all__ = ["ServerClient"]

logger = logging.getLogger("toolrt.lsp")

_MAX_HEADER = 8 * 1024
_MAX_BODY = 64 * 1024 * 1024
_STDERR_TAIL = 2000
_QUIET = 0.15
"""After the first diagnostics of a change that carry no version, how long more may still arrive
(OpenCode's debounce); diagnostics that name the version just sent end the wait at once."""


class _Reader:
    """`readline`/`readexactly` (what pygls's loop wants) over a process's stdout stream."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._buffer = bytearray()

    async def _fill(self) -> bool:
        try:
            data = await self._stream.receive(65536)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            return False
        self._buffer += data
        return True

    async def readline(self) -> bytes:
        while b"\n" not in self._buffer:
            if len(self._buffer) > _MAX_HEADER or not await self._fill():
                return b""  # a header line this long is no header: end the connection
        index = self._buffer.index(b"\n") + 1
        line = bytes(self._buffer[:index])
        del self._buffer[:index]
        return line

    async def readexactly(self, size: int) -> bytes:
        if size > _MAX_BODY:
            return b""
        while len(self._buffer) < size:
            if not await self._fill():
                return b""
        body = bytes(self._buffer[:size])
        del self._buffer[:size]
        return body


class _Writer:
    """pygls's writer: messages queued in order and written by one task."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._run())

    def write(self, data: bytes) -> None:
        self._queue.put_nowait(data)

    def close(self) -> None:
        self._queue.put_nowait(None)

    async def _run(self) -> None:
        while (data := await self._queue.get()) is not None:
            try:
                await self._stream.send(data)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                return  # the exit watcher reports the server's end


def _raw_converter() -> Any:
    """pygls's converter, except that incoming params and results stay plain JSON (pygls would make
    namedtuples of them, which cannot hold every JSON key)."""
    from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, default_converter

    converter = default_converter()  # type: ignore[no-untyped-call]
    for message in (JsonRPCRequestMessage, JsonRPCResponseMessage, JsonRPCNotification):
        converter.register_structure_hook(message, lambda data, cls: cls(**data))
    return converter


def _ignore(params: Any) -> None:
    return None


def _plain_function(handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """pygls marks each handler with attributes, which a bound method cannot carry."""

    def handle(params: Any) -> Any:
        return handler(params)

    return handle


def _diagnostic(item: Any) -> Diagnostic | None:
    """A published diagnostic, or None when it is malformed."""
    try:
        start = item["range"]["start"]
        severity = item.get("severity") or 1
        return Diagnostic(
            int(start["line"]),
            int(start["character"]),
            str(item["message"]),
            int(severity),
            str(item.get("source") or ""),
        )
    except (KeyError, TypeError, ValueError):
        return None


class ServerClient:
    """A started language server for one (server, root), and what it told about each document."""

    def __init__(
        self,
        server: ServerDef,
        root: Path,
        *,
        program: str,
        env: Mapping[str, str],
        sandbox: SandboxPlan | None,
        on_exit: Callable[[ServerClient, int], None],
    ) -> None:
        self.server = server
        self.root = root
        self._argv = [program, *server.command[1:]]
        self._env = dict(env)
        self._sandbox = sandbox
        self._on_exit = on_exit
        self.pid: int | None = None
        self.started_at = 0.0
        self.capabilities: Any = None
        self.exit_code: int | None = None
        self.stopping = False
        self.stderr_tail = b""
        self.diagnostics: dict[str, list[Diagnostic]] = {}
        self._published: dict[str, int] = {}
        self._waiters: dict[str, asyncio.Event] = {}
        self._versions: dict[str, int] = {}
        self._current: dict[str, bool] = {}
        """Whether the last diagnostics of a document named the version the server has (no more will come)."""
        self._process: Any = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._client: Any = None

    @property
    def alive(self) -> bool:
        return self._process is not None and self.exit_code is None

    def describe(self) -> str:
        return f"{self.server.name} ({' '.join(self._argv)})"

    # --- life -------------------------------------------------------------------------------------

    async def start(self, timeout: float) -> None:
        """Start the process and complete the `initialize` handshake within `timeout` seconds.

        Raises:
            LspError: the program cannot be started, exits, or does not answer `initialize` in time.
        """
        from lsprotocol import types
        from pygls.client import JsonRPCClient
        from pygls.io_ import run_async

        from ..execute.spawn import open_process

        client = JsonRPCClient(converter_factory=_raw_converter)
        self._client = client
        handlers: dict[str, Callable[[Any], Any]] = {
            types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: self._published_diagnostics,
            types.WORKSPACE_CONFIGURATION: self._configuration,
            types.WORKSPACE_WORKSPACE_FOLDERS: lambda params: [self._folder()],
        }
        for method in (
            types.CLIENT_REGISTER_CAPABILITY,
            types.CLIENT_UNREGISTER_CAPABILITY,
            types.WINDOW_WORK_DONE_PROGRESS_CREATE,
            types.WINDOW_LOG_MESSAGE,
            types.WINDOW_SHOW_MESSAGE,
            types.PROGRESS,
            "telemetry/event",
        ):
            handlers[method] = _ignore
        for method, handler in handlers.items():
            client.feature(method)(_plain_function(handler))
        client.report_server_error = self._server_error  # type: ignore[method-assign]
        try:
            self._process = await open_process(
                self._argv,
                stdin=subprocess.PIPE,
                cwd=self.root,
                env=self._env,
                sandbox=self._sandbox,
                split_stderr=True,
            )
        except OSError as error:
            raise LspError(f"language server {self.describe()} could not be started: {error}") from None
        self.pid = self._process.pid
        self.started_at = time.monotonic()
        writer = _Writer(self._process.stdin)
        client.protocol.set_writer(writer)
        loop = asyncio.get_running_loop()
        self._tasks = [
            writer.task,
            loop.create_task(
                self._read(
                    run_async(
                        stop_event=client._stop_event,
                        reader=_Reader(self._process.stdout),
                        protocol=client.protocol,
                        logger=logger,
                        error_handler=client.report_server_error,
                    )
                )
            ),
            loop.create_task(self._drain_stderr()),
            loop.create_task(self._watch_exit()),
        ]
        params = types.InitializeParams(
            process_id=os.getpid(),
            root_uri=self.root.as_uri(),
            root_path=str(self.root),
            workspace_folders=[self._folder()],
            initialization_options=self.server.initialization_options,
            capabilities=_CLIENT_CAPABILITIES(),
            client_info=types.ClientInfo(name="toolrt", version="0.2.0"),
        )
        result = await self.request(types.INITIALIZE, params, timeout, what="initialize")
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        self.capabilities = capabilities if isinstance(capabilities, dict) else {}
        client.protocol.notify(types.INITIALIZED, types.InitializedParams())
        if self.server.initialization != "null":
            client.protocol.notify(
                types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                types.DidChangeConfigurationParams(settings=self.server.initialization_options),
            )

    async def stop(self, timeout: float = 2.0) -> None:
        """`shutdown`, `exit`, then SIGKILL to the process group if it is still there after `timeout`."""
        self.stopping = True
        if self._process is None:
            return
        if self.alive and self.capabilities is not None:
            with contextlib.suppress(LspError):
                await self.request("shutdown", None, timeout / 2, what="shutdown")
            with contextlib.suppress(Exception):
                self._client.protocol.notify("exit", None)
        with contextlib.suppress(Exception):
            self._client.protocol.writer.close()
        try:
            await asyncio.wait_for(self._exited(), timeout / 2)
        except asyncio.TimeoutError:
            self.kill()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._exited(), timeout)
        for task in self._tasks:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self._process.aclose()

    def kill(self) -> None:
        """SIGKILL to the server's process group (it runs in a session of its own) and to itself."""
        if self.pid is None or self.exit_code is not None:
            return
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)

    async def _exited(self) -> None:
        while self.exit_code is None:
            await asyncio.sleep(0.02)

    async def _watch_exit(self) -> None:
        code = await self._process.wait()
        self.exit_code = code
        self._client._stop_event.set()
        self._client.protocol.writer.close()  # ends the writer task
        reason = LspError(f"language server {self.describe()} exited with status {code}{self._stderr_note()}")
        for future in list(self._client.protocol._request_futures.values()):
            if not future.done():
                future.set_exception(reason)
        for event in self._waiters.values():
            event.set()
        self._on_exit(self, code)
        if not self.stopping:  # a crash: nobody calls `stop`, so the pipes are released here
            await self._release()

    async def _release(self) -> None:
        """Close an exited server's pipes once its reader and stderr drain have seen the end (bounded)."""
        others = [task for task in self._tasks if task is not asyncio.current_task()]
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*others, return_exceptions=True), 2.0)
        with contextlib.suppress(Exception):
            await self._process.aclose()

    async def _read(self, loop: Any) -> None:
        """pygls's message loop; when it ends while the process lives on (a header it cannot parse, a
        body past the size limit), the server is stopped, so the exit watcher restarts it."""
        await loop
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._exited(), 1.0)  # end of output at exit: let the exit watcher see it
        if self.exit_code is None and not self.stopping:
            logger.warning("language server %s broke the protocol (unreadable message); stopping it", self.describe())
            self.kill()

    async def _drain_stderr(self) -> None:
        stream = self._process.stderr
        if stream is None:
            return
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            while True:
                data = await stream.receive(65536)
                self.stderr_tail = (self.stderr_tail + data)[-_STDERR_TAIL:]

    def _stderr_note(self) -> str:
        lines = self.stderr_tail.decode("utf-8", "replace").strip().splitlines()[-3:]
        return f"; it wrote: {' | '.join(lines)}" if lines else ""

    def _server_error(self, error: Exception, source: Any) -> None:
        logger.warning("language server %s sent a malformed message: %s", self.describe(), error)

    def _folder(self) -> Any:
        from lsprotocol import types

        return types.WorkspaceFolder(uri=self.root.as_uri(), name=self.root.name)

    def _configuration(self, params: Any) -> list[Any]:
        """`workspace/configuration`: each asked section of the initialization options (or null)."""
        options = self.server.initialization_options
        items = params.get("items") if isinstance(params, dict) else None
        found = []
        for item in items if isinstance(items, list) else []:
            value = options
            section = item.get("section") if isinstance(item, dict) else None
            for part in section.split(".") if isinstance(section, str) and section else ():
                value = value.get(part) if isinstance(value, dict) else None
            found.append(value)
        return found

    # --- requests ---------------------------------------------------------------------------------

    async def request(self, method: str, params: Any, timeout: float, *, what: str = "") -> Any:
        """Send a request and await its result.

        Raises:
            LspError: the server exited, answered with an error, or did not answer within `timeout`.
        """
        if not self.alive:
            raise LspError(f"language server {self.describe()} is not running{self._stderr_note()}")
        protocol = self._client.protocol
        message_id = str(uuid.uuid4())
        try:
            future = asyncio.wrap_future(protocol.send_request(method, params, msg_id=message_id))
        except Exception as error:
            raise LspError(f"language server {self.describe()}: {what or method} could not be sent: {error}") from None
        try:
            return await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            # A late answer settles a future nobody waits for, rather than the cancelled one (pygls would
            # log a traceback and toolrt a "malformed message"), and an exit after it retrieves nothing.
            protocol._request_futures[message_id] = concurrent.futures.Future()
            raise LspError(
                f"language server {self.describe()} did not answer {what or method} within {timeout:g} seconds"
            ) from None
        except LspError:
            raise
        except Exception as error:
            raise LspError(f"language server {self.describe()} failed {what or method}: {error}") from None

    def supports(self, capability: str) -> bool:
        """Whether the server announced a capability (`definitionProvider`)."""
        value = (self.capabilities or {}).get(capability)
        return value is not None and value is not False

    # --- documents --------------------------------------------------------------------------------

    def touch(self, path: Path, text: str) -> int:
        """Tell the server the file's content (didOpen the first time, then didChange + didSave);
        returns how many diagnostics publications for it came before, for `wait_diagnostics`."""
        from lsprotocol import types

        uri = path.as_uri()
        since = self._published.get(uri, 0)
        protocol = self._client.protocol
        version = self._versions.get(uri)
        if version is None:
            self._versions[uri] = 0
            document = types.TextDocumentItem(uri=uri, language_id=language_id(path), version=0, text=text)
            protocol.notify(types.TEXT_DOCUMENT_DID_OPEN, types.DidOpenTextDocumentParams(text_document=document))
            return since
        self._versions[uri] = version + 1
        protocol.notify(
            types.TEXT_DOCUMENT_DID_CHANGE,
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version + 1),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            ),
        )
        protocol.notify(
            types.TEXT_DOCUMENT_DID_SAVE,
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri), text=text),
        )
        return since

    def close_document(self, path: Path) -> None:
        from lsprotocol import types

        uri = path.as_uri()
        if self._versions.pop(uri, None) is not None and self.alive:
            self._client.protocol.notify(
                types.TEXT_DOCUMENT_DID_CLOSE,
                types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)),
            )
        self.diagnostics.pop(uri, None)

    @property
    def open_documents(self) -> Sequence[str]:
        return tuple(self._versions)

    def _published_diagnostics(self, params: Any) -> None:
        if not isinstance(params, dict) or not isinstance(params.get("uri"), str):
            return
        uri = params["uri"]
        version = params.get("version")
        if isinstance(version, int) and version < self._versions.get(uri, 0):
            return  # about an older text than the server has now
        items = params.get("diagnostics")
        self.diagnostics[uri] = [d for d in map(_diagnostic, items if isinstance(items, list) else []) if d]
        self._current[uri] = isinstance(version, int) and version == self._versions.get(uri)
        self._published[uri] = self._published.get(uri, 0) + 1
        event = self._waiters.pop(uri, None)
        if event is not None:
            event.set()

    async def wait_diagnostics(self, uri: str, since: int, deadline: float) -> bool:
        """Wait until the server publishes diagnostics for `uri` after publication `since` (then a
        short quiet time for a second one), or until `deadline` (the loop's clock). True: it did."""
        loop = asyncio.get_running_loop()
        seen = False
        quiet_until = deadline
        while self.alive:
            count = self._published.get(uri, 0)
            if count > since:
                seen = True
                since = count
                if self._current.get(uri):
                    break  # about the text just sent: final for it
                quiet_until = min(deadline, loop.time() + _QUIET)
            remaining = quiet_until - loop.time()
            if remaining <= 0:
                break
            event = self._waiters.setdefault(uri, asyncio.Event())
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except asyncio.TimeoutError:
                break
        return seen


def _CLIENT_CAPABILITIES() -> Any:
    from lsprotocol import types

    return types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            synchronization=types.TextDocumentSyncClientCapabilities(did_save=True),
            publish_diagnostics=types.PublishDiagnosticsClientCapabilities(version_support=True),
            hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.PlainText, types.MarkupKind.Markdown]),
            definition=types.DefinitionClientCapabilities(link_support=True),
            implementation=types.ImplementationClientCapabilities(link_support=True),
            references=types.ReferenceClientCapabilities(),
            document_symbol=types.DocumentSymbolClientCapabilities(hierarchical_document_symbol_support=True),
            call_hierarchy=types.CallHierarchyClientCapabilities(),
        ),
        workspace=types.WorkspaceClientCapabilities(
            configuration=True,
            workspace_folders=True,
            symbol=types.WorkspaceSymbolClientCapabilities(),
        ),
        window=types.WindowClientCapabilities(work_done_progress=True),
    )
