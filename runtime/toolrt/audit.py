"""The call record: one JSON line per tool call, appended so that no crash or race breaks a reader.

Each record is serialised in full and handed to the kernel with a single `write(2)` on a file
descriptor opened with `O_APPEND`: the kernel places each write at the end of the file atomically,
so writers in several threads or processes never interleave inside a line, and a crash loses at
most the line being written (which `read_records` skips and reports). Recording must never fail a
tool call, so `AuditLog.append_line` swallows every OS error after warning once. The line is encoded
by `call.record.Recorder`, the one encoder of records (production and tests alike).

Record fields (filled by dispatch): time (ISO 8601 UTC), session, agent, model, tool, call_id,
arguments, requests ([{permission, pattern, action, rule}]), duration_ms, status (ok | error |
denied | rejected | invalid), output_bytes, error.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import weakref
from pathlib import Path
from typing import Any

__all__ = ["AuditLog", "read_records"]

logger = logging.getLogger("toolrt.audit")


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


class AuditLog:
    """Append-only JSON Lines log at `path`; `None` turns recording off.

    The file is opened on the first record, not at construction, so a log that is never written
    never touches the disk. `last_error` holds the latest failure's text, `None` while all is well.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.last_error: str | None = None
        self._fd: int | None = None
        self._closer: weakref.finalize[[int], AuditLog] | None = None  # closes the fd of a log never closed
        self._warned = False
        self._lock = threading.Lock()

    def append_line(self, line: str) -> None:
        """Write one encoded JSON line (ending in a newline; the call record's encoder, `call.record.Recorder`,
        makes it). Never raises; a failure is logged once and kept in `last_error`."""
        if self.path is None:
            return
        try:
            data = line.encode("utf-8")
        except UnicodeEncodeError:
            # Lone surrogates (undecodable bytes in arguments): keep them as JSON escapes instead.
            data = json.dumps(json.loads(line), ensure_ascii=True).encode("ascii") + b"\n"
        self._write(data)

    def _write(self, data: bytes) -> None:
        if self.path is None:
            return
        try:
            fd = self._fd if self._fd is not None else self._open(self.path)
            written = os.write(fd, data)
            if written < len(data):
                # A short write (disk filled up mid-line): end the torn line so the next record starts clean.
                os.write(fd, b"\n")
                raise OSError(f"short write: {written} of {len(data)} bytes")
        except (OSError, ValueError, TypeError) as error:
            self._fail(error)

    def _open(self, path: Path) -> int:
        with self._lock:
            if self._fd is not None:
                return self._fd
            path.parent.mkdir(parents=True, exist_ok=True)
            # Read access only to look at the last byte; every write still lands at the end (O_APPEND).
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                self._seal_torn_tail(fd)
            except OSError:
                os.close(fd)
                raise
            self._fd = fd
            self._closer = weakref.finalize(self, _close_quietly, fd)
            return fd

    @staticmethod
    def _seal_torn_tail(fd: int) -> None:
        """If a previous run died mid-line, end that line so our first record is not glued onto it."""
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            os.write(fd, b"\n")

    def _fail(self, error: BaseException) -> None:
        self.last_error = f"audit log {self.path}: {error}"
        if not self._warned:
            self._warned = True
            logger.warning("Cannot write the audit log %s (%s); calls go on unrecorded.", self.path, error)

    def close(self) -> None:
        """Close the file; a later `append_line` opens it again."""
        with self._lock:
            fd, self._fd = self._fd, None
            closer, self._closer = self._closer, None
        if closer is not None:
            closer.detach()
        if fd is not None:
            try:
                os.close(fd)
            except OSError as error:
                self._fail(error)


def read_records(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """Every record in the log, and the 1-based numbers of lines that are not a JSON object.

    Blank lines are ignored. A line cut short by a crash, or any other unparsable line, is reported
    and skipped, never raised.

    Raises:
        OSError: the file cannot be read (missing, a directory, no permission).
    """
    records: list[dict[str, Any]] = []
    bad: list[int] = []
    with open(path, "rb") as stream:
        for number, raw in enumerate(stream, start=1):
            if not raw.strip():
                continue
            try:
                value = json.loads(raw)
            except ValueError:
                bad.append(number)
                continue
            if isinstance(value, dict):
                records.append(value)
            else:
                bad.append(number)
    return records, bad
