"""The settings model: every setting's type and default (`Settings` and its sections), and what a
resolution returns (`ResolvedSettings`, each value with its origin). `toolrt.config.settings` fills it
by its precedence."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import Problem

__all__ = [
    "AuthSettings",
    "CommandLineSettings",
    "CredentialSettings",
    "IgnoredSetting",
    "LspServerSettings",
    "LspSettings",
    "NetworkNames",
    "ResolvedSettings",
    "RetentionSettings",
    "SandboxSettings",
    "ServeSettings",
    "Settings",
    "TruncateSettings",
    "default_data_dir",
    "flatten",
    "user_settings_file",
]


@dataclass(frozen=True, slots=True)
class TruncateSettings:
    """`truncate.*`: how much of a tool's output a result keeps."""

    max_lines: int = 2000
    max_bytes: int = 51200
    direction: Literal["head", "tail"] = "head"


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """`serve.*`: where and how `toolrt serve` serves."""

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


@dataclass(frozen=True, slots=True)
class CommandLineSettings:
    """What the command line (or a host embedding toolrt) sets: the highest layer."""

    values: Mapping[str, Any] = field(default_factory=dict)
    """Dotted keys (`data_dir`, `serve.host`) → values of the `Settings` field's type."""
    flags: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class IgnoredSetting:
    """A setting value a layer gave that was not applied: where it came from and why."""

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
        for key, value in flatten(_as_plain(self.values)).items():
            yield key, value, self.origins.get(key, "default")
        for name, value in sorted(self.flags.items()):
            yield f"flags.{name}", value, self.origins.get(f"flags.{name}", "default")


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and dotted != "flags" and not dotted.startswith("flags."):
            flat.update(flatten(value, dotted + "."))
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
