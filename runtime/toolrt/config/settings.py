"""Every configurable value, from one layered model: where each came from, and what a project may not set.

Precedence, highest first (each setting on its own):

```
locked file    its `settings:` section (LOCKABLE: data_dir, audit, serve.host)
command line   --data-dir, --audit, --locked-permissions, --sandbox, --flag, serve's --host/--port
environment    TOOLRT_DATA_DIR, TOOLRT_TRUNCATE__MAX_LINES (nested: `__`), TOOLRT_FLAG_<NAME>
user file      $XDG_CONFIG_HOME/toolrt/settings.yaml (default ~/.config/toolrt/settings.yaml)
project .env   TOOLRT_… lines of <root>/.env
toolrt.yaml    `defaults:`, `locked_permissions`, `serve:`, `lsp:`; flags take their declared `default`
default
```
The project's files (`.env`, `toolrt.yaml`) are writable by a model, so they may not set the
**host-only** settings (`HOST_ONLY`): a value found there is ignored and reported as a located
warning. The administrator's locked permissions file (`locked_permissions`, found through the
layers below it) may fix host-only settings in its `settings:` section: a locked value beats every
layer, the command line and the environment included, because whoever starts toolrt (a shell
script, an agent host, a model with a bash tool) can pass options and variables, and the locked
file is the one source none of them can change. What it overrode is listed in `ignored`.

pydantic-settings reads the environment and `.env` (prefix, nesting, JSON for lists) and pydantic
checks the merged values against `Settings`; neither is imported when nothing but defaults and the
YAML files set anything, so the CLI's fast commands stay fast.

The parts, a module each: `settings_model` (every setting's type and default, and what a resolution
returns), `host_only` (what a project's files may not set), `settings_sources` (each layer read from
its source), `settings_values` (merged values made a `Settings`). This module merges the layers by the
precedence above, and every name a host or another floor uses is imported from it.

Extension points: a new setting is a field of `Settings` (or of a nested section) plus its schema
entries in `schemas/settings.schema.json` and `project.schema.json`; one a project must not set, or
may set only to some values (a sandbox loosening, a non-loopback host), is an entry of `HOST_ONLY`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, Problem, UsageError
from .document import Document
from .host_only import HOST_ONLY, LOCKABLE, SECRET_PATTERNS, host_only_guard, how_to_set, is_secret_name
from .model import FlagDef
from .settings_model import (
    AuthSettings,
    CommandLineSettings,
    CredentialSettings,
    IgnoredSetting,
    LspServerSettings,
    LspSettings,
    NetworkNames,
    ResolvedSettings,
    RetentionSettings,
    SandboxSettings,
    ServeSettings,
    Settings,
    TruncateSettings,
    default_data_dir,
    user_settings_file,
)
from .settings_sources import (
    SettingsLayer,
    command_line_layer,
    dotenv_layer,
    environment_layer,
    locked_layer,
    project_layer,
    user_layer,
)
from .settings_values import (
    FALSE_WORDS,
    TRUE_WORDS,
    boolean_setting,
    checked_settings,
    parse_flag_option,
    plain_settings,
)

if TYPE_CHECKING:
    from .reuse import Reused

__all__ = [
    "HOST_ONLY",
    "LOCKABLE",
    "CommandLineSettings",
    "IgnoredSetting",
    "LspServerSettings",
    "LspSettings",
    "ResolvedSettings",
    "AuthSettings",
    "RetentionSettings",
    "CredentialSettings",
    "NetworkNames",
    "SandboxSettings",
    "ServeSettings",
    "Settings",
    "TruncateSettings",
    "SECRET_PATTERNS",
    "default_data_dir",
    "is_secret_name",
    "host_only_guard",
    "parse_flag_option",
    "resolve_settings",
    "user_settings_file",
]


_PATH_KEYS = ("data_dir", "audit", "locked_permissions")


def resolve_settings(
    root: Path,
    *,
    project: Document | None = None,
    declared_flags: Mapping[str, FlagDef] | None = None,
    cli: CommandLineSettings | None = None,
    environ: Mapping[str, str] | None = None,
    user_file: Path | None = None,
    reused: Reused | None = None,
) -> ResolvedSettings:
    """Every setting's effective value and origin, by the precedence in this module's docstring.

    `reused`: the build's parsed files (`config.reuse`), so the locked file is parsed once per build.

    Raises:
        UsageError: the command line names a flag the config does not declare.
        ConfigError: a value that is not of its setting's type (located at its origin).
    """
    cli = cli or CommandLineSettings()
    environ = os.environ if environ is None else environ
    declared = declared_flags or {}
    unknown = sorted(set(cli.flags) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise UsageError(f"unknown flag {', '.join(map(repr, unknown))} (declared flags: {known})")
    flag_names = tuple(sorted(declared))
    problems: list[Problem] = []
    layers = [
        command_line_layer(cli),
        environment_layer(environ, flag_names),
        user_layer(user_file or user_settings_file(), problems),
        dotenv_layer(root / ".env", flag_names, ".env"),
    ]
    if project is not None:
        layers.append(project_layer(project))
    values, origins, ignored, warnings = _merge(layers)
    locked_path = values.get("locked_permissions")
    locked = locked_layer(locked_path, reused) if isinstance(locked_path, Path) else None
    if locked is not None and locked.values:
        values, origins, ignored, warnings = _merge([locked, *layers])
    if problems:
        raise ConfigError(problems)
    flags = {name: flag.default for name, flag in declared.items()}
    for name, flag in declared.items():
        origins.setdefault(f"flags.{name}", flag.source or "default")
    settings_values = {k: v for k, v in values.items() if not k.startswith("flags.")}
    settings = (
        (plain_settings(settings_values) or checked_settings(settings_values, origins))
        if settings_values
        else Settings()
    )
    for key, value in values.items():
        if key.startswith("flags.") and key[6:] in declared:  # the user file may name other projects' flags
            flags[key[6:]] = boolean_setting(key, value, origins[key])
    return ResolvedSettings(
        settings, MappingProxyType(flags), MappingProxyType(origins), tuple(ignored), tuple(warnings)
    )


def _merge(
    layers: list[SettingsLayer],
) -> tuple[dict[str, Any], dict[str, str], list[IgnoredSetting], list[Problem]]:
    """Values and origins by precedence (the first layer that sets a key wins), the values ignored,
    and the located warnings for host-only values in project files."""
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    ignored: list[IgnoredSetting] = []
    warnings: list[Problem] = []
    for layer in layers:
        for key, value in layer.values.items():
            guard = host_only_guard(key)
            if layer.project and guard is not None and guard(value):
                reason = (
                    f"{key} is a host-only setting: a project file may not set it, so this value is ignored "
                    f"(set it with {how_to_set(key)} "
                    f"or in {user_settings_file()})"
                )
                ignored.append(IgnoredSetting(key, value, layer.origins[key], reason))
                file, line, column, pointer = layer.where.get(key, (layer.name, 0, 0, ""))
                warnings.append(Problem(file, line, column, pointer, reason, severity="warning"))
                continue
            if key in values:
                if origins[key].startswith("locked "):
                    reason = f"{key} is fixed by the locked file ({origins[key]}), which beats every other source"
                    ignored.append(IgnoredSetting(key, value, layer.origins[key], reason))
                continue
            values[key] = _relative_to(layer.base, key, value)
            origins[key] = layer.origins[key]
    return values, origins, ignored, warnings


def _relative_to(base: Path | None, key: str, value: Any) -> Any:
    if key == "sandbox.mode" and value is False:
        return "off"  # YAML 1.1 reads an unquoted `off` as false
    if key in ("sandbox.writable", "sandbox.sockets") and isinstance(value, str):  # a JSON list or PATH-style
        text = value.strip()
        value = json.loads(text) if text.startswith("[") else [p for p in text.split(os.pathsep) if p]
    if key == "sandbox.network" and isinstance(value, str) and value.strip().startswith("{"):  # names, as JSON
        return json.loads(value)
    if key in ("serve.task_tools", "auth.required_scopes") and isinstance(
        value, str
    ):  # the environment: a JSON list or comma-separated
        text = value.strip()
        return json.loads(text) if text.startswith("[") else [name.strip() for name in text.split(",") if name.strip()]
    if key == "sandbox.sockets" and isinstance(value, (list, tuple)):
        value = [os.path.expandvars(str(item)) for item in value]
    if key in ("sandbox.writable", "sandbox.sockets") and isinstance(value, (list, tuple)):
        paths = [Path(str(item)).expanduser() for item in value]
        return [path if path.is_absolute() or base is None else base / path for path in paths]
    if key not in _PATH_KEYS or not isinstance(value, str) or value.strip().lower() in TRUE_WORDS | FALSE_WORDS:
        return value
    path = Path(value).expanduser()
    return path if path.is_absolute() or base is None else base / path
