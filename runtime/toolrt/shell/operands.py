"""Which words of a command are not paths (operands.yaml): text, patterns, scripts, delimiters.

`not_paths(program, args)` gives the positions in `args` (the words after the program's name) that
the program never opens: `echo`'s operands, the first operand of `sed`/`awk`/`grep` (their script or
pattern), `cut -d`'s delimiter. The bash analyzer checks every other word as a possible path.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from ..config.resources import read_yaml
from .long_options import long_option

__all__ = ["not_paths", "one_word", "takes_value"]


class _Program(NamedTuple):
    """What a known program does with its operands (reads text, runs a script)."""

    text: bool = False
    script: bool = False
    script_options: frozenset[str] = frozenset()
    file_options: frozenset[str] = frozenset()
    patternless: frozenset[str] = frozenset()
    text_options: frozenset[str] = frozenset()
    value_options: frozenset[str] = frozenset()
    flags: frozenset[str] = frozenset()
    ends_cluster: frozenset[str] = frozenset()
    takes_value: frozenset[str] = frozenset()
    """Every option that takes a value (script, file, text and other values), joined once."""
    short: Mapping[str, str] = MappingProxyType({})
    """Each short option's letter → how a cluster reads it (`_ENDS`, `_VALUE`, `_FLAG`), in that order of
    precedence: one lookup per letter instead of three set tests."""
    long_options: tuple[str, ...] = ()
    """The long options the row names, those that give the script or a file first: what an abbreviation
    of one is read as (`long_option`)."""
    flag_letters: frozenset[str] = frozenset()
    """The letters `short` reads as flags: a cluster of them only (`ls -la`) is one set test."""
    options: Mapping[str, _Read] = MappingProxyType({})
    """What reading each option word the table names finds (`-m`, `--message`), read once per program."""


class _Read(NamedTuple):
    """What reading one option word finds (`_read_option`), wherever it stands."""

    advance: int
    """The words it takes: 1, or 2 when the next word is its value."""
    text: tuple[int, ...]
    """Offsets from it (0: its own word, 1: the next) of the words that hold only text."""
    settles: bool
    """It gives the script or says there is none, or (not in the table) may take the next word as its
    value: no operand is then taken for the script."""


@cache
def _programs() -> Mapping[str, _Program]:
    data: dict[str, Any] = read_yaml(Path(__file__).with_name("operands.yaml"))
    options = (
        "script_options", "file_options", "patternless", "text_options", "value_options", "flags", "ends_cluster"
    )  # fmt: skip
    programs: dict[str, _Program] = {}
    for name, row in data["programs"].items():
        sets: dict[str, Any] = {key: frozenset(row.get(key, ())) for key in options}
        valued = ("script_options", "file_options", "text_options", "value_options")
        takes_value = frozenset().union(*(sets[key] for key in valued))
        short = _short_roles(sets["ends_cluster"], takes_value, sets["flags"])
        order = ("script_options", "file_options", "text_options", "value_options", "patternless", "flags")
        long_options = (option for key in order for option in sorted(sets[key]) if option[:2] == "--")
        program = _Program(
            text=row.get("text") == "all",
            script=row.get("script") == "first",
            takes_value=takes_value,
            long_options=tuple(dict.fromkeys(long_options)),
            short=short,
            flag_letters=frozenset(letter for letter, role in short.items() if role is _FLAG),
            **sets,
        )
        named = {"-" + letter for letter in short}.union(*sets.values())
        reads = {word: _read_option(program, word) for word in named if word[:1] == "-" and len(word) > 1}
        programs[name] = program._replace(options=reads)
    _loaded.update(programs)
    return programs


_loaded: dict[str, _Program] = {}
"""`_programs()` at hand once loaded (read on every command the table describes)."""


_ENDS, _VALUE, _FLAG = "ends", "value", "flag"


def _short_roles(ends: frozenset[str], valued: frozenset[str], flags: frozenset[str]) -> Mapping[str, str]:
    """Letter → role of every short option (`-x`) in the three sets; the first set that holds it wins."""
    roles: dict[str, str] = {}
    for role, options in ((_FLAG, flags), (_VALUE, valued), (_ENDS, ends)):  # later ones take precedence
        roles.update((option[1], role) for option in options if len(option) == 2 and option[1] != "-")
    return roles  # a dict, not a read-only view: read on every option, and kept private to this module


class _Reading:
    """What reading a command's options found: the words that hold only text, whether an option gave
    the script (or said there is none), and whether an unknown option may have taken a word."""

    __slots__ = ("no_script_operand", "skipped", "uncertain")

    def __init__(self) -> None:
        self.skipped: set[int] = set()
        self.no_script_operand = False
        self.uncertain = False


_NOTHING: tuple[int, ...] = ()


def takes_value(program: str, option: str) -> bool:
    """Whether `program` (a row of the table) reads the word after `option` as that option's value,
    whatever it starts with: getopt gives an option that takes an argument the next word (`rg -e -x`
    searches for `-x`). An abbreviation is not read here (the caller then takes the word for an option)."""
    spec = (_loaded or _programs()).get(program)
    return spec is not None and option in spec.takes_value


def one_word(program: str, option: str) -> bool:
    """Whether the table knows that `program` reads the option word `option` (`-n`, `-nF`, `-m5`,
    `--x=y`) alone, never taking the next word as its value. False for an option it does not know
    (`rg --context-separator`, `mawk -W`) or a cluster ending in one that takes a value (`rg -nr`)."""
    spec = (_loaded or _programs()).get(program)
    if spec is None or option[:1] != "-" or len(option) < 2:
        return False
    reading = _Reading()
    advance = (_long if option[:2] == "--" else _cluster)(spec, (option,), 0, reading)
    return advance == 1 and not reading.uncertain


def not_paths(program: str, args: Sequence[str | None]) -> Collection[int]:
    """The positions in `args` that `program` reads as text, patterns or scripts, never as paths (none for
    a program the table does not describe), each once or more: a few at most, tested with `in`."""
    spec = (_loaded or _programs()).get(program)
    if spec is None:
        return _NOTHING
    if spec.text:
        return range(len(args))
    if not spec.script and not _any_option(args):
        return _NOTHING  # operands only, and every one a path (`cat README.md`)
    skipped: list[int] = []
    settled = False  # no operand is taken for the script (`_Read.settles`)
    first_operand: int | None = None
    index = 0
    count = len(args)
    while index < count:
        arg = args[index]
        if arg == "--":
            first_operand = index + 1 if first_operand is None and index + 1 < count else first_operand
            break
        if arg is None or arg == "-" or arg[:1] != "-":
            first_operand = index if first_operand is None else first_operand
            index += 1
            continue
        read = spec.options.get(arg)
        if read is None:
            if arg[1] != "-" and spec.flag_letters.issuperset(arg[1:]):  # a cluster of flags only (`ls -la`)
                skipped.append(index)
                index += 1
                continue
            read = _read(spec, arg)
        for offset in read.text:
            skipped.append(index + offset)
        settled = settled or read.settles
        index += read.advance
    if spec.script and not settled and first_operand is not None:
        skipped.append(first_operand)
    return skipped


def _any_option(args: Sequence[str | None]) -> bool:
    for arg in args:  # a loop: cheaper than `any` over a generator
        if arg is not None and arg[:1] == "-":
            return True
    return False


_UNKNOWN = _Read(1, (), True)


def _read(spec: _Program, arg: str) -> _Read:
    """What reading the option word `arg`, which the table does not name and is no cluster of flags only,
    finds: a cluster led by a letter the table does not know (`head -20`) is read no further (`_cluster`)."""
    if arg[1] != "-" and arg[1] not in spec.short:
        return _UNKNOWN
    return _read_option(spec, arg)


def _read_option(spec: _Program, arg: str) -> _Read:
    """What reading the option word `arg` finds: it depends on nothing but the word."""
    reading = _Reading()
    advance = (_long if arg[:2] == "--" else _cluster)(spec, (arg,), 0, reading)
    return _Read(advance, tuple(sorted(reading.skipped)), reading.no_script_operand or reading.uncertain)


def _long(spec: _Program, args: Sequence[str | None], index: int, reading: _Reading) -> int:
    """Read `--name[=value]` at `index`; the index of the next word to read."""
    name, equals, _ = (args[index] or "").partition("=")
    name = long_option(name, spec.long_options) or name
    _note(spec, name, index, reading)
    if equals or name in spec.flags or name in spec.patternless:
        return index + 1
    if name in spec.takes_value:
        if name in spec.text_options or name in spec.script_options:
            reading.skipped.add(index + 1)
        return index + 2
    reading.uncertain = True  # it may take the next word as its value
    return index + 1


def _cluster(spec: _Program, args: Sequence[str | None], index: int, reading: _Reading) -> int:
    """Read a cluster of short options (`-rn`, `-nf FILE`, `-d/`) at `index`; the next word to read."""
    arg = args[index] or ""
    roles = spec.short
    for position in range(1, len(arg)):
        role = roles.get(arg[position])
        if role is _FLAG:
            continue
        if role is _ENDS:
            return index + 1
        if role is _VALUE:
            option = "-" + arg[position]
            _note(spec, option, index, reading)
            if position + 1 < len(arg):  # the rest of the cluster is its value (`-d/`, `-fFILE`)
                return index + 1
            if option in spec.text_options or option in spec.script_options:
                reading.skipped.add(index + 1)
            return index + 2
        reading.uncertain = True  # not in the table: it may take the next word as its value
        return index + 1
    reading.skipped.add(index)  # flags only (`ls -la`): the word names no path
    return index + 1


def _note(spec: _Program, option: str, index: int, reading: _Reading) -> None:
    """What an option says about the script, and whether its own word holds only text."""
    if option in spec.script_options or option in spec.file_options or option in spec.patternless:
        reading.no_script_operand = True
    if option in spec.text_options or option in spec.script_options:
        reading.skipped.add(index)  # `-d/`, `--fields=2`: the option's word holds only text
