"""A snapshot's two digests: `digest`, of everything a build used (reloads compare it), and `config_digest`,
of what the config says wherever it is loaded (replicas serving one config report one)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..config.document import Document
from ..config.layers import ConfigSet
from ..config.settings import ResolvedSettings
from ..errors import Problem
from ..sandbox.policy import SandboxPolicy
from .code_files import code_digests

__all__ = ["canonical_digest", "snapshot_digests"]


def canonical_digest(parts: list[Any]) -> str:
    """SHA-256 of `parts` as canonical JSON (sorted keys, no spaces): equal data, equal digest."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _data(document: Document | None) -> Any:
    return document.data if document is not None else None


def snapshot_digests(
    root: Path,
    config: ConfigSet,
    locked: Document | None,
    code_files: Mapping[Path, tuple[int, int]],
    sandbox: SandboxPolicy,
    resolved: ResolvedSettings,
    withheld: Mapping[str, tuple[Problem, ...]],
    blocked: bool,
    partial: bool,
) -> tuple[str, str]:
    """(digest, config_digest): the first by the handler code's file stamps, the host's settings and the
    sandbox; the second by the code's content and nothing of the host's."""
    layers = [
        [layer.name, [t.digest for t in layer.tools], _data(layer.permissions), _data(layer.settings)]
        for layer in config.layers
    ]
    digest = canonical_digest(
        layers
        + [_data(locked), [(str(path), stamp) for path, stamp in code_files.items()], repr(sandbox)]
        + [list(resolved.items())]
        + ([sorted(withheld), blocked] if partial and (withheld or blocked) else [])
    )
    config_digest = canonical_digest(
        layers + [_data(locked), code_digests(root, code_files), sorted(withheld), blocked]
    )
    return digest, config_digest
