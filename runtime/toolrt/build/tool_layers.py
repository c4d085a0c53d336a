"""The tools of a build from its layers: which definition of each id wins, a replaced built-in's identity
kept, and each compiled with its `describe` hook's description."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from ..config.document import Document
from ..config.layers import Layer, ToolSource
from ..config.model import ProjectSettings, ToolDefinition
from ..errors import Problem
from ..permissions.config import PermissionConfig
from .compiled import CompiledTool, DescribeInfo, compile_tool, import_ref, locate, project_root_of

__all__ = ["compile_with_description", "keep_builtin_identity", "merge_tools", "subagents"]


def merge_tools(
    layers: tuple[Layer, ...], settings: ProjectSettings, problems: list[Problem]
) -> dict[str, tuple[ToolSource, str]]:
    merged: dict[str, tuple[ToolSource, str]] = {}
    for layer in layers:
        seen: dict[str, ToolSource] = {}
        for source in layer.tools:
            tool_id = source.document.data["id"]
            if tool_id in seen:
                first = seen[tool_id].document
                line, column = source.document.locate("/id")
                problems.append(
                    Problem(
                        source.document.name,
                        line,
                        column,
                        "/id",
                        f"duplicate tool id '{tool_id}' (also defined in {first.source('/id')})",
                    )
                )
                continue
            seen[tool_id] = source
            if layer.name == "builtin" and settings.builtin_tools is not True:
                if settings.builtin_tools is False or tool_id not in settings.builtin_tools:
                    continue
            if source.document.data.get("enabled", True) is False:
                merged.pop(tool_id, None)
                continue
            merged[tool_id] = (source, layer.name)
    return merged


def keep_builtin_identity(document: Document, builtins: Mapping[str, Mapping[str, Any]]) -> Document:
    """A tool that replaces a built-in (same id, or `overrides:` it) keeps the built-in's permission key
    and analyzer, so the rules written for the built-in (a locked `bash` deny) still bind it; its own
    `patterns`, `always` and `paths` stay. Returns `document` itself when nothing changes."""
    data = document.data
    base_id = data["id"] if data["id"] in builtins else data.get("overrides")
    base = builtins.get(base_id) if isinstance(base_id, str) else None
    if base is None:
        return document
    base_permission = base.get("permission") or {}
    own = dict(data.get("permission") or {})
    key, analyzer = base_permission.get("key", base["id"]), base_permission.get("analyzer")
    if own.get("key", data["id"]) == key and own.get("analyzer") == analyzer:
        return document
    own["key"] = key
    if analyzer is not None:
        own["analyzer"] = analyzer
        own.pop("patterns", None)
        own.pop("always", None)
    else:
        own.pop("analyzer", None)

    return replace(document, data={**data, "permission": own})


def subagents(permissions: PermissionConfig | None) -> Mapping[str, str]:
    if permissions is None:
        return {}
    return {name: info.description or "" for name, info in permissions.agents.items() if info.mode != "primary"}


def compile_with_description(
    definition: ToolDefinition, info: DescribeInfo, problems: list[Problem]
) -> CompiledTool | None:
    description = definition.description
    if definition.describe:
        try:
            hook: Callable[[str, DescribeInfo], str] = import_ref(
                definition.describe, project_root_of(definition, info.root)
            )
            description = hook(description, info)
        except Exception as exc:  # a hook is project code: report it as a config problem
            problems.append(locate(definition, "/describe", f"describe hook failed: {type(exc).__name__}: {exc}"))
            return None
    return compile_tool(definition, description, problems)
