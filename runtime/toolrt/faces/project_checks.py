"""`toolrt validate`: everything that can be checked without running a tool.

Beyond what building a snapshot checks (YAML, schemas, ids, templates, examples, flags, groups):
handler imports, permission lint (unreachable rules, unused keys), permission self-tests, and that
every tool compiles for every provider format (lossy rewrites reported as warnings).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..beneath import is_within
from ..build.compiled import CompiledTool, call_arity_problem, import_ref, locate, project_root_of
from ..build.snapshot import Snapshot, build_snapshot
from ..config.collect import collector_paused
from ..config.document import child_pointer
from ..config.model import PythonHandler
from ..errors import ConfigError, Problem, UsageError
from ..permissions.model import PermissionRequest
from ..sandbox.config import sandbox_problems, sandbox_status

__all__ = ["RUNTIME_PERMISSIONS", "Report", "validate"]

RUNTIME_PERMISSIONS = frozenset(
    {
        "external_directory",
        "doom_loop",
        "bash",
        "task",
        "question",
        "plan_enter",
        "plan_exit",
        "private_network",
        "protected",
        "tool",
    }
)
"""Permission keys asked by the runtime or by tools' analyzers rather than named by a tool's `permission.key`."""


@dataclass(frozen=True, slots=True)
class Report:
    """What `validate` found: errors and warnings, sorted by file and line."""

    errors: tuple[Problem, ...]
    warnings: tuple[Problem, ...]
    sandbox: str | None = None
    """Which OS sandbox the tools' processes run in (None when the config did not load)."""

    @property
    def ok(self) -> bool:
        return not self.errors


def validate(root: Path, *, builtin: bool = True) -> Report:
    """Every error and warning of the config at `root`.

    Without `builtin`, the installed built-in tools' provider formats and parameter keywords are not
    checked: they are the package's own (its tests check them), and `toolrt validate` shows what they
    would give only with `--all`; locating those warnings in the built-in files costs a fifth of a start.
    """
    if not root.is_dir():
        raise UsageError(f"--root {root}: not a directory")
    with collector_paused():
        return _validate(root, builtin)


def _validate(root: Path, builtin: bool) -> Report:
    """One pass over every file: a broken file withholds its own tools (or, for the rules and settings,
    blocks calls), and everything else is still checked, so one run shows every problem."""
    from .exit_hints import exit_status_problems

    try:
        # most tools get a located warning (lossy formats); `partial` keeps what is valid to check it too
        snapshot = build_snapshot(root, located=True, partial=True)
    except ConfigError as error:
        return _report(error.problems)
    problems: list[Problem] = list(snapshot.warnings)
    if snapshot.blocked is not None:
        problems.extend(snapshot.blocked.problems)
    problems.extend(problem for found in snapshot.withheld.values() for problem in found)
    problems.extend(python_handler_problems(snapshot))
    if _rules_built(snapshot):
        problems.extend(_permission_problems(snapshot))
    checked = [tool for tool in snapshot.tools.values() if builtin or tool.definition.layer != "builtin"]
    problems.extend(_spec_problems(checked))
    problems.extend(schema_copy_problems(root, _texts(snapshot)))
    problems.extend(_keyword_problems(checked))
    problems.extend(sandbox_problems(snapshot.sandbox))
    problems.extend(_lsp_problems(snapshot))
    problems.extend(exit_status_problems(snapshot))
    return _report(problems, sandbox_status(snapshot.sandbox))


def _rules_built(snapshot: Snapshot) -> bool:
    """Whether the snapshot's rules are the files' own: a broken project or locked rules file leaves the
    built-in rules standing in (so that nothing runs), which neither lint nor the file's tests concern."""
    scopes = {layer.scope for layer in snapshot.permissions.layers}
    layers = snapshot.config.layers if snapshot.config is not None else ()
    project = any(layer.name == "project" and layer.permissions is not None for layer in layers)
    locked = snapshot.resolved.values.locked_permissions is not None
    return (not project or "project" in scopes) and (not locked or "locked" in scopes)


def _lsp_problems(snapshot: Snapshot) -> list[Problem]:
    resolved = snapshot.resolved
    if not resolved.values.lsp.servers:
        return []  # settings name no server: nothing to check (nor the language-server module to import)
    from ..lsp.servers import server_problems

    return server_problems(resolved.values.lsp, resolved.origins, snapshot.root)


_MODELINE = "# yaml-language-server: $schema="


def _texts(snapshot: Snapshot) -> dict[str, str]:
    """The text of each project file the build read, by path relative to the root (so that its first
    line is not read again)."""
    texts: dict[str, str] = {}
    root = str(snapshot.root)
    skip = len(root.rstrip("/")) + 1  # a document within the root is named from it: its path is root + "/" + name
    for layer in snapshot.config.layers if snapshot.config is not None else ():
        if layer.name == "project":
            for document in [source.document for source in layer.tools] + [layer.permissions, layer.settings]:
                if document is not None and document.text is not None and is_within(document.path, root):
                    texts[str(document.path)[skip:]] = document.text
    return texts


def schema_copy_problems(root: Path, texts: Mapping[str, str] | None = None) -> list[Problem]:
    """Warnings for `$schema` modelines pointing at a local schema copy that is missing or out of date.

    `toolrt init` (and `toolrt schema --write DIR`) copy the installed toolrt's schemas into the
    project; after an upgrade the copies lag behind and the editor completes yesterday's keys.
    `texts`: files already read, by path relative to `root`; the others are opened for their first line.
    """
    from ..config.layers import tool_files
    from ..config.resources import SCHEMA_NAMES, schema

    kinds = {file_name: name for name, file_name in SCHEMA_NAMES.items()}
    files = [("permissions.yaml", root / "permissions.yaml"), ("toolrt.yaml", root / "toolrt.yaml")]
    if (root / "tools.d").is_dir():
        files += [(f"tools.d/{name}", Path(path)) for name, path, _, _ in tool_files(root / "tools.d")]
    problems: list[Problem] = []
    reported: set[Path] = set()
    for shown, file in files:
        text = (texts or {}).get(shown)
        try:
            if text is not None:
                first = text.split("\n", 1)[0].strip()
            else:
                with file.open(encoding="utf-8") as handle:
                    first = handle.readline().strip()
        except (OSError, UnicodeDecodeError):
            continue  # the loader reports unreadable files
        if not first.startswith(_MODELINE):
            continue
        target = first[len(_MODELINE) :].strip()
        if "://" in target or target.startswith("/"):
            continue
        copy = (file.parent / target).resolve()
        kind = kinds.get(copy.name)
        if kind is None or copy in reported:
            continue
        reported.add(copy)
        refresh = f"toolrt schema --write {Path(os.path.relpath(copy.parent, root.resolve())).as_posix()}"
        if not copy.is_file():
            message = f"$schema points at {target}, which does not exist; write it with `{refresh}`"
            problems.append(Problem(shown, 1, 1, "", message, "warning"))
            continue
        try:
            current = json.loads(copy.read_text(encoding="utf-8")) == schema(kind)
        except (OSError, ValueError):
            current = False
        if not current:
            message = (
                f"$schema points at {target}, an out-of-date copy of the {kind} schema (the installed"
                f" toolrt's differs): editors complete old keys; refresh it with `{refresh}`"
            )
            problems.append(Problem(shown, 1, 1, "", message, "warning"))
    return problems


def _keyword_problems(tools: Sequence[CompiledTool]) -> list[Problem]:
    from ..config.schema_check import parameter_keyword_warnings

    problems: list[Problem] = []
    for tool in tools:
        document = tool.definition.document
        if document is not None and isinstance(document.data, dict) and "parameters" in document.data:
            problems.extend(parameter_keyword_warnings(document, "/parameters", tool.definition.parameters))
        if document is not None and tool.definition.output is not None:
            problems.extend(parameter_keyword_warnings(document, "/output", tool.definition.output))
    return problems


def _report(problems: Sequence[Problem], sandbox: str | None = None) -> Report:
    ordered = sorted(dict.fromkeys(problems), key=lambda p: (p.file, p.line, p.column, p.message))
    return Report(
        errors=tuple(p for p in ordered if p.severity == "error"),
        warnings=tuple(p for p in ordered if p.severity == "warning"),
        sandbox=sandbox,
    )


def _permission_problems(snapshot: Snapshot) -> list[Problem]:
    from ..call.arguments import parse_arguments
    from ..call.permissions import pattern_requests, permission_requests
    from ..permissions.lint import lint
    from ..permissions.selftests import run_permission_tests

    known = {tool.permission_key for tool in snapshot.tools.values()} | {tool.id for tool in snapshot.tools.values()}
    known |= RUNTIME_PERMISSIONS
    problems = lint(snapshot.permissions, known_permissions=known)

    def analyze(tool_id: str, args: Mapping[str, Any], agent: str) -> Sequence[PermissionRequest]:
        tool: CompiledTool | None = snapshot.tools.get(tool_id)
        if tool is None:
            raise UsageError(f"unknown tool '{tool_id}' (tools: {', '.join(sorted(snapshot.tools))})")
        return permission_requests(tool, parse_arguments(tool, args), snapshot, agent)

    problems.extend(run_permission_tests(snapshot.permissions, analyze, pattern_requests(snapshot)))
    return problems


def _spec_problems(tools: Sequence[CompiledTool]) -> list[Problem]:
    from ..specs import FORMATS, compile_spec

    problems: list[Problem] = []
    for tool in tools:
        definition = tool.definition
        if definition.internal:
            continue
        document = definition.document
        lossy: dict[tuple[str, str, str], list[str]] = {}
        for format in FORMATS:
            if format == "openai-responses":
                continue  # openai's rules: its warnings below name both formats
            try:
                compiled = compile_spec(
                    format,
                    name=tool.id,
                    description=tool.description,
                    parameters=definition.parameters,
                    annotations=definition.annotations,
                )
            except Exception as exc:  # a compiler bug must surface as a finding, not a traceback
                problems.append(
                    _at(definition.source, document, "/parameters", f"does not compile for {format}: {exc}", "error")
                )
                continue
            names = [format, "openai-responses"] if format == "openai" else [format]
            for warning in compiled.warnings:
                # openai and openai-responses share their rules: one warning names both formats.
                formats = lossy.setdefault((warning.pointer, warning.keyword, warning.message), [])
                formats.extend(names)
        for (pointer, keyword, message), formats in lossy.items():
            where = "/parameters" + pointer
            # at the keyword's own line (or the one the message names: strict mode off because of
            # 'additionalProperties'), not at its schema's
            named = [keyword, *re.findall(r"'([A-Za-z$]+)'", message)]
            found = next((key for key in named if _has_key(definition.parameters, pointer, key)), None)
            if found is not None:
                where = child_pointer(where, found)
            text = f"{message} [{', '.join(formats)}: {keyword}]"
            problems.append(_at(definition.source, document, where, text, "warning"))
    return problems


def _has_key(schema: Any, pointer: str, key: str) -> bool:
    """Whether the node at JSON `pointer` inside `schema` is a mapping holding `key`."""
    node = schema
    for part in pointer.split("/")[1:] if pointer else ():
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return isinstance(node, dict) and key in node


def _at(source: str, document: Any, pointer: str, message: str, severity: str) -> Problem:
    if document is None:
        return Problem(source, 0, 0, pointer, message, severity)  # type: ignore[arg-type]
    line, column = document.locate(pointer)
    return Problem(document.name, line, column, pointer, message, severity)  # type: ignore[arg-type]


def python_handler_problems(snapshot: Snapshot, *, builtin: bool = False) -> list[Problem]:
    """Handlers, hooks and analyzers that cannot be imported (project modules from the project root).

    The installed built-in layer's are checked only with `builtin` (the package's tests do): they are
    the package's own, and importing them all would cost `toolrt validate` a third of its time."""
    problems: list[Problem] = []
    for tool in snapshot.tools.values():
        definition = tool.definition
        if definition.layer == "builtin" and not builtin:
            continue
        refs = []
        if isinstance(definition.handler, PythonHandler):
            refs.append(("/handler/python", definition.handler.ref, "handler(args, ctx)"))
        if definition.permission.analyzer and ":" in definition.permission.analyzer:
            refs.append(("/permission/analyzer", definition.permission.analyzer, "analyzer(args, site)"))
        if definition.permission.preview:
            refs.append(("/permission/preview", definition.permission.preview, "preview(args, cwd)"))
        if definition.format_validation_error:
            refs.append(("/format_validation_error", definition.format_validation_error, "formatter(tool_id, errors)"))
        for pointer, ref, shape in refs:
            try:
                target = import_ref(ref, project_root_of(definition, snapshot.root))
            except ImportError as exc:
                problems.append(locate(definition, pointer, f"handler '{ref}' cannot be imported: {exc}"))
                continue
            if not callable(target):
                problems.append(locate(definition, pointer, f"'{ref}' is not callable"))
                continue
            arity = call_arity_problem(target, 2, shape)
            if arity is not None:
                problems.append(locate(definition, pointer, f"'{ref}' cannot be called: {arity}"))
    return problems
