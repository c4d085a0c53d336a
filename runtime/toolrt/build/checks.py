"""Checks of a build across files: flags and model groups named where they are declared, overrides and tool
sets naming tools that exist, and `background: true` only where the host approved it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ..config.document import Document
from ..config.layers import ConfigSet
from ..config.model import ArgvHandler, ProjectSettings, ShellHandler, When
from ..errors import Problem
from .compiled import CompiledTool, locate

__all__ = ["check_flags", "check_references", "unapproved_background"]


def _names(names: Iterable[str]) -> str:
    """Names for a message: sorted, comma-separated, or `none`."""
    return ", ".join(sorted(names)) or "none"


def _when_flags(when: Mapping[str, Any], pointer: str) -> Iterator[tuple[str, str]]:
    """(JSON pointer, flag) of every flag a `when` block names, its `any` alternatives' included."""
    for index, flag in enumerate(when.get("flags", ())):
        yield f"{pointer}/flags/{index}", flag
    for index, alternative in enumerate(when.get("any", ())):
        yield from _when_flags(alternative, f"{pointer}/any/{index}")


def check_flags(config: ConfigSet, settings: ProjectSettings, problems: list[Problem]) -> None:
    declared = settings.flags
    seen: set[str] = set()
    for document in (layer.settings for layer in config.layers):
        if document is None:
            continue
        for index, flag in enumerate((document.data or {}).get("flags", ())):
            if "description" not in flag and flag["name"] not in seen:
                line, column = document.locate(f"/flags/{index}")
                message = (
                    f"flag '{flag['name']}' has no description: a new flag says what it switches on "
                    f"(only a flag declared before, such as {_names(seen)}, may be given as name and default)"
                )
                problems.append(Problem(document.name, line, column, f"/flags/{index}", message))
            seen.add(flag["name"])
    for layer in config.layers:
        for source in layer.tools:
            when = source.document.data.get("when")
            if not when:
                continue  # most tools: no flag to check
            for pointer, flag in _when_flags(when, "/when"):
                name = flag.lstrip("!")
                if name not in declared:
                    line, column = source.document.locate(pointer)
                    known = ", ".join(sorted(declared)) or "none declared"
                    problems.append(
                        Problem(
                            source.document.name,
                            line,
                            column,
                            pointer,
                            f"unknown flag '{name}' (declared flags: {known}); declare it under 'flags:' in toolrt.yaml",  # noqa: E501
                        )
                    )
    for key in os.environ:
        if key.startswith("TOOLRT_FLAG_") and key[12:].lower() not in declared:
            problems.append(
                Problem(
                    "<environment>",
                    0,
                    0,
                    "",
                    f"environment variable {key} names an unknown flag '{key[12:].lower()}' "
                    f"(declared flags: {_names(declared)})",
                )
            )


def unapproved_background(tools: Mapping[str, CompiledTool], approved: Iterable[str]) -> list[Problem]:
    """A located warning per tool declaring `background: true` that the host did not approve: its
    processes end with each call, as every other tool's."""
    found = []
    for tool_id, tool in tools.items():
        handler = tool.definition.handler
        if isinstance(handler, (ArgvHandler, ShellHandler)) and handler.options.background and tool_id not in approved:
            message = (
                f"background: true needs the host's approval: the host setting `background` does not name "
                f"'{tool_id}', so its processes end with each call (the host adds it with "
                f"TOOLRT_BACKGROUND='[\"{tool_id}\"]' or `background: [{tool_id}]` in its settings file)"
            )
            found.append(locate(tool.definition, "/handler/background", message, "warning"))
    return found


def check_references(
    tools: Mapping[str, CompiledTool],
    settings: ProjectSettings,
    settings_documents: Iterable[Document],
    problems: list[Problem],
    withheld: Mapping[str, object],
) -> None:
    """Model groups, overrides and tool sets must name what exists; naming a withheld tool is a warning."""
    groups = settings.model_groups
    for tool in tools.values():
        definition = tool.definition
        for pointer, group in _when_groups(definition.when, "/when"):
            if group not in groups:
                problems.append(
                    locate(definition, pointer, f"unknown model group '{group}' (groups: {_names(groups)})")
                )
        if definition.overrides is not None and definition.overrides not in tools:
            if definition.overrides in withheld:
                message = f"overrides '{definition.overrides}', which is left out (its file is invalid)"
                problems.append(locate(definition, "/overrides", message, "warning"))
            else:
                message = f"overrides '{definition.overrides}', which is not a tool"
                problems.append(locate(definition, "/overrides", message))
    for document in settings_documents:
        toolsets = document.data.get("toolsets") if isinstance(document.data, dict) else None
        for name, ids in (toolsets or {}).items():
            for index, tool_id in enumerate(ids):
                if tool_id not in tools:
                    pointer = f"/toolsets/{name}/{index}"
                    line, column = document.locate(pointer)
                    if tool_id in withheld:
                        message = f"tool set '{name}' names '{tool_id}', which is left out (its file is invalid)"
                        problems.append(Problem(document.name, line, column, pointer, message, "warning"))
                    else:
                        message = f"tool set '{name}' names unknown tool '{tool_id}'"
                        problems.append(Problem(document.name, line, column, pointer, message))


def _when_groups(when: When, pointer: str) -> Iterator[tuple[str, str]]:
    """(JSON pointer, group) of every model group a `when` names, its `any` alternatives' included."""
    if when.models_group is not None:
        yield f"{pointer}/models", when.models_group
    for index, selector in enumerate(when.models or ()):
        for group in _selector_groups(selector):
            yield f"{pointer}/models/{index}", group
    for index, alternative in enumerate(when.any_):
        yield from _when_groups(alternative, f"{pointer}/any/{index}")


def _selector_groups(selector: Any) -> list[str]:
    found = [selector.group] if selector.group else []
    for inner in selector.not_:
        found.extend(_selector_groups(inner))
    return found
