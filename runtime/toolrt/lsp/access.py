"""What a tool handler reaches as `ctx.lsp`: the Runtime's servers under one snapshot's settings."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import LspError, ToolFailure
from .report import Diagnostic
from .servers import configured_servers

if TYPE_CHECKING:
    from ..build.snapshot import Snapshot
    from .manager import LspConfig, LspManager

__all__ = ["LspAccess", "lsp_config"]


def lsp_config(snapshot: Snapshot) -> LspConfig:
    """The servers, sandbox (the snapshot's, network off) and environment of `snapshot`."""
    from ..attribution import journal_for
    from ..execute.environment import DEFAULT_ENV_ALLOW, build_env
    from ..sandbox.config import call_plan
    from .manager import LspConfig

    settings = snapshot.resolved.values
    servers = configured_servers(settings.lsp)
    cache = snapshot.data_dir / "lsp-cache"
    if servers:
        cache.mkdir(parents=True, exist_ok=True)
    policy = snapshot.sandbox
    # A server reads the project and writes only its cache: it runs project code (rust-analyzer runs a
    # crate's build.rs, a mypy or pylint plugin is imported) outside every process tool's lifetime, so
    # what it wrote in the project would be taken for the person's. With the sandbox off, nothing stops it.
    if policy.mode != "off":
        policy = dataclasses.replace(policy, mode="read-only", writable=(cache,), external_writable=False)
    try:
        plan = call_plan(
            dataclasses.replace(policy, network=False, writable=(*policy.writable, cache)),
            root=snapshot.root,
            output_dir=snapshot.truncation_dir,
            journal=journal_for(snapshot.data_dir),
        )
    except ToolFailure:
        servers = ()  # the locked file requires a sandbox this machine lacks: no server may start
        plan = None
    if plan is not None and plan.covered:
        # A server lives as long as the Runtime and watches the root: it sees the real root, without the
        # overlay that covers absent protected names for the model's processes (the Runtime starts it).
        plan = dataclasses.replace(
            plan, covered=(), description=plan.description.replace(" + absent protected covered", "")
        )
    # Servers keep caches (jedi's parse cache, Go's build cache) under XDG_CACHE_HOME: one writable
    # directory of toolrt's instead of the home directory, which the sandbox keeps read-only.
    # Temporary files and cargo's build directory go there too (the temp directories are not writable).
    env = {
        **build_env(settings.env_allow or DEFAULT_ENV_ALLOW),
        "XDG_CACHE_HOME": str(cache),
        "TMPDIR": str(cache),
        "CARGO_TARGET_DIR": str(cache / "cargo-target"),
    }
    return LspConfig(
        servers=servers,
        root=snapshot.root,
        env=env,
        sandbox=plan,
        wait=settings.lsp.wait,
        path=os.environ.get("PATH", ""),
    )


@dataclass(frozen=True, slots=True)
class LspAccess:
    manager: LspManager
    config: LspConfig

    async def diagnostics(
        self, files: Sequence[Path], deleted: Sequence[Path] = ()
    ) -> Mapping[Path, Sequence[Diagnostic]]:
        """The servers' diagnostics after `files` changed (and `deleted` went away), waiting at most
        `lsp.wait` seconds; `{}` when no server answers (never raises for a server's failure)."""
        if not any(server.serves(path) for server in self.config.servers for path in (*files, *deleted)):
            return {}  # no server's file: not even the server thread is needed
        try:
            return await self.manager.diagnostics(self.config, files, deleted)
        except LspError:
            return {}

    def warm(self, path: Path) -> None:
        """Start the servers of `path` and open it in them, in the background (returns at once)."""
        if any(server.serves(path) for server in self.config.servers):
            self.manager.warm(self.config, path)

    async def query(self, path: Path, operation: Any, timeout: float, text: str | None = None) -> list[tuple[str, Any]]:
        """See `LspManager.query`."""
        return await self.manager.query(self.config, path, operation, timeout, text)
