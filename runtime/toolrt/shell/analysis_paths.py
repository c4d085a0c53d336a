"""Paths and the working directory: which places a line's operands and redirects name, what it
writes, and where each `cd` leaves it."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Collection
from typing import TYPE_CHECKING

from ..permissions.model import UNNAMED
from .analysis_state import GLOB_CHARS, UNKNOWN_CWD, AnalysisState, brief, runtime_path, unknown_until_run
from .braces import expand_braces
from .findings import MAX_READ_PATHS
from .globs import glob_paths
from .paths import fs_safe, path_candidate
from .variables import assignment_word
from .words import Word, evaluate
from .writes import copies, may_write, written

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["PathChecks", "path_like", "redefines_cd", "sets_pwd"]

_EXTGLOB = re.compile(r"[?*+@!]\(")  # `@(a|b)`, `!(x)`: patterns once `extglob` is on
_FD_DUPLICATION = frozenset((">&", "<&"))
_PATHSPECS = frozenset(("restore", "checkout", "rm"))  # git subcommands whose operands are pathspecs
_MAX_COPIED = 2_000  # names below a copied directory that are checked one by one
_MAX_WALKED = 20_000  # entries below the directories a symlink-following program walks
_MAX_CWDS = 8


class PathChecks(AnalysisState):
    """Operands, redirects and written files as places; `cd` as a change of place."""

    __slots__ = ()

    def _cwd_real(self) -> str | None:
        """The real path of the working directory while it is inside the project, else None."""
        if self.cwd_real is UNKNOWN_CWD:
            only = self.cwds[0] if len(self.cwds) == 1 else None
            self.cwd_real = self.scope.real_inside(only, self.findings.listings) if only is not None else None
        return self.cwd_real

    def _check_paths(self, words: list[Word], *, skip_first: bool = True, text: Collection[int] | None = None) -> None:
        """Check the words (after the command's name) that may be paths; `text` holds the positions,
        counted after the name, that the program reads as text, patterns or scripts."""
        if skip_first and len(words) < 2:
            return
        base = self.cwd_real if self.cwd_real is not UNKNOWN_CWD else self._cwd_real()
        globbing = self.findings.globbing is not None  # what changes it is no operand
        operands = False  # after `--`, a word that starts with `-` is an operand too (`cat -- -n`)
        for position, word in enumerate(words[1:] if skip_first else words):
            if text and position in text and not word.glob and not word.defaults:
                continue  # text the program prints or matches; a glob or a default still names paths
            if globbing and not word.glob and _EXTGLOB.search(word.raw):
                self._changed_glob(word.raw)
            value = word.value
            if value is None:
                self._dynamic_operand(word)
            elif value == "--" and not operands:
                operands = True
            elif operands and value[:1] == "-":
                self._path("./" + value, glob=word.glob)  # the name `-n`, not an option
            elif value and (value[0] != "-" or len(value) > 2):  # `-x` and `-` name no path
                self._operand(word, value, base)

    def _dynamic_operand(self, word: Word) -> None:
        """An operand only known when it runs: the defaults it may take, and the operand itself."""
        for default in word.defaults:
            if default is None:
                why = f"`{brief(word.raw)}` may take a default only known when it runs"
                self.findings.fail_closed(word.raw, why)
            elif default and default[0] != "-":
                self._path(default, glob=GLOB_CHARS.search(default) is not None)
        self._dynamic_path(word, self.cwds)

    def _operand(self, word: Word, value: str, base: str | None) -> None:
        """A literal operand (`base`: the real working directory while it is inside the project)."""
        if value[0] == "-":
            candidates = _option_values(value)
        elif base is not None and _bare_name(word, value):
            # A bare name in a directory known to be inside the project: only an existing
            # entry of that name (a symlink) can lead out, and most names do not exist.
            kind = self.findings.listings.kind(base, value)
            if kind == "link":
                self._external(value)
            elif kind == "other" and self.cwds[0] is not None and len(self.findings.read) < MAX_READ_PATHS:
                # An entry that is no symlink stays in the project: only its `read` rules apply.
                self.findings.read[_entry_path(self.cwds[0], value)] = None
            return
        else:
            candidates = [value]
            key, equals, rest = value.partition("=")
            if equals and rest and "/" not in key:
                candidates.append(rest)  # `dd if=../x`, `GIT_DIR=../x`
        for position, candidate in enumerate(candidates):
            self._path(candidate, glob=word.glob)
            if candidate[:1] == "~" and (position or value[0] == "-"):
                # bash expands a `~` after `=` only in a word shaped like an assignment (`if=~/x`), never
                # in `--file=~/x` or `-f~/x`: the program may open `./~/x`, so that is checked too
                self._path("./" + candidate, glob=word.glob)

    def _path(self, candidate: str, *, glob: bool, cwds: tuple[str | None, ...] | None = None) -> None:
        """Check one path-like text; a glob or brace word is checked as every path it may become."""
        expanded = expand_braces(candidate) if glob and "{" in candidate else [candidate]
        if expanded is None:
            self.findings.fail_closed(candidate, f"`{brief(candidate)}` expands to too many words to check")
            return
        for each in expanded:
            path = each if each and each[0] != "-" else path_candidate(each)
            if path is None:
                continue
            if glob and GLOB_CHARS.search(path):
                self._glob(path, cwds)
            else:
                self._external(path, cwds)

    def _glob(self, pattern: str, cwds: tuple[str | None, ...] | None) -> None:
        """A glob is checked as the paths it matches now (bounded), and as its literal directory."""
        self._external(pattern, cwds)
        if self.findings.globbing is not None:
            self._changed_glob(pattern)
        if not self.findings.expand_globs:
            return
        for cwd in self.cwds if cwds is None else cwds:
            matches = glob_paths(pattern, cwd)
            if matches is None:
                self.findings.fail_closed(pattern, f"`{brief(pattern)}` matches too many paths to check")
                return
            for match in matches:
                self._external(match, (cwd,))

    def _changed_glob(self, pattern: str) -> None:
        why = f"`{brief(pattern)}` is matched under the glob options the line changed ({self.findings.globbing})"
        self.findings.fail_closed(pattern, why + ", which this analysis does not model")

    def _dynamic_path(self, word: Word, cwds: tuple[str | None, ...]) -> None:
        """An operand only known when it runs: its literal start is checked now, and a word made of
        variables is checked again at the end, with every value the text assigns them."""
        slash = word.prefix.rfind("/")
        if slash >= 0:
            self._external(word.prefix[: slash + 1], cwds)
        if word.variables:
            self.deferred.append((word, cwds))
        elif word.variables is None or path_like(word.shape):
            # `cat $(echo ../x)`, `cat ${x/a/../x}`: what a substitution or an edited value gives may be any path
            self.findings.fail_closed(word.raw, runtime_path(word.raw))

    def _external(self, path: str, cwds: tuple[str | None, ...] | None = None) -> None:
        if path.startswith("~-"):
            self.findings.fail_closed(path, f"`{brief(path)}` is under the previous directory, only known when it runs")
            return
        if not self.pwd_known and path.startswith("~+"):
            self.findings.fail_closed(path, f"`{brief(path)}` is under `$PWD`, which the line sets")
            return
        if cwds is None and len(self.cwds) == 1 and _plain_name(path) and self._plain_entry(path):
            return
        for cwd in self.cwds if cwds is None else cwds:
            if cwd is None and path[0] not in "/~":
                continue  # the unknown directory already failed closed where it became unknown
            if len(self.findings.read) < MAX_READ_PATHS:
                absolute = self.scope.expand(path, cwd)
                if absolute is not None:
                    self.findings.read[posixpath.normpath(absolute)] = None
            for directory in self.scope.external(path, cwd, self.findings.listings):
                self.findings.directories[directory] = None

    def _plain_entry(self, name: str) -> bool:
        """`_external` of a plain name in the one working directory, answered when it is inside the
        project and no symlink of that name is there (the common case): True when nothing is left to
        check. Records the path for the `read` rules as `_external` does."""
        base = self._cwd_real()
        cwd = self.cwds[0]
        if base is None or cwd is None:
            return False
        if len(self.findings.read) < MAX_READ_PATHS:
            self.findings.read[_entry_path(cwd, name)] = None
        return self.findings.listings.kind(base, name) != "link"

    def _redirect(self, node: Node, parent: Node | None) -> None:
        operator = self._operator(node)
        for destination in node.children_by_field_name("destination"):
            target = self._slice(destination.start_byte, destination.end_byte)
            if operator in _FD_DUPLICATION and (destination.type == "number" or target == "-"):
                continue
            word = evaluate(destination, self.known, source=self.source)
            if word.value is None:
                self._fail(parent or node, unknown_until_run("the redirect target", word.raw))
                slash = word.prefix.rfind("/")
                if slash >= 0:
                    self._external(word.prefix[: slash + 1])
                continue
            if not word.value:
                continue
            if operator not in ("<", "<&", "<<<"):
                targets = [word.value]
                if word.glob and GLOB_CHARS.search(word.value):  # `> permissions.ya?l` writes what it matches
                    targets.extend(self._written_matches(word.value, self._slice(node.start_byte, node.end_byte)))
                for target in targets:
                    for cwd in self.cwds:
                        absolute = self.scope.expand(target, cwd)
                        if absolute is not None:
                            self.written.add(posixpath.normpath(absolute))
                            self.findings.written[posixpath.normpath(absolute)] = None
            self._path(word.value, glob=word.glob)

    def _writes(self, values: list[str | None], text: str, *, fed: bool = False) -> None:
        """Record the operands the command writes (writes.yaml); an unknown one fails closed, and so
        do `find -exec`'s `{}` and the words `xargs` adds. A glob in a written operand writes every
        path it matches."""
        if not may_write(values):
            return
        values = [None if value == "{}" else value for value in values]
        paths = written([*values, None] if fed else values)
        copied = copies(values)
        if not paths and copied is None:
            return  # the table's row names nothing this command writes (`git commit`, `sed -n`)
        if copied is not None and copied[1] is not None:
            paths.extend(self._copies(copied[0], copied[1]))
        paths.extend(self._directories_below(values, paths))
        globbed = [path for path in paths if path and GLOB_CHARS.search(path) and not path.endswith(UNNAMED)]
        for pattern in globbed:
            paths.extend(self._written_matches(pattern, text))  # matches are not globbed again
        for path in paths:
            if path is None:
                self.findings.fail_closed(text, "a file this command writes is only known when it runs")
            elif path:
                for cwd in self.cwds:
                    absolute = self.scope.expand(path, cwd)
                    if absolute is not None:
                        self.findings.written[posixpath.normpath(absolute)] = None

    def _copies(self, sources: list[str | None], destination: str) -> list[str | None]:
        """What copying `sources` into `destination` writes besides the destination, in every working
        directory (an unknown source adds nothing: the destination itself is already written)."""
        out: list[str | None] = []
        for source in sources:
            if source is not None:
                for cwd in self.cwds:
                    out.extend(self._copied_names(source, destination, cwd))
        return out

    def _directories_below(self, values: list[str | None], paths: list[str | None]) -> list[str | None]:
        """For each path git writes that is an existing directory, the files below it, unnamed
        (`git restore src` rewrites every file below `src`)."""
        out: list[str | None] = []
        if values[0] is None or values[0].rpartition("/")[2] != "git" or _PATHSPECS.isdisjoint(values[1:]):
            return out
        for path in paths:
            if not path or path.endswith(UNNAMED):
                continue
            for cwd in self.cwds:
                absolute = self.scope.expand(path, cwd)
                if absolute is not None and fs_safe(absolute) and os.path.isdir(absolute):
                    out.append(posixpath.join(path, UNNAMED))
                    break
        return out

    def _written_matches(self, pattern: str, text: str) -> list[str]:
        """The paths a glob in a written operand matches now (`sed -i … *.yaml`); too many fail closed."""
        out: list[str] = []
        for cwd in self.cwds:
            matches = glob_paths(pattern, cwd)
            if matches is None:
                self.findings.fail_closed(text, f"`{brief(pattern)}` matches too many files to check what it writes")
                return []
            out.extend(matches)
        return out

    def _walked_links(self, base: str, args: list[str | None]) -> None:
        """A program that follows symlinks while it walks (`grep -R`, `find -L`) reads wherever a link
        below its directories points: each link out of the project asks `external_directory` for its
        target, as naming the path would. The directory operands and the working directory are walked,
        up to `_MAX_WALKED` entries; past that the line fails closed."""
        roots: dict[str, str | None] = {}
        for cwd in self.cwds:
            # `.` too: `grep -R PATTERN` walks the working directory, and its pattern is no directory.
            # An empty operand (`find -L ""`) names no directory.
            for operand in (*(a for a in args if a and not a.startswith("-")), "."):
                absolute = self.scope.expand(operand, cwd) if cwd is not None or operand[:1] in "/~" else None
                if absolute is not None and os.path.isdir(absolute) and not os.path.islink(absolute):
                    roots.setdefault(posixpath.normpath(absolute), cwd)
        seen = 0
        for top, cwd in roots.items():
            for directory, subdirectories, files in os.walk(top):
                for name in (*subdirectories, *files):
                    path = posixpath.join(directory, name)
                    if os.path.islink(path):
                        self._external(path, (cwd,))
                seen += len(subdirectories) + len(files)
                if seen > _MAX_WALKED:
                    reason = f"`{base}` follows symlinks through more files than can be checked"
                    self.findings.fail_closed(f"{base} {top}", reason)
                    return

    def _copied_names(self, source: str, destination: str, cwd: str | None) -> list[str]:
        """What copying `source` into `destination` may write besides the destination itself: the
        source's name inside it, and for a directory everything below (as `cp -r`, `rsync -a` do, with
        and without the directory's own name); past `_MAX_COPIED` names, the directory's unnamed files."""
        base = posixpath.basename(posixpath.normpath(source))
        out = [posixpath.join(destination, base)] if base not in ("", ".", "..", "/") else []
        if not source:
            return out  # an empty operand names no file (`cp "" dir` copies nothing)
        absolute = self.scope.expand(source, cwd) if cwd is not None or source.startswith(("/", "~")) else None
        if absolute is None or not os.path.isdir(absolute):
            return out
        names: list[str] = []
        for directory, subdirectories, files in os.walk(absolute):
            relative = posixpath.relpath(directory, absolute)
            for name in (*subdirectories, *files):
                names.append(posixpath.normpath(posixpath.join(relative, name)))
            if len(names) > _MAX_COPIED:
                return [posixpath.join(destination, UNNAMED)]
        for name in names:
            out.append(posixpath.join(destination, name))
            if base not in ("", ".", "..", "/"):
                out.append(posixpath.join(destination, base, name))
        return out

    def _cd(self, words: list[Word], first: int, last: int, text: str, *, name: str, certain: bool = False) -> None:
        """`cd`/`pushd`/`popd`: the working directory may be the new one or (the change may fail)
        the old one; both stay candidates, except before `&&`, where what follows runs only in the
        new one (`cd src && make && cd ..` ends where it started). Where it goes is unknown,
        relative paths fail closed."""
        if self.findings.cd_redefined:
            self.findings.fail_closed(text, f"`{name}` is a function the line defines: where it goes is not known here")
            self._set_cwds((*self.cwds, None))
            return
        if self.keyword and any(assignment_word(word.raw) for word in words[first + 1 : last]):
            # After `set -k`, `cd HOME=.` is `cd` with HOME set: its NAME=value words pick where it goes.
            self.findings.fail_closed(text, f"after `set -k`, `{brief(text)}` is given HOME or CDPATH by its words")
            self._set_cwds((*self.cwds, None))
            return
        target, followed = _directory_operand(words[first + 1 : last], pushd=name == "pushd")
        if not followed:
            self.findings.fail_closed(text, f"`{brief(text)}` goes to a directory of the stack, not known here")
            self._set_cwds((*self.cwds, None))
            return
        if name == "popd" or (target is not None and target.value == "-"):
            self.findings.fail_closed(text, f"`{brief(text)}` goes back to a directory not known here")
            self._set_cwds((*self.cwds, None))
            return
        if target is None:  # home, as `cd ~`: what follows may read there (`cd && grep -r x`)
            self._external("~")
            self._set_cwds((*self.cwds, self.scope.home))
            return
        if target.value is None or target.glob or (not self.pwd_known and target.value.startswith("~+")):
            self.findings.fail_closed(text, f"cd goes to `{brief(target.raw)}`, which is only known when it runs")
            self._set_cwds((*self.cwds, None))
            return
        targets: list[str | None] = []
        for cwd in self.cwds:
            absolute = self.scope.expand(target.value, cwd) if target.value else cwd
            targets.append(posixpath.normpath(absolute) if absolute is not None else None)
        self._set_cwds(tuple(targets) if certain else (*self.cwds, *targets))

    def _set_cwds(self, cwds: tuple[str | None, ...]) -> None:
        unique: tuple[str | None, ...]
        if len(cwds) == 1 or len(cwds) == 2 and cwds[0] != cwds[1]:
            unique = cwds  # each once already
        else:
            unique = tuple(dict.fromkeys(cwds))
        if len(unique) > _MAX_CWDS:
            self.findings.fail_closed(self.text, "the working directory could be too many places to follow")
            unique = (None,)
        if unique != self.cwds:  # a subshell or list that ends where it began keeps what was learnt
            self.cwds = unique
            self.cwd_real = UNKNOWN_CWD
            self._set_pwd()
        for seen in self.chains:
            for cwd in unique:
                seen[cwd] = None

    def _set_pwd(self) -> None:
        if len(self.cwds) == 1 and self.cwds[0] is not None and self.pwd_known:
            self.known["PWD"] = self.cwds[0]
        else:
            self.known.pop("PWD", None)


_DIRECTORY_FUNCTION = re.compile(r"(?:^|[^\w-])(?:cd|pushd|popd)\s*\(\s*\)|\bfunction\s+(?:cd|pushd|popd)(?![\w-])")
_PWD = re.compile(r"\bPWD\b")
_PWD_READ = re.compile(r"\$PWD\b|\$\{PWD\}")


def redefines_cd(text: str) -> bool:
    """Whether `text` may define a function named `cd`, `pushd` or `popd` (quotes and backslashes
    ignored: a false match only makes the line's `cd`s fail closed)."""
    if "(" not in text and "function" not in text:
        return False
    return _DIRECTORY_FUNCTION.search(text.replace("\\", "").replace("'", "").replace('"', "")) is not None


def sets_pwd(text: str) -> bool:
    """Whether `text` may give `PWD` a value of its own: `PWD` named anywhere but in a plain `$PWD` or
    `${PWD}` (`PWD=..`, `read PWD`, `${PWD:=..}`, `declare -n r=PWD`). Then `$PWD` is not taken for the
    working directory."""
    if "PWD" not in text:
        return False
    return len(_PWD.findall(text)) > len(_PWD_READ.findall(text))


def _directory_operand(words: list[Word], *, pushd: bool) -> tuple[Word | None, bool]:
    """The directory `cd` or `pushd` goes to (None: none given, `cd` goes home), and whether this
    analysis follows the form: `pushd` alone, `pushd -n DIR` (the directory does not change) and
    `pushd +N`/`-N` (a turn of the stack) go where the stack says, which is not known here."""
    options = True
    for word in words:
        value = word.value
        if options and value is not None and value[:1] == "-" and value != "-":
            if value == "--":
                options = False
            elif pushd:
                return None, False
            continue
        if pushd and value is not None and value[:1] == "+":
            return None, False
        return word, True
    return None, not pushd


def _bare_name(word: Word, value: str) -> bool:
    """A plain name of an entry in the working directory: no glob, `~`, `/`, `=`, `.` or `..`."""
    return (
        not word.glob
        and value[0] != "~"
        and "/" not in value
        and "=" not in value
        and value != "."
        and value != ".."
        and (value.isascii() and "\x00" not in value or fs_safe(value))  # fs_safe, its common case first
    )


def _entry_path(directory: str, name: str) -> str:
    """`posixpath.normpath(directory + "/" + name)` for a normalised directory and a bare name (no `/`, not
    `.` or `..`): the joined text itself, but under `/` and `//`."""
    return directory + "/" + name if len(directory) > 2 else posixpath.normpath(directory + "/" + name)


def _plain_name(path: str) -> bool:
    """A name of an entry in the working directory (`PathScope.external`'s common case)."""
    return "/" not in path and path[0] != "~" and path != "." and path != ".." and fs_safe(path)


def _option_values(word: str) -> list[str]:
    """Paths an option may carry: `--out=../x` → `../x`, `-o../x` → `../x`. Which short options take
    a value is not known here, so what follows the first letter of any cluster counts (`-la` names
    `a`: a `read` request for it adds nothing unless a `read` rule matches it, `cp -tlnk` names `lnk`)."""
    name, equals, value = word.partition("=")
    if equals:
        return [value] if value else []
    if len(word) > 2 and word[1] != "-":
        return [word[2:]]
    return []


def path_like(raw: str) -> bool:
    """A word whose literal parts say it is a path (`$X/y`, `$PWD/../x`); dynamic parts are NUL."""
    return "/" in raw or ".." in raw or raw.startswith("~")
