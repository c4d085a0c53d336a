"""Per-program facts: what the analyzer's tables say about one command name, derived once per table.

A simple command's name decides which checks apply to it: a wrapper may run another command, a
builtin may assign or evaluate names, the command table may give a reason, an option may carry code,
a follow option may walk symlinks, the writes table may name written operands. `program_facts` asks
every table once per name and keeps the answer on the wrapper table (`WrapperTable.facts`), so a line
reads one record per command instead of querying a dozen tables; most names (`ls`, `cat`, `make`)
are `plain`, and only their patterns and `-o`-like options remain to check.
"""

from __future__ import annotations

from typing import NamedTuple

from .analysis_scripts import interpreter
from .analysis_variables import NAME_BUILTINS
from .python_code import is_python
from .variables import ASSIGNING_BUILTINS
from .wrappers import WrapperTable
from .writes import write_rules

__all__ = ["INERT", "NAMED_BUILTINS", "RESERVED", "STATEMENTS", "ProgramFacts", "program_facts"]

INERT = frozenset(("true", "false", ":", "set", "shopt"))
"""Builtins that neither run anything nor write anything (with no redirection): no request at all."""
RESERVED = frozenset(
    ("{", "}", "!", "if", "then", "elif", "else", "fi", "do", "done", "case", "esac", "while", "until", "for",
     "select", "function", "in", "[[", "]]")
)  # fmt: skip
"""Reserved words bash reads at a command's start. tree-sitter leaves some compound commands unparsed
(`time { ...; }`, `! { ...; }`, `coproc NAME { ...; }`) and offers the reserved word as a command name."""
STATEMENTS = frozenset(("declare", "typeset", "export", "local", "readonly", "unset"))
"""Command names tree-sitter reads as statements of their own (`declare x`: a `declaration_command`)."""
NAMED_BUILTINS = frozenset(("shopt", "let", "source", ".", *NAME_BUILTINS, *ASSIGNING_BUILTINS))
"""Builtins `_unseen` reads whatever the tables say: they alias, evaluate arithmetic, source scripts,
evaluate or assign variable names."""
# Names a command's checks read specially whatever the wrapper table says.
_SPECIAL = frozenset(("cd", "pushd", "popd", "trap", "bash", "sh", "git", *INERT, *NAMED_BUILTINS, *RESERVED))
_MAX_NAMES = 4_096  # names kept per table; past this the cache starts over


class ProgramFacts(NamedTuple):
    """What the tables say about one command name (`head`, as written: `/usr/bin/git` or `git`)."""

    plain: bool
    """No table describes it: not a builtin the analyzer reads, no wrapper, no unseen effect or code
    option, no global options, no interpreter, no path, and no row of the writes table."""
    may_wrap: bool
    """Some wrapper's name starts with its basename (`WrapperTable.match` may find one)."""
    described: bool
    """A builtin `_unseen` reads, or a program the command, code-option, subcommand or follow-option
    tables name: anything else has no effect the analysis cannot see."""
    builtin: bool
    """A builtin `_unseen_builtin` reads, or a program the command table gives a reason for."""
    code: bool
    """A program with code-carrying options, or a Python whose inline code is read."""
    interpreter: bool
    """A program whose first file operand is a script in another language (`analysis_scripts`)."""
    plain_name: bool
    """Read as a command's name and nothing else, by bash and by tree-sitter: no `=` (an assignment), no
    reserved word or statement (`declare`), no leading `-` (tree-sitter skips it), and no `@`, `%` or
    `+:`, which tree-sitter cannot parse in a name (`a@ rm x`)."""


def program_facts(table: WrapperTable, head: str) -> ProgramFacts:
    """The facts of the command name `head` under `table`, derived on first use and kept."""
    facts: ProgramFacts | None = table.facts.get(head)
    if facts is None:
        facts = _derive(table, head)
        if len(table.facts) >= _MAX_NAMES:
            table.facts.clear()
        table.facts[head] = facts
    return facts


def _derive(table: WrapperTable, head: str) -> ProgramFacts:
    base = head.rpartition("/")[2]
    may_wrap = table.may_wrap(base)
    described = base in NAMED_BUILTINS or table.describes(base)
    runs_scripts = interpreter(head)
    plain = (
        "/" not in head
        and head not in _SPECIAL
        and not may_wrap
        and not described
        and head not in table.global_options
        and not runs_scripts
        and head not in write_rules()
    )
    return ProgramFacts(
        plain=plain,
        may_wrap=may_wrap,
        described=described,
        builtin=base in NAMED_BUILTINS or base in table.unseen,
        code=table.code_options_of(base) is not None or is_python(base),
        interpreter=runs_scripts,
        plain_name=not (
            "=" in head
            or head in RESERVED
            or head in STATEMENTS
            or head[:1] == "-"
            or "@" in head
            or "%" in head
            or "+:" in head
        ),
    )
