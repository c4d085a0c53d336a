"""Find and read every config file of a project: the built-in layer, plugin layers, the project layer.

Everything is read and schema-checked here, collecting every problem instead of stopping at the first,
so `toolrt validate` can report them all in one run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, Problem
from .document import Document
from .loader import load_documents
from .resources import builtin_root
from .validation import check_document

__all__ = ["ConfigSet", "Layer", "read_config", "read_layer", "read_single", "tool_files"]

PERMISSIONS_FILE = "permissions.yaml"
SETTINGS_FILE = "toolrt.yaml"
TOOLS_DIR = "tools.d"
_YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class ToolSource:
    document: Document
    description: str | None
    """The description text (inline or from description_file), None when missing."""


@dataclass(frozen=True, slots=True)
class Layer:
    name: str
    """`builtin`, `plugin:NAME` or `project`."""
    tools: tuple[ToolSource, ...] = ()
    permissions: Document | None = None
    settings: Document | None = None


@dataclass(frozen=True, slots=True)
class ConfigSet:
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


def tool_files(directory: Path) -> list[Path]:
    """The YAML files of a `tools.d/` directory, sorted by name (hidden files skipped)."""
    return sorted(
        p for p in directory.iterdir() if p.suffix in _YAML_SUFFIXES and not p.name.startswith(".") and p.is_file()
    )


def _read(path: Path, display: str, problems: list[Problem]) -> list[Document]:
    try:
        return load_documents(path, display=display)
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


def read_layer(name: str, base: Path, problems: list[Problem], watched: list[Path], *, prefix: str = "") -> Layer:
    """Read one layer rooted at `base` (its tools.d/, permissions.yaml and toolrt.yaml, each optional)."""
    tools: list[ToolSource] = []
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
        if not files and name == "project":
            problems.append(Problem(_display(tools_dir, base, prefix), 0, 0, "", "directory has no .yaml files"))
        for path in files:
            for document in _read(path, _display(path, base, prefix), problems):
                schema_problems = check_document(document, "tool")
                if schema_problems:
                    problems.extend(schema_problems)
                    continue
                tools.append(ToolSource(document, _description(document, problems)))
    return Layer(
        name=name,
        tools=tuple(tools),
        permissions=_single(base / PERMISSIONS_FILE, base, prefix, "permissions", problems, watched),
        settings=_single(base / SETTINGS_FILE, base, prefix, "project", problems, watched),
    )


def read_single(path: Path, kind: str, problems: list[Problem], *, display: str | None = None) -> Document | None:
    """One single-document file (`permissions`/`project` kind) read and schema-checked; None if absent or bad."""
    return _single(path, path.parent, "", kind, problems, [], display=display)


def _single(
    path: Path,
    base: Path,
    prefix: str,
    kind: str,
    problems: list[Problem],
    watched: list[Path],
    *,
    display: str | None = None,
) -> Document | None:
    watched.append(path)
    if not path.exists():
        return None
    display = display or _display(path, base, prefix)
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


def _plugin_dirs() -> Iterable[tuple[str, Path]]:
    from importlib.metadata import entry_points

    for entry in entry_points(group="toolrt.tools"):
        try:
            value = entry.load()
        except Exception as exc:  # a broken plugin must not take the runtime down
            yield entry.name, Path(f"<plugin {entry.name} failed to load: {exc}>")
            continue
        yield entry.name, Path(str(value))


def read_config(root: Path, *, locked: Path | None = None, plugins: bool = True) -> ConfigSet:
    """Read the built-in layer, plugin layers (entry points `toolrt.tools`) and the project at `root`."""
    problems: list[Problem] = []
    watched: list[Path] = []
    builtin = builtin_root()
    layers = [read_layer("builtin", builtin, problems, [], prefix="<builtin>/")]
    if plugins:
        for name, directory in _plugin_dirs():
            if not directory.is_dir():
                problems.append(Problem(str(directory), 0, 0, "", f"plugin '{name}' does not point at a directory"))
                continue
            layers.append(
                read_layer(
                    f"plugin:{name}",
                    directory.parent if directory.name == TOOLS_DIR else directory,
                    problems,
                    [],
                    prefix=f"<plugin {name}>/",
                )
            )
    if root.resolve() != builtin.resolve():
        layers.append(read_layer("project", root, problems, watched))
    env_locked = os.environ.get("TOOLRT_LOCKED_PERMISSIONS")
    locked_path = Path(env_locked) if env_locked else locked
    if locked_path is not None:
        watched.append(locked_path)
    return ConfigSet(root=root, layers=tuple(layers), problems=tuple(problems), watched=tuple(dict.fromkeys(watched)))
