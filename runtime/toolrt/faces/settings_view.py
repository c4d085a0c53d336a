"""The rows `toolrt settings` shows: every setting with where its value came from.

The `sandbox.*` settings are the host's; the project's `toolrt.yaml` and the locked file shape the
sandbox too (tighten-only, and fixed), so their rows show the sandbox that applies, with the file and
line that decided it, rather than the host's unset value.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..build.snapshot import Snapshot
from ..config.document import Document
from ..config.layers import read_single

__all__ = ["setting_rows", "without_secrets"]

_SANDBOX_FIELDS = ("mode", "network", "writable")


def setting_rows(snapshot: Snapshot) -> Iterator[tuple[str, Any, str]]:
    """(key, value, origin) of every setting and flag, the sandbox's as it applies to the project's tools."""
    sandbox = {f"sandbox.{field}": field for field in _SANDBOX_FIELDS}
    for key, value, origin in snapshot.resolved.items():
        field = sandbox.get(key)
        if field is None:
            yield key, without_secrets(key, value), origin
            continue
        effective = getattr(snapshot.sandbox, field)
        yield key, effective, _sandbox_origin(snapshot, field, effective, origin)


def without_secrets(key: str, value: Any) -> Any:
    """A setting's value as it may be shown: the `store` URI without its password."""
    if key == "store" and isinstance(value, str):
        from ..store.uri import redact

        return redact(value)
    return value


def _sandbox_origin(snapshot: Snapshot, field: str, effective: Any, host_origin: str) -> str:
    locked_path = snapshot.resolved.values.locked_permissions
    if locked_path is not None:
        locked = read_single(locked_path, "permissions", [])
        where = _set_at(locked, field, effective, loose=True, root=locked_path.parent)
        if where is not None:
            return f"locked {locked_path}:{where}"
    layers = snapshot.config.layers if snapshot.config is not None else ()
    project = next((layer.settings for layer in layers if layer.name == "project"), None)
    where = _set_at(project, field, effective, loose=False, root=snapshot.root)
    if where is not None:
        return f"{project.name if project is not None else 'toolrt.yaml'}:{where}"
    return host_origin


def _set_at(document: Document | None, field: str, effective: Any, *, loose: bool, root: Path) -> int | None:
    """The line where `document` sets `sandbox.FIELD` to what applies (`loose`: whatever it sets: the
    locked file fixes the value), or None."""
    if document is None or not isinstance(document.data, dict):
        return None
    block = document.data.get("sandbox")
    if not isinstance(block, dict) or field not in block:
        return None
    value = block[field]
    if not loose and _plain(value, root) != _plain(effective, root):
        return None  # the project asked for it, but the host or the locked file is tighter
    return document.locate(f"/sandbox/{field}")[0]


def _plain(value: Any, root: Path) -> Any:
    if isinstance(value, (list, tuple)):
        return sorted(str((root / Path(str(item)).expanduser()).resolve()) for item in value)
    return value
