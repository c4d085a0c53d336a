"""Each source of settings read into a layer (dotted keys, their values and origins): the command line,
the environment, the user settings file, the project's `.env` and `toolrt.yaml`, the locked file.

pydantic-settings reads the environment and `.env` (prefix, nesting, JSON for lists), imported only
when a variable needs more than its text (`_plain_environment`) or the project has a `.env`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, Problem
from .document import Document
from .host_only import LOCKABLE
from .settings_model import (
    AuthSettings,
    CommandLineSettings,
    LspSettings,
    RetentionSettings,
    SandboxSettings,
    ServeSettings,
    Settings,
    TruncateSettings,
    flatten,
)
from .settings_values import SECTIONS, scalar_fields

if TYPE_CHECKING:
    from .reuse import Reused

__all__ = [
    "ENV_PREFIX",
    "FLAG_PREFIX",
    "SettingsLayer",
    "command_line_layer",
    "dotenv_layer",
    "environment_layer",
    "locked_layer",
    "project_layer",
    "user_layer",
]


ENV_PREFIX = "TOOLRT_"
FLAG_PREFIX = "TOOLRT_FLAG_"


@dataclass
class SettingsLayer:
    """One source of settings values, by its precedence."""

    name: str
    project: bool
    """A project file (a model can write it): host-only settings are refused."""
    base: Path | None
    """Relative paths in this layer are relative to it."""
    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    where: dict[str, tuple[str, int, int, str]] = field(default_factory=dict)
    """Key → (file, line, column, pointer) for located warnings."""


def _document_layer(name: str, document: Document, values: Mapping[str, Any], *, project: bool) -> SettingsLayer:
    layer = SettingsLayer(name, project, document.path.parent)
    for key, value in values.items():
        pointer = "/" + key.replace(".", "/")
        layer.values[key] = value
        line, column = document.locate(pointer)
        layer.origins[key] = f"{document.name}:{line}"
        layer.where[key] = (document.name, line, column, pointer)
    return layer


def _project_values(document: Document) -> dict[str, Any]:
    """`toolrt.yaml`'s settings under their `Settings` keys; pointers follow the file's own shape."""
    data: Mapping[str, Any] = document.data or {}
    found: dict[str, Any] = {}
    for key, value in flatten(data.get("defaults", {})).items():
        found[key] = value
    if "locked_permissions" in data:
        found["locked_permissions"] = data["locked_permissions"]
    for key, value in flatten(data.get("serve", {}), "serve.").items():
        found[key] = value
    for key, value in flatten(data.get("lsp", {}), "lsp.").items():
        found[key] = value
    return found


def project_layer(document: Document) -> SettingsLayer:
    layer = SettingsLayer("project", True, document.path.parent)
    for key, value in _project_values(document).items():
        pointer = ("/defaults/" if key in _DEFAULTS_KEYS or key.startswith("truncate.") else "/") + key.replace(
            ".", "/"
        )
        line, column = document.locate(pointer)
        layer.values[key] = value
        layer.origins[key] = f"{document.name}:{line}"
        layer.where[key] = (document.name, line, column, pointer)
    return layer


_DEFAULTS_KEYS = ("timeout", "data_dir", "audit", "env_allow")


@functools.lru_cache(maxsize=16)
def _env_model(flags: tuple[str, ...]) -> Any:
    """A pydantic-settings model of `Settings` plus one `flag_<name>` field per declared flag.

    A value-keyed memo (building a model costs milliseconds), bounded: each set of declared flags a
    save brings is another key."""
    from pydantic import create_model
    from pydantic_settings import BaseSettings, SettingsConfigDict

    fields: dict[str, Any] = {f.name: (Any, None) for f in dataclasses.fields(Settings)}
    fields["truncate"] = (TruncateSettings | None, None)
    fields["serve"] = (ServeSettings | None, None)
    fields["sandbox"] = (SandboxSettings | None, None)
    fields["lsp"] = (LspSettings | None, None)
    fields["retention"] = (RetentionSettings | None, None)
    fields["auth"] = (AuthSettings | None, None)
    fields["env_allow"] = (list[str] | None, None)
    fields["background"] = (list[str] | None, None)
    fields.update({f"flag_{name}": (Any, None) for name in flags})
    config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", case_sensitive=False, extra="ignore", env_ignore_empty=True
    )
    base = type("EnvSettings", (BaseSettings,), {"model_config": config, "__module__": __name__})
    return create_model("ToolrtEnvSettings", __base__=base, **fields)


def _env_values(raw: Mapping[str, Any], flags: tuple[str, ...]) -> dict[str, Any]:
    known = {f.name for f in dataclasses.fields(Settings)} | {f"flag_{name}" for name in flags}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known or value is None:
            continue
        if key.startswith("flag_") and key not in {f.name for f in dataclasses.fields(Settings)}:
            values[f"flags.{key[5:]}"] = value
        elif isinstance(value, Mapping):
            for dotted, item in flatten(value, key + ".").items():
                if dotted == "lsp.servers" and isinstance(item, str):  # TOOLRT_LSP__SERVERS: JSON
                    values.update(flatten(_json_object(dotted, item), "lsp.servers."))
                elif item is not None:
                    values[dotted] = item
        else:
            values[key] = value
    return values


def _json_object(key: str, text: str) -> Mapping[str, Any]:
    try:
        found = json.loads(text)
    except ValueError as error:
        raise ConfigError([Problem(_env_name(key), 0, 0, "", f"{key}: not JSON ({error})")]) from None
    if not isinstance(found, Mapping):
        raise ConfigError([Problem(_env_name(key), 0, 0, "", f"{key}: a JSON object is expected")])
    return found


def _env_name(key: str) -> str:
    if key.startswith("flags."):
        return FLAG_PREFIX + key[6:].upper()
    if key.startswith("lsp.servers."):
        return ENV_PREFIX + "LSP__SERVERS"  # one JSON object (see `_env_values`)
    return ENV_PREFIX + key.replace(".", "__").upper()


def environment_layer(environ: Mapping[str, str], flags: tuple[str, ...]) -> SettingsLayer:
    layer = SettingsLayer("environment", False, None)
    if not any(k.upper().startswith(ENV_PREFIX) for k in environ):
        return layer
    raw = _plain_environment(environ, flags)
    if raw is None:
        raw = _pydantic_environment(environ, flags)
    layer.values = _env_values(raw, flags)
    layer.origins = {key: f"environment {_env_name(key)}" for key in layer.values}
    return layer


def _pydantic_environment(environ: Mapping[str, str], flags: tuple[str, ...]) -> dict[str, Any]:
    """What pydantic-settings reads from `environ` for `_env_model(flags)`: JSON values, nested keys."""
    from pydantic_settings import EnvSettingsSource

    source = EnvSettingsSource(_env_model(flags))
    source.env_vars = {k.lower(): v for k, v in environ.items()}  # the given mapping, not os.environ
    return source()


def _plain_environment(environ: Mapping[str, str], flags: tuple[str, ...]) -> dict[str, Any] | None:
    """`_pydantic_environment` without importing pydantic-settings (a sixth of a second at every start of
    a process with, say, TOOLRT_DATA_DIR set), when every TOOLRT_ variable names a setting of a plain
    type (`scalar_fields`: TOOLRT_DATA_DIR, TOOLRT_LSP__ENABLED), a declared flag, or nothing (ignored,
    as pydantic-settings ignores it): each is then its text, as pydantic-settings reads it. None when any
    needs more (a JSON list, a section as one JSON object, a deeper key): pydantic-settings reads those."""
    plain = scalar_fields()
    names = {f.name for f in dataclasses.fields(Settings)}
    found: dict[str, Any] = {}
    for key, value in environ.items():
        name = key.lower()
        if not name.startswith(ENV_PREFIX.lower()):
            continue
        name = name[len(ENV_PREFIX) :]
        head, nested, leaf = name.partition("__")
        flag = [f for f in flags if f"flag_{f.lower()}" == name]
        if nested and head in SECTIONS and f"{head}.{leaf}" in plain:
            found.setdefault(head, {})[leaf] = value
        elif not nested and "." not in name and name in plain:
            found[name] = value
        elif flag == [name[5:]]:  # declared once, in lower case (pydantic-settings matches any case of it)
            found[name] = value
        elif head in names or name.startswith("flag_"):
            return None
    return found


def dotenv_layer(path: Path, flags: tuple[str, ...], display: str) -> SettingsLayer:
    layer = SettingsLayer(".env", True, path.parent)
    if not path.is_file():
        return layer
    from pydantic_settings import DotEnvSettingsSource

    layer.values = _env_values(DotEnvSettingsSource(_env_model(flags), env_file=path)(), flags)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for key in layer.values:
        name = _env_name(key)
        pattern = re.compile(rf"^\s*(export\s+)?{re.escape(name)}\s*=", re.IGNORECASE)
        line = next((n for n, text in enumerate(lines, 1) if pattern.match(text)), 0)
        layer.origins[key] = f"{display}:{line}" if line else display
        layer.where[key] = (display, line, 1 if line else 0, "")
    return layer


def user_layer(path: Path, problems: list[Problem]) -> SettingsLayer:
    from .layers import read_single

    document = read_single(path, "settings", problems, display=str(path))
    if document is None:
        return SettingsLayer("user", False, path.parent)
    data: Mapping[str, Any] = document.data or {}
    values = flatten({k: v for k, v in data.items() if k != "flags"})
    values.update({f"flags.{name}": value for name, value in data.get("flags", {}).items()})
    return _document_layer("user", document, values, project=False)


def command_line_layer(cli: CommandLineSettings) -> SettingsLayer:
    layer = SettingsLayer("command line", False, Path.cwd())
    layer.values = {key: value for key, value in cli.values.items() if value is not None}
    layer.values.update({f"flags.{name}": value for name, value in cli.flags.items()})
    layer.origins = dict.fromkeys(layer.values, "command line")
    return layer


def locked_layer(path: Path, reused: Reused | None) -> SettingsLayer | None:
    """The locked file's `settings:` section; None when the file is absent or invalid (the snapshot
    takes the same document from `reused`, reports its problems and blocks every call)."""
    from .layers import read_single

    problems: list[Problem] = []
    document = read_single(path, "permissions", problems, reused=reused)
    if document is None or problems or not isinstance(document.data, Mapping):
        return None
    section = document.data.get("settings")
    if not isinstance(section, Mapping):
        return None
    layer = SettingsLayer("locked", False, path.parent)
    for key, value in flatten(section).items():
        if key not in LOCKABLE:  # the schema refuses these; never let one through
            continue
        pointer = "/settings/" + key.replace(".", "/")
        line, column = document.locate(pointer)
        layer.values[key] = value
        layer.origins[key] = f"locked {path}:{line}"
        layer.where[key] = (str(path), line, column, pointer)
    return layer
