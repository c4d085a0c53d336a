"""Where the built-in layer lives: inside the wheel, or at the repository root in a source checkout."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

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
    """A YAML file toolrt ships (the analyzer's tables, the language servers), read with libyaml's loader
    where PyYAML has it: the pure-Python one takes ten times as long, and every process reads these."""
    import yaml

    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)  # noqa: S506 (a safe loader)
