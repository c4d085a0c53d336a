"""A project's own handler modules, imported from its root without putting the root on `sys.path`.

Each project root gets a package of its own in `sys.modules`, `_toolrt_project_<digest of the root>`,
whose `__path__` is the root: `handlers` of the project at `/a` is imported as
`_toolrt_project_1f2e….handlers`, so two Runtimes whose roots both hold a `handlers.py` keep two
modules side by side, and nothing of a project shadows an installed package for anyone else.

Inside a project, a package's relative imports (`from .util import x`) work as usual; an absolute
import of another top-level module of the project (`import helpers` from `handlers.py`) does not,
because the root is not on `sys.path`: put such modules in a package and import them relatively.
Handlers of installed packages (plugins, `toolrt.builtin`) import normally.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

__all__ = ["in_project", "project_module_name"]


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
