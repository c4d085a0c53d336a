"""Programs that run code in their own language, which the analyzer does not read.

`python -c`, `perl -e`, `node -e` and the rest (`code_options` in wrappers.yaml) run code unseen;
so do sed scripts with the `e` command or the `e`/`w` flags, and awk programs that call `system`,
pipe, read a command with `getline` or print to a file. Whatever this module finds is judged as
the ruleset's fallback for bash, never weaker than ask.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .long_options import long_option

__all__ = ["awk_runs_code", "sed_runs_code", "unseen_code"]

_DATA_INPUT = frozenset(("rg", "split"))
"""Programs whose code is only in their options (`rg --pre`, `split --filter`): their input is data."""
_SED = frozenset(("sed", "gsed"))
_AWK = frozenset(("awk", "gawk", "mawk", "nawk", "busybox awk"))
# awk: `system(`, a pipe into or out of a command, `getline` from a command, or output redirected
# to a file (`print > "f"`; a comparison `$1 > 5` is caught too: the cost of not parsing awk).
# awk: `system(`, a pipe (not `||`), `getline`, `ARGV`/`ARGC` (files the program names for itself to
# read), and any `>` after a `print`/`printf` (it may be an output redirection; a `>` or `>=` before
# any print only compares).
_AWK_CODE = re.compile(r"system\s*\(|(?<!\|)\|(?!\|)|getline|\bARG[VC]\b|(?s:\bprintf?\b.*>)")
# sed: after an address, the command letter; `e` runs a command, `w`/`W` write a file.
_SED_ADDRESS = re.compile(
    r"\s*(?:[0-9$]+|/(?:[^/\\\n]|\\.)*/[IM]*)?(?:\s*,\s*(?:[0-9$]+|/(?:[^/\\\n]|\\.)*/[IM]*))?\s*!?\s*"
)


def unseen_code(base: str, options: frozenset[str], args: Sequence[str | None], fed: Callable[[], bool]) -> str | None:
    """Why the program `base` with arguments `args` runs code the analyzer does not read, or None.

    `options` are its code-carrying options (from `code_options`); `fed()` says a here-document or
    here-string gives it input (for an interpreter without a script operand, its program): asked only
    when no operand names the script.
    """
    if base in _SED:
        return _sed(args)
    if base in _AWK:
        return _awk(args)
    operands = 0
    for arg in args:
        if arg is None:
            return f"`{base}` takes an argument only known when it runs"
        name = arg.partition("=")[0] if "=" in arg else arg
        attached = arg[:2] if len(arg) > 2 and arg[1] != "-" else None
        if name in options or attached in options or long_option(name, options) is not None:
            shown = name if name in options or not attached else attached
            return f"`{base} {shown}` runs code the analyzer does not read"
        if base in _DATA_INPUT:
            continue
        if arg == "-" or (not arg.startswith("-")):
            operands += 1
            if arg == "-":
                return f"`{base} -` runs code from its input, which the analyzer does not read"
    if operands == 0 and base not in _DATA_INPUT and fed():
        return f"`{base}` runs the code fed to its input, which the analyzer does not read"
    return None


def _sed(args: Sequence[str | None]) -> str | None:
    """GNU sed's options as getopt_long reads them: clusters (`-nf FILE`, `-ne SCRIPT`, `-sE`) and any
    prefix of a long option's name (`--expr=SCRIPT`)."""
    scripts: list[str] = []
    index = 0
    explicit = False
    options = True
    while index < len(args):
        arg = args[index]
        following = args[index + 1] if index + 1 < len(args) else ""
        if arg is None:
            return "`sed` takes an argument only known when it runs"
        if not options or arg == "-" or arg[:1] != "-":
            if not explicit:
                scripts.append(arg)
                explicit = True
            index += 1
            continue
        if arg == "--":
            options = False
            index += 1
            continue
        role, value, taken = _option(arg, following, _SED_LONG, _SED_SHORT)
        if role == _CODE_FILE:
            return "`sed -f` runs a script file the analyzer does not read"
        if role == _PROGRAM:
            if value is None:
                return "`sed -e` takes a script only known when it runs"
            scripts.append(value)
            explicit = True
        index += 1 + taken
    for script in scripts:
        if sed_runs_code(script):
            return "the sed script runs a command or reads or writes a file (`e`, `r`, `w`), which is not followed here"
    return None


_PROGRAM, _CODE_FILE, _VALUE, _OPTIONAL, _FLAG = "program", "code file", "value", "optional", "flag"
# Each option's role: its value is the program text, names a file of code, is another value, is attached
# only (`sed -i.bak`, `gawk -dFILE`), or it has none. A long option is read by any prefix of its name, in
# this order (`long_option`: a prefix of several stops the program, so the first, the strictest, is never weaker).
_SED_LONG = {"--expression": _PROGRAM, "--file": _CODE_FILE, "--line-length": _VALUE, "--in-place": _OPTIONAL}
_SED_SHORT = {"e": _PROGRAM, "f": _CODE_FILE, "l": _VALUE, "i": _OPTIONAL}
_AWK_LONG = {
    "--file": _CODE_FILE, "--exec": _CODE_FILE, "--include": _CODE_FILE, "--load": _CODE_FILE,
    "--source": _PROGRAM, "--assign": _VALUE, "--field-separator": _VALUE,
}  # fmt: skip
_AWK_SHORT = {
    "f": _CODE_FILE, "E": _CODE_FILE, "i": _CODE_FILE, "l": _CODE_FILE, "e": _PROGRAM, "F": _VALUE, "v": _VALUE,
    "W": _VALUE, "d": _OPTIONAL, "D": _OPTIONAL, "L": _OPTIONAL, "o": _OPTIONAL, "p": _OPTIONAL,
}  # fmt: skip


def _option(
    arg: str, following: str | None, longs: dict[str, str], shorts: dict[str, str]
) -> tuple[str, str | None, int]:
    """The role of the option word `arg` (`--name[=value]` or a cluster), its value (None: only known when
    it runs) and how many words after it the value takes (0 or 1)."""
    if arg[:2] == "--":
        name, equals, value = arg.partition("=")
        option = long_option(name, longs)
        if option is None:
            return _FLAG, None, 0
        role = longs[option]
        if role in (_FLAG, _OPTIONAL) or equals:
            return role, value, 0
        return role, following, 1
    for position in range(1, len(arg)):
        role = shorts.get(arg[position], _FLAG)
        if role == _FLAG:
            continue
        rest = arg[position + 1 :]
        if rest or role == _OPTIONAL:
            return role, rest, 0
        return role, following, 1
    return _FLAG, None, 0


def sed_runs_code(script: str) -> bool:
    """True when a sed script has an `e`, `w`, `W`, `r` or `R` command, or an `s` with the `e` or `w`
    flag: it runs a command, or writes or reads a file it names."""
    index = 0
    length = len(script)
    while index < length:
        match = _SED_ADDRESS.match(script, index)
        index = match.end() if match else index
        if index >= length:
            break
        command = script[index]
        if command in "ewWrR":  # `r FILE`/`R FILE` read a file the script names, anywhere
            return True
        if command in "s" and index + 1 < length:
            index = _after_delimited(script, index)  # the pattern, then the replacement
            flags_start = index
            while index < length and script[index] not in ";\n}":
                index += 1
            if "e" in script[flags_start:index] or "w" in script[flags_start:index]:
                return True
        elif command in "y" and index + 1 < length:
            index = _after_delimited(script, index)
        elif command in "aicrRbtTqQlL:#{}":
            # Text or a label or a file name runs to the end of the line (or the next `;`).
            while index < length and script[index] != "\n" and (command in "aicrR:#" or script[index] != ";"):
                index += 1
        index += 1
    return False


def _after_delimited(script: str, index: int) -> int:
    """Where the two delimited parts of the `s` or `y` command at `index` end (`s/a/b/` → after the last `/`)."""
    length = len(script)
    delimiter = script[index + 1]
    index += 2
    for _ in range(2):
        while index < length and script[index] != delimiter:
            index += 2 if script[index] == "\\" else 1
        index += 1
    return index


def _awk(args: Sequence[str | None]) -> str | None:
    """awk's options (gawk's and mawk's) as getopt_long reads them: `-e`/`--source` give program text,
    `-f`, `-E`, `-i`, `-l` (and their long names, by any prefix) files of code; the first operand is the
    program unless an option gave one."""
    programs: list[str] = []
    index = 0
    options = True
    while index < len(args):
        arg = args[index]
        following = args[index + 1] if index + 1 < len(args) else ""
        if arg is None:
            return "`awk` takes an argument only known when it runs"
        if not options or arg == "-" or arg[:1] != "-":
            if not programs:
                programs.append(arg)
            break  # the program, or the first file after the programs the options gave
        if arg == "--":
            options = False
            index += 1
            continue
        role, value, taken = _option(arg, following, _AWK_LONG, _AWK_SHORT)
        if role == _CODE_FILE or (arg[:2] == "-W" and (value or "")[:1] == "e"):  # mawk's `-W exec FILE`
            return "`awk -f` runs a program file the analyzer does not read"
        if role == _PROGRAM:
            if value is None:
                return "`awk -e` takes a program only known when it runs"
            programs.append(value)
        index += 1 + taken
    if any(awk_runs_code(program) for program in programs):
        return "the awk program runs commands or writes files"
    return None


def awk_runs_code(program: str) -> bool:
    """True when an awk program may run a command or write a file (see `_AWK_CODE`)."""
    return _AWK_CODE.search(program) is not None
