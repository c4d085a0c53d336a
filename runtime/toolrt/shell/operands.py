"""Which words of a command are not paths (operands.yaml): text, patterns, scripts, delimiters.

`not_paths(program, args)` gives the positions in `args` (the words after the program's name) that
the program never opens: `echo`'s operands, the first operand of `sed`/`awk`/`grep` (their script or
pattern), `cut -d`'s delimiter. The bash analyzer checks every other word as a possible path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["not_paths"]


@dataclass(frozen=True, slots=True)
class _Program:
    text: bool = False
    script: bool = False
    script_options: frozenset[str] = frozenset()
    file_options: frozenset[str] = frozenset()
    text_options: frozenset[str] = frozenset()
    value_options: frozenset[str] = frozenset()


@cache
def _programs() -> Mapping[str, _Program]:
    import yaml

    data: dict[str, Any] = yaml.safe_load(Path(__file__).with_name("operands.yaml").read_text(encoding="utf-8"))
    options = ("script_options", "file_options", "text_options", "value_options")
    return {
        name: _Program(
            text=row.get("text") == "all",
            script=row.get("script") == "first",
            **{key: frozenset(row.get(key, ())) for key in options},
        )
        for name, row in data["programs"].items()
    }


def not_paths(program: str, args: Sequence[str | None]) -> frozenset[int]:
    """The positions in `args` that `program` reads as text, patterns or scripts, never as paths."""
    spec = _programs().get(program)
    if spec is None:
        return frozenset()
    if spec.text:
        return frozenset(range(len(args)))
    skipped: set[int] = set()
    script_given = False
    first_operand: int | None = None
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            first_operand = index + 1 if first_operand is None and index + 1 < len(args) else first_operand
            break
        if arg is None or arg == "-" or arg[:1] != "-":
            first_operand = index if first_operand is None else first_operand
            index += 1
            continue
        given, index = _option(spec, args, index, skipped)
        script_given = script_given or given
    if spec.script and not script_given and first_operand is not None:
        skipped.add(first_operand)
    return frozenset(skipped)


def _option(spec: _Program, args: Sequence[str | None], index: int, skipped: set[int]) -> tuple[bool, int]:
    """Read the option at `index`: (whether it gives the script, the index after it and its value),
    adding to `skipped` the words that hold only text."""
    arg = args[index] or ""
    takes_value = spec.script_options | spec.file_options | spec.text_options | spec.value_options
    option, equals, _ = arg.partition("=")
    attached = not equals and arg[:2] != "--" and len(arg) > 2 and arg[:2] in takes_value
    if attached:
        option = arg[:2]
    textual = option in spec.text_options or option in spec.script_options
    if textual:
        skipped.add(index)  # `-d/`, `--fields=2`: the option's own word holds only text
    gives_script = option in spec.script_options or option in spec.file_options
    if option in takes_value and not equals and not attached:
        if textual:
            skipped.add(index + 1)
        return gives_script, index + 2
    return gives_script, index + 1
