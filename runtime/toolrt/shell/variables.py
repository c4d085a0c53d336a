"""Variables: which builtins assign which names, and which variables bash runs as code.

An assignment is not only `NAME=value`: `for NAME in`, `select NAME in`, `${NAME:=word}`, `read`,
`mapfile`/`readarray`, `printf -v`, `getopts` and `wait -p` assign too, and the analyzer must see each
of them, because some variables are code: bash expands `PS0`–`PS4` as prompts (command
substitutions included: `PS4` on every command traced by `set -x`) and runs `PROMPT_COMMAND`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

__all__ = [
    "ASSIGNING_BUILTINS",
    "CODE_VARIABLES",
    "PROMPTS",
    "assigned_names",
    "assignment_word",
    "prompt_code",
    "sets_keyword",
    "traces",
]

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

ASSIGNING_BUILTINS = frozenset(_ASSIGNS)
"""The builtins `assigned_names` reads."""


def assigned_names(builtin: str, args: Sequence[str | None]) -> list[str | None] | None:
    """The variables `builtin ARGS…` assigns (None for a name only known when it runs), or None when
    `builtin` assigns none. Options are read as bash reads them: clusters (`-rp PROMPT`), `--`."""
    spec = _ASSIGNS.get(builtin)
    if spec is None:
        return None
    names, operands = _read_options(spec, args)
    chosen = {"all": operands, "first": operands[:1], "second": operands[1:2], "none": []}[spec.operands]
    names.extend(chosen)
    if not names and spec.default is not None:
        names.append(spec.default)
    return names


def _read_options(spec: _Assigns, args: Sequence[str | None]) -> tuple[list[str | None], list[str | None]]:
    """(names its options assign, operands) of a builtin's words under `spec`."""
    names: list[str | None] = []
    operands: list[str | None] = []
    expect: str | None = None  # what the next word is: "name" or "value"
    for index, arg in enumerate(args):
        if expect is not None:
            if expect == "name":
                names.append(arg)
            expect = None
        elif arg == "--":
            operands.extend(args[index + 1 :])
            break
        elif arg is not None and len(arg) > 1 and arg[0] == "-":
            expect = _cluster(spec, arg, names)
        else:
            operands.extend(args[index:])
            break
    return names, operands


def _cluster(spec: _Assigns, arg: str, names: list[str | None]) -> str | None:
    """Read one cluster of short options (`-rp`, `-vNAME`); what the next word is, if it is a value."""
    for position in range(1, len(arg)):
        option = "-" + arg[position]
        if option not in spec.name_options and option not in spec.value_options:
            continue
        if position + 1 == len(arg):
            return "name" if option in spec.name_options else "value"
        if option in spec.name_options:
            names.append(arg[position + 1 :])  # `-vNAME`
        return None
    return None


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


def sets_keyword(args: Sequence[str | None], *, shopt: bool = False) -> bool:
    """Whether the options `args` of `set` or `bash` turn on `keyword` (`-k`, `-o keyword`), or those of
    `shopt` (`shopt -so keyword`): bash then puts every `NAME=value` word of a later command into its
    environment, not its arguments. The options end at `--`, `-` or the first other word (`set -- -k`
    sets the positional parameters)."""
    if shopt:
        options = [arg for arg in args if arg is not None and arg[:1] == "-"]
        return any("o" in option for option in options) and any(arg is None or arg == "keyword" for arg in args)
    takes_name = False
    for arg in args:
        if takes_name:
            if arg is None or arg == "keyword":
                return True
            takes_name = False
            continue
        if arg is None or arg in ("-", "--") or arg[:1] not in ("-", "+"):
            return False
        if arg[0] == "-" and "k" in arg[1:]:
            return True
        takes_name = "o" in arg[1:] or "O" in arg[1:]
    return False


_ASSIGNMENT_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")


def assignment_word(value: str) -> bool:
    """Whether a word reads as `NAME=value` (or `NAME+=value`), which `set -k` makes an assignment."""
    return _ASSIGNMENT_WORD.match(value) is not None
