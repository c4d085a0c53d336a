"""What the sandbox keeps read-only of a build: toolrt's own state, the person's settings, the environment
toolrt runs from, the locked file (the walls the others rest on), and the project's handler code."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from ..attribution import Journal
from ..beneath import is_within
from ..config.settings import user_settings_file
from ..permissions.config import PermissionConfig
from ..sandbox.config import concrete_protected
from ..sandbox.policy import SandboxPolicy
from .code_files import handler_modules, imported_modules
from .compiled import CompiledTool
from .project_import import environments_inside

__all__ = ["Walls", "walls_of"]


class Walls(NamedTuple):
    """The files protected by identity, the protected list the sandbox enforces, and its walls."""

    files: tuple[Path, ...]
    """The essential directories and files, then the handler modules and the project modules they import."""
    protected: tuple[Path, ...]
    essential: tuple[Path, ...]

    def around(self, policy: SandboxPolicy) -> SandboxPolicy:
        """`policy` with these protected paths and walls."""
        return replace(policy, protected=self.protected, essential=self.essential)


def walls_of(
    root: Path,
    journal: Journal,
    locked_path: Path | None,
    tools: Mapping[str, CompiledTool],
    permissions: PermissionConfig,
) -> Walls:
    """toolrt's data directory (the journal, the person's kept approvals, sessions), the person's settings
    directory, the environment toolrt runs from and the locked file first: the other walls rest on them."""
    essential = (
        (_state_directory(journal.directory.parent.resolve(), root),)
        + _settings_directory(root)
        + environments_inside(root)
        + ((locked_path.resolve(),) if locked_path else ())
    )
    files = essential + imported_modules(root, handler_modules(root, tools))
    protected = concrete_protected(root, permissions.protected, files, first=essential)
    return Walls(files, protected, tuple(Path(os.path.normpath(path)) for path in essential))


def _state_directory(data_dir: Path, root: Path) -> Path:
    """What stays read-only of toolrt's data directory in the sandbox: all of it (the journal, the
    person's kept approvals and sessions; its tool-output directory is bound writable again), or only
    the journal where the project lies inside it."""
    if root == data_dir or data_dir in root.parents:
        return data_dir / "attribution"
    return data_dir


def _settings_directory(root: Path) -> tuple[Path, ...]:
    """The directory of the person's settings file (`$XDG_CONFIG_HOME/toolrt`), made when missing so the
    sandbox can keep it read-only: a settings file a process put there would turn the sandbox off at
    toolrt's next start (it may set every host-only setting). None inside the project, whose own
    settings files are the project's."""
    directory = user_settings_file().parent.resolve()  # compared with the writable set, which is resolved
    if is_within(directory, root) or is_within(root, directory):
        return ()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass  # a read-only home: nothing can be put there either
    return (directory,)
