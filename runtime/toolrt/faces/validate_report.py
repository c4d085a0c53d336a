"""`toolrt validate` as CI and pre-commit run it: which problems to show, where they are, in which format.

- Scope: problems in the project's own files. Warnings about built-in and plugin files (which the
  user cannot change) are notes: shown only with `--all`, and never failing `--strict`; their errors
  always appear, because they make the config invalid.
- A directory that is not a toolrt project is a usage error (exit 2) naming the projects below it: a
  CI job that forgot `--root` must not pass by checking nothing.
- Paths are relative to the working directory (GitHub and pre-commit run at the repository root), so
  `--root sub` gives `sub/tools.d/a.yaml`; a file outside the working directory keeps its absolute path,
  a built-in one its `<builtin>/` name.
- `FILE…` arguments: each file's project is the nearest directory above it holding `tools.d/`,
  `permissions.yaml` or `toolrt.yaml`, looking no higher than the VCS root. Every such project is
  validated; its errors are reported (a file can break another one: a removed flag breaks the tool
  that names it), its warnings only for the files named.
- `--strict`: warnings fail too (exit 1), and the summary says so.
- Formats: text (`file:line:column: message`), json, github (workflow commands), sarif (2.1.0).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from ..beneath import is_within
from ..config.resources import builtin_root
from ..errors import Problem, UsageError
from .project_checks import validate

__all__ = [
    "Outcome",
    "find_project",
    "is_project",
    "problem_text",
    "projects_below",
    "render",
    "sarif_log",
    "validate_paths",
]

PROJECT_MARKERS = ("tools.d", "permissions.yaml", "toolrt.yaml")
"""What makes a directory a toolrt project."""

VCS_MARKERS = (".git", ".hg", ".svn", ".jj")
"""What marks a repository's root, above which no project is looked for."""

_BUILTIN = "<builtin>/"
_SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one `toolrt validate` run reports. Problem paths are as shown (relative to the working directory)."""

    roots: tuple[Path, ...]
    errors: tuple[Problem, ...]
    warnings: tuple[Problem, ...]
    """Warnings about the project's own files (those named, with `FILE…` arguments): `--strict` fails on them."""
    notes: tuple[Problem, ...] = ()
    """With `--all`: warnings about built-in and plugin files, which the user cannot change (never failing)."""
    sandboxes: tuple[str, ...] = ()
    """Per project validated: which OS sandbox its tools' processes run in (shown with `--all`)."""

    @property
    def ok(self) -> bool:
        return not self.errors

    def passes(self, *, strict: bool) -> bool:
        return self.ok and not (strict and self.warnings)


def find_project(file: Path) -> Path | None:
    """The project holding `file`: the nearest directory at or above it with a project marker.

    The search stops at the repository root (the first directory with `.git`, `.hg`, `.svn`, `.jj`),
    so a file of an unrelated tree never picks up a project above the repository.
    """
    start = file.absolute()
    if not start.is_dir():
        start = start.parent
    for directory in (start, *start.parents):
        if any((directory / marker).exists() for marker in PROJECT_MARKERS):
            return directory
        if any((directory / marker).exists() for marker in VCS_MARKERS):
            return None
    return None


_SKIPPED_DIRECTORIES = frozenset({"node_modules", "__pycache__", "venv", "site-packages", "dist", "build"})
_SEARCH_DEPTH = 3
_SEARCH_LIMIT = 2000
"""Directories looked at below a directory that is not a project, for the projects to suggest."""


def is_project(directory: Path) -> bool:
    """Whether `directory` holds `tools.d/`, `permissions.yaml` or `toolrt.yaml`."""
    return any((directory / marker).exists() for marker in PROJECT_MARKERS)


def projects_below(directory: Path) -> list[Path]:
    """The toolrt projects under `directory` (not itself), nearest first: up to three levels down,
    leaving out hidden directories and a few that hold installed packages, never inside a project."""
    found: list[Path] = []
    level = [directory]
    seen = 0
    for _ in range(_SEARCH_DEPTH):
        below: list[Path] = []
        for parent in level:
            try:
                entries = sorted(os.scandir(parent), key=lambda entry: entry.name)
            except OSError:
                continue
            for entry in entries:
                seen += 1
                if seen > _SEARCH_LIMIT:
                    return found
                name = entry.name
                if name.startswith(".") or name in _SKIPPED_DIRECTORIES or not entry.is_dir(follow_symlinks=False):
                    continue
                path = Path(entry.path)
                if is_project(path):
                    found.append(path)
                else:
                    below.append(path)
        level = below
    return found


def _not_a_project(root: Path, shown: str) -> UsageError:
    markers = "tools.d/, permissions.yaml or toolrt.yaml"
    found = projects_below(root)
    if not found:
        return UsageError(
            f"{shown}: not a toolrt project (no {markers} in it or below it); give the project with --root DIR,"
            " or make one with `toolrt init`"
        )
    names = [_shown_root(path) for path in found]
    listed = ", ".join(f"{name}/" for name in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    which = "one" if len(names) == 1 else len(names)
    return UsageError(f"{shown}: not a toolrt project (found {which} in {listed}: use --root {names[0]})")


def validate_paths(root: Path, files: Sequence[str], *, all_files: bool, cwd: Path | None = None) -> Outcome:
    """Validate the project at `root`, or the projects of `files`, and keep what this run reports.

    Raises:
        UsageError: `root` is not a toolrt project (naming those below it), or a file is in none.
    """
    cwd = (cwd or Path.cwd()).absolute()
    named: dict[Path, set[Path]] = {}
    if files:
        for name in files:
            path = (cwd / name).absolute()
            if not path.exists():
                raise UsageError(f"{name}: no such file")
            project = find_project(path)
            if project is None:
                raise UsageError(
                    f"{name}: not in a toolrt project (no {', '.join(PROJECT_MARKERS)} above it"
                    " up to the repository root)"
                )
            named.setdefault(project, set()).add(Path(os.path.normpath(path)))
    else:
        project = Path(os.path.normpath(cwd / root))
        if project.is_dir() and not is_project(project):
            raise _not_a_project(project, str(root))
        named[project] = set()
    errors: list[Problem] = []
    warnings: list[Problem] = []
    notes: list[Problem] = []
    sandboxes: list[str] = []
    for project, chosen in named.items():
        # the built-in tools' warnings are shown only with --all (or in the package's own tree)
        report = validate(project, builtin=all_files or is_within(builtin_root(), project.absolute()))
        if report.sandbox is not None:
            sandboxes.append(f"{_shown_root(project)}: sandbox: {report.sandbox}")
        for problem in report.errors + report.warnings:
            location = _location(problem, project)
            shown = replace(problem, file=_shown(problem, location, cwd))
            inside = location is not None and is_within(location, project.absolute())
            if problem.severity == "error":
                errors.append(shown)
            elif problem.file == "<sandbox>" or inside and (not chosen or all_files or location in chosen):
                warnings.append(shown)
            elif all_files and not inside:
                notes.append(shown)
    return Outcome(
        tuple(named),
        tuple(dict.fromkeys(errors)),
        tuple(dict.fromkeys(warnings)),
        tuple(dict.fromkeys(notes)),
        tuple(sandboxes),
    )


def _location(problem: Problem, root: Path) -> Path | None:
    """The file a problem is about, as an absolute path; None for a plugin's file or a made-up name."""
    name = problem.file
    if name.startswith(_BUILTIN):
        return Path(os.path.normpath(builtin_root() / name[len(_BUILTIN) :]))
    if name.startswith("<"):
        return None
    return Path(os.path.normpath(root.absolute() / name))


def _shown(problem: Problem, location: Path | None, cwd: Path) -> str:
    if location is None:
        return problem.file
    if is_within(location, cwd.absolute()):
        return location.relative_to(cwd).as_posix()
    if problem.file.startswith(_BUILTIN):
        return problem.file
    return str(location)


# --- output ---------------------------------------------------------------------------------------


def render(outcome: Outcome, format: str, out: TextIO, *, strict: bool, all_files: bool) -> None:
    """Write the outcome in `format` (text, json, github, sarif)."""
    problems = outcome.errors + outcome.warnings
    strict_failed = strict and outcome.ok and bool(outcome.warnings)
    if format == "json":
        json.dump(
            {
                "ok": outcome.passes(strict=strict),
                "errors": [p.to_json() for p in outcome.errors],
                "warnings": [p.to_json() for p in outcome.warnings],
                "notes": [{**p.to_json(), "severity": "note"} for p in outcome.notes],
            },
            out,
            indent=2,
        )
        out.write("\n")
    elif format == "github":
        out.writelines(_github(problem) + "\n" for problem in problems)
        out.writelines(_github(problem, "notice") + "\n" for problem in outcome.notes)
        if strict_failed:
            out.write(f"::error title=toolrt validate --strict::{_strict_summary(outcome)}\n")
    elif format == "sarif":
        json.dump(sarif_log(problems, notes=outcome.notes), out, indent=2)
        out.write("\n")
    else:
        out.writelines(problem_text(problem) + "\n" for problem in problems)
        out.writelines(problem_text(problem, "note") + "\n" for problem in outcome.notes)
        if all_files:
            out.writelines(line + "\n" for line in outcome.sandboxes)
        verdict = "valid" if outcome.passes(strict=strict) else "invalid"
        strictness = "; --strict: warnings fail" if strict and outcome.warnings else ""
        where = ", ".join(_shown_root(root) for root in outcome.roots)
        counts = f"{len(outcome.errors)} error(s), {len(outcome.warnings)} warning(s){strictness}"
        notes = f", {len(outcome.notes)} note(s) about built-in or plugin files" if outcome.notes else ""
        out.write(f"{where}: {verdict} ({counts}{notes})\n")


def _strict_summary(outcome: Outcome) -> str:
    return f"{len(outcome.warnings)} warning(s) fail the run under --strict (no errors)"


def _shown_root(root: Path) -> str:
    cwd = Path.cwd().absolute()
    return "." if root == cwd else (root.relative_to(cwd).as_posix() if is_within(root, cwd) else str(root))


def problem_text(problem: Problem, severity: str | None = None) -> str:
    """`file:line:column: [warning: |note: ]message` (`file: message` when no line is known)."""
    shown = severity or problem.severity
    prefix = f"{shown}: " if shown != "error" else ""
    return f"{problem.where}: {prefix}{problem.message}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github(problem: Problem, command: str | None = None) -> str:
    """A workflow command; files GitHub cannot attach to (toolrt's own) are named in the title instead."""
    properties: list[str] = []
    if problem.file.startswith("<") or os.path.isabs(problem.file):
        properties.append(f"title={_escape_property(problem.where)}")
    else:
        properties.append(f"file={_escape_property(problem.file)}")
        if problem.line > 0:
            properties.append(f"line={problem.line}")
            if problem.column > 0:
                properties.append(f"col={problem.column}")
    return f"::{command or problem.severity} {','.join(properties)}::{_escape_data(problem.message)}"


# --- SARIF 2.1.0 ----------------------------------------------------------------------------------

_BUILTIN_BASE = "toolrt-builtin"
_OUTSIDE_BASE = "toolrt-outside"
_SOURCE_BASE = "%SRCROOT%"


def sarif_log(problems: Iterable[Problem], *, notes: Iterable[Problem] = ()) -> dict[str, Any]:
    """A SARIF 2.1.0 log of one run: one rule per kind of finding (`faces.findings`), a result per problem
    with a fingerprint that survives lines moving, located relative to the working directory (`%SRCROOT%`),
    toolrt's own files relative to `toolrt-builtin`; no path of the machine that ran it."""
    from .. import __version__
    from .findings import KINDS, fingerprint, kind_of

    results = []
    used: dict[int, None] = {}
    for problem, level in [*((p, p.severity) for p in problems), *((p, "note") for p in notes)]:
        index = kind_of(problem)
        kind = KINDS[index]
        used[index] = None
        result: dict[str, Any] = {
            "ruleId": kind.id,
            "ruleIndex": index,
            "level": level,
            "message": {"text": problem.message},
            "locations": [{"physicalLocation": _physical_location(problem)}],
            "partialFingerprints": {"toolrtFinding/v1": fingerprint(problem, kind)},
        }
        if problem.pointer:
            result["properties"] = {"pointer": problem.pointer}
        results.append(result)
    return {
        "$schema": _SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "toolrt",
                        "version": __version__,
                        "rules": [{"id": kind.id, "shortDescription": {"text": kind.description}} for kind in KINDS],
                    }
                },
                "originalUriBaseIds": {
                    _SOURCE_BASE: {"description": {"text": "The directory toolrt validate ran in."}},
                    _BUILTIN_BASE: {
                        "description": {"text": "toolrt's built-in tools.d/ and permissions.yaml, as installed."}
                    },
                    _OUTSIDE_BASE: {"description": {"text": "The file system's root, for files outside SRCROOT."}},
                },
                "results": results,
            }
        ],
    }


def _physical_location(problem: Problem) -> dict[str, Any]:
    name = problem.file
    if name.startswith(_BUILTIN):
        artifact = {"uri": quote(name[len(_BUILTIN) :]), "uriBaseId": _BUILTIN_BASE}
    elif os.path.isabs(name):
        artifact = {"uri": quote(Path(name).as_posix().lstrip("/")), "uriBaseId": _OUTSIDE_BASE}
    else:
        artifact = {"uri": quote(name), "uriBaseId": _SOURCE_BASE}
    location: dict[str, Any] = {"artifactLocation": artifact}
    if problem.line > 0:
        region = {"startLine": problem.line}
        if problem.column > 0:
            region["startColumn"] = problem.column
        location["region"] = region
    return location
