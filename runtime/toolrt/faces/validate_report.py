"""`toolrt validate` as CI and pre-commit run it: which problems to show, where they are, in which format.

- Scope: problems in the project's own files. Warnings about built-in and plugin files (which the
  user cannot change) appear only with `--all`; their errors always appear, because they make the
  config invalid.
- Paths are relative to the working directory (GitHub and pre-commit run at the repository root), so
  `--root sub` gives `sub/tools.d/a.yaml`; a file outside the working directory keeps its absolute path,
  a built-in one its `<builtin>/` name.
- `FILE…` arguments: each file's project is the nearest directory above it holding `tools.d/`,
  `permissions.yaml` or `toolrt.yaml`, looking no higher than the VCS root. Every such project is
  validated; its errors are reported (a file can break another one: a removed flag breaks the tool
  that names it), its warnings only for the files named.
- `--strict`: warnings fail too (exit 1).
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

from ..config.resources import builtin_root
from ..errors import Problem, UsageError
from .validate import validate

__all__ = ["Outcome", "find_project", "problem_text", "render", "sarif_log", "validate_paths"]

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
    hidden_warnings: int
    """Warnings left out: about built-in or plugin files without `--all`, or about files not named."""
    sandboxes: tuple[str, ...] = ()
    """Per project validated: which OS sandbox its tools' processes run in."""

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


def validate_paths(root: Path, files: Sequence[str], *, all_files: bool, cwd: Path | None = None) -> Outcome:
    """Validate the project at `root`, or the projects of `files`, and keep what this run reports."""
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
        named[(cwd / root).absolute()] = set()
    errors: list[Problem] = []
    warnings: list[Problem] = []
    hidden = 0
    sandboxes: list[str] = []
    for project, chosen in named.items():
        report = validate(project)
        if report.sandbox is not None:
            sandboxes.append(f"{_shown_root(project)}: sandbox: {report.sandbox}")
        for problem in report.errors + report.warnings:
            location = _location(problem, project)
            shown = replace(problem, file=_shown(problem, location, cwd))
            inside = location is not None and _is_under(location, project)
            if problem.severity == "error":
                errors.append(shown)
            elif (
                problem.file == "<sandbox>" or (all_files or inside) and (not chosen or all_files or location in chosen)
            ):
                warnings.append(shown)
            else:
                hidden += 1
    return Outcome(tuple(named), tuple(dict.fromkeys(errors)), tuple(dict.fromkeys(warnings)), hidden, tuple(sandboxes))


def _location(problem: Problem, root: Path) -> Path | None:
    """The file a problem is about, as an absolute path; None for a plugin's file or a made-up name."""
    name = problem.file
    if name.startswith(_BUILTIN):
        return Path(os.path.normpath(builtin_root() / name[len(_BUILTIN) :]))
    if name.startswith("<"):
        return None
    return Path(os.path.normpath(root.absolute() / name))


def _is_under(path: Path, directory: Path) -> bool:
    # Both are normalised absolute paths: a prefix test (walking `path.parents` cost more than the check).
    base = str(directory.absolute())
    return path == directory or str(path).startswith(base if base.endswith(os.sep) else base + os.sep)


def _shown(problem: Problem, location: Path | None, cwd: Path) -> str:
    if location is None:
        return problem.file
    if _is_under(location, cwd):
        return location.relative_to(cwd).as_posix()
    if problem.file.startswith(_BUILTIN):
        return problem.file
    return str(location)


# --- output ---------------------------------------------------------------------------------------


def render(outcome: Outcome, format: str, out: TextIO, *, strict: bool, all_files: bool) -> None:
    """Write the outcome in `format` (text, json, github, sarif)."""
    problems = outcome.errors + outcome.warnings
    if format == "json":
        json.dump(
            {
                "ok": outcome.passes(strict=strict),
                "errors": [p.to_json() for p in outcome.errors],
                "warnings": [p.to_json() for p in outcome.warnings],
            },
            out,
            indent=2,
        )
        out.write("\n")
    elif format == "github":
        out.writelines(_github(problem) + "\n" for problem in problems)
    elif format == "sarif":
        json.dump(sarif_log(problems), out, indent=2)
        out.write("\n")
    else:
        out.writelines(problem_text(problem) + "\n" for problem in problems)
        out.writelines(line + "\n" for line in outcome.sandboxes)
        if outcome.hidden_warnings and not all_files:
            out.write(
                f"({outcome.hidden_warnings} warning(s) about built-in, plugin or unnamed files not shown;"
                " --all shows them)\n"
            )
        verdict = "valid" if outcome.passes(strict=strict) else "invalid"
        strictness = "; --strict: warnings fail" if strict and outcome.warnings else ""
        where = ", ".join(_shown_root(root) for root in outcome.roots)
        counts = f"{len(outcome.errors)} error(s), {len(outcome.warnings)} warning(s){strictness}"
        out.write(f"{where}: {verdict} ({counts})\n")


def _shown_root(root: Path) -> str:
    cwd = Path.cwd().absolute()
    return "." if root == cwd else (root.relative_to(cwd).as_posix() if _is_under(root, cwd) else str(root))


def problem_text(problem: Problem) -> str:
    """`file:line:column: [warning: ]message` (`file: message` when no line is known)."""
    prefix = "warning: " if problem.severity == "warning" else ""
    return f"{problem.where}: {prefix}{problem.message}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github(problem: Problem) -> str:
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
    return f"::{problem.severity} {','.join(properties)}::{_escape_data(problem.message)}"


# --- SARIF 2.1.0 ----------------------------------------------------------------------------------

_RULES = (
    ("toolrt/config-error", "The config is invalid: toolrt refuses or cannot build it."),
    ("toolrt/config-warning", "The config loads, but something in it is likely a mistake or lossy for a provider."),
)


def sarif_log(problems: Iterable[Problem]) -> dict[str, Any]:
    """A SARIF 2.1.0 log of one run: a result per problem, located by a URI relative to the working directory."""
    from .. import __version__

    results = []
    for problem in problems:
        index = 0 if problem.severity == "error" else 1
        result: dict[str, Any] = {
            "ruleId": _RULES[index][0],
            "ruleIndex": index,
            "level": problem.severity,
            "message": {"text": problem.message},
            "locations": [{"physicalLocation": _physical_location(problem)}],
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
                        "rules": [
                            {"id": rule, "shortDescription": {"text": text}, "defaultConfiguration": {"level": level}}
                            for (rule, text), level in zip(_RULES, ("error", "warning"), strict=True)
                        ],
                    }
                },
                "originalUriBaseIds": {"toolrt-builtin": {"uri": builtin_root().absolute().as_uri() + "/"}},
                "results": results,
            }
        ],
    }


def _physical_location(problem: Problem) -> dict[str, Any]:
    name = problem.file
    if name.startswith(_BUILTIN):
        artifact = {"uri": quote(name[len(_BUILTIN) :]), "uriBaseId": "toolrt-builtin"}
    elif os.path.isabs(name):
        artifact = {"uri": Path(name).as_uri()}
    else:
        artifact = {"uri": quote(name)}
    location: dict[str, Any] = {"artifactLocation": artifact}
    if problem.line > 0:
        region = {"startLine": problem.line}
        if problem.column > 0:
            region["startColumn"] = problem.column
        location["region"] = region
    return location
