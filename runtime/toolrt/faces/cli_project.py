"""The commands about a project's files and set-up: `validate`, `schema`, `init`, `settings`, `trust`, `watch`
and `lsp check`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from .cli_runtime import load_runtime

__all__ = ["cmd_init", "cmd_lsp", "cmd_schema", "cmd_settings", "cmd_trust", "cmd_validate", "cmd_watch"]


def cmd_validate(options: argparse.Namespace, out: TextIO) -> int:
    from ..config.collect import collector_paused, keep_heap_until_exit
    from ..errors import UsageError

    if options.files and options.root != ".":
        raise UsageError("give FILE arguments or --root, not both (each file's project is found from the file)")
    # Most of a `validate` is importing the modules it runs and building one snapshot: objects that live
    # until the process ends, no garbage for the collector to find (paused when the command opted in).
    with collector_paused(age=True):
        from .terminal import PaintedLines, painter
        from .validate_report import render, validate_paths

        outcome = validate_paths(Path(options.root), options.files, all_files=options.all)
    keep_heap_until_exit()  # nothing that is alive now is garbage before the process ends
    paint = painter(options.color, out)
    shown: Any = PaintedLines(out, paint) if paint.on and options.format == "text" else out
    render(outcome, options.format, shown, strict=options.strict, all_files=options.all)
    shown.flush()
    return 0 if outcome.passes(strict=options.strict) else 1


def cmd_schema(options: argparse.Namespace, out: TextIO) -> int:
    from ..config.resources import SCHEMA_NAMES, schema
    from ..errors import UsageError

    if options.write:
        from .init import write_schemas

        names = (options.name,) if options.name else tuple(SCHEMA_NAMES)
        for path in write_schemas(Path(options.root) / options.write, names):
            out.write(f"wrote {path}\n")
        return 0
    if options.name is None:
        raise UsageError("name the schema (tool, permissions or project), or give --write DIR")
    json.dump(schema(options.name), out, indent=2)
    out.write("\n")
    return 0


def cmd_init(options: argparse.Namespace, out: TextIO) -> int:
    from .init import write_starter

    for path in write_starter(Path(options.directory)):
        out.write(f"wrote {path}\n")
    return 0


def cmd_settings(options: argparse.Namespace, out: TextIO) -> int:
    from .settings_view import setting_rows, without_secrets

    rt = load_runtime(options)
    resolved = rt.settings
    rows = [(key, _shown(value), origin) for key, value, origin in setting_rows(rt.snapshot)]
    if options.json:
        document = {
            "settings": {key: {"value": value, "origin": origin} for key, value, origin in rows},
            "ignored": [
                {"key": i.key, "value": _shown(without_secrets(i.key, i.value)), "origin": i.origin, "reason": i.reason}
                for i in resolved.ignored
            ],
        }
        json.dump(document, out, indent=2)
        out.write("\n")
        return 0
    width = max(len(origin) for _, _, origin in rows)
    for key, value, origin in rows:
        out.write(f"{origin:<{width}}  {key}={value}\n")
    for ignored in resolved.ignored:
        shown = _shown(without_secrets(ignored.key, ignored.value))
        out.write(f"ignored: {ignored.origin}  {ignored.key}={shown}  ({ignored.reason})\n")
    return 0


def _shown(value: Any) -> Any:
    """A setting's value as text or JSON: paths as strings, tuples as lists, None as null."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def cmd_trust(options: argparse.Namespace, out: TextIO) -> int:
    from .trust import run_trust, terminal_confirm

    rt = load_runtime(options)
    try:
        interactive = not options.yes and not options.json and sys.stdin.isatty() and sys.stderr.isatty()
        confirm = terminal_confirm(options.err) if interactive else None
        return run_trust(rt, options.files, approve_all=options.yes, json_output=options.json, out=out, confirm=confirm)
    finally:
        rt.close()


def cmd_watch(options: argparse.Namespace, out: TextIO) -> int:
    from .watch import run_watch

    rt = load_runtime(options)
    rt.development = True
    return run_watch(rt, json_output=options.json, out=out, color=options.color)


def cmd_lsp(options: argparse.Namespace, out: TextIO) -> int:
    from .lsp_check import run_lsp_check

    rt = load_runtime(options)
    try:
        return run_lsp_check(rt, servers=options.server, timeout=options.timeout, json_output=options.json, out=out)
    finally:
        rt.close()
