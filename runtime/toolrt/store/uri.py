"""The `store` setting's value: which engine, where, and how it is shown without its password."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import StoreError
from .model import Store

if TYPE_CHECKING:
    from ..config.settings import ResolvedSettings

__all__ = ["ENGINES", "is_persistent", "open_configured", "open_store", "redact", "scrub"]

ENGINES = ("memory", "sqlite", "postgresql://…")
_SCHEMES = ("postgresql", "postgres")


def redact(value: str) -> str:
    """`value` with the password of a URI replaced by `***` (anything else unchanged)."""
    try:
        parts = urlsplit(value)
    except ValueError:
        return "<an unparsable store URI>"
    if parts.password is None:
        return value
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def scrub(text: str, uri: str) -> str:
    """`text` (a driver's error) with `uri`'s password removed wherever it appears."""
    try:
        password = urlsplit(uri).password
    except ValueError:
        return text
    if password:
        for form in {password, unquote(password)}:
            text = text.replace(form, "***")
    return text.replace(uri, redact(uri))


def is_persistent(value: str) -> bool:
    return value.strip().lower() != "memory"


def open_store(value: str, data_dir: Path) -> Store:
    """The store the `store` setting names: `memory`, `sqlite` (`<data_dir>/state.sqlite3`), a
    `sqlite:///PATH`, or a `postgresql://…` URI.

    Raises:
        StoreError: an unknown engine, or a store that cannot be opened (the text names the setting).
    """
    text = value.strip()
    try:
        return _open(text, data_dir)
    except StoreError as error:
        raise StoreError(f"the store setting ({redact(text)}): {error}") from None


def open_configured(resolved: ResolvedSettings, data_dir: Path, default: str) -> Store:
    """The store the host-only `store` setting names (`default` when no layer sets it), opened (its migrations
    applied) and, when it persists, pruned once by the retention settings.

    Raises:
        StoreError: the store cannot be opened (unreachable, a newer schema); the text names the setting.
    """
    import time

    values = resolved.values
    store = open_store(values.store if resolved.origins.get("store", "default") != "default" else default, data_dir)
    if store.persistent:
        retention = values.retention
        store.prune(time.time(), audit_days=retention.audit_days, session_days=retention.session_days)
    return store


def _open(text: str, data_dir: Path) -> Store:
    lowered = text.lower()
    if lowered == "memory":
        from .memory import MemoryStore

        return MemoryStore()
    if lowered == "sqlite" or lowered.startswith("sqlite:///"):
        from .sqlite import FILE_NAME, SqliteStore

        path = data_dir / FILE_NAME if lowered == "sqlite" else Path(text[len("sqlite://") :])
        return SqliteStore(path)
    scheme = lowered.partition("://")[0]
    if scheme in _SCHEMES:
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:
            raise StoreError(
                "a PostgreSQL store needs psycopg and psycopg-pool: pip install 'toolrt[postgresql]'"
            ) from None
        from .postgres import PostgresStore

        return PostgresStore(text)
    raise StoreError(f"unknown engine; use one of {', '.join(ENGINES)}")
