"""Which language servers exist: the built-in table (`servers.yaml`) under the host's settings.

A server is a process toolrt starts from a configured command, so a command is a host-only setting
(`toolrt.config.settings.host_only_guard`): the built-in entries and the host's `lsp.servers` declare
commands, extensions, root markers and environment; a project may only switch a server off or
pass initialization options. A command's program is an absolute path or a name looked up on PATH,
skipping every PATH entry inside the project tree (a model could put `node_modules/.bin/x` there).
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..beneath import is_within, steady_realpath
from ..config.resources import read_yaml
from ..config.settings import LspSettings
from ..errors import Problem

__all__ = [
    "LANGUAGE_IDS",
    "ServerDef",
    "configured_servers",
    "find_root",
    "language_id",
    "resolve_program",
    "server_problems",
]

LANGUAGE_IDS: Mapping[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "typescriptreact",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascriptreact",
    ".go": "go",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
    ".sh": "shellscript",
    ".bash": "shellscript",
    ".zsh": "shellscript",
    ".ksh": "shellscript",
}
"""File suffix → LSP `languageId` (anything else: the suffix without its dot, or `plaintext`)."""


@dataclass(frozen=True, slots=True)
class ServerDef:
    """One language server as the effective settings declare it."""

    name: str
    command: tuple[str, ...]
    extensions: tuple[str, ...]
    root_markers: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    initialization: str = "null"
    """`initializationOptions`, as JSON (kept as text so the definition stays hashable)."""

    def serves(self, path: Path) -> bool:
        """Whether a file is this server's: its name ends with an extension (`.py`) or matches a glob."""
        name = path.name
        for pattern in self.extensions:
            if any(c in pattern for c in "*?["):
                if fnmatch.fnmatchcase(name, pattern):
                    return True
            elif name.endswith(pattern) or name == pattern:
                return True
        return False

    @property
    def initialization_options(self) -> Any:
        return json.loads(self.initialization)


@functools.cache
def _builtin() -> Mapping[str, Mapping[str, Any]]:
    loaded: Mapping[str, Mapping[str, Any]] = read_yaml(Path(__file__).parent / "servers.yaml")
    return loaded


def configured_servers(settings: LspSettings) -> tuple[ServerDef, ...]:
    """Every server the settings leave on (built-in entries first, then new ones by name); a server
    without a command (a project naming one the host never declared) is left out."""
    if not settings.enabled:
        return ()
    merged: dict[str, dict[str, Any]] = {name: dict(entry) for name, entry in _builtin().items()}
    for name, override in settings.servers.items():
        entry = merged.setdefault(name, {})
        for key in ("command", "extensions", "root_markers", "env", "initialization"):
            value = getattr(override, key)
            if value is not None:
                entry[key] = value
        if override.disabled:
            entry["disabled"] = True
    found = []
    for name, entry in merged.items():
        if entry.get("disabled") or not entry.get("command"):
            continue
        found.append(
            ServerDef(
                name=name,
                command=tuple(str(part) for part in entry["command"]),
                extensions=tuple(entry.get("extensions") or ()),
                root_markers=tuple(entry.get("root_markers") or ()),
                env=tuple(sorted((str(k), str(v)) for k, v in (entry.get("env") or {}).items())),
                initialization=json.dumps(entry.get("initialization"), sort_keys=True),
            )
        )
    return tuple(found)


def _inside(path: str, root: Path) -> bool:
    return is_within(steady_realpath(path), steady_realpath(root))


def resolve_program(program: str, root: Path, *, path: str | None = None) -> str | None:
    """The executable a command's first word names, or None when it is not installed.

    An absolute path is taken as given; a bare name is looked up on PATH (`path`, default the
    environment's) without the entries that are relative or inside the project tree. A program
    that resolves inside the project (a relative name with a slash, a symlink into it) is refused.
    """
    if os.sep in program:
        if not os.path.isabs(program) or _inside(program, root):
            return None
        return program if os.path.isfile(program) and os.access(program, os.X_OK) else None
    entries = (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep)
    safe = [entry for entry in entries if entry and os.path.isabs(entry) and not _inside(entry, root)]
    found = shutil.which(program, path=os.pathsep.join(safe)) if safe else None
    if found is None or _inside(found, root):
        return None
    return found


def find_root(server: ServerDef, file: Path, project_root: Path) -> Path:
    """The nearest directory from the file's up to the project root holding one of the server's root
    markers; the project root when none does."""
    directory = file.parent
    while True:
        if any((directory / marker).exists() for marker in server.root_markers):
            return directory
        if directory == project_root or directory.parent == directory:
            return project_root
        directory = directory.parent


def language_id(path: Path) -> str:
    suffix = path.suffix.lower()
    return LANGUAGE_IDS.get(suffix, suffix[1:] or "plaintext")


def server_problems(settings: LspSettings, origins: Mapping[str, str], root: Path) -> list[Problem]:
    """Warnings for `toolrt validate`: a server the settings declare a command for that is not
    installed, and settings for a server nothing declares (a typo of its name)."""
    if not settings.enabled:
        return []
    problems = []
    for name, override in settings.servers.items():
        if override.disabled:
            continue
        command = override.command
        if command is None and name not in _builtin():
            prefix = f"lsp.servers.{name}."
            origin = next((o for key, o in origins.items() if key.startswith(prefix)), "<settings>")
            message = (
                f"language server '{name}' is not declared (no built-in entry of that name and no command in the "
                f"host settings), so its settings are unused; built-in servers: {', '.join(_builtin())}"
            )
            problems.append(_located(origin, f"/lsp/servers/{name}", message))
        elif command and resolve_program(command[0], root) is None:
            origin = origins.get(f"lsp.servers.{name}.command", "<settings>")
            message = (
                f"language server '{name}': its command `{command[0]}` is not installed (not found on PATH outside "
                "the project, or not an executable file), so it will not start"
            )
            problems.append(_located(origin, f"/lsp/servers/{name}/command", message))
    return problems


def _located(origin: str, pointer: str, message: str) -> Problem:
    file, _, line = origin.rpartition(":")
    if file and line.isdigit():
        return Problem(file, int(line), 1, pointer, message, "warning")
    return Problem(origin, 0, 0, pointer, message, "warning")
