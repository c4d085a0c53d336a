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
import importlib.machinery
import importlib.util
import site
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import CodeType, ModuleType

from ..attribution import Journal

__all__ = ["environments_inside", "guard_imports", "in_project", "project_module_name"]

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


class _CheckedFinder:
    """Finds the modules of guarded project packages and refuses the held ones (see the module).

    A `sys.meta_path` finder by its `find_spec` (`importlib.abc.MetaPathFinder`'s module, which brings in
    `importlib.resources`, is not imported for it)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, dot, _ = fullname.partition(".")
        guard = _guards.get(package) if dot else None
        if guard is None and not _guards:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or not spec.has_location:
            return spec if guard is not None else None  # not found, or a namespace package (no code)
        origin = Path(spec.origin)
        if guard is None:  # a project file reached by another name (a handler put the root on sys.path)
            parts = origin.parts
            if _installed(parts):
                return None  # an environment's (inside a root too): imported as always, no root looked at
            guard = next((g for g in list(_guards.values()) if _within(parts, g[0].parts)), None)
            if guard is None:
                return None  # not a project's: imported as always
        root, journal = guard
        if type(spec.loader) is not importlib.machinery.SourceFileLoader:
            # Bytecode (a package whose `__init__.pyc` shadows the person's `handlers.py`) or an extension
            # module (`handlers.so`, found before the source): nothing the journal could check before it ran.
            shown = origin.relative_to(root) if origin.is_relative_to(root) else origin
            raise ImportError(
                f"{shown} is compiled code (bytecode or an extension module) in the project: toolrt imports a "
                "project's modules from their source only. Remove it, or install it as a package",
                name=fullname,
            )
        try:
            source = origin.read_bytes()
        except OSError as error:
            raise ImportError(f"cannot read {origin}: {error.strerror}", name=fullname) from error
        hold = journal.hold(origin, root, data=source)
        if hold is not None:
            journal.refused(hold)  # so that `toolrt trust` lists it, though no tool file names it
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


def _installed(parts: tuple[str, ...]) -> bool:
    """Whether the path of `parts` belongs to a Python environment (a virtualenv kept inside the project
    root). Runs for every import once a project is guarded, so it compares parts (what
    `Path.is_relative_to` compares) without making a Path per prefix."""
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    return any(_within(parts, prefix) for prefix in _prefix_parts(sys.prefix, sys.exec_prefix, sys.base_prefix))


def _within(parts: tuple[str, ...], base: tuple[str, ...]) -> bool:
    """`Path(*parts).is_relative_to(Path(*base))` on parts already split."""
    return parts[: len(base)] == base


@functools.lru_cache(maxsize=8)
def _prefix_parts(*prefixes: str) -> tuple[tuple[str, ...], ...]:
    return tuple(dict.fromkeys(Path(prefix).parts for prefix in prefixes))


def environments_inside(root: Path) -> tuple[Path, ...]:
    """What the interpreter running toolrt loads code from before any check can run: the environment
    (`sys.prefix`, `sys.exec_prefix`), toolrt's own package, and, outside the project, every directory
    on `sys.path` and the user site-packages. Kept read-only in the sandbox wherever a process could
    write them (inside the project, as a `.venv` or a source checkout installed in editable mode; or in
    the temp directory, or beneath an approved `external_directory`), since what a process put there (a
    `.pth` file, a changed module) would run inside toolrt at its next start.

    A `sys.path` directory inside the project (the person's `PYTHONPATH=src`) is the project's own
    source, checked by the import finder; one holding the project is left out too (it would make the
    whole project read-only)."""
    found: dict[Path, None] = {}
    package = str(Path(__file__).parent.parent)  # toolrt/build/project_import.py → toolrt/
    for prefix in (sys.prefix, sys.exec_prefix, package):
        path = _resolved(prefix)
        if path is not None and path != root and path.is_relative_to(root):
            found[path] = None
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    for entry in (sys.prefix, sys.exec_prefix, package, *sys.path, user_site):
        path = _resolved(entry) if entry else None
        if path is None or path.is_relative_to(root) or root.is_relative_to(path) or not path.is_dir():
            continue
        found[path] = None
    kept = sorted(found, key=lambda p: len(p.parts))
    return tuple(p for i, p in enumerate(kept) if not any(p.is_relative_to(q) for q in kept[:i]))


def _resolved(entry: str) -> Path | None:
    try:
        return Path(entry).resolve()
    except OSError:
        return None


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
