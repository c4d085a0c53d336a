"""A project's own handler modules, imported from its root without putting the root on `sys.path`.

Each project root gets a package of its own in `sys.modules`, `_toolrt_project_<digest of the root>`,
whose `__path__` is the root: `handlers` of the project at `/a` is imported as
`_toolrt_project_1f2e….handlers`, so two Runtimes whose roots both hold a `handlers.py` keep two
modules side by side, and nothing of a project shadows an installed package for anyone else.

Inside a project, a package's relative imports (`from .util import x`) work as usual; an absolute
import of another top-level module of the project (`import helpers` from `handlers.py`) does not,
because the root is not on `sys.path`: put such modules in a package and import them relatively.
Handlers of installed packages (plugins, `toolrt.builtin`) import normally.

Every project module is imported through `_CheckedFinder` (`guard_imports`), under the project's package
name or any other (a handler that put the root on `sys.path`): its source is read once,
asked about in the attribution journal (`toolrt.attribution`), and compiled from exactly the bytes that
were checked; a held module (the model changed it, the person has not approved) raises ImportError and
none of it runs. Bytecode caches are neither read nor written for project modules: a `.pyc` the model
wrote beside an approved source would otherwise run instead of it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import CodeType, ModuleType

from ..attribution import Journal

__all__ = ["guard_imports", "in_project", "project_module_name"]

_guards: dict[str, tuple[Path, Journal]] = {}
"""Project package name → (root, journal) its modules are checked against."""
_guards_lock = threading.Lock()


class _CheckedLoader(importlib.machinery.SourceFileLoader):
    """Compiles the source bytes that were checked, never a bytecode cache."""

    def __init__(self, fullname: str, path: str, source: bytes) -> None:
        super().__init__(fullname, path)
        self._source = source

    def get_code(self, fullname: str) -> CodeType:
        return compile(self._source, self.path, "exec", dont_inherit=True)

    def get_source(self, fullname: str) -> str:
        return importlib.util.decode_source(self._source)


class _CheckedFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of guarded project packages and refuses the held ones (see the module)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, dot, _ = fullname.partition(".")
        guard = _guards.get(package) if dot else None
        if guard is None and not _guards:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader) or spec.origin is None:
            return spec if guard is not None else None
        origin = Path(spec.origin)
        if guard is None:  # a project file reached by another name (a handler put the root on sys.path)
            guard = next((g for g in list(_guards.values()) if origin.is_relative_to(g[0])), None)
            if guard is None or _installed(origin):
                return None  # not a project's (an environment inside the root is not): imported as always
        root, journal = guard
        try:
            source = origin.read_bytes()
        except OSError as error:
            raise ImportError(f"cannot read {origin}: {error.strerror}", name=fullname) from error
        hold = journal.hold(origin, root, data=source)
        if hold is not None:
            shown = origin.relative_to(root) if origin.is_relative_to(root) else origin
            raise ImportError(f"{shown} was {hold.reason()}", name=fullname)
        checked = importlib.util.spec_from_file_location(
            fullname,
            spec.origin,
            loader=_CheckedLoader(fullname, spec.origin, source),
            submodule_search_locations=spec.submodule_search_locations,
        )
        if checked is not None:
            checked.cached = None
        return checked


_finder = _CheckedFinder()


def _installed(origin: Path) -> bool:
    """Whether `origin` belongs to a Python environment (a virtualenv kept inside the project root)."""
    prefixes = {sys.prefix, sys.exec_prefix, sys.base_prefix}
    return any(part in ("site-packages", "dist-packages") for part in origin.parts) or any(
        origin.is_relative_to(prefix) for prefix in prefixes
    )


def guard_imports(root: Path, journal: Journal) -> None:
    """Check every module of the project at `root` against `journal` when it is imported (see the module)."""
    name = _package(str(root))
    with _guards_lock:
        _guards[name] = (root, journal)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


@functools.lru_cache(maxsize=256)
def _package(root: str) -> str:
    """The name of the root's package, created in `sys.modules` on first use (a pure function of `root`)."""
    name = "_toolrt_project_" + hashlib.sha256(root.encode()).hexdigest()[:16]
    if name not in sys.modules:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [root]
        sys.modules[name] = importlib.util.module_from_spec(spec)
    return name


def in_project(root: Path, module: str) -> bool:
    """Whether `module`'s top-level name is a module or package file under `root`."""
    top = module.split(".", 1)[0]
    return (root / f"{top}.py").is_file() or (root / top / "__init__.py").is_file()


def project_module_name(root: Path, module: str) -> str:
    """The name under which `module` of the project at `root` is imported."""
    return f"{_package(str(root))}.{module}"
