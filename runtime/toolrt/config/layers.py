"""Find and read every config file of a project: the built-in layer, plugin layers, the project layer.

Everything is read and schema-checked here, collecting every problem instead of stopping at the first,
so `toolrt validate` can report them all in one run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import marshal
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ..attribution import signature_of
from ..beneath import is_within
from ..errors import ConfigError, Problem
from .document import Document
from .loader import load_documents
from .resources import REGISTRY_ORDER, builtin_root
from .reuse import FileKey, Reused
from .schema_check import check_document

__all__ = ["ConfigSet", "Layer", "read_config", "read_layer", "read_single", "tool_files"]

PERMISSIONS_FILE = "permissions.yaml"
SETTINGS_FILE = "toolrt.yaml"
TOOLS_DIR = "tools.d"
_YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class ToolSource:
    """One tool document of a layer, with its description resolved."""

    document: Document
    description: str | None
    """The description text (inline or from description_file), None when missing."""
    digest: str = ""
    """sha256 of the document's data, and of the description a `description_file` holds (`data_digest`;
    the snapshot digest combines these)."""


@dataclass(frozen=True, slots=True)
class Layer:
    """The files of one layer (the built-in one, a plugin's, the project's), read and schema-checked."""

    name: str
    """`builtin`, `plugin:NAME` or `project`."""
    tools: tuple[ToolSource, ...] = ()
    permissions: Document | None = None
    settings: Document | None = None
    files: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(display path, tool ids) of every tool file, broken ones included: the ids a broken file would
    have defined (read from its documents where possible, else its file name), so that serving can
    withhold them rather than fall back to a tool the file meant to replace or disable."""


@dataclass(frozen=True, slots=True)
class ConfigSet:
    """Every layer of a project as read, with the problems found and the paths to watch."""

    root: Path
    layers: tuple[Layer, ...]
    problems: tuple[Problem, ...] = ()
    watched: tuple[Path, ...] = field(default=())
    """Every file and directory whose change should trigger a reload."""


def _display(path: Path, base: Path, prefix: str = "") -> str:
    try:
        return prefix + str(path.relative_to(base))
    except ValueError:
        return str(path)


def tool_files(directory: Path) -> list[tuple[str, str, os.stat_result, os.stat_result]]:
    """(name, path, stat, lstat) of the YAML files of a `tools.d/` directory, sorted by name (hidden files
    skipped). For a file that is no symlink the two are one `lstat`, which the listing makes anyway."""
    found = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.endswith(_YAML_SUFFIXES) and not entry.name.startswith(".") and entry.is_file():
                found.append((entry.name, entry.path, entry.stat(), entry.stat(follow_symlinks=False)))
    found.sort()
    return found


def _read(path: Path, display: str, problems: list[Problem], located: bool = False) -> list[Document]:
    try:
        return load_documents(path, display=display, located=located)
    except ConfigError as error:
        problems.extend(error.problems)
        return []


def _description(document: Document, problems: list[Problem]) -> str | None:
    data = document.data
    if data.get("enabled") is False:
        return str(data.get("description", ""))
    if "description" in data:
        text: str = data["description"]
        if not text.strip():
            problems.append(_at(document, "/description", "'description' is empty: say what the tool does"))
        return text
    if "description_file" in data:
        path = document.path.parent / data["description_file"]
        layer = document.path.parent.parent if document.path.parent.name == TOOLS_DIR else document.path.parent
        if not is_within(path.resolve(), layer.resolve()):
            message = (
                f"description file {data['description_file']} lies outside the layer directory {layer} "
                "(symlinks resolved): keep it beside the tool"
            )
            problems.append(_at(document, "/description_file", message))
            return None
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            problems.append(_at(document, "/description_file", f"cannot read description file {path}: {exc.strerror}"))
            return None
        if not text.strip():
            problems.append(_at(document, "/description_file", f"description file {path} is empty"))
        return text
    problems.append(
        _at(document, "", "missing 'description' (or 'description_file'): the model needs to know what the tool does")
    )
    return None


def _at(document: Document, pointer: str, message: str) -> Problem:
    line, column = document.locate(pointer)
    return Problem(document.name, line, column, pointer, message)


_ToolFile = tuple[tuple[ToolSource, ...], tuple[Problem, ...], tuple[str, ...]]


def data_digest(data: Any) -> str:
    """sha256 of parsed YAML data: equal data, equal digest (comments and layout do not count).

    The data's `marshal` form (version 2, which writes no back-references, so equal values give equal
    bytes; mapping keys in file order) costs a quarter of canonical JSON's. The digest is compared
    only within one process (has a reload changed anything?), never stored.
    """
    try:
        encoded = marshal.dumps(data, 2)
    except ValueError:  # not plain data: cannot come from the YAML loader, kept for safety
        encoded = json.dumps(data, sort_keys=True, default=str).encode()
    return hashlib.sha256(encoded).hexdigest()


def _file_key(kind: str, path: str, display: str, stat: os.stat_result) -> FileKey:
    return (kind, path, display, stat.st_mtime_ns, stat.st_size, stat.st_ino)


def _tool_file(
    path: str, display: str, stat: os.stat_result, link: os.stat_result, reused: Reused, located: bool
) -> _ToolFile:
    """The valid tool sources of one file, its problems, and the ids it defines (or would, if valid).

    Taken from `reused` when the file's path and stat signature are unchanged (a file with a
    `description_file` is always read again: the description may have changed on its own); its
    listing's attribution signature is then kept in `reused.listed` for the attribution check."""
    key = _file_key("tool", path, display, stat)
    found_before: _ToolFile | None = reused.get(key)
    if found_before is not None:
        if reused.taken_over(key):
            reused.listed[path] = signature_of(link, stat)
        return found_before
    problems: list[Problem] = []
    sources: list[ToolSource] = []
    ids: list[str] = []
    documents = _read(Path(path), display, problems, located)
    for document in documents:
        data = document.data
        ids.append(data["id"] if isinstance(data, dict) and isinstance(data.get("id"), str) else _stem(path))
        schema_problems = check_document(document, "tool")
        if schema_problems:
            problems.extend(schema_problems)
            continue
        description = _description(document, problems)
        digest = data_digest([document.data, description] if "description_file" in data else document.data)
        sources.append(ToolSource(document, description, digest))
    if not documents:
        ids.append(_stem(path))
    result = (tuple(sources), tuple(problems), tuple(dict.fromkeys(ids)))
    if not any("description_file" in source.document.data for source in sources):
        reused.keep(key, result)
    return result


def _stem(path: str) -> str:
    """The tool id a file's name suggests (`tools.d/read.yaml` → `read`)."""
    name = os.path.basename(path)
    for suffix in _YAML_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def read_layer(
    name: str,
    base: Path,
    problems: list[Problem],
    watched: list[Path],
    *,
    prefix: str = "",
    reused: Reused | None = None,
    located: bool = False,
) -> Layer:
    """Read one layer rooted at `base` (its tools.d/, permissions.yaml and toolrt.yaml, each optional).

    Files unchanged since the build `reused` carries over from are taken from it, not read again.
    With `located`, tool files record every value's position while parsing (`load_documents`)."""
    reused = reused if reused is not None else Reused()
    tools: list[ToolSource] = []
    file_ids: list[tuple[str, tuple[str, ...]]] = []
    tools_dir = base / TOOLS_DIR
    if tools_dir.is_dir():
        watched.append(tools_dir)
        try:
            files = tool_files(tools_dir)
        except OSError as exc:
            problems.append(
                Problem(_display(tools_dir, base, prefix), 0, 0, "", f"cannot list directory: {exc.strerror}")
            )
            files = []
        shown = _display(tools_dir, base, prefix)
        for file_name, path, stat, link in files:
            display = f"{shown}/{file_name}"
            sources, found, ids = _tool_file(path, display, stat, link, reused, located)
            tools.extend(sources)
            problems.extend(found)
            file_ids.append((display, ids))
    if name == "builtin":
        rank = {tool_id: index for index, tool_id in enumerate(REGISTRY_ORDER)}
        tools.sort(key=lambda source: rank.get(source.document.data["id"], len(rank)))
    return Layer(
        name=name,
        tools=tuple(tools),
        files=tuple(file_ids),
        permissions=_single(base / PERMISSIONS_FILE, base, prefix, "permissions", problems, watched, reused),
        settings=_single(base / SETTINGS_FILE, base, prefix, "project", problems, watched, reused),
    )


def read_single(
    path: Path, kind: str, problems: list[Problem], *, display: str | None = None, reused: Reused | None = None
) -> Document | None:
    """One single-document file (`permissions`/`project` kind) read and schema-checked; None if absent or bad."""
    return _single(path, path.parent, "", kind, problems, [], reused, display=display)


def _single(
    path: Path,
    base: Path,
    prefix: str,
    kind: str,
    problems: list[Problem],
    watched: list[Path],
    reused: Reused | None,
    *,
    display: str | None = None,
) -> Document | None:
    watched.append(path)
    try:
        stat = path.stat()
    except OSError:
        return None
    display = display or _display(path, base, prefix)
    key = _file_key(kind, str(path), display, stat)
    cached = reused.get(key) if reused is not None else None
    if cached is not None:
        problems.extend(cached[1])
        return cast("Document | None", cached[0])
    found_problems: list[Problem] = []
    document = _read_single(path, display, kind, found_problems)
    problems.extend(found_problems)
    if reused is not None:
        reused.keep(key, (document, tuple(found_problems)))
    return document


def _read_single(path: Path, display: str, kind: str, problems: list[Problem]) -> Document | None:
    documents = _read(path, display, problems)
    if not documents:
        return None
    if len(documents) > 1:
        problems.append(
            Problem(
                display,
                documents[1].locate("")[0],
                1,
                "",
                f"{path.name} must hold one document, found {len(documents)}",
            )
        )
    document = documents[0]
    if document.data is None:
        document = Document(document.path, {}, document.marks, document.display)
    found = check_document(document, kind)
    if found:
        problems.extend(found)
        return None
    return document


def _plugin_dirs() -> tuple[tuple[str, Path], ...]:
    """Plugin `tools.d/` directories from the `toolrt.tools` entry points of the installed distributions."""
    return _plugin_dirs_of(_installed_state())


def _installed_state() -> tuple[tuple[str, int], ...]:
    """Each `sys.path` entry with its modification time: installing or removing a distribution
    (a `.dist-info` directory made or deleted) changes it."""
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            continue
    return tuple(state)


@functools.lru_cache(maxsize=4)
def _plugin_dirs_of(state: tuple[tuple[str, int], ...]) -> tuple[tuple[str, Path], ...]:
    """A value-keyed memo: the plugins installed in that state of `sys.path` (a fact of the process's
    installation, the same for every Runtime; reading the distributions' metadata costs milliseconds)."""
    return tuple(_load_plugin_dirs())


def _any_plugin_installed() -> bool:
    """A quick look for `[toolrt.tools]` in installed distributions' entry_points.txt files.

    Parsing every distribution's metadata (importlib.metadata) costs tens of milliseconds on each
    start; most installs have no plugin at all, which this finds in a few.
    """
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith((".dist-info", ".egg-info")):
                try:
                    with open(os.path.join(entry or ".", name, "entry_points.txt"), encoding="utf-8") as handle:
                        if "[toolrt.tools]" in handle.read():
                            return True
                except OSError:
                    continue
    return False


def _load_plugin_dirs() -> Iterable[tuple[str, Path]]:
    if not _any_plugin_installed():
        return
    from importlib.metadata import entry_points

    for entry in entry_points(group="toolrt.tools"):
        try:
            value = entry.load()
        except Exception as exc:  # a broken plugin must not take the runtime down
            yield entry.name, Path(f"<plugin {entry.name} failed to load: {exc}>")
            continue
        yield entry.name, Path(str(value))


def _layer_signature(base: Path) -> tuple[object, ...]:
    """The names and stat signatures of a layer's files: two equal signatures mean the same layer."""
    files: list[object] = []
    tools_dir = base / TOOLS_DIR
    try:
        files.extend((name, stat.st_mtime_ns, stat.st_size, stat.st_ino) for name, _, stat, _ in tool_files(tools_dir))
    except OSError:
        files.append(None)
    for name in (PERMISSIONS_FILE, SETTINGS_FILE):
        try:
            stat = (base / name).stat()
            files.append((name, stat.st_mtime_ns, stat.st_size, stat.st_ino))
        except OSError:
            files.append(None)
    return tuple(files)


def _installed_layer(name: str, base: Path, prefix: str, problems: list[Problem]) -> Layer:
    """The built-in layer or a plugin's: files of an installed package, not of a project."""
    layer, found, volatile = _installed_layer_of(name, base, prefix, _layer_signature(base))
    if volatile:  # a description_file may change without its tool file: read it again
        found_now: list[Problem] = []
        layer = read_layer(name, base, found_now, [], prefix=prefix)
        found = tuple(found_now)
    problems.extend(found)
    return layer


@functools.lru_cache(maxsize=16)
def _installed_layer_of(
    name: str, base: Path, prefix: str, signature: tuple[object, ...]
) -> tuple[Layer, tuple[Problem, ...], bool]:
    """A value-keyed memo of an installed layer by its files' signature, shared by every Runtime of the
    process (the package's own files; bounded): (layer, problems, whether it uses description files)."""
    problems: list[Problem] = []
    layer = read_layer(name, base, problems, [], prefix=prefix)
    volatile = any("description_file" in source.document.data for source in layer.tools)
    return layer, tuple(problems), volatile


def read_config(
    root: Path,
    *,
    locked: Path | None = None,
    plugins: bool = True,
    reused: Reused | None = None,
    located: bool = False,
) -> ConfigSet:
    """Read the built-in layer, plugin layers (entry points `toolrt.tools`) and the project at `root`.

    The project's files unchanged since the build `reused` carries over from are not read again.
    `located`: the project's tool files record every value's position while parsing (`validate`)."""
    problems: list[Problem] = []
    watched: list[Path] = []
    builtin = builtin_root()
    layers = [_installed_layer("builtin", builtin, "<builtin>/", problems)]
    if plugins:
        for name, directory in _plugin_dirs():
            if not directory.is_dir():
                problems.append(Problem(str(directory), 0, 0, "", f"plugin '{name}' does not point at a directory"))
                continue
            base = directory.parent if directory.name == TOOLS_DIR else directory
            layers.append(_installed_layer(f"plugin:{name}", base, f"<plugin {name}>/", problems))
    if root.resolve() != builtin.resolve():
        layers.append(read_layer("project", root, problems, watched, reused=reused, located=located))
    env_locked = os.environ.get("TOOLRT_LOCKED_PERMISSIONS")
    locked_path = Path(env_locked) if env_locked else locked
    if locked_path is not None:
        watched.append(locked_path)
    return ConfigSet(root=root, layers=tuple(layers), problems=tuple(problems), watched=tuple(dict.fromkeys(watched)))
