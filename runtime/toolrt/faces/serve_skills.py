"""toolrt's skills over MCP: the skills extension (`io.modelcontextprotocol/skills`, SEP-2640).

The skills the `skill` tool loads (`builtin.skill.discover_skills`: the project's `.toolrt/skills/` over
the user's `~/.config/toolrt/skills/`) are served next to it:

- `skills/list` and `skills/get`: one entry per skill, `{uri, frontmatter, resources}`: the URI of its
  `skill://<name>/SKILL.md`, its frontmatter verbatim, and every file of its directory with its
  `sha256:` digest and size; `ttlMs` 0 and `cacheScope` private (an entry follows the rules and files
  of this moment); an unknown URI is `-32602`;
- `resources/list` names each `SKILL.md` (text/markdown, named and described by its frontmatter),
  `resources/templates/list` is empty, and `resources/read` returns any listed file of a skill,
  exactly the bytes its digest covers;
- `resources/directory/read` (the `directoryRead` setting): the direct children of a skill's directory,
  subdirectories as `inode/directory`;
- the capability: the extension with `directoryRead`, and the `resources` capability it depends on;
- the same decisions as the `skill` tool: only while the selection offers it, and through its
  permission (`skill` with the skill's name) in the request's session, so a skill the rules deny is
  neither listed nor served; a skill at `ask` is listed to a client toolrt can ask (or with
  `--offer-unaskable`) and its files are read after the person's approval, as a tool call's ask (an
  "always" approves the skill for the session, for the tool as well);
- the same integrity rules: a project file the model wrote or changed and the person has not approved
  (`toolrt.attribution`) is held, so a skill whose `SKILL.md` is held is neither listed nor served, and
  a held supporting file is not read; files are walked without following symlinks, read beneath their
  real path, and a project skill never reaches outside the project;
- only skills the extension can name are served: a name of 1–64 lowercase letters, digits and
  single hyphens (the Agent Skills rule), with at most 512 files and 16 MiB in all;
- hot reload: a skill added, changed or removed is `notifications/resources/list_changed` (the
  extension's files are resources; 2026-07-28 clients hear it through `subscriptions/listen`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
import os
import re
import stat
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
import mcp_types as types
import yaml
from mcp.shared.exceptions import MCPError

from ..api import Runtime
from ..attribution import journal_for
from ..beneath import is_within, open_checked
from ..builtin.skill import discover_skills, is_project_skill, split_frontmatter
from ..errors import PathChanged
from ..scope import CallScope
from .serve_client import RequestContext

__all__ = [
    "EXTENSION",
    "MAX_FILES",
    "MAX_FRONTMATTER_VALUES",
    "MAX_TOTAL_BYTES",
    "GetSkillParams",
    "ServedSkill",
    "SkillsFace",
    "catalog",
]

EXTENSION = "io.modelcontextprotocol/skills"
MAX_FILES = 512
"""Files per skill, `SKILL.md` included (the extension's limit: a larger skill is not served)."""
MAX_TOTAL_BYTES = 16 * 1024 * 1024
"""Bytes per skill, over all its files (the extension's limit)."""
MAX_FRONTMATTER_VALUES = 10_000
"""Values (mappings, lists and scalars) a served frontmatter holds once its YAML aliases are expanded."""
_MAX_DEPTH = 64
DIRECTORY = "inode/directory"
_NAME = re.compile(r"^(?!.*--)[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$")
_SCHEME = "skill://"


class GetSkillParams(types.RequestParams):
    """`skills/get`: the URI of a skill's `SKILL.md`."""

    uri: str


class ReadDirectoryParams(types.RequestParams):
    """`resources/directory/read`: the URI of a directory of a skill (`skill://<name>` or below)."""

    uri: str
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class SkillFile:
    path: str
    """Relative to the skill's directory, `/`-separated."""
    real: Path
    size: int
    digest: str


@dataclass(frozen=True, slots=True)
class ServedSkill:
    """One skill as the extension serves it."""

    name: str
    frontmatter: Mapping[str, Any]
    directory: Path
    project: bool
    """A project skill (held files apply), not a user skill."""
    files: tuple[SkillFile, ...]
    manifest_data: bytes
    """The `SKILL.md` bytes its frontmatter was read from (the held check is of exactly these)."""

    @property
    def manifest(self) -> tuple[SkillFile, bytes]:
        """The `SKILL.md` file and the bytes the frontmatter served was read from."""
        return self.files[0], self.manifest_data

    @property
    def uri(self) -> str:
        return f"{_SCHEME}{self.name}/SKILL.md"

    def file_uri(self, file: SkillFile) -> str:
        return f"{_SCHEME}{self.name}/{file.path}"

    def entry(self) -> dict[str, Any]:
        resources = [{"uri": self.file_uri(f), "digest": f.digest, "size": f.size} for f in self.files]
        return {"uri": self.uri, "frontmatter": dict(self.frontmatter), "resources": resources}

    def children(self, directory: str) -> list[types.Resource] | None:
        """The direct children of `directory` (relative, "" for the skill's root) as resources, subdirectories
        as `inode/directory`; None when it is not a directory of the skill."""
        files: dict[str, types.Resource] = {}
        directories: dict[str, types.Resource] = {}
        prefix = f"{directory}/" if directory else ""
        for file in self.files:
            if not file.path.startswith(prefix):
                continue
            child, _, rest = file.path.removeprefix(prefix).partition("/")
            uri = f"{_SCHEME}{self.name}/{prefix}{child}"
            if rest:
                directories[child] = types.Resource(uri=uri, name=child, mime_type=DIRECTORY)
            else:
                files[child] = types.Resource(uri=uri, name=child, mime_type=_mime(file.path), size=file.size)
        if not files and not directories:
            return None
        return [*(files | directories).values()]

    def resource(self) -> types.Resource:
        return types.Resource(
            uri=self.uri,
            name=self.name,
            description=str(self.frontmatter.get("description", "")),
            mime_type="text/markdown",
        )


class Digests:
    """The size and digest of each skill file hashed, by its path and stat signature: a file unchanged
    since (same size, modification and change times, inode) is not read again. At most `limit` kept."""

    def __init__(self, limit: int = 4096) -> None:
        self._limit = limit
        self._known: dict[tuple[str, int, int, int, int], tuple[int, str]] = {}

    @staticmethod
    def _key(path: Path, status: os.stat_result) -> tuple[str, int, int, int, int]:
        return (str(path), status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)

    def get(self, path: Path, status: os.stat_result) -> tuple[int, str] | None:
        return self._known.get(self._key(path, status))

    def keep(self, path: Path, status: os.stat_result, data: bytes) -> tuple[int, str]:
        if len(self._known) >= self._limit:
            self._known.clear()
        found = self._known[self._key(path, status)] = (len(data), "sha256:" + hashlib.sha256(data).hexdigest())
        return found


def catalog(root: Path, home: Path, digests: Digests | None = None) -> dict[str, ServedSkill]:
    """The skills the extension can serve, by name: those the `skill` tool finds, within the limits."""
    digests = digests or Digests()
    served: dict[str, ServedSkill] = {}
    real_root = root.resolve()
    for name, skill in discover_skills(root, home).items():
        if not _NAME.match(name):
            continue
        project = is_project_skill(skill, root)
        found = _served(name, skill.directory.resolve(), real_root if project else None, project, digests)
        if found is not None:
            served[name] = found
    return served


def _served(name: str, directory: Path, confine: Path | None, project: bool, digests: Digests) -> ServedSkill | None:
    files: list[SkillFile] = []
    total = 0
    frontmatter: Mapping[str, Any] | None = None
    manifest = b""
    for relative, real, status in _walk(directory, confine):
        known = digests.get(real, status) if relative != "SKILL.md" else None
        if known is None:
            try:
                data = _read(real)
            except (OSError, PathChanged):
                return None  # changed while it was read: served again once it settles
            known = digests.keep(real, status, data)
            if relative == "SKILL.md":
                frontmatter, manifest = _frontmatter(data), data
        files.append(SkillFile(relative, real, *known))
        total += known[0]
        if len(files) > MAX_FILES or total > MAX_TOTAL_BYTES:
            return None
    if frontmatter is None or frontmatter.get("name") != name:
        return None
    files.sort(key=lambda file: (file.path != "SKILL.md", file.path))
    return ServedSkill(name, frontmatter, directory, project, tuple(files), manifest)


def _walk(directory: Path, confine: Path | None) -> Iterator[tuple[str, Path, os.stat_result]]:
    """(relative path, real path, status) of every regular file under `directory`; symlinks are not followed."""
    for top, subdirectories, names in os.walk(directory, followlinks=False):
        subdirectories.sort()
        for name in sorted(names):
            path = Path(top, name)
            try:
                status = path.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(status.st_mode) or (confine is not None and not is_within(path, confine)):
                continue
            yield path.relative_to(directory).as_posix(), path, status


def _read(path: Path) -> bytes:
    fd = open_checked(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise PathChanged(f"{path} is no longer a regular file")
        return handle.read(MAX_TOTAL_BYTES + 1)


def _frontmatter(data: bytes) -> Mapping[str, Any] | None:
    """The frontmatter as JSON values, verbatim (a YAML date becomes its ISO text); None when it does not
    parse, or expands (YAML aliases) past `MAX_FRONTMATTER_VALUES` values or `_MAX_DEPTH` levels."""
    try:
        found, _ = split_frontmatter(data.decode("utf-8"))
        meta = yaml.safe_load(found) if found is not None else None
        if not isinstance(meta, dict) or not isinstance(meta.get("description"), str):
            return None
        plain: dict[str, Any] = _plain(meta, [MAX_FRONTMATTER_VALUES], 0)
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError, _TooLarge):
        return None
    return plain


class _TooLarge(Exception):
    """Frontmatter that expands past the bounds."""


def _plain(value: Any, budget: list[int], depth: int) -> Any:
    """`value` as JSON values (keys as `json.dumps` writes them, other scalars as text), counting each
    value against `budget[0]`: YAML aliases share one object between many places, and a copy (or a
    `json.dumps`) would expand them, or never end on one that contains itself."""
    budget[0] -= 1
    if budget[0] < 0 or depth > _MAX_DEPTH:
        raise _TooLarge
    if isinstance(value, dict):
        return {_key(key): _plain(item, budget, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item, budget, depth + 1) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _key(key: Any) -> str:
    return (
        key
        if isinstance(key, str)
        else json.dumps(key)
        if isinstance(key, bool | int | float) or key is None
        else str(key)
    )


class SkillsFace:
    """The extension's handlers over one Runtime, for `toolrt serve`."""

    def __init__(
        self,
        rt: Runtime,
        scope_of: Callable[[], CallScope],
        *,
        session_of: Callable[[RequestContext], str],
        can_ask: Callable[[RequestContext], bool],
        load: Callable[[RequestContext, str], Awaitable[types.InputRequiredResult | None]],
        offer_unaskable: bool,
    ) -> None:
        self._rt = rt
        self._scope_of = scope_of
        """The request's scope (an authenticated caller's agent and principal, `serve_principal`)."""
        self._session_of = session_of
        self._can_ask = can_ask
        self._load = load
        """Loads a skill at ask: a call of the `skill` tool in the request's session (its ask, held-file
        check and audit record); an input-required result while the person's answer is awaited
        (2026-07-28); `MCPError` when refused."""
        self._offer_unaskable = offer_unaskable
        self._digests = Digests()

    # --- which skills this request may see --------------------------------------------------------

    def _offered(self) -> bool:
        return "skill" in self._rt.tools(self._scope_of())

    def _action(self, name: str, session: str) -> str:
        """The `skill` tool's verdict on loading `name` in `session` (its "always" approvals count)."""
        decision, _ = self._rt.check_call(
            "skill", {"name": name}, replace(self._scope_of(), session=session), approvals=True
        )
        return decision.action

    async def _visible(self, ctx: RequestContext) -> dict[str, ServedSkill]:
        """The skills this request may see: none without the `skill` tool; not denied, not held; at
        ask only for a client that can be asked (or with `--offer-unaskable`)."""
        if not self._offered():
            return {}
        skills = await anyio.to_thread.run_sync(catalog, self._rt.root, Path.home(), self._digests)
        session = self._session_of(ctx)
        may_ask = self._offer_unaskable or self._can_ask(ctx)
        visible: dict[str, ServedSkill] = {}
        for name, skill in skills.items():
            action = self._action(name, session)
            if action == "deny" or (action == "ask" and not may_ask) or await self._held(skill, *skill.manifest):
                continue
            visible[name] = skill
        return visible

    async def _held(self, skill: ServedSkill, file: SkillFile, data: bytes) -> str | None:
        """Why `data`, the content of a project skill's `file` as read to be served, is held (the model wrote
        it and the person has not approved it). The check is of exactly those bytes: a file the model
        flips between the person's content and its own is never served in its own."""
        if not skill.project:
            return None
        journal = journal_for(self._rt.snapshot.data_dir)
        hold = await anyio.to_thread.run_sync(lambda: journal.hold(file.real, self._rt.root, data=data))
        return None if hold is None else hold.reason()

    # --- handlers ---------------------------------------------------------------------------------

    async def list_skills(self, ctx: RequestContext, params: types.PaginatedRequestParams) -> dict[str, Any]:
        skills = await self._visible(ctx)
        entries = [skills[name].entry() for name in sorted(skills)]
        return {"resultType": "complete", "skills": entries, "ttlMs": 0, "cacheScope": "private"}

    async def get_skill(self, ctx: RequestContext, params: GetSkillParams) -> dict[str, Any]:
        skill = (await self._visible(ctx)).get(_skill_name(params.uri) or "")
        if skill is None or skill.uri != params.uri:
            raise MCPError(types.INVALID_PARAMS, f"No skill is served at {params.uri}")
        return {"resultType": "complete", "skill": skill.entry(), "ttlMs": 0, "cacheScope": "private"}

    async def read_directory(self, ctx: RequestContext, params: ReadDirectoryParams) -> dict[str, Any]:
        """`resources/directory/read`: the direct children of a skill's directory, in one page."""
        name, _, directory = params.uri.removeprefix(_SCHEME).partition("/")
        skill = (await self._visible(ctx)).get(name) if params.uri.startswith(_SCHEME) else None
        children = skill.children(directory.rstrip("/")) if skill is not None and not directory.endswith("/") else None
        if children is None:
            raise MCPError(types.INVALID_PARAMS, f"{params.uri} is not a directory resource")
        resources = [child.model_dump(by_alias=True, exclude_none=True) for child in sorted(children, key=_by_uri)]
        return {"resultType": "complete", "resources": resources}

    async def list_resources(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        skills = await self._visible(ctx)
        return types.ListResourcesResult(resources=[skills[name].resource() for name in sorted(skills)])

    async def list_resource_templates(
        self, ctx: RequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        """None: every file of a skill is named by its entry."""
        return types.ListResourceTemplatesResult(resource_templates=[])

    async def read_resource(
        self, ctx: RequestContext, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        uri = str(params.uri)
        name, _, path = uri.removeprefix(_SCHEME).partition("/") if uri.startswith(_SCHEME) else ("", "", "")
        skill = (await self._visible(ctx)).get(name)
        file = next((f for f in skill.files if f.path == path), None) if skill is not None else None
        if skill is None or file is None:
            raise MCPError(types.INVALID_PARAMS, f"Resource not found: {uri}")
        try:
            data = await anyio.to_thread.run_sync(_read, file.real)
        except (OSError, PathChanged):
            raise MCPError(types.INVALID_PARAMS, f"{uri} changed while it was read; list the skills again") from None
        held = await self._held(skill, file, data)  # the bytes served: a change after the check is not
        if held is not None:
            raise MCPError(types.INVALID_PARAMS, f"{uri} was {held}; `toolrt trust` approves it")
        waiting = await self._authorize(ctx, skill)  # the person is not asked about a held file
        if waiting is not None:
            return waiting
        mime = _mime(path)
        contents: types.TextResourceContents | types.BlobResourceContents
        try:
            contents = types.TextResourceContents(uri=uri, mime_type=mime, text=data.decode("utf-8"))
        except UnicodeDecodeError:
            contents = types.BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(data).decode())
        return types.ReadResourceResult(contents=[contents])

    async def _authorize(self, ctx: RequestContext, skill: ServedSkill) -> types.InputRequiredResult | None:
        """Reading a skill's file is loading the skill: allowed as the `skill` tool's rules allow it in the
        request's session; at ask, a call of the `skill` tool puts the ask to the person as any call's is."""
        action = self._action(skill.name, self._session_of(ctx))
        if action == "allow":
            return None
        if action == "ask":
            return await self._load(ctx, skill.name)
        raise MCPError(types.INVALID_PARAMS, f"No skill is served at {skill.uri}")


def _mime(path: str) -> str:
    return "text/markdown" if path.endswith(".md") else mimetypes.guess_type(path)[0] or "application/octet-stream"


def _skill_name(uri: str) -> str | None:
    if not uri.startswith(_SCHEME) or not uri.endswith("/SKILL.md"):
        return None
    parts = PurePosixPath(uri.removeprefix(_SCHEME)).parts
    return parts[0] if len(parts) == 2 else None


def _by_uri(resource: types.Resource) -> str:
    return str(resource.uri)


def fingerprint(root: Path, home: Path, digests: Digests) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    """What a client of the extension sees change: each skill's URI and its files' digests."""
    return tuple(
        (skill.uri, tuple((f.path, f.digest) for f in skill.files))
        for _, skill in sorted(catalog(root, home, digests).items())
    )


async def watch_skills(root: Path, home: Path, announce: Callable[[], Awaitable[None]], *, step_ms: int = 50) -> None:
    """Announce each change of the served skills (a skill added, changed or removed) until cancelled.

    Watches the skill directories recursively where they exist, else their parent (`.toolrt/`,
    `~/.config/toolrt/`) for the directory to appear; a save is compared by `fingerprint`, so a
    change that leaves every skill as it was is not announced."""
    import watchfiles

    bases = (root / ".toolrt" / "skills", home / ".config" / "toolrt" / "skills")

    def targets() -> list[Path]:
        found = [base if base.is_dir() else base.parent for base in bases]
        return [target for target in found if target.is_dir()]

    def relevant(path: str) -> bool:
        return any(is_within(path, base) for base in bases)

    digests = Digests()
    known = await anyio.to_thread.run_sync(fingerprint, root, home, digests)
    while watched := targets():
        stop = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(_set_when_cancelled, stop)
            async for _batch in watchfiles.awatch(
                *watched,
                watch_filter=lambda _change, path: relevant(path),
                step=step_ms,
                stop_event=stop,
                ignore_permission_denied=True,
            ):
                now = await anyio.to_thread.run_sync(fingerprint, root, home, digests)
                if now != known:
                    known = now
                    await announce()
                if targets() != watched:
                    stop.set()  # a skill directory appeared or went: watch again from where it is now
            group.cancel_scope.cancel()


async def _set_when_cancelled(stop: anyio.Event) -> None:
    """Set `stop` when the watch is cancelled: watchfiles' thread notices `stop`, not cancellation, and a
    cancelled watch (a server shutting down) would otherwise wait for its 5 s timeout."""
    try:
        await anyio.sleep_forever()
    finally:
        stop.set()
