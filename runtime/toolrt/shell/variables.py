"""Variables: which builtins assign which names, and which variables bash runs as code.

An assignment is not only `NAME=value`: `for NAME in`, `select NAME in`, `${NAME:=word}`, `read`,
`mapfile`/`readarray`, `printf -v`, `getopts` and `wait -p` assign too, and the analyzer must see each
of them, because some variables are code: bash expands `PS0`–`PS4` as prompts (command
substitutions included: `PS4` on every command traced by `set -x`) and runs `PROMPT_COMMAND`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

__all__ = ["CODE_VARIABLES", "PROMPTS", "assigned_names", "prompt_code", "traces"]

PROMPTS = frozenset(("PS0", "PS1", "PS2", "PS3", "PS4"))
"""Variables bash expands as prompts: parameter expansion, arithmetic and command substitution."""
CODE_VARIABLES = PROMPTS | {"PROMPT_COMMAND"}
"""Variables whose value bash runs: the prompts, and `PROMPT_COMMAND` (a command line)."""


class _Assigns(NamedTuple):
    name_options: frozenset[str]
    """Options whose value is a name the builtin assigns."""
    value_options: frozenset[str]
    """Options that take some other value."""
    operands: str
    """Which operands are assigned names: "all", "first", "second" or "none"."""
    default: str | None
    """The name assigned when no operand names one."""


_ASSIGNS: Mapping[str, _Assigns] = MappingProxyType(
    {
        "read": _Assigns(frozenset(("-a",)), frozenset(("-d", "-i", "-n", "-N", "-p", "-t", "-u")), "all", "REPLY"),
        "mapfile": _Assigns(frozenset(), frozenset(("-d", "-n", "-O", "-s", "-u", "-C", "-c")), "first", "MAPFILE"),
        "readarray": _Assigns(frozenset(), frozenset(("-d", "-n", "-O", "-s", "-u", "-C", "-c")), "first", "MAPFILE"),
        "printf": _Assigns(frozenset(("-v",)), frozenset(), "none", None),
        "getopts": _Assigns(frozenset(), frozenset(), "second", None),
        "wait": _Assigns(frozenset(("-p",)), frozenset(), "none", None),
    }
)


def assigned_names(builtin: str, args: Sequence[str | None]) -> list[str | None] | None:
    """The variables `builtin ARGS…` assigns (None for a name only known when it runs), or None when
    `builtin` assigns none. Options are read as bash reads them: clusters (`-rp PROMPT`), `--`."""
    spec = _ASSIGNS.get(builtin)
    if spec is None:
        return None
    names: list[str | None] = []
    operands: list[str | None] = []
    expect: str | None = None  # what the next word is: "name" or "value"
    options_done = False
    for arg in args:
        if expect is not None:
            if expect == "name":
                names.append(arg)
            expect = None
        elif not options_done and arg is not None and len(arg) > 1 and arg[0] == "-":
            if arg == "--":
                options_done = True
                continue
            for position in range(1, len(arg)):
                option = "-" + arg[position]
                if option in spec.name_options or option in spec.value_options:
                    if position + 1 == len(arg):
                        expect = "name" if option in spec.name_options else "value"
                    elif option in spec.name_options:
                        names.append(arg[position + 1 :])  # `-vNAME`
                    break
        else:
            options_done = True
            operands.append(arg)
    if spec.operands == "all":
        names.extend(operands)
    elif spec.operands == "first" and operands:
        names.append(operands[0])
    elif spec.operands == "second" and len(operands) > 1:
        names.append(operands[1])
    if not names and spec.default is not None:
        names.append(spec.default)
    return names


def prompt_code(value: str) -> str:
    """Bash text that runs what expanding `value` as a prompt runs: its substitutions inside a
    double-quoted word of the inert `:`. Backslashes (prompt escapes: `\\$` becomes `$`) and double
    quotes are dropped, so the text shows every substitution the prompt can make, and no fewer."""
    return ': "' + value.replace("\\", "").replace('"', "") + '"'


def traces(builtin: str, args: Sequence[str | None]) -> bool:
    """Whether `set …` or `shopt …` turns on xtrace (which expands `PS4` before every command)."""
    if builtin == "set":
        return any(
            arg is not None and ((arg[:1] == "-" and arg[1:2] != "-" and "x" in arg[1:]) or arg == "xtrace")
            for arg in args
        )
    if builtin == "shopt":
        return "xtrace" in args
    return False
