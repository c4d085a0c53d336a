"""Who changed a file: the attribution journal, defined once and read by every load and check.

A change is **the model's** when toolrt can attribute it:
- a built-in file tool wrote it (`write`, `edit`, `apply_patch` record what they wrote: `wrote`);
- or the file (or a directory between the project root and it) has an `st_ctime` inside the lifetime
  of a process a process tool started, from spawn to the end of its last descendant (`process`: the
  PID namespace's init ends last, so its exit is that end). `st_ctime` is set by the kernel on every
  write, link, rename and chmod, and no unprivileged process can set it back.

Everything else is **the person's**: a project Python handler's own writes, and every change toolrt
cannot attribute. A write the person approved through a `protected` ask, and content approved with
`toolrt trust`, is approved content: its digest is recorded as the person's for that path (`approve`).

`hold(path)` answers "is the file's current content the model's and not approved?"; loads refuse a
config file or module that is held. Content a load accepted as the person's is recorded too (with a
copy, so `toolrt trust` can show what changed since).

The journal is JSON Lines in `<data_dir>/attribution/journal.jsonl`, appended with one `write(2)` per
record on an `O_APPEND` descriptor (see `audit`); contents kept for diffs are in `attribution/content/`
under their SHA-256. Records: `model` (path, digest, call, via), `person` (path, digest, via), `span`
(id, call, start, deadline), `extend` (id, deadline: a later one, for a process still running) and
`end` (id, end), times in nanoseconds of `time.time_ns()`.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ToolFailure

__all__ = ["Confinement", "Hold", "Journal", "approved_files", "digest_of", "journal_for", "signature_of"]


def _warn(message: str, *args: object) -> None:
    """A warning on the `toolrt.attribution` logger (logging is imported when there is one to give)."""
    import logging

    logging.getLogger("toolrt.attribution").warning(message, *args)


_CLOCK_SLACK_NS = 20_000_000
"""File times come from the kernel's coarse clock, up to a tick behind `time.time_ns()`: a span starts
this much earlier (fail closed)."""
_DEFAULT_DEADLINE_NS = 3600 * 1_000_000_000
"""A span whose end was never recorded (toolrt died) lasts this long after its start, or its timeout."""
_MAX_KEPT_CONTENT = 1 << 20
_SETTLED_NS = 1_000_000_000
"""A file whose times are this far in the past cannot fall inside a span recorded from now on."""


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class Hold:
    """A file whose current content is the model's and not approved."""

    path: Path
    digest: str
    call_id: str
    via: str
    """`write`, `edit`, `apply_patch` (a built-in file tool) or `process` (a process tool's lifetime)."""

    def reason(self) -> str:
        if self.via == "changed":
            return "changed while toolrt read it (what was checked is not what was parsed): not loaded. Reload again"
        how = "a process a tool started" if self.via == "process" else f"the `{self.via}` tool"
        call = f" in call {self.call_id}" if self.call_id else ""
        return (
            f"changed by {how}{call} and not approved by the person: not loaded. "
            "Review and approve it with `toolrt trust`"
        )


@dataclass(frozen=True, slots=True)
class Confinement:
    """What the OS sandbox let a process write: beneath `writable`, not beneath `read_only`."""

    writable: tuple[str, ...]
    read_only: tuple[str, ...] = ()

    def could_write(self, path: str) -> bool:
        """Whether the process could have changed `path` ("": a file with other names, reachable anywhere)."""
        if not path:
            return True
        return any(_within(path, w) for w in self.writable) and not any(_within(path, r) for r in self.read_only)


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


class _State:
    """What the journal said so far, and the offset up to which it was read (one per journal, mutated in
    place as records are read: a plain class, none of a dataclass's methods would be used)."""

    __slots__ = ("last_person", "model", "model_inodes", "offset", "person", "refused", "spans")

    def __init__(self) -> None:
        self.offset = 0
        self.model: dict[tuple[str, str], tuple[str, str]] = {}
        """(path, digest) → (call, via) of content the model wrote there."""
        self.model_inodes: dict[tuple[int, int, str], tuple[str, str]] = {}
        """(device, inode, digest) → (call, via) of content a file tool wrote into that file: the same
        content under another name of it (a hard link made beforehand) is the model's too."""
        self.person: set[tuple[str, str]] = set()
        """(path, digest) accepted as the person's."""
        self.last_person: dict[str, str] = {}
        """path → the latest digest accepted as the person's there (what `toolrt trust` diffs against)."""
        self.spans: dict[str, list[Any]] = {}
        """span id → [call, start, end or None, deadline, Confinement or None]."""
        self.refused: dict[str, None] = {}
        """Paths a load refused that no build lists (a module imported at run time, a plugin's): `toolrt
        trust` shows them."""


class Journal:
    """The attribution journal of one data directory (see the module). Thread-safe; one per process
    and directory through `journal_for`."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = data_dir / "attribution"
        self.path = self.directory / "journal.jsonl"
        self._lock = threading.Lock()
        self._state = _State()
        self._counter = 0
        self._batching: dict[int, list[dict[str, Any]]] = {}
        """Thread → the records `batch` writes at its end."""
        self._settled: dict[str, tuple[tuple[int, ...], str]] = {}
        """path → (stat signature, digest) of a file found to be the person's: not read again while its
        signature (inode, size, times) stays the same, so a build over a thousand unchanged files stats
        them instead of reading and hashing each."""

    # --- writing ------------------------------------------------------------------------------

    def _append(self, *records: dict[str, Any]) -> bool:
        """Append `records` (one `write(2)`); whether they were written (a failure is logged)."""
        data = b"".join((json.dumps(r, separators=(",", ":")) + "\n").encode() for r in records)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as error:
            _warn("cannot write the attribution journal %s: %s", self.path, error)
            return False
        return True

    def _keep(self, digest: str, data: bytes) -> None:
        if len(data) > _MAX_KEPT_CONTENT:
            return
        target = self.directory / "content" / digest
        if target.exists():
            return
        try:
            if not target.parent.is_dir():
                target.parent.mkdir(parents=True, exist_ok=True)
            temporary = target.with_name(f".{digest}.{os.getpid()}.{threading.get_ident()}")
            temporary.write_bytes(data)
            os.replace(temporary, target)
        except OSError as error:
            _warn("cannot keep content for diffs in %s: %s", target.parent, error)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Within it, the records of content first seen as the person's (`hold`) are written at the end,
        in one write: a build over a thousand new files appends once."""
        records: list[dict[str, Any]] = []
        self._batching[threading.get_ident()] = records
        try:
            yield
        finally:
            del self._batching[threading.get_ident()]
            if records:
                self._append(*records)

    def wrote(
        self, path: Path, data: bytes, *, call_id: str, via: str, identity: tuple[int, int] | None = None
    ) -> None:
        """A built-in file tool wrote `data` to `path` for the model. The file's identity (device, inode:
        `identity`, from the descriptor the data was read from, or else a `stat` of `path`) is recorded
        too: a file tool writes in place, so every other name of that file holds the content."""
        record: dict[str, Any] = {"kind": "model", "path": str(path), "digest": digest_of(data), "call": call_id}
        record["via"] = via
        if identity is not None:
            record["inode"] = list(identity)
        else:
            try:
                status = os.stat(path)
                record["inode"] = [status.st_dev, status.st_ino]
            except OSError:
                pass
        self._append(record)

    def refused(self, hold: Hold) -> None:
        """A module import refused `hold` (found at run time, not from a tool file): recorded once per
        path, so `toolrt trust` shows it (`refused_paths`)."""
        key = str(hold.path)
        with self._lock:
            if key in self._read().refused:
                return
        self._append({"kind": "refused", "path": key, "digest": hold.digest})

    def refused_paths(self) -> tuple[Path, ...]:
        """Every path an import refused so far (whether it is still held is `hold`'s to say)."""
        with self._lock:
            return tuple(map(Path, self._read().refused))

    def approve(self, path: Path, data: bytes, *, via: str) -> None:
        """The person approved `data` at `path` (`toolrt trust`, a `protected` ask): it is theirs."""
        digest = digest_of(data)
        self._keep(digest, data)
        self._append({"kind": "person", "path": str(path), "digest": digest, "via": via})

    @contextmanager
    def process(
        self,
        call_id: str,
        *,
        timeout: float | None,
        approved: Iterable[Path] = (),
        confined: Confinement | None = None,
    ) -> Iterator[str]:
        """The lifetime of a process a tool started (and of all it starts): wrap its run, from before the
        spawn to after its last descendant ended; yields the span's id (for `extend`). A span whose end
        is never written (toolrt died) ends at its deadline. `approved`: files the person let this call
        write through a `protected` ask; what they hold when it ends is the person's. `confined`: what
        the OS sandbox let the process write (None: no sandbox, anything): a file it could not have
        written is never attributed to it, so the person's edits of read-only config during a long call
        stay theirs.

        Raises:
            ToolFailure: the span cannot be journalled (the process must not run unrecorded)."""
        with self._lock:
            self._counter += 1
            span = f"{os.getpid()}.{self._counter}.{time.time_ns()}"
        start = time.time_ns() - _CLOCK_SLACK_NS
        deadline = start + (int(timeout * 2e9) + 60_000_000_000 if timeout else _DEFAULT_DEADLINE_NS)
        record: dict[str, Any] = {"kind": "span", "id": span, "call": call_id, "start": start, "deadline": deadline}
        if confined is not None:
            record["writable"], record["read_only"] = list(confined.writable), list(confined.read_only)
        if not self._append(record):  # fail closed: what the process changed could not be attributed
            raise ToolFailure(
                f"toolrt cannot write its attribution journal ({self.path}), which records what processes "
                "change, so nothing was run. Ask the person to check the data directory."
            )
        try:
            yield span
        finally:
            self._append({"kind": "end", "id": span, "end": time.time_ns()})
            for path in approved:
                try:
                    self.approve(path, path.read_bytes(), via="protected ask")
                except OSError:
                    continue  # not a file (a directory, gone): nothing to approve

    def extend(self, span: str, seconds: float) -> None:
        """Move the deadline of `span` (a process still running: a background one) to `seconds` from now."""
        self._append({"kind": "extend", "id": span, "deadline": time.time_ns() + int(seconds * 1e9)})

    # --- reading ------------------------------------------------------------------------------

    def _read(self) -> _State:
        """The journal's records so far (read on from where the last read stopped)."""
        state = self._state
        try:
            if os.stat(self.path).st_size == state.offset:
                return state  # nothing new (the common case: one stat instead of an open)
            with open(self.path, "rb") as handle:
                handle.seek(state.offset)
                data = handle.read()
        except FileNotFoundError:
            return state
        except OSError as error:  # a data directory that is not one: nothing was journalled there
            _warn("cannot read the attribution journal %s: %s", self.path, error)
            return state
        complete = data.rfind(b"\n") + 1
        for line in data[:complete].splitlines():
            try:
                record = json.loads(line)
                _apply(state, record)
            except (ValueError, KeyError, TypeError):
                continue  # a torn or foreign line: skipped
        state.offset += complete
        return state

    def hold(
        self,
        path: Path,
        root: Path,
        *,
        data: bytes | None = None,
        text: str | None = None,
        listed: tuple[int, ...] | None = None,
    ) -> Hold | None:
        """Whether `path`'s current content is the model's and not approved (None: it is the person's,
        or the file is unreadable, which the loader reports). `root`: the project root, above which
        directories are not looked at. Content found to be the person's is recorded as such. `data`:
        the content, when the caller read it already (and will use exactly that). `text`: what the caller
        parsed from the file earlier (read as text): held (`changed`) unless it is the content checked, so
        a file swapped between the parse and this check never passes for the content it was swapped to.
        `listed`: the file's signature (`signature_of`) from the directory listing of this build, given
        only for a document the build took over unparsed from the previous one (whose text was checked
        then): it answers when it is the settled one; anything else is looked at afresh."""
        key = str(path)
        settled = self._settled.get(key)
        if data is None and _settled_on(settled, listed):
            return None  # the content the previous build used, the person's, and its file unchanged since
        signature = _signature(path)
        if data is None and _settled_on(settled, signature):
            return None  # the person's when last looked at, and not changed since (nothing can make it the model's)
        if data is None:
            data = _read_bytes(path)
            if data is None:
                return None
        digest = digest_of(data)
        if text is not None and _as_text(data) != text:
            return Hold(path, digest, "", "changed")
        if settled == (signature, digest):
            return None
        return self._judge(path, root, data, digest, signature)

    def _judge(
        self, path: Path, root: Path, data: bytes, digest: str, signature: tuple[int, ...] | None
    ) -> Hold | None:
        """`hold` for content not settled: the journal's record of it, else the process span its change falls in."""
        key = str(path)
        fresh = False
        with self._lock:
            state = self._read()
            if (key, digest) in state.person:
                self._settle(key, signature, digest)
                return None
            written = state.model.get((key, digest)) or state.model.get((os.path.realpath(path), digest))
            if written is not None:
                return Hold(path, digest, written[0], written[1])
            times = _change_times(path, root)
            call = _inside_span(state, times)
            if call is None:
                if (written := _by_inode(state, path, digest)) is not None:
                    # written in place by a file tool through another name of this file (a hard link)
                    return Hold(path, digest, written[0], written[1])
                fresh = state.last_person.get(key) != digest
                # Settled once every time is well before now: a span recorded later starts after them.
                if all(moment < time.time_ns() - _SETTLED_NS for _, moment in times):
                    self._settle(key, signature, digest)
        if call is not None:
            self._append({"kind": "model", "path": key, "digest": digest, "call": call, "via": "process"})
            return Hold(path, digest, call, "process")
        if fresh:  # the person's content, seen for the first time: kept for `toolrt trust`'s diffs
            self._keep_person(key, digest, data)
        return None

    def _settle(self, key: str, signature: tuple[int, ...] | None, digest: str) -> None:
        """Remember `key`'s content as the person's while its file keeps `signature` (None: unreadable, never)."""
        if signature is not None:
            self._settled[key] = (signature, digest)

    def _keep_person(self, key: str, digest: str, data: bytes) -> None:
        """Keep the person's content and journal it (in this thread's batch, when it has one)."""
        self._keep(digest, data)
        record = {"kind": "person", "path": key, "digest": digest, "via": "loaded"}
        batch = self._batching.get(threading.get_ident())
        if batch is not None:
            batch.append(record)
        else:
            self._append(record)

    def span_at(self, path: str, moment_ns: int) -> str | None:
        """The call of a journalled process span that `moment_ns` (a file's `st_ctime`) falls inside, at a
        place (`path`) that span's process could write; None when no process a tool started could have
        made that change. A span still open, or cut off by toolrt's death, counts up to now."""
        with self._lock:
            return _inside_span(self._read(), ((path, moment_ns),))

    def previous(self, path: Path) -> bytes | None:
        """The content last accepted as the person's at `path`, when kept."""
        with self._lock:
            digest = self._read().last_person.get(str(path))
        if digest is None:
            return None
        try:
            return (self.directory / "content" / digest).read_bytes()
        except OSError:
            return None


def _apply(state: _State, record: dict[str, Any]) -> None:
    kind = record["kind"]
    if kind == "model":
        who = (str(record.get("call", "")), str(record.get("via", "")))
        state.model[(record["path"], record["digest"])] = who
        inode = record.get("inode")
        if isinstance(inode, list) and len(inode) == 2:
            state.model_inodes[(int(inode[0]), int(inode[1]), str(record["digest"]))] = who
    elif kind == "person":
        state.person.add((record["path"], record["digest"]))
        state.last_person[record["path"]] = record["digest"]
    elif kind == "span":
        writable = record.get("writable")
        confined = (
            Confinement(tuple(map(str, writable)), tuple(map(str, record.get("read_only", ()))))
            if isinstance(writable, list)
            else None
        )
        state.spans[record["id"]] = [
            str(record.get("call", "")),
            int(record["start"]),
            None,
            int(record["deadline"]),
            confined,
        ]
    elif kind == "refused":
        state.refused[str(record["path"])] = None
    elif kind == "end" and record["id"] in state.spans:
        state.spans[record["id"]][2] = int(record["end"])
    elif kind == "extend" and record["id"] in state.spans:
        state.spans[record["id"]][3] = max(state.spans[record["id"]][3], int(record["deadline"]))


def _as_text(data: bytes) -> str | None:
    """`data` as `Path.read_text` gives it (UTF-8, universal newlines); None when it is not UTF-8."""
    try:
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError:
        return None


def _by_inode(state: _State, path: Path, digest: str) -> tuple[str, str] | None:
    """Who wrote `digest` into the file `path` names, by its identity, whatever name it was written by."""
    if not state.model_inodes:
        return None
    try:
        status = os.stat(path)
    except OSError:
        return None
    return state.model_inodes.get((status.st_dev, status.st_ino, digest))


def _settled_on(settled: tuple[tuple[int, ...], str] | None, signature: tuple[int, ...] | None) -> bool:
    """Whether the file was settled (`Journal._settled`) with this signature (None: never)."""
    return signature is not None and settled is not None and settled[0] == signature


def _read_bytes(path: Path) -> bytes | None:
    """The file's content, or None when it cannot be read (the loader reports that)."""
    try:
        return path.read_bytes()
    except OSError:
        return None


def _signature(path: Path) -> tuple[int, ...] | None:
    """The link's and the file's identity, size and times: any change to either changes it."""
    try:
        link, target = os.lstat(path), os.stat(path)
    except OSError:
        return None
    return signature_of(link, target)


def signature_of(link: os.stat_result, target: os.stat_result) -> tuple[int, ...]:
    """The signature `Journal.hold` settles a file on, from its `lstat` (`link`) and its `stat` (`target`)."""
    return (
        link.st_ino,
        link.st_ctime_ns,
        target.st_dev,
        target.st_ino,
        target.st_size,
        target.st_mtime_ns,
        target.st_ctime_ns,
    )


def _change_times(path: Path, root: Path) -> list[tuple[str, int]]:
    """(where, `st_ctime`) of `path` (the link, and the file it points to) and of each directory between
    the root (left out: every new name in it changes it) and the path."""
    times: list[tuple[str, int]] = []
    try:
        times.append((os.path.abspath(path), os.lstat(path).st_ctime_ns))
        target = os.stat(path)
        # A file with other names (hard links) may have been changed through any of them, wherever the
        # sandbox let a process write: its place is unknown ("").
        times.append(("" if target.st_nlink > 1 else os.path.realpath(path), target.st_ctime_ns))
    except OSError:
        pass
    parent = path.parent
    while parent != root and parent.is_relative_to(root) and parent != parent.parent:
        try:
            times.append((os.path.realpath(parent), os.lstat(parent).st_ctime_ns))
        except OSError:
            pass
        parent = parent.parent
    return times


def _inside_span(state: _State, times: Iterable[tuple[str, int]]) -> str | None:
    """The call of a span one of `times` falls inside, at a place that span's process could write; None."""
    now = time.time_ns()
    found = list(times)
    for call, start, end, deadline, confined in state.spans.values():
        last = end if end is not None else min(deadline, now)
        for where, moment in found:
            if start <= moment <= last and (confined is None or confined.could_write(where)):
                return str(call)
    return None


_journals: dict[Path, Journal] = {}
_journals_lock = threading.Lock()


def journal_for(data_dir: Path) -> Journal:
    """The process's journal for `data_dir` (one object per directory, so its reads are shared)."""
    key = data_dir.absolute()
    with _journals_lock:
        journal = _journals.get(key)
        if journal is None:
            journal = _journals[key] = Journal(key)
            try:  # made now, so that a sandbox whose writable set holds it can mount it read-only
                journal.directory.mkdir(parents=True, exist_ok=True)
            except OSError:
                pass
        return journal


def approved_files(granted: Iterable[tuple[str, str]], root: Path) -> tuple[Path, ...]:
    """The files a call's approved `protected` requests name (root-relative or absolute patterns; the
    `dir/*` of unnamed files names none)."""
    found = []
    for permission, pattern in granted:
        if permission != "protected" or pattern.endswith("*"):
            continue
        found.append(Path(pattern) if os.path.isabs(pattern) else root / pattern)
    return tuple(found)
