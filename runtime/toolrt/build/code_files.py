"""The project's code as files: the modules of its `python:` handlers and the project modules they import
(each a protected path), and their contents' digests (the config digest)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..config.model import PythonHandler
from .compiled import CompiledTool
from .handler_code import imported_names

__all__ = ["MAX_IMPORTED_MODULES", "code_digests", "handler_modules", "imported_modules"]


def handler_modules(root: Path, tools: Mapping[str, CompiledTool]) -> dict[Path, tuple[int, int]]:
    """The files inside the project root that hold `python:` handlers, with their (mtime_ns, size).

    Found by path (`pkg.mod` → `pkg/mod.py` or `pkg/mod/__init__.py`), never by importing.
    """
    names = {
        tool.definition.handler.ref.partition(":")[0]
        for tool in tools.values()
        if isinstance(tool.definition.handler, PythonHandler) and tool.definition.layer == "project"
    }
    found: dict[Path, tuple[int, int]] = {}
    for name in sorted(names):
        parts = name.split(".")
        for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
            try:
                stat = candidate.stat()
            except OSError:
                continue
            found[candidate] = (stat.st_mtime_ns, stat.st_size)
            break
    return found


MAX_IMPORTED_MODULES = 500


def imported_modules(root: Path, modules: Iterable[Path]) -> tuple[Path, ...]:
    """`modules` and the project modules they import, transitively (at most 500 files): all of them are
    code toolrt runs, so each is a protected path. Imports are read from the source, never executed."""
    import ast

    found: dict[Path, None] = {}
    pending = list(modules)
    while pending and len(found) < MAX_IMPORTED_MODULES:
        path = pending.pop()
        if path in found:
            continue
        found[path] = None
        try:
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        for parts in imported_names(tree, path, root):
            for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
                if parts and candidate.is_file() and candidate not in found:
                    pending.append(candidate)
    return tuple(found)


def code_digests(root: Path, files: Mapping[Path, tuple[int, int]]) -> list[tuple[str, str]]:
    """(path relative to the project, digest of the content) of each handler code file."""
    found = []
    for path in files:
        try:
            content = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            content = "unreadable"
        try:
            shown = str(path.relative_to(root))
        except ValueError:
            shown = str(path)
        found.append((shown, content))
    return sorted(found)
