"""Which shell words name a location outside the project, and the `external_directory` glob for it.

A word is taken as a path unless it plainly is not one (an option without `=`, a URL, `host:path`).
Both forms are checked: the lexical one (`~` and `$HOME` expanded, `..` folded) and the real one
(symlinks resolved), so neither `../../etc` nor a symlink inside the project that points out of
it slips through. The real form costs one `lstat` per path component under the project root, and
stops at the first component that does not exist.
"""

from __future__ import annotations

import os
import posixpath
import re
import stat
from functools import lru_cache

from ..beneath import is_within, steady_realpath
from ..permissions.model import CallSite, usable_exempt
from .listings import Listings

__all__ = ["PathScope", "fs_safe", "path_candidate", "scope_for"]

_DEVICES = frozenset(("/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"))
_UNSAFE = re.compile("[\x00\ud800-\udfff]")


def fs_safe(path: str) -> bool:
    """False for text the OS cannot take as a path (NUL, lone surrogates): such words get lexical checks only."""
    if path.isascii():
        return "\x00" not in path
    return _UNSAFE.search(path) is None


def path_candidate(word: str) -> str | None:
    """The part of an argument that may be a path, or None when it is not a path at all.

    `--out=/tmp/x` → `/tmp/x`; `-rf` → None. Everything else is checked as a path as it stands:
    `https://x.y/z` or `host:repo` is a harmless relative name unless it climbs out with `..` or
    starts at a symlink (`a:/../x`, where `a:` may be a link), and bash would pass it as a path.
    """
    if not word:
        return None
    if word[0] == "-":
        name, equals, value = word.partition("=")
        if not equals or not value:
            return None
        word = value
    return word


@lru_cache(maxsize=64)
def _realpath(path: str) -> str:
    # The project root and the exempt directories are resolved once per process: they are the
    # fixed frame every call is measured against, not arguments the model controls.
    return steady_realpath(path)


class PathScope:
    """The project root of one call site, and the directories that never ask."""

    __slots__ = ("cwd", "exempt", "home", "journal", "root", "root_real", "_root_base")

    def __init__(self, site: CallSite) -> None:
        self.root = posixpath.normpath(os.path.abspath(site.root))
        self.root_real = _realpath(self.root)
        self._root_base = self.root_real.rstrip("/") or ""
        self.home = posixpath.normpath(os.path.abspath(site.home))
        self.cwd = posixpath.normpath(os.path.abspath(site.cwd))
        # Lexical only, never their real paths: a tool-output directory made a symlink to `/` must not
        # exempt everything. Whether one is (or passes through) a symlink is checked at each use.
        self.exempt = tuple(dict.fromkeys(posixpath.normpath(os.path.abspath(path)) for path in site.exempt))
        self.journal = site.journal
        """The attribution journal: which scripts the model wrote (None: scripts are not looked up)."""

    def expand(self, word: str, cwd: str | None) -> str | None:
        """The absolute, unresolved form of `word` (tilde expanded), or None if cwd is unknown."""
        if word[0] == "~":
            head, slash, rest = word.partition("/")
            if head == "~":
                word = self.home + slash + rest
            elif head == "~+":  # the working directory (`~-`, the previous one, is `_previous`'s)
                if cwd is None:
                    return None
                word = cwd + slash + rest
            else:
                # `~user/x`: the passwd lookup only happens for this rare form; a name holding a NUL, which
                # the lookup refuses (`ValueError`), is no user's.
                expanded = os.path.expanduser(head) if "\x00" not in head else head
                word = (expanded if expanded != head else "/nonexistent-user-home") + slash + rest
        if word[0] == "/":
            return word
        if cwd is None:
            return None
        return cwd + "/" + word

    def inside(self, lexical: str) -> bool:
        """True when a normalised absolute path is in the project (lexically)."""
        return is_within(lexical, self.root)

    def external(self, word: str, cwd: str | None, listings: Listings | None = None) -> list[str]:
        """The directories (0, 1 or 2) outside the project that `word` reaches, lexically or really.

        For a path that is an existing directory the directory itself, otherwise its parent,
        as OpenCode's `kind` rule. `/dev/null` and friends and the exempt directories give none.
        `listings` answers whether a name in a directory exists (one listing, not a call per name).
        """
        if not fs_safe(word) or (cwd is not None and not fs_safe(cwd)):  # `cd a<NUL>b; cat x/y` too
            return self._lexical_only(word, cwd)
        if cwd is not None and "/" not in word and word[0] != "~" and word != "." and word != "..":
            base = self.real_inside(cwd)
            if base is not None:
                # The common case (`origin`, `main`): a name in a directory known to be in the
                # project; only a symlink of that name can lead out.
                if (listings or Listings()).kind(base, word) != "link":
                    return []
                real = steady_realpath(base + "/" + word)
                if self._exempt(real) or is_within(real, self.root_real):
                    return []
                return [_directory_of(real)]
        absolute = self.expand(word, cwd)
        if absolute is None:
            return []
        lexical = posixpath.normpath(absolute)
        if lexical.startswith("//"):
            lexical = lexical[1:]
        if _device(lexical):
            # `/dev/stderr` is a symlink into /proc: the name is what is exempt, not its target.
            return []
        found: list[str] = []
        if not is_within(lexical, self.root) and not self._exempt(lexical):
            found.append(_directory_of(lexical))
        resolved = self._real(absolute, lexical, listings)
        if resolved is not None and not self._exempt(resolved) and not is_within(resolved, self.root_real):
            directory = _directory_of(resolved)
            if directory not in found:
                found.append(directory)
        return found

    def _lexical_only(self, word: str, cwd: str | None) -> list[str]:
        absolute = self.expand(word, cwd) if word[0] != "~" or fs_safe(word.partition("/")[0]) else None
        if absolute is None:
            return []
        lexical = posixpath.normpath(absolute)
        if self._exempt(lexical) or is_within(lexical, self.root):
            return []
        return [posixpath.dirname(lexical)]

    def real_inside(self, directory: str, listings: Listings | None = None) -> str | None:
        """The real path of a directory that is in the project both lexically and really, else None.
        `listings` answers for each component (one listing per directory, not a call per name)."""
        if directory == self.root:
            return self._root_base
        if not is_within(directory, self.root) or not fs_safe(directory):
            return None
        walked = self._walk(directory[len(self.root) :].strip("/"), listings)
        return None if walked is None or walked[1] else walked[0]

    def _real(self, absolute: str, lexical: str, listings: Listings | None) -> str | None:
        """The symlink-resolved path when it may differ from `lexical`, else None."""
        if "/.." not in absolute and is_within(lexical, self.root):
            # Walk the components under the root; only a symlink among them can lead out.
            relative = lexical[len(self.root) :].lstrip("/")
            if not relative:
                return None
            current = self.root_real.rstrip("/")
            if "/" not in relative:
                # The common case (`origin`, `main`): answered from the root's listing.
                if (listings or Listings()).kind(current, relative) != "link":
                    return None
                return steady_realpath(current + "/" + relative)
            walked = self._walk(relative)
            return steady_realpath(lexical) if walked is not None and walked[1] else None
        return steady_realpath(absolute)

    def _walk(self, relative: str, listings: Listings | None = None) -> tuple[str, bool] | None:
        """Follow `relative` under the root's real path one component at a time, without following
        links: (path so far, True) at the first symlink, (full path, False) when there is none, and
        None when a component does not exist."""
        current = self.root_real.rstrip("/")
        for part in relative.split("/"):
            if listings is not None and part not in ("", ".", ".."):
                kind = listings.kind(current, part)
                current += "/" + part
                if kind != "other":
                    return (current, True) if kind == "link" else None
                continue
            current += "/" + part
            try:
                mode = os.lstat(current).st_mode
            except OSError:
                return None
            if stat.S_ISLNK(mode):
                return current, True
        return current, False

    def _exempt(self, path: str) -> bool:
        if _device(path):
            return True
        inside = [directory for directory in self.exempt if is_within(path, directory)]
        return bool(inside) and bool(usable_exempt(inside))


def _device(path: str) -> bool:
    return path in _DEVICES or path.startswith("/dev/fd/")


_last_scope: tuple[CallSite, PathScope] | None = None


def scope_for(site: CallSite) -> PathScope:
    """The scope of a call site, built once per site (the root's real path costs syscalls). The site
    object last asked about answers without hashing it (a tool's calls reuse one site)."""
    global _last_scope  # a one-entry cache in front of the lru_cache
    last = _last_scope
    if last is not None and last[0] is site:
        return last[1]
    scope = _scope_for(site)
    _last_scope = (site, scope)
    return scope


@lru_cache(maxsize=64)
def _scope_for(site: CallSite) -> PathScope:
    return PathScope(site)


def _directory_of(path: str) -> str:
    return path if os.path.isdir(path) else posixpath.dirname(path)
