"""What only the host may set: the settings a project's files may not set (`HOST_ONLY`), those the locked
file may fix (`LOCKABLE`), and the variable names that look like credentials (`is_secret_name`)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

__all__ = ["HOST_ONLY", "LOCKABLE", "SECRET_PATTERNS", "host_only_guard", "how_to_set", "is_secret_name"]


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


def how_to_set(key: str) -> str:
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
