"""A project's handler code: which files each tool runs, and loading changed code before a reload uses it.

A project tool's Python references (`python:` handler, `analyzer`, `preview`, `format_validation_error`)
name modules of the project; those modules and the project modules they import are the tool's code
(`project_code`, read from the source with `ast`, never by importing).

A reload that sees that code change takes the new snapshot only once the new code loads, in two steps that
`Runtime.reload` runs one after the other, so that a check can sit between them (code the person has not
approved is compiled, never imported):
1. `compile_code`: `compile()` each changed file (nothing runs): a syntax error located at its file:line;
2. `import_code`: import every project tool's modules afresh from disk; on any failure the modules that
   were serving are put back in `sys.modules` and the failure comes back located (the file and line of the
   project frame that raised, or the tool's YAML when the module lacks the named function).
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, ModuleType

from ..config.model import PythonHandler, ToolDefinition
from ..errors import Problem
from .compiled import CompiledTool, import_ref, locate
from .project_import import project_module_name

__all__ = ["IMPORT_LOCK", "ProjectCode", "changed_files", "compile_code", "import_code", "project_code", "python_refs"]

MAX_CODE_FILES = 500
"""At most this many project modules are followed from one project's handlers."""

IMPORT_LOCK = threading.RLock()
"""Held while a reload imports project code, and by a call importing a handler: a call never picks up a
module of a reload's import that is then rolled back."""


@dataclass(frozen=True, slots=True)
class ProjectCode:
    """The project modules the tools run, found from the source."""

    files: Mapping[Path, tuple[int, int]]
    """Every module file a project tool's Python reference names or (transitively) imports: (mtime_ns, size)."""
    by_tool: Mapping[str, frozenset[Path]]
    """Tool id → the files of its own references and what they import (tools without project code absent)."""


def python_refs(definition: ToolDefinition) -> list[tuple[str, str]]:
    """(JSON pointer, `module:function`) of each Python reference a tool definition makes."""
    refs = []
    if isinstance(definition.handler, PythonHandler):
        refs.append(("/handler/python", definition.handler.ref))
    if definition.permission.analyzer and ":" in definition.permission.analyzer:
        refs.append(("/permission/analyzer", definition.permission.analyzer))
    if definition.permission.preview:
        refs.append(("/permission/preview", definition.permission.preview))
    if definition.format_validation_error:
        refs.append(("/format_validation_error", definition.format_validation_error))
    return refs


def _module_file(root: Path, parts: tuple[str, ...]) -> Path | None:
    if not parts or not all(parts):
        return None
    for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=1024)
def _direct_imports(root: Path, path: Path, stamp: tuple[int, int]) -> tuple[Path, ...]:
    """The project module files `path` imports (its source read once per version of the file)."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return ()
    found: dict[Path, None] = {}
    for parts in imported_names(tree, path, root):
        module = _module_file(root, parts)
        if module is not None and module != path:
            found[module] = None
    return tuple(found)


def imported_names(tree: ast.AST, path: Path, root: Path) -> Iterator[tuple[str, ...]]:
    """The dotted names (as parts) the module `tree`, read from `path`, imports, relative imports
    resolved against its package under `root`; `from a import b` gives both `a` and `a.b`."""
    package = path.parent.relative_to(root).parts if path.is_relative_to(root) else ()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (tuple(alias.name.split(".")) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            stem = (*base, *(node.module.split(".") if node.module else ()))
            yield stem
            yield from ((*stem, alias.name) for alias in node.names)


def project_code(root: Path, tools: Mapping[str, CompiledTool]) -> ProjectCode:
    """The module files each project tool runs, and the stamps of them all (at most 500 files)."""
    files: dict[Path, tuple[int, int]] = {}
    by_tool: dict[str, frozenset[Path]] = {}
    for tool_id, tool in tools.items():
        definition = tool.definition
        if definition.layer != "project":
            continue
        pending = [
            found
            for _, ref in python_refs(definition)
            if (found := _module_file(root, tuple(ref.partition(":")[0].split(".")))) is not None
        ]
        own: set[Path] = set()
        while pending and len(files) < MAX_CODE_FILES:
            path = pending.pop()
            if path in own:
                continue
            stamp = files.get(path) or _stamp(path)
            if stamp is None:
                continue
            own.add(path)
            files[path] = stamp
            pending.extend(_direct_imports(root, path, stamp))
        if own:
            by_tool[tool_id] = frozenset(own)
    return ProjectCode(MappingProxyType(files), MappingProxyType(by_tool))


def changed_files(new: Mapping[Path, tuple[int, int]], old: Mapping[Path, tuple[int, int]]) -> frozenset[Path]:
    """Files added, edited or gone between two snapshots' code stamps."""
    return frozenset(path for path, stamp in new.items() if old.get(path) != stamp) | (old.keys() - new.keys())


def _shown(root: Path, path: Path | str) -> str:
    path = Path(path)
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def compile_code(root: Path, files: Iterable[Path]) -> list[Problem]:
    """`compile()` each file (never run): its syntax errors, located. Missing files are the import step's."""
    problems = []
    for path in sorted(files):
        try:
            source = path.read_bytes()
        except OSError:
            continue
        try:
            compile(source, str(path), "exec", dont_inherit=True)
        except SyntaxError as error:
            where = _shown(root, error.filename or path)
            message = f"{type(error).__name__}: {error.msg} (the code in use is kept until this is fixed)"
            problems.append(Problem(where, error.lineno or 0, error.offset or 0, "", message))
        except ValueError as error:  # null bytes
            problems.append(Problem(_shown(root, path), 0, 0, "", f"cannot compile: {error}"))
    return problems


def import_code(root: Path, tools: Mapping[str, CompiledTool], changed: Iterable[Path] = ()) -> list[Problem]:
    """Import every project tool's Python references afresh from disk, as the next calls will use them.

    The project's modules in use are set aside first (an edited helper must reach the modules importing it,
    too); when anything fails they are put back, so the code in use keeps serving, and each failure is
    returned located. `changed` files lose their cached bytecode first: an edit within the same second
    that keeps the size would otherwise import the old code.
    """
    for path in changed:
        try:
            Path(importlib.util.cache_from_source(str(path))).unlink(missing_ok=True)
        except (OSError, ValueError, NotImplementedError):
            pass
    prefix = project_module_name(root, "")
    problems: list[Problem] = []
    with IMPORT_LOCK:
        saved = {name: module for name, module in sys.modules.items() if name.startswith(prefix)}
        for name in saved:
            del sys.modules[name]
        importlib.invalidate_caches()
        try:
            for tool in tools.values():
                definition = tool.definition
                if definition.layer != "project":
                    continue
                for pointer, ref in python_refs(definition):
                    try:
                        import_ref(ref, root)
                    except ImportError as error:
                        problem = _located(root, definition, pointer, ref, error)
                        if problem not in problems:
                            problems.append(problem)
        finally:
            if problems:
                _restore(prefix, saved)
    return problems


def _restore(prefix: str, saved: Mapping[str, ModuleType]) -> None:
    """Put the modules that were in use back, under their names and as attributes of their packages."""
    for name in [name for name in sys.modules if name.startswith(prefix)]:
        del sys.modules[name]
    sys.modules.update(saved)
    for name, module in saved.items():
        parent, _, child = name.rpartition(".")
        if parent in sys.modules:
            setattr(sys.modules[parent], child, module)


def _located(root: Path, definition: ToolDefinition, pointer: str, ref: str, error: ImportError) -> Problem:
    """Where an import failed: the project frame that raised (a syntax error's own line), else the YAML."""
    cause = error.__cause__
    suffix = f"(importing '{ref}' for tool '{definition.id}'; the code in use is kept until this is fixed)"
    if isinstance(cause, SyntaxError) and cause.filename:
        message = f"{type(cause).__name__}: {cause.msg} {suffix}"
        return Problem(_shown(root, cause.filename), cause.lineno or 0, cause.offset or 0, "", message)
    if cause is not None:
        frames = [
            frame for frame in traceback.extract_tb(cause.__traceback__) if Path(frame.filename).is_relative_to(root)
        ]
        if frames:
            frame = frames[-1]
            message = f"{type(cause).__name__}: {cause} {suffix}"
            return Problem(_shown(root, frame.filename), frame.lineno or 0, 0, "", message)
    return locate(definition, pointer, f"{error} {suffix}")
