"""The `apply_patch` tool: add, update, move and delete files with one `*** Begin Patch` text (GPT models).

OpenCode §13, made all-or-nothing: every hunk is parsed, located and computed against the current
files (and against the patch's own earlier hunks) before anything is written; then every new text
goes to a temporary file beside its target, and only when all of them are written are they renamed
into place and the deletions done. A failing hunk therefore leaves no file changed.
Permissions come from `permission_requests`, the YAML's analyzer: one `edit` request naming every
root-relative path the patch touches, after one `external_directory` request per outside directory.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import anyio.to_thread

from ..beneath import open_checked, replace_checked, unlink_checked
from ..call.context import ToolContext
from ..errors import PathChanged, ToolFailure
from ..lsp.report import patch_report
from ..permissions.model import CallSite, PermissionRequest
from . import filetime
from .diff import count_changes, trim_diff, unified_diff
from .filepaths import (
    attribute_writes,
    checked_real,
    describe_mode,
    encode_text,
    exempt_directories,
    external_patterns,
    make_parents,
    read_regular,
    relative,
    remove_directory,
    stat_or_none,
    steady_realpath,
)
from .patch_format import AddFile, DeleteFile, Hunk, PatchError, UpdateFile, apply_chunks, is_empty_patch, parse_patch
from .preview import bounded

__all__ = ["MAX_PATCH_FILE_BYTES", "apply_patch", "permission_requests"]

MAX_PATCH_FILE_BYTES = 10 * 1024 * 1024
"""Files larger than this are not updated: every hunk scans the whole file up to four times."""

_VERIFY = "apply_patch verification failed: "
_BOM = "\ufeff"
ChangeKind = Literal["add", "update", "move", "delete"]


@dataclass(frozen=True, slots=True)
class _Change:
    """One file operation of a verified patch."""

    kind: ChangeKind
    path: Path
    """The file as the patch names it, made absolute (lexical)."""
    target: Path
    """Where the new text goes: the real path of `path`, or of the move destination."""
    new: str | None
    """The complete new text; None for a deletion."""
    diff: str


@dataclass(slots=True)
class _Plan:
    """The verified patch: the changes in order, and the final state of every touched file."""

    changes: list[_Change] = field(default_factory=list)
    files: dict[Path, str | None] = field(default_factory=dict)
    """Real path → final text, or None when the file ends up deleted."""
    lexical: dict[Path, Path] = field(default_factory=dict)
    """Real path → the path as named, which a deletion unlinks (a symlink itself, not its target)."""

    def current(self, real: Path, display: str) -> str | None:
        """The file's text as earlier hunks left it, else as on disk; None when it does not exist."""
        if real in self.files:
            return self.files[real]
        status = stat_or_none(real, display)
        if status is None:
            return None
        if not stat.S_ISREG(status.st_mode):
            raise ToolFailure(f"{_VERIFY}{display} is {describe_mode(status.st_mode)}, not a regular file")
        if status.st_size > MAX_PATCH_FILE_BYTES:
            raise ToolFailure(
                f"{_VERIFY}{display} is {status.st_size} bytes, over the {MAX_PATCH_FILE_BYTES} byte limit of "
                "apply_patch. Use bash with a stream editor (sed) for a file this large."
            )
        return read_regular(real, display)[0]


def _resolve_in(root: Path, home: Path, raw: str) -> Path:
    if raw == "~" or raw.startswith("~/"):
        raw = str(home) + raw[1:]
    candidate = Path(raw)
    if not candidate.is_absolute():
        candidate = root / candidate
    return Path(os.path.normpath(candidate))


def _named_paths(hunks: Sequence[Hunk]) -> list[str]:
    named: list[str] = []
    for hunk in hunks:
        named.append(hunk.path)
        if isinstance(hunk, UpdateFile) and hunk.move_to:
            named.append(hunk.move_to)
    return named


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def permission_requests(args: Mapping[str, Any], site: CallSite) -> Sequence[PermissionRequest]:
    """The permission requests of an `apply_patch` call (the YAML's `analyzer`).

    One `external_directory` request `<dir>/*` per directory outside the root that the patch touches
    (symlinks resolved), then one `edit` request whose patterns are every root-relative path touched,
    move destinations included, with `always: ["*"]`. A patch that does not parse (or names a path
    with a NUL byte) asks nothing: the handler checks it again and fails before touching any file.
    """
    text = args.get("patchText")
    if not isinstance(text, str) or not text:
        return ()
    try:
        hunks = parse_patch(text)
        paths = [_resolve_in(site.root, site.home, raw) for raw in _named_paths(hunks)]
        outside = [pattern for path in paths for pattern in external_patterns(path, site.root, exempt=site.exempt)]
    except (PatchError, ToolFailure):
        return ()
    if not paths:
        return ()
    requests = [PermissionRequest("external_directory", (pattern,), (pattern,)) for pattern in _unique(outside)]
    real_root = Path(steady_realpath(site.root))
    named = [relative(path, site.root) for path in paths]
    relative_paths = _unique(named + [relative(Path(steady_realpath(path)), real_root) for path in paths])
    requests.append(PermissionRequest("edit", relative_paths, ("*",), {"filepath": ", ".join(_unique(named))}))
    # Moving or deleting a file hands its content on (or destroys it): the source must be readable too,
    # or a patch could move `.env` to `env.txt` past a `read` deny.
    sources = [
        _resolve_in(site.root, site.home, hunk.path)
        for hunk in hunks
        if isinstance(hunk, DeleteFile) or (isinstance(hunk, UpdateFile) and hunk.move_to)
    ]
    read_patterns = _unique([form for path in sources for form in (str(path), steady_realpath(path))])
    if read_patterns:
        requests.append(PermissionRequest("read", read_patterns, ("*",)))
    protected = site.protected.request(str(path) for path in paths) if site.protected is not None else None
    if protected is not None:
        requests.append(_with_diff(protected, hunks, paths, site))
    return tuple(requests)


def _with_diff(
    protected: PermissionRequest, hunks: Sequence[Hunk], paths: Sequence[Path], site: CallSite
) -> PermissionRequest:
    """`protected` carrying the diff of the changes to protected files (what the ask shows), when the
    patch applies; computed without writing anything."""
    resolved = {raw: (path, Path(steady_realpath(path))) for raw, path in zip(_named_paths(hunks), paths, strict=True)}
    try:
        plan = _verify(hunks, resolved)
    except (ToolFailure, OSError, ValueError):
        return protected
    assert site.protected is not None
    shown = [
        change.diff
        for change in plan.changes
        if site.protected.request(
            [str(change.path), str(change.target), str(plan.lexical.get(change.target, change.target))]
        )
        is not None
    ]
    if not shown:
        return protected
    diff = bounded("\n".join(shown))
    return replace(protected, metadata=MappingProxyType({**protected.metadata, "diff": diff}))


def _split_text(text: str) -> tuple[str, bool, bool]:
    """(text with `\\n` endings and no BOM, had a BOM, used CRLF)."""
    bom = text.startswith(_BOM)
    body = text[1:] if bom else text
    crlf = "\r\n" in body
    return body.replace("\r\n", "\n"), bom, crlf


def _join_text(text: str, bom: bool, crlf: bool) -> str:
    if crlf:
        text = text.replace("\n", "\r\n")
    return _BOM + text if bom else text


def _verify_add(plan: _Plan, hunk: AddFile, path: Path, real: Path) -> None:
    display = hunk.path
    if (status := stat_or_none(real, display)) is not None and stat.S_ISDIR(status.st_mode):
        raise ToolFailure(f"{_VERIFY}Cannot add {display}: a directory exists at that path")
    before = plan.current(real, display) or ""
    new = hunk.contents if hunk.contents == "" or hunk.contents.endswith("\n") else hunk.contents + "\n"
    plan.files[real] = new
    plan.lexical[real] = path
    plan.changes.append(_Change("add", path, real, new, trim_diff(unified_diff(str(path), before, new))))


def _verify_delete(plan: _Plan, hunk: DeleteFile, path: Path, real: Path) -> None:
    display = hunk.path
    if (status := stat_or_none(real, display)) is not None and stat.S_ISDIR(status.st_mode):
        raise ToolFailure(f"{_VERIFY}Cannot delete {display}: it is a directory; apply_patch deletes files only")
    before = plan.current(real, display)
    if before is None:
        raise ToolFailure(f"{_VERIFY}Failed to read file to delete: {display} does not exist")
    plan.files[real] = None
    plan.lexical[real] = path
    plan.changes.append(_Change("delete", path, real, None, trim_diff(unified_diff(str(path), before, ""))))


def _verify_update(plan: _Plan, hunk: UpdateFile, paths: Mapping[str, tuple[Path, Path]]) -> None:
    path, real = paths[hunk.path]
    before = plan.current(real, hunk.path)
    if before is None:
        raise ToolFailure(f"{_VERIFY}Failed to read file to update: {hunk.path} does not exist")
    body, bom, crlf = _split_text(before)
    try:
        new = _join_text(apply_chunks(body, hunk.path, hunk.chunks), bom, crlf)
    except PatchError as error:
        raise ToolFailure(f"{_VERIFY}{error}") from error
    target = real
    kind: ChangeKind = "update"
    if hunk.move_to:
        destination, target = paths[hunk.move_to]
        if (status := stat_or_none(target, hunk.move_to)) is not None and stat.S_ISDIR(status.st_mode):
            raise ToolFailure(f"{_VERIFY}Cannot move {hunk.path} to {hunk.move_to}: a directory exists there")
        plan.files[real] = None
        plan.lexical[real] = path
        plan.lexical[target] = destination
        kind = "move"
    plan.files[target] = new
    diff = trim_diff(unified_diff(str(path), before.replace("\r\n", "\n"), new.replace("\r\n", "\n")))
    plan.changes.append(_Change(kind, path, target, new, diff))


def _verify(hunks: Sequence[Hunk], paths: Mapping[str, tuple[Path, Path]]) -> _Plan:
    """Compute every change without writing anything."""
    plan = _Plan()
    for hunk in hunks:
        if isinstance(hunk, AddFile):
            _verify_add(plan, hunk, *paths[hunk.path])
        elif isinstance(hunk, DeleteFile):
            _verify_delete(plan, hunk, *paths[hunk.path])
        else:
            _verify_update(plan, hunk, paths)
    return plan


def _stage(target: Path, data: bytes, created: list[Path]) -> Path:
    """Write `data` to a new temporary file beside `target` (creating directories beneath the last
    existing one, no symlink followed: see beneath); return its path."""
    make_parents(target, str(target), created)
    staged = target.with_name(f".{target.name}.{secrets.token_hex(6)}.toolrt-patch")
    fd = open_checked(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        if (existing := stat_or_none(target, str(target))) is not None:
            os.fchmod(fd, stat.S_IMODE(existing.st_mode))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return staged


def _commit(plan: _Plan) -> None:
    """Stage every write, then rename them all into place and do the deletions."""
    writes = {real: text for real, text in plan.files.items() if text is not None}
    encoded = {real: encode_text(text, str(real)) for real, text in writes.items()}
    staged: dict[Path, Path] = {}
    created: list[Path] = []
    try:
        for real, data in encoded.items():
            staged[real] = _stage(real, data, created)
    except (OSError, ToolFailure) as error:
        for temporary in staged.values():
            unlink_checked(temporary)
        for directory in reversed(created):
            remove_directory(directory)
        kind = PathChanged if isinstance(error, PathChanged) else ToolFailure
        raise kind(f"apply_patch failed before changing any file: {error}") from error
    for real, temporary in staged.items():
        replace_checked(temporary, real)
    for real, text in plan.files.items():
        if text is None:
            named = plan.lexical[real]  # the name itself goes (a symlink, not its target), in its real parent
            unlink_checked(Path(steady_realpath(named.parent)) / named.name)


def _shown(change: _Change, plan: _Plan) -> Path:
    """The path the model named for what a change left: the move destination for a move."""
    return change.path if change.kind != "move" else plan.lexical[change.target]


def _summary(plan: _Plan, root: Path) -> str:
    lines = []
    for change in plan.changes:
        letter = {"add": "A", "delete": "D"}.get(change.kind, "M")
        lines.append(f"{letter} {relative(_shown(change, plan), root)}")
    return "Success. Updated the following files:\n" + "\n".join(lines)


def _file_metadata(change: _Change, plan: _Plan, root: Path) -> dict[str, Any]:
    additions, deletions = count_changes(change.diff)
    shown = _shown(change, plan)
    entry: dict[str, Any] = {
        "filePath": str(change.path),
        "relativePath": relative(shown, root),
        "type": change.kind,
        "diff": change.diff,
        "additions": additions,
        "deletions": deletions,
    }
    if change.kind == "move":
        entry["movePath"] = str(shown)
    return entry


async def apply_patch(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Apply `patchText`; returns `{title, output, metadata: {diff, files}}` with the `A/M/D path` summary.

    Raises:
        ToolFailure: OpenCode's texts (`patchText is required`, `patch rejected: empty patch`,
            `apply_patch verification failed: ...`); nothing has been written when one is raised
            before the final renames.
        PermissionBlocked: a touched path lies outside the root and `external_directory` was not allowed.
    """
    text: str = args.get("patchText", "")
    if not text:
        raise ToolFailure("patchText is required")
    try:
        hunks = parse_patch(text)
    except PatchError as error:
        raise ToolFailure(f"{_VERIFY}{error}") from error
    if not hunks:
        raise ToolFailure("patch rejected: empty patch" if is_empty_patch(text) else f"{_VERIFY}no hunks found")
    paths: dict[str, tuple[Path, Path]] = {}
    outside: list[str] = []
    for raw in _named_paths(hunks):
        path = ctx.resolve(raw)
        paths[raw] = (path, path)
        outside.extend(external_patterns(path, ctx.root, exempt=exempt_directories(ctx)))
    if outside:
        await ctx.ask_requests(
            [PermissionRequest("external_directory", (pattern,), (pattern,)) for pattern in _unique(outside)]
        )
    # Each real path is one the call's rules were checked on, and only it is opened from here on.
    paths = {raw: (path, checked_real(ctx, path, "file", outside, writes=True)) for raw, (path, _) in paths.items()}
    plan = await anyio.to_thread.run_sync(partial(_verify, hunks, paths))
    await anyio.to_thread.run_sync(partial(_commit, plan))
    attribute_writes(ctx, [real for real, final in plan.files.items() if final is not None], "apply_patch")
    for real, final in plan.files.items():
        if final is not None:
            filetime.refresh(ctx.session_state, real)
    output = _summary(plan, ctx.root)
    title = output
    lsp = ctx.lsp
    if lsp is not None:
        changed = list(dict.fromkeys(_shown(change, plan) for change in plan.changes if change.kind != "delete"))
        gone = [change.path for change in plan.changes if change.kind in ("delete", "move")]
        output += patch_report(changed, ctx.root, await lsp.diagnostics(changed, gone))
    return {
        "title": title,
        "output": output,
        "metadata": {
            "diff": "\n".join(change.diff for change in plan.changes),
            "files": [_file_metadata(change, plan, ctx.root) for change in plan.changes],
        },
    }
