"""What one build read and compiled (`BuildReuse`), and taking it again in the next build of the same
Runtime: an unchanged tool document keeps its compiled tool, unchanged permission files their rulesets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..config.document import Document
from ..config.model import tool_from_document
from ..config.reuse import Reused
from ..errors import ConfigError, Problem
from ..permissions.config import PermissionConfig, build_permission_config
from .compiled import CompiledTool, DescribeInfo
from .tool_layers import compile_with_description

__all__ = ["BuildReuse", "Reusing", "compile_cached", "permission_config"]


_CompiledEntry = CompiledTool | tuple[Document, str, str, None, tuple[Problem, ...]]
"""A tool compiled without a problem (its definition holds the document, description and layer it came
from: no tuple per tool), or what a document with problems gave."""


_PermissionEntry = tuple[tuple[Any, ...], PermissionConfig | None, tuple[Problem, ...]]


@dataclass(frozen=True)
class BuildReuse:
    """What one build read and compiled, kept with its snapshot so that the next build of the same
    Runtime (a reload) reads and compiles only what changed. Holds exactly what the build used:
    bounded by the config, not by the number of reloads; never shared between Runtimes."""

    files: Mapping[Any, Any] = field(default_factory=dict)
    """Parsed and schema-checked project files by path and stat signature (`config.reuse`)."""
    compiled: Mapping[int, _CompiledEntry] = field(default_factory=dict)
    """Compiled tools by source document (held, so its id stays unique), description and layer."""
    permissions: tuple[_PermissionEntry, ...] = ()
    """The permission configs built, with the documents they came from: unchanged files keep their
    compiled rulesets (and the per-permission indexes those build lazily)."""


@dataclass
class Reusing:
    """The reuse of one build in progress: the previous build's entries, and what this one uses."""

    previous: BuildReuse
    files: Reused
    compiled: dict[int, _CompiledEntry] = field(default_factory=dict)
    permissions: list[_PermissionEntry] = field(default_factory=list)

    def done(self) -> BuildReuse:
        return BuildReuse(self.files.done(), MappingProxyType(self.compiled), tuple(self.permissions))


def compile_cached(
    document: Document, description: str, layer: str, info: DescribeInfo, problems: list[Problem], reusing: Reusing
) -> CompiledTool | None:
    """Compile a tool document, reusing the result for a document unchanged since the previous build."""
    if "describe" in document.data:  # describe hooks read the world: always rerun them
        definition = tool_from_document(document, description=description, layer=layer)
        return compile_with_description(definition, info, problems)
    hit = reusing.compiled.get(id(document)) or reusing.previous.compiled.get(id(document))
    if hit is not None:
        if isinstance(hit, CompiledTool):
            made = hit.definition
            if made.document is document and made.description == description and made.layer == layer:
                reusing.compiled[id(document)] = hit
                return hit
        elif hit[0] is document and hit[1] == description and hit[2] == layer:
            reusing.compiled[id(document)] = hit
            problems.extend(hit[4])
            return None
    found: list[Problem] = []
    definition = tool_from_document(document, description=description, layer=layer)
    compiled = compile_with_description(definition, info, found)
    problems.extend(found)
    if compiled is not None and not found:
        reusing.compiled[id(document)] = compiled
    else:
        reusing.compiled[id(document)] = (document, description, layer, None, tuple(found))
    return compiled


def permission_config(
    builtin: Document,
    project: Document | None,
    locked: Document | None,
    data_dir: Path,
    truncation_dir: Path,
    root: Path,
    problems: list[Problem],
    reusing: Reusing,
) -> PermissionConfig | None:
    key = (builtin, project, locked, Path.home(), data_dir, truncation_dir, root)
    for cached_key, config, found in (*reusing.permissions, *reusing.previous.permissions):
        same_files = all(a is b for a, b in zip(cached_key[:3], key[:3], strict=True))
        if same_files and cached_key[3:] == key[3:]:
            problems.extend(found)
            reusing.permissions.append((cached_key, config, found))
            return config
    found_problems: list[Problem] = []
    config = None
    try:
        config = build_permission_config(
            builtin, project, locked, home=Path.home(), data_dir=data_dir, truncation_dir=truncation_dir, root=root
        )
    except ConfigError as error:
        found_problems.extend(error.problems)
    problems.extend(found_problems)
    reusing.permissions.append((key, config, tuple(found_problems)))
    return config
