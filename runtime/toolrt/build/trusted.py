"""The load step that refuses config the model changed and the person has not approved.

Every build (the start of any command, and every reload) asks the attribution journal
(`toolrt.attribution`) about each project file it is about to use, before anything of it is compiled
or imported:
- a tool file that is held is left out: its tools are withheld with a located message, and a
  built-in of the same id is not put in its place;
- `permissions.yaml` or `toolrt.yaml` held: an error, so no call runs (a partial build is blocked) and
  a reload keeps serving the last good snapshot: leaving the person's rules out would loosen them;
- a tool whose Python handler or `describe` hook lives in a held project module, or in a project module
  one of those imports (read from the source, never imported), is left out the same way: a held
  module is never imported, not even to validate it.
Content that passes is recorded as the person's, so `toolrt trust` can show what changed since.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..attribution import Hold, Journal
from ..config.layers import ConfigSet, Layer, ToolSource
from ..errors import Problem

__all__ = ["HeldConfig", "held_files", "hold_untrusted", "module_files"]


@dataclass(frozen=True, slots=True)
class HeldConfig:
    """What a build left out because the person has not approved it."""

    config: ConfigSet
    """The config without the held tool files and the tools whose modules are held."""
    holds: tuple[Hold, ...]


def hold_untrusted(
    config: ConfigSet,
    journal: Journal,
    problems: list[Problem],
    listed: Mapping[str, tuple[int, ...]] | None = None,
) -> HeldConfig:
    """Check the project layer's files against `journal` (see the module); problems are appended.
    `listed`: path → signature from this build's listing of the tool files it took over unparsed from
    the previous build (`Reused.listed`), which spares the check a stat of each (`Journal.hold`)."""
    with journal.batch():
        return _hold_untrusted(config, journal, problems, listed or {})


def _hold_untrusted(
    config: ConfigSet, journal: Journal, problems: list[Problem], listed: Mapping[str, tuple[int, ...]]
) -> HeldConfig:
    root = config.root
    verdicts: dict[Path, Hold | None] = {}

    def held(path: Path, text: str | None = None) -> Hold | None:
        if path not in verdicts:
            verdicts[path] = journal.hold(path, root, text=text, listed=listed.get(str(path)))
        return verdicts[path]

    layers: list[Layer] = []
    known: dict[tuple[str, ...], tuple[Path, ...]] = {}
    for layer in config.layers:
        if layer.name != "project":
            layers.append(layer)
            continue
        for document in (layer.permissions, layer.settings):
            if document is not None and (hold := held(document.path, document.text)) is not None:
                problems.append(Problem(document.display, 0, 0, "", hold.reason()))
        kept: list[ToolSource] = []
        for source in layer.tools:
            document = source.document
            hold = held(document.path, document.text)
            if hold is None:
                hold = next(filter(None, map(held, module_files(root, document.data, known))), None)
            if hold is None:
                kept.append(source)
                continue
            line = document.locate("")[0] if hold.path == document.path else document.locate("/handler")[0]
            where = "" if hold.path == document.path else f"{_shown(hold.path, root)}, which this tool runs, was "
            problems.append(Problem(document.display, line, 1 if line else 0, "", where + hold.reason()))
        layers.append(layer if len(kept) == len(layer.tools) else replace(layer, tools=tuple(kept)))
    holds = tuple(hold for hold in verdicts.values() if hold is not None)
    if not holds:
        return HeldConfig(config, ())
    return HeldConfig(replace(config, layers=tuple(layers)), holds)


def held_files(config: ConfigSet, journal: Journal) -> tuple[Hold, ...]:
    """Every held file of the project layer, each once: tool files (broken ones included), the rules and
    settings files, the modules of every tool document, a held tool file's included, and the project's
    skills, and the modules an import refused at run time (what `toolrt trust` shows, so one review
    covers a tool file and the module it names)."""
    root = config.root
    paths: dict[Path, None] = {}
    known: dict[tuple[str, ...], tuple[Path, ...]] = {}
    for layer in config.layers:
        if layer.name != "project":
            continue
        for display, _ in layer.files:
            paths[root / display] = None
        for document in (layer.permissions, layer.settings):
            if document is not None:
                paths[document.path] = None
        for source in layer.tools:
            paths[source.document.path] = None
            paths.update(dict.fromkeys(module_files(root, source.document.data, known)))
    paths.update(dict.fromkeys(sorted((root / ".toolrt" / "skills").glob("*/SKILL.md"))))
    # Modules an import refused at run time (a handler's dynamic import, a plugin installed from the project).
    paths.update(dict.fromkeys(path for path in journal.refused_paths() if path.is_relative_to(root)))
    with journal.batch():
        return tuple(hold for path in paths if (hold := journal.hold(path, root)) is not None)


def module_files(
    root: Path, data: Mapping[str, Any], known: dict[tuple[str, ...], tuple[Path, ...]] | None = None
) -> tuple[Path, ...]:
    """The project files a tool document's Python runs: its handler's and its `describe` hook's module,
    and the project modules they import (transitively, read from the source). `known`: the answers of
    this build so far, by module references (a thousand tools of one handler module parse it once)."""
    handler = data.get("handler")
    refs = tuple(
        ref
        for ref in (data.get("describe"), handler.get("python") if isinstance(handler, Mapping) else None)
        if isinstance(ref, str)
    )
    if not refs:
        return ()
    if known is not None and refs in known:
        return known[refs]
    modules = list(_module_paths(root, refs))
    found: tuple[Path, ...] = ()
    if modules:
        from .code_files import imported_modules

        found = imported_modules(root, modules)
    if known is not None:
        known[refs] = found
    return found


def _module_paths(root: Path, refs: Iterable[str]) -> Iterator[Path]:
    for ref in refs:
        parts = ref.partition(":")[0].split(".")
        for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
            if candidate.is_file():
                yield candidate
                break


def _shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
