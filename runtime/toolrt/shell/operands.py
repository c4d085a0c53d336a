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
    takes_value = spec.script_options | spec.file_options | spec.text_options | spec.value_options
    index = 0
    options_done = False
    first_operand: int | None = None
    while index < len(args):
        arg = args[index]
        if arg is None or options_done or arg == "-" or arg[:1] != "-":
            if first_operand is None:
                first_operand = index
            index += 1
            continue
        if arg == "--":
            options_done = True
            index += 1
            continue
        option, equals, _ = arg.partition("=")
        attached = not equals and arg[:2] != "--" and len(arg) > 2 and arg[:2] in takes_value
        if attached:
            option = arg[:2]
        if option in spec.script_options or option in spec.file_options:
            script_given = True
        if option in spec.text_options or option in spec.script_options:
            skipped.add(index)  # `-d/`, `--fields=2`: the option's own word holds only text
        if option in takes_value and not equals and not attached:
            if option in spec.text_options or option in spec.script_options:
                skipped.add(index + 1)
            index += 2
            continue
        index += 1
    if spec.script and not script_given and first_operand is not None:
        skipped.add(first_operand)
    return frozenset(skipped)
