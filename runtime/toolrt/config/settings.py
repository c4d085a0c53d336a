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

Extension points: a new setting is a field of `Settings` (or of a nested section) plus its schema
entries in `schemas/settings.schema.json` and `project.schema.json`; one a project must not set, or
may set only to some values (a sandbox loosening, a non-loopback host), is an entry of `HOST_ONLY`.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError, Problem, UsageError
from .document import Document
from .model import FlagDef

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

ENV_PREFIX = "TOOLRT_"
FLAG_PREFIX = "TOOLRT_FLAG_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True, slots=True)
class TruncateSettings:
    max_lines: int = 2000
    max_bytes: int = 51200
    direction: Literal["head", "tail"] = "head"


@dataclass(frozen=True, slots=True)
class ServeSettings:
    host: str = "127.0.0.1"
    """Where `toolrt serve --transport http` listens; anything but loopback is host-only."""
    port: int = 8765
    inline_refs: Literal["auto", "always", "never"] = "auto"
    """MCP input schemas keep `$defs`, `$ref` and `$anchor` as written (`never`: for every client); `always` inlines
    every reference; `auto` inlines for clients known by `clientInfo.name` to drop `$defs`."""
    task_tools: tuple[str, ...] = ()
    """Tools served as MCP tasks to clients that support them, besides those whose YAML says `task:`."""


@dataclass(frozen=True, slots=True)
class NetworkNames:
    """`sandbox.network: {allow: [...], deny: [...]}`: host names (and presets) reachable through toolrt's
    proxy, the network otherwise off (see `toolrt.sandbox.netrules`)."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CredentialSettings:
    """One `sandbox.credentials` entry: an environment variable (or a file) that never enters the sandbox
    (`deny`), or enters it as a placeholder the network proxy replaces with the real value only in
    `header` of requests to `host` (`mask`; see `toolrt.sandbox.credentials`)."""

    env: str = ""
    action: Literal["deny", "mask"] = "deny"
    host: str = ""
    header: str = "Authorization"
    file: Path | None = None
    """A file that reads as empty in the sandbox (`deny`), or as a placeholder the proxy replaces with the
    file's content (`mask`); `~` is expanded."""


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """The host's OS sandbox choices (all host-only); the project's `sandbox:` block may only tighten them
    and the locked file fixes what it names (see `toolrt.sandbox.policy`)."""

    mode: Literal["read-only", "workspace-write", "off"] | None = None
    """None: the default, `workspace-write`."""
    network: bool | NetworkNames | None = None
    """None: the default, on; names: only those, through toolrt's proxy."""
    writable: tuple[Path, ...] | None = None
    """More writable directories (a package cache); relative paths are relative to the settings file."""
    sockets: tuple[Path, ...] | None = None
    """Pathname UNIX sockets a sandboxed tool may connect to (`$SSH_AUTH_SOCK`); variables and `~` are
    expanded. None or empty: no process in the sandbox may make a UNIX socket."""
    credentials: tuple[CredentialSettings, ...] | None = None
    """Environment variables kept out of the sandbox (`deny`) or masked (`mask`)."""


@dataclass(frozen=True, slots=True)
class LspServerSettings:
    """One language server's settings; fields left None keep the built-in entry's value
    (`toolrt.lsp.servers`). Only `disabled` and `initialization` may come from a project."""

    command: tuple[str, ...] | None = None
    """Host-only. argv; the program resolves from PATH (never inside the project) or is an absolute path."""
    extensions: tuple[str, ...] | None = None
    """Host-only. File name endings (`.py`) or globs (`*.pyi`, `Dockerfile`) the server serves."""
    root_markers: tuple[str, ...] | None = None
    """Host-only. Files whose nearest directory above an edited file is the server's root."""
    env: Mapping[str, str] | None = None
    """Host-only. Variables set for the server beside the allowed environment (`env_allow`)."""
    initialization: Mapping[str, Any] | None = None
    """`initializationOptions` of the LSP `initialize` request."""
    disabled: bool = False


@dataclass(frozen=True, slots=True)
class LspSettings:
    """Language servers (see `toolrt.lsp`): diagnostics after edits, and the `lsp` tool."""

    enabled: bool = True
    wait: float = 2.0
    """Seconds an edit waits at most for a server's diagnostics of the changed files."""
    servers: Mapping[str, LspServerSettings] = field(default_factory=dict)
    """Server name → settings over the built-in entry of that name (or a new server)."""


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    """How long the state store keeps what it holds (host-only); every replica applies it."""

    audit_days: float | None = None
    """Audit records older than this many days are removed; None: kept until an administrator removes them."""
    session_days: float | None = 30.0
    """A session unused this many days is removed with its approvals; None: kept."""


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """`toolrt serve --transport http` as an OAuth 2.1 resource server (MCP's authorization spec), host-only.

    Off while `issuer` is None: the server then authenticates nobody and listens on loopback only."""

    issuer: str | None = None
    """The authorization server whose tokens are accepted (a token's `iss` must equal it)."""
    audience: str | None = None
    """This server's resource URL (`https://tools.example/mcp`): a token's `aud` must name it."""
    jwks_url: str | None = None
    """Where the issuer publishes its signing keys (JWKS)."""
    required_scopes: tuple[str, ...] = ()
    """Scopes every token must hold, besides those of the tool it calls (a tool's `scopes:`)."""

    @property
    def enabled(self) -> bool:
        return self.issuer is not None


def default_data_dir() -> Path:
    """`$XDG_DATA_HOME/toolrt`, else `~/.local/share/toolrt`."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "toolrt"


def user_settings_file() -> Path:
    """`$XDG_CONFIG_HOME/toolrt/settings.yaml`, else `~/.config/toolrt/settings.yaml`."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "toolrt" / "settings.yaml"


@dataclass(frozen=True, slots=True)
class Settings:
    """The effective value of every setting (flags are separate: a project declares them)."""

    data_dir: Path = field(default_factory=default_data_dir)
    """Host-only. Truncated outputs, todos, session files and (by default) the audit log."""
    audit: bool | Path = True
    """Host-only. True: `<data_dir>/audit.jsonl`; False: no record; a path: that file."""
    locked_permissions: Path | None = None
    """Host-only. An administrator's permissions file whose denies nothing can override."""
    timeout: float = 120.0
    truncate: TruncateSettings = TruncateSettings()
    env_allow: tuple[str, ...] | None = None
    serve: ServeSettings = ServeSettings()
    sandbox: SandboxSettings = SandboxSettings()
    """Host-only: any value here may loosen the sandbox."""
    lsp: LspSettings = LspSettings()
    """A server's command, extensions, root markers and environment are host-only."""
    background: tuple[str, ...] = ()
    """Host-only. Tools whose `background: true` the host approves (tool ids): their processes keep
    running after the call, until their session or the Runtime closes (see `toolrt.execute.background`)."""
    store: str = field(default="memory", repr=False)
    """Host-only. Where state that outlives a call is kept (`toolrt.store`): `memory`, `sqlite` (a file in
    the data directory) or a `postgresql://…` URI; shown everywhere without its password (not in `repr`)."""
    retention: RetentionSettings = RetentionSettings()
    """Host-only. How long the store keeps audit records and unused sessions."""
    auth: AuthSettings = AuthSettings()
    """Host-only. Who may call `toolrt serve` over HTTP: OAuth bearer tokens (JWTs) of one issuer."""

    @property
    def audit_path(self) -> Path | None:
        if self.audit is False:
            return None
        return self.audit if isinstance(self.audit, Path) else self.data_dir / "audit.jsonl"


def _always(value: Any) -> bool:
    return True


def _not_loopback(host: Any) -> bool:
    if str(host).lower() == "localhost":
        return False
    try:
        return not ipaddress.ip_address(str(host)).is_loopback
    except ValueError:
        return True  # a host name: it may resolve anywhere


SECRET_PATTERNS: tuple[str, ...] = (
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_KEY",
    "*API_KEY*",
    "AWS_*",
    "*CREDENTIAL*",
)
"""Names (compared upper-case) that a wildcard allow entry never passes through."""


def _glob_regex(patterns: Sequence[str]) -> re.Pattern[str]:
    parts = ("".join(".*" if c == "*" else re.escape(c) for c in p) for p in patterns)
    return re.compile("(?:" + "|".join(parts) + r")\Z")


_SECRET = _glob_regex(SECRET_PATTERNS)


def is_secret_name(name: str) -> bool:
    """True when `name` looks like it holds a credential (see `SECRET_PATTERNS`)."""
    return _SECRET.match(name.upper()) is not None


def _passes_secrets(names: Any) -> bool:
    """An `env_allow` that names a variable looking like a credential (`OPENAI_API_KEY`): a project
    could hand it to a tool whose output the model reads. Prefix entries never pass such names."""
    items = names if isinstance(names, (list, tuple)) else str(names).split(",")
    return any(not str(name).endswith("*") and is_secret_name(str(name)) for name in items)


HOST_ONLY: Mapping[str, Callable[[Any], bool]] = MappingProxyType(
    {
        "data_dir": _always,
        "env_allow": _passes_secrets,
        "audit": _always,
        "locked_permissions": _always,
        "serve.host": _not_loopback,
        # A project tightens the sandbox through toolrt.yaml's `sandbox:` block, checked tighten-only.
        "sandbox.mode": _always,
        "sandbox.network": _always,
        "sandbox.writable": _always,
        "sandbox.sockets": _always,
        "sandbox.credentials": _always,
        "background": _always,
        # A project that could choose the store could point its audit records at a database it reads.
        "store": _always,
        "retention.audit_days": _always,
        "retention.session_days": _always,
        # A project that could set the issuer or its keys would sign its own tokens.
        "auth.issuer": _always,
        "auth.audience": _always,
        "auth.jwks_url": _always,
        "auth.required_scopes": _always,
    }
)
"""Settings the project's files may not set: key → whether a given value needs the host (a project may
still say `serve.host: 127.0.0.1`)."""

_LSP_HOST_ONLY = re.compile(r"lsp\.servers\.[^.]+\.(command|extensions|root_markers|env)(\..*)?")
"""A language server's command (and what decides where and how it runs): a project that could set it
would make toolrt start any program it likes."""


def host_only_guard(key: str) -> Callable[[Any], bool] | None:
    """Whether (and for which values) `key` is host-only; None: a project may set it."""
    guard = HOST_ONLY.get(key)
    if guard is None and _LSP_HOST_ONLY.fullmatch(key):
        return _always
    return guard


def _how_to_set(key: str) -> str:
    if key in _HOW_TO_SET:
        return _HOW_TO_SET[key]
    if key.startswith("lsp.servers."):
        return "the user settings file's lsp.servers, TOOLRT_LSP__SERVERS"
    return "the command line, the environment"


LOCKABLE: tuple[str, ...] = ("data_dir", "audit", "serve.host")
"""Settings the locked file's `settings:` section may fix (host-only ones). Not the locked file's own
path, not the sandbox (its `sandbox:` section fixes that, see `toolrt.sandbox.policy`); language
servers and `env_allow` are not lockable yet."""

_HOW_TO_SET = {
    "data_dir": "--data-dir, TOOLRT_DATA_DIR",
    "audit": "--audit, TOOLRT_AUDIT",
    "locked_permissions": "--locked-permissions, TOOLRT_LOCKED_PERMISSIONS",
    "env_allow": "TOOLRT_ENV_ALLOW='[\"NAME\", ...]'",
    "serve.host": "serve --host, TOOLRT_SERVE__HOST",
    "sandbox.mode": "--sandbox, TOOLRT_SANDBOX__MODE",
    "sandbox.network": "TOOLRT_SANDBOX__NETWORK",
    "sandbox.writable": "TOOLRT_SANDBOX__WRITABLE='[\"DIR\", ...]'",
    "sandbox.sockets": "TOOLRT_SANDBOX__SOCKETS='[\"$SSH_AUTH_SOCK\", ...]', the user settings file",
    "sandbox.credentials": "the user settings file's sandbox.credentials",
    "background": "TOOLRT_BACKGROUND='[\"TOOL\", ...]'",
    "store": "TOOLRT_STORE",
    "retention.audit_days": "TOOLRT_RETENTION__AUDIT_DAYS",
    "retention.session_days": "TOOLRT_RETENTION__SESSION_DAYS",
    "auth.issuer": "TOOLRT_AUTH__ISSUER, the user settings file",
    "auth.audience": "TOOLRT_AUTH__AUDIENCE, the user settings file",
    "auth.jwks_url": "TOOLRT_AUTH__JWKS_URL, the user settings file",
    "auth.required_scopes": "TOOLRT_AUTH__REQUIRED_SCOPES='[\"SCOPE\", ...]', the user settings file",
}
_PATH_KEYS = ("data_dir", "audit", "locked_permissions")


@dataclass(frozen=True, slots=True)
class CommandLineSettings:
    """What the command line (or a host embedding toolrt) sets: the highest layer."""

    values: Mapping[str, Any] = field(default_factory=dict)
    """Dotted keys (`data_dir`, `serve.host`) → values of the `Settings` field's type."""
    flags: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IgnoredSetting:
    key: str
    value: Any
    origin: str
    reason: str


@dataclass(frozen=True, slots=True)
class ResolvedSettings:
    """The effective settings and flags, each value's origin, and the project values that were ignored."""

    values: Settings
    flags: Mapping[str, bool]
    origins: Mapping[str, str]
    """Dotted key (`truncate.max_lines`, `flags.beta`) → where its value came from (`default`,
    `command line`, `environment TOOLRT_…`, `FILE:LINE`)."""
    ignored: tuple[IgnoredSetting, ...] = ()
    warnings: tuple[Problem, ...] = ()

    def items(self) -> Iterator[tuple[str, Any, str]]:
        """(key, value, origin) of every setting, then every flag, in a stable order."""
        for key, value in _flatten(_as_plain(self.values)).items():
            yield key, value, self.origins.get(key, "default")
        for name, value in sorted(self.flags.items()):
            yield f"flags.{name}", value, self.origins.get(f"flags.{name}", "default")


# --- layers ---------------------------------------------------------------------------------------


@dataclass
class _Layer:
    name: str
    project: bool
    """A project file (a model can write it): host-only settings are refused."""
    base: Path | None
    """Relative paths in this layer are relative to it."""
    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    where: dict[str, tuple[str, int, int, str]] = field(default_factory=dict)
    """Key → (file, line, column, pointer) for located warnings."""


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and dotted != "flags" and not dotted.startswith("flags."):
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _as_plain(settings: Settings) -> dict[str, Any]:
    return {f.name: _plain(getattr(settings, f.name)) for f in dataclasses.fields(settings)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _document_layer(name: str, document: Document, values: Mapping[str, Any], *, project: bool) -> _Layer:
    layer = _Layer(name, project, document.path.parent)
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
    for key, value in _flatten(data.get("defaults", {})).items():
        found[key] = value
    if "locked_permissions" in data:
        found["locked_permissions"] = data["locked_permissions"]
    for key, value in _flatten(data.get("serve", {}), "serve.").items():
        found[key] = value
    for key, value in _flatten(data.get("lsp", {}), "lsp.").items():
        found[key] = value
    return found


def _project_layer(document: Document) -> _Layer:
    layer = _Layer("project", True, document.path.parent)
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
            for dotted, item in _flatten(value, key + ".").items():
                if dotted == "lsp.servers" and isinstance(item, str):  # TOOLRT_LSP__SERVERS: JSON
                    values.update(_flatten(_json_object(dotted, item), "lsp.servers."))
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


def _environment_layer(environ: Mapping[str, str], flags: tuple[str, ...]) -> _Layer:
    layer = _Layer("environment", False, None)
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
    type (`_scalar_fields`: TOOLRT_DATA_DIR, TOOLRT_LSP__ENABLED), a declared flag, or nothing (ignored,
    as pydantic-settings ignores it): each is then its text, as pydantic-settings reads it. None when any
    needs more (a JSON list, a section as one JSON object, a deeper key): pydantic-settings reads those."""
    plain = _scalar_fields()
    names = {f.name for f in dataclasses.fields(Settings)}
    found: dict[str, Any] = {}
    for key, value in environ.items():
        name = key.lower()
        if not name.startswith(ENV_PREFIX.lower()):
            continue
        name = name[len(ENV_PREFIX) :]
        head, nested, leaf = name.partition("__")
        flag = [f for f in flags if f"flag_{f.lower()}" == name]
        if nested and head in _SECTIONS and f"{head}.{leaf}" in plain:
            found.setdefault(head, {})[leaf] = value
        elif not nested and "." not in name and name in plain:
            found[name] = value
        elif flag == [name[5:]]:  # declared once, in lower case (pydantic-settings matches any case of it)
            found[name] = value
        elif head in names or name.startswith("flag_"):
            return None
    return found


def _dotenv_layer(path: Path, flags: tuple[str, ...], display: str) -> _Layer:
    layer = _Layer(".env", True, path.parent)
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


def _user_layer(path: Path, problems: list[Problem]) -> _Layer:
    from .layers import read_single

    document = read_single(path, "settings", problems, display=str(path))
    if document is None:
        return _Layer("user", False, path.parent)
    data: Mapping[str, Any] = document.data or {}
    values = _flatten({k: v for k, v in data.items() if k != "flags"})
    values.update({f"flags.{name}": value for name, value in data.get("flags", {}).items()})
    return _document_layer("user", document, values, project=False)


def _command_line_layer(cli: CommandLineSettings) -> _Layer:
    layer = _Layer("command line", False, Path.cwd())
    layer.values = {key: value for key, value in cli.values.items() if value is not None}
    layer.values.update({f"flags.{name}": value for name, value in cli.flags.items()})
    layer.origins = dict.fromkeys(layer.values, "command line")
    return layer


def _locked_layer(path: Path, reused: Reused | None) -> _Layer | None:
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
    layer = _Layer("locked", False, path.parent)
    for key, value in _flatten(section).items():
        if key not in LOCKABLE:  # the schema refuses these; never let one through
            continue
        pointer = "/settings/" + key.replace(".", "/")
        line, column = document.locate(pointer)
        layer.values[key] = value
        layer.origins[key] = f"locked {path}:{line}"
        layer.where[key] = (str(path), line, column, pointer)
    return layer


# --- resolution -----------------------------------------------------------------------------------


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
        _command_line_layer(cli),
        _environment_layer(environ, flag_names),
        _user_layer(user_file or user_settings_file(), problems),
        _dotenv_layer(root / ".env", flag_names, ".env"),
    ]
    if project is not None:
        layers.append(_project_layer(project))
    values, origins, ignored, warnings = _merge(layers)
    locked_path = values.get("locked_permissions")
    locked = _locked_layer(locked_path, reused) if isinstance(locked_path, Path) else None
    if locked is not None and locked.values:
        values, origins, ignored, warnings = _merge([locked, *layers])
    if problems:
        raise ConfigError(problems)
    flags = {name: flag.default for name, flag in declared.items()}
    for name, flag in declared.items():
        origins.setdefault(f"flags.{name}", flag.source or "default")
    settings_values = {k: v for k, v in values.items() if not k.startswith("flags.")}
    settings = (_plain_settings(settings_values) or _build(settings_values, origins)) if settings_values else Settings()
    for key, value in values.items():
        if key.startswith("flags.") and key[6:] in declared:  # the user file may name other projects' flags
            flags[key[6:]] = _boolean(key, value, origins[key])
    return ResolvedSettings(
        settings, MappingProxyType(flags), MappingProxyType(origins), tuple(ignored), tuple(warnings)
    )


def _merge(
    layers: list[_Layer],
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
                    f"(set it with {_how_to_set(key)} "
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
    if key not in _PATH_KEYS or not isinstance(value, str) or value.strip().lower() in _TRUE | _FALSE:
        return value
    path = Path(value).expanduser()
    return path if path.is_absolute() or base is None else base / path


def _boolean(key: str, value: Any, origin: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
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
_SECTIONS: Mapping[str, Any] = {"truncate": TruncateSettings, "serve": ServeSettings, "lsp": LspSettings}


@functools.cache
def _scalar_fields() -> Mapping[str, Callable[[Any], Any]]:
    """Dotted key → type of every setting whose type is a plain int, float, bool, str or path (the
    annotations are strings: this module postpones them)."""
    found = {f.name: _SCALARS[str(f.type)] for f in dataclasses.fields(Settings) if str(f.type) in _SCALARS}
    for section, kind in _SECTIONS.items():
        scalars = {f.name: str(f.type) for f in dataclasses.fields(kind) if str(f.type) in _SCALARS}
        found.update({f"{section}.{name}": _SCALARS[type_name] for name, type_name in scalars.items()})
    return MappingProxyType(found)


def _plain_settings(values: Mapping[str, Any]) -> Settings | None:
    """`Settings` from values that each already have their setting's plain type (an int for a float
    is widened; paths are `Path`s already, `_relative_to` made them), so pydantic would return them
    unchanged: a project's `defaults: {timeout: 60}` or TOOLRT_DATA_DIR needs no pydantic model built.
    None when any value needs pydantic's conversion or check (a bool where a number goes, a list, a
    literal, the audit setting's path or boolean)."""
    fields = _scalar_fields()
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        kind = fields.get(key)
        if kind is Path and isinstance(value, Path):
            value = value.expanduser() if key == "data_dir" else value  # as `_build` does
        elif kind is None or type(value) is not kind and not (kind is float and type(value) is int):
            return None
        section, _, name = key.rpartition(".")
        (sections.setdefault(section, {}) if section else top)[name] = kind(value)
    for section, changed in sections.items():
        top[section] = _SECTIONS[section](**changed)
    return Settings(**top)


def _build(values: Mapping[str, Any], origins: Mapping[str, str]) -> Settings:
    """The merged values checked and converted by pydantic against `Settings`."""
    from pydantic import TypeAdapter, ValidationError

    nested: dict[str, Any] = {}
    for key, value in values.items():
        *parents, last = key.split(".")
        target = nested
        for parent in parents:
            target = target.setdefault(parent, {})
        if key == "audit" and isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            value = value.strip().lower() in _TRUE
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
    if lowered in _TRUE:
        return name, True
    if lowered in _FALSE:
        return name, False
    raise UsageError(f"--flag {option}: '{value}' is not a boolean (use true or false)")
