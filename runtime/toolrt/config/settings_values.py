"""Merged settings values made a `Settings`: values that already have their setting's plain type as they
are, the rest converted and checked by pydantic (imported only then); booleans from text."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import ConfigError, Problem, UsageError
from .settings_model import LspSettings, ServeSettings, Settings, TruncateSettings

__all__ = [
    "FALSE_WORDS",
    "SECTIONS",
    "TRUE_WORDS",
    "boolean_setting",
    "checked_settings",
    "parse_flag_option",
    "plain_settings",
    "scalar_fields",
]


TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}


def boolean_setting(key: str, value: Any, origin: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ConfigError([Problem(origin, 0, 0, "", f"{key}: '{value}' is not a boolean (use true or false)")])


_SCALARS: Mapping[str, Callable[[Any], Any]] = {
    "int": int,
    "float": float,
    "bool": bool,
    "str": str,
    "Path": Path,
    "Path | None": Path,
}
SECTIONS: Mapping[str, Any] = {"truncate": TruncateSettings, "serve": ServeSettings, "lsp": LspSettings}


@functools.cache
def scalar_fields() -> Mapping[str, Callable[[Any], Any]]:
    """Dotted key → type of every setting whose type is a plain int, float, bool, str or path (the
    annotations are strings: this module postpones them)."""
    found = {f.name: _SCALARS[str(f.type)] for f in dataclasses.fields(Settings) if str(f.type) in _SCALARS}
    for section, kind in SECTIONS.items():
        scalars = {f.name: str(f.type) for f in dataclasses.fields(kind) if str(f.type) in _SCALARS}
        found.update({f"{section}.{name}": _SCALARS[type_name] for name, type_name in scalars.items()})
    return MappingProxyType(found)


def plain_settings(values: Mapping[str, Any]) -> Settings | None:
    """`Settings` from values that each already have their setting's plain type (an int for a float
    is widened; paths are `Path`s already, `_relative_to` made them), so pydantic would return them
    unchanged: a project's `defaults: {timeout: 60}` or TOOLRT_DATA_DIR needs no pydantic model built.
    None when any value needs pydantic's conversion or check (a bool where a number goes, a list, a
    literal, the audit setting's path or boolean)."""
    fields = scalar_fields()
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        kind = fields.get(key)
        if kind is Path and isinstance(value, Path):
            value = value.expanduser() if key == "data_dir" else value  # as `checked_settings` does
        elif kind is None or type(value) is not kind and not (kind is float and type(value) is int):
            return None
        section, _, name = key.rpartition(".")
        (sections.setdefault(section, {}) if section else top)[name] = kind(value)
    for section, changed in sections.items():
        top[section] = SECTIONS[section](**changed)
    return Settings(**top)


def checked_settings(values: Mapping[str, Any], origins: Mapping[str, str]) -> Settings:
    """The merged values checked and converted by pydantic against `Settings`."""
    from pydantic import TypeAdapter, ValidationError

    nested: dict[str, Any] = {}
    for key, value in values.items():
        *parents, last = key.split(".")
        target = nested
        for parent in parents:
            target = target.setdefault(parent, {})
        if key == "audit" and isinstance(value, str) and value.strip().lower() in TRUE_WORDS | FALSE_WORDS:
            value = value.strip().lower() in TRUE_WORDS
        target[last] = value
    try:
        settings: Settings = _adapter(TypeAdapter).validate_python(nested)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            key = ".".join(str(p) for p in item["loc"] if not str(p).startswith(("function-", "lax-")))
            key = next((k for k in values if key.startswith(k) or k.startswith(key)), key)
            origin = origins.get(key, "settings")
            problems.append(Problem(origin, 0, 0, "", f"{key}: {item['msg']} (got {values.get(key)!r})"))
        raise ConfigError(problems) from None
    if isinstance(settings.data_dir, Path):
        settings = dataclasses.replace(settings, data_dir=settings.data_dir.expanduser())
    return settings


@functools.cache
def _adapter(adapter_class: Any) -> Any:
    return adapter_class(Settings)


def parse_flag_option(option: str) -> tuple[str, bool]:
    """`name`, `name=true`, `name=false` (also 1/0, yes/no, on/off) from `--flag`."""
    name, sep, value = option.partition("=")
    name = name.strip().lower()
    if not sep:
        return name, True
    lowered = value.strip().lower()
    if lowered in TRUE_WORDS:
        return name, True
    if lowered in FALSE_WORDS:
        return name, False
    raise UsageError(f"--flag {option}: '{value}' is not a boolean (use true or false)")
