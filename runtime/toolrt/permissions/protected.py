"""Protected paths: files that change how tools or programs behave, asked as the permission `protected`.

toolrt's own config, VCS internals, editor task files and shell start-up files are listed as data
(`protected:` in the permissions files, the built-in list in toolrt's permissions.yaml); the runtime
adds the locked file and the project's handler modules. Every route that writes a file (write,
edit, apply_patch, bash redirects and written operands, project tools' `permission.paths`) turns
the paths it writes into one `protected` request for those that match, checked as written and as
their real path (symlinks resolved). The built-in rule at the end of every agent's chain asks, so no
project rule can lift it; a session approval can, and the locked file can deny.

Pattern forms (wildcards as in rules: `*` crosses `/`):
- a name without `/` (`.git`, `.bashrc`, `*.pem`) matches a file or directory of that name at any depth;
- `./x` or `dir/x` is relative to the project root; `/x` (and `~/x`, expanded on load) is absolute;
everything under a matched directory is protected too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from ..beneath import is_within, steady_realpath
from .model import UNNAMED, PermissionRequest
from .wildcard import Matcher, compile_matcher, fold

__all__ = ["PROTECTED", "ProtectedPaths"]

PROTECTED = "protected"


@dataclass(frozen=True)
class ProtectedPaths:
    """The protected list of one snapshot, compiled once; `request(paths)` is the `protected` ask."""

    root: str
    patterns: tuple[str, ...]
    files: tuple[str, ...] = ()
    """Absolute files protected by identity: the locked file, the project's handler modules."""
    _cache: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def _compiled(self) -> tuple[tuple[Matcher, ...], tuple[Matcher, ...], tuple[Matcher, ...]]:
        names: list[Matcher] = []
        relative: list[Matcher] = []
        absolute: list[Matcher] = []
        for pattern in self.patterns:
            if "/" not in pattern:
                names.append(compile_matcher(pattern))
            elif pattern.startswith("/"):
                absolute.append(compile_matcher(pattern.rstrip("/") or "/"))
            else:
                relative.append(compile_matcher(pattern.removeprefix("./").rstrip("/")))
        # A file name holding `*` or `?` also protects its look-alikes, which fails safe.
        absolute.extend(compile_matcher(file) for file in self.files)
        return tuple(names), tuple(relative), tuple(absolute)

    def matches(self, path: str) -> bool:
        """Whether the absolute, normalised `path` (as given; see `forms`) is protected."""
        hit = self._cache.get(path)
        if hit is None:
            hit = self._cache[path] = self._matches(path)
            if len(self._cache) > 4096:
                self._cache.clear()
        return hit

    def _matches(self, path: str) -> bool:
        names, relative, absolute = self._compiled
        candidates = _ancestors(path)  # the path and every directory above it
        if any(matcher(fold(candidate)) for candidate in candidates for matcher in absolute):
            return True
        root = self.root
        if is_within(path, root):
            inside = path[len(root.rstrip("/")) + 1 :]
            if inside and any(matcher(fold(candidate)) for candidate in _ancestors(inside) for matcher in relative):
                return True
        components = [part for part in path.split("/") if part]
        return any(matcher(fold(part)) for part in components for matcher in names)

    def display(self, path: str) -> str:
        """The path as the ask shows it and rules match it: root-relative inside the root, else absolute."""
        root = self.root.rstrip("/")
        if path.startswith(root + "/"):
            return path[len(root) + 1 :]
        return path

    def request(self, paths: Iterable[str]) -> PermissionRequest | None:
        """One `protected` request for the written `paths` (absolute) that are protected, as written or
        as their real path; None when none is. `DIR/` + `UNNAMED` stands for files whose names come
        from what the command reads (an archive it extracts, a patch it applies): any may be
        protected, so it is asked as `DIR/*`."""
        found: dict[str, None] = {}
        unnamed: dict[str, None] = {}
        for path in paths:
            if path.endswith(UNNAMED):
                directory = os.path.normpath(path[: -len(UNNAMED)] or ".")
                inside = self.display(directory) if directory != self.root.rstrip("/") else ""
                unnamed[f"{inside}/*" if inside else "*"] = None
                continue
            for form in dict.fromkeys((os.path.normpath(path), steady_realpath(path))):
                if self.matches(form):
                    found[self.display(form)] = None
        if not found and not unnamed:
            return None
        patterns = tuple(found)
        # "Always" never covers unnamed files: it would let every later write to a protected path through.
        return PermissionRequest(PROTECTED, (*patterns, *unnamed), patterns, {"paths": [*patterns, *unnamed]})


def _ancestors(path: str) -> list[str]:
    """`a/b/c` → [`a/b/c`, `a/b`, `a`]; `/a/b` → [`/a/b`, `/a`]."""
    out = [path]
    while True:
        parent = path.rsplit("/", 1)[0]
        if not parent or parent == path:
            return out
        out.append(parent)
        path = parent
