"""Where the built-in layer lives: inside the wheel, or at the repository root in a source checkout."""

from __future__ import annotations

import functools
import json
import marshal
import os
import sys
from pathlib import Path
from typing import Any

from ..beneath import is_within

__all__ = ["REGISTRY_ORDER", "SCHEMA_NAMES", "builtin_root", "read_yaml", "schema"]

SCHEMA_NAMES = {
    "tool": "tool.schema.json",
    "permissions": "permissions.schema.json",
    "project": "project.schema.json",
    "settings": "settings.schema.json",
}

REGISTRY_ORDER = (
    "invalid",
    "question",
    "bash",
    "read",
    "glob",
    "grep",
    "edit",
    "write",
    "task",
    "webfetch",
    "todowrite",
    "websearch",
    "codesearch",
    "skill",
    "apply_patch",
    "lsp",
    "batch",
    "plan_exit",
    "plan_enter",
)
"""The built-in tools in OpenCode's registry order (its `ToolRegistry.all()`): tools are offered in this
order, then built-ins OpenCode lacks in file order, then plugin and project tools in file order. A
stable order also keeps providers' prompt caches warm."""


@functools.cache
def builtin_root() -> Path:
    """The directory holding the built-in `tools.d/`, `permissions.yaml`, `toolrt.yaml` and `schemas/`."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "_builtin"
    if packaged.is_dir():
        return packaged
    return package.parent.parent  # a source checkout: runtime/toolrt/ sits two levels below the root


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """A config schema by short name (`tool`, `permissions`, `project`); parsed once."""
    with open(builtin_root() / "schemas" / SCHEMA_NAMES[name], encoding="utf-8") as handle:
        data: dict[str, Any] = json.load(handle)
    return data


def read_yaml(path: Path) -> Any:
    """A YAML file toolrt ships (the analyzer's tables, the language servers) or one a host names, read
    with libyaml's loader where PyYAML has it: the pure-Python one takes ten times as long, and every
    process reads these. A file of the package is kept compiled beside it as bytecode is
    (`__pycache__/<name>.<tag>.marshal`, checked against the file's size and modification time), so a
    process reads its tables with `marshal` instead of parsing YAML (fifty times faster)."""
    compiled = _compiled_path(path)
    if compiled is None:
        return _parse_yaml(path)
    try:
        stat = path.stat()
        with open(compiled, "rb") as handle:
            signature, data = marshal.load(handle)
        if signature == (stat.st_mtime_ns, stat.st_size):
            return data
    except (OSError, EOFError, ValueError, TypeError):
        pass  # no compiled copy yet, or a torn or foreign one: parse the file
    stat = path.stat()
    data = _parse_yaml(path)
    if not sys.dont_write_bytecode:
        try:
            encoded = marshal.dumps(((stat.st_mtime_ns, stat.st_size), data))
            compiled.parent.mkdir(exist_ok=True)
            temporary = compiled.with_name(f"{compiled.name}.{os.getpid()}")
            temporary.write_bytes(encoded)
            os.replace(temporary, compiled)  # readers see the old copy or the whole new one
        except (OSError, ValueError):
            pass  # a read-only install, or a value marshal cannot hold: parse it again next time
    return data


def _compiled_path(path: Path) -> Path | None:
    """Where the compiled copy of a file of the package goes; None for a file outside the package."""
    package = Path(__file__).resolve().parent.parent
    resolved = path.resolve()
    if not is_within(resolved, package):
        return None
    return resolved.parent / "__pycache__" / f"{resolved.name}.{sys.implementation.cache_tag}.marshal"


def _parse_yaml(path: Path) -> Any:
    import yaml

    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 (a safe loader)
