"""Flag values and run-time defaults: CLI option > environment (`TOOLRT_…`) > `.env` > toolrt.yaml > default.

pydantic-settings does the layering; the flag model is created from the flags toolrt.yaml declares,
so an undeclared flag has nowhere to go and is reported instead of silently ignored.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .config.model import FlagDef
from .errors import UsageError

__all__ = ["default_data_dir", "parse_flag_option", "resolve_flags"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def default_data_dir() -> Path:
    """`TOOLRT_DATA_DIR`, else `$XDG_DATA_HOME/toolrt`, else `~/.local/share/toolrt`."""
    explicit = os.environ.get("TOOLRT_DATA_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "toolrt"


def parse_flag_option(option: str) -> tuple[str, bool]:
    """`name`, `name=true`, `name=false` (also 1/0, yes/no, on/off) from `--flag`."""
    name, sep, value = option.partition("=")
    name = name.strip().lower()
    if not sep:
        return name, True
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return name, True
    if lowered in _FALSE:
        return name, False
    raise UsageError(f"--flag {option}: '{value}' is not a boolean (use true or false)")


@functools.lru_cache(maxsize=32)
def _flag_model(declared: tuple[tuple[str, bool], ...], env_file: str | None) -> Any:
    from pydantic import create_model
    from pydantic_settings import BaseSettings, SettingsConfigDict

    fields: dict[str, Any] = {name: (bool, default) for name, default in declared}
    config = SettingsConfigDict(env_prefix="TOOLRT_FLAG_", env_file=env_file, extra="ignore", case_sensitive=False)
    base = type("FlagSettings", (BaseSettings,), {"model_config": config, "__module__": __name__})
    return create_model("ToolrtFlags", __base__=base, **fields)


def resolve_flags(
    declared: Mapping[str, FlagDef], *, root: Path, cli: Mapping[str, bool] | None = None
) -> Mapping[str, bool]:
    """The value of every declared flag; an unknown flag given on the command line is a UsageError."""
    cli = dict(cli or {})
    unknown = sorted(set(cli) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise UsageError(f"unknown flag {', '.join(map(repr, unknown))} (declared flags: {known})")
    if not declared:
        return MappingProxyType({})
    env_file = root / ".env"
    needs_settings = env_file.is_file() or any(k.startswith("TOOLRT_FLAG_") for k in os.environ)
    if not needs_settings:
        values = {name: flag.default for name, flag in declared.items()}
        values.update(cli)
        return MappingProxyType(values)
    model = _flag_model(
        tuple((name, flag.default) for name, flag in sorted(declared.items())),
        str(env_file) if env_file.is_file() else None,
    )
    try:
        settings = model(**cli)
    except Exception as exc:  # pydantic's ValidationError: a malformed boolean in the environment or .env
        raise UsageError(f"invalid flag value: {exc}") from None
    return MappingProxyType({name: bool(getattr(settings, name)) for name in declared})
