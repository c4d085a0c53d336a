"""Where a shell template's `{{ }}` may stand, read on the tree-sitter parse of the template.

A value reaches the shell as an environment variable, `"${TOOLRT_ARG_<NAME>}"` (see
`toolrt.build.templates`): bash expands it once and never reads it as code, *if* the place the expansion
stands does not evaluate it again. So a placeholder may stand as a word, or part of a word, of a
simple command's arguments, as a redirect target, a here-string, an assignment's value, a `for` or
`case` subject, or inside double quotes. Everywhere else it is refused: arithmetic (`$(( ))`,
`(( ))`, `let`, subscripts evaluate `a[$(cmd)]`), `[ ]` / `[[ ]]` tests, backticks, comments,
here-documents, case patterns, `${ }` expansions, variable names, and the value of a variable that
loads code or picks programs. The command check then refuses the program a command runs and any
word a wrapper from the wrapper table (`bash -c`, `eval`, `python -c`) reads as code.

The template's text is parsed once with each `{{ }}` replaced by a marker word; a placeholder's
context is `word` or `quoted` (inside double quotes), which decides how its expansion is written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from .long_options import long_option
from .operands import one_word, takes_value
from .unwrap import unwrap

if TYPE_CHECKING:
    from tree_sitter import Node

    from .wrappers import Wrapper, WrapperTable

__all__ = ["MARKER", "PlaceholderProblem", "placeholder_contexts"]


class PlaceholderProblem(Exception):
    """A placeholder where its value could become code (`toolrt.build.templates` reports it as a TemplateProblem)."""


MARKER = "toolrtVALUE{}x"
"""The word that stands for the n-th `{{ }}` while the template's shell text is parsed."""

_PASS = frozenset(
    {
        "word",
        "concatenation",
        "string",
        "string_content",
        "program",
        "list",
        "redirected_statement",
        "subshell",
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "do_group",
        "negated_command",
        "process_substitution",
        "herestring_redirect",
        "array",
        "command_name",
    }
)
"""Nodes a placeholder may sit in whatever its place inside them."""

_REJECTED: Mapping[str, str] = {
    "raw_string": "inside single quotes",
    "ansi_c_string": "inside $'...' quotes",
    "translated_string": 'inside $"..." quotes',
    "comment": "inside a comment",
    "arithmetic_expansion": "inside arithmetic $(( ))",
    "c_style_for_statement": "inside arithmetic for (( ))",
    "expansion": "inside a ${ } expansion",
    "simple_expansion": "after a $",
    "subscript": "inside an array subscript (it is arithmetic)",
    "variable_name": "as a variable name",
    "unset_command": "as a name unset removes",
    "regex": "inside a [[ =~ ]] pattern",
    "extglob_pattern": "inside a pattern",
    "ERROR": "where the shell parser finds no valid command",
}
_HEREDOC = frozenset({"heredoc_body", "heredoc_redirect", "heredoc_content", "heredoc_start", "heredoc_end"})
_ASSIGNED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
"""A word that assigns a variable when a wrapper such as `env` reads it (`env NAME=value cmd`)."""
_CODE_KINDS = frozenset({"shell", "script", "argument"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})


def _within(nodes: Sequence[Node], start: int) -> bool:
    return any(node.start_byte <= start < node.end_byte for node in nodes)


def placeholder_contexts(probe: str, lines: Sequence[int] | None) -> tuple[str, ...]:
    """Each marker's context in `probe` (`word` or `quoted`); PlaceholderProblem for a refused place.

    `lines` are the template lines of the markers (compile time); None: the probe is a rendered
    template, and its own lines are named.
    """
    from .parser import parse
    from .wrappers import default_wrappers

    data = probe.encode()
    root = parse(data).root_node
    table = default_wrappers()
    contexts: list[str] = []
    index = 0
    while True:
        marker = MARKER.format(index).encode()
        start = data.find(marker)
        if start < 0:
            return tuple(contexts)
        line = lines[index] if lines is not None else data.count(b"\n", 0, start) + 1
        where = f"(template line {line})" if lines is not None else f"(rendered line {line})"
        contexts.append(_context(root, data, start, len(marker), where, table))
        index += 1


def _context(root: Node, data: bytes, start: int, size: int, where: str, table: WrapperTable) -> str:
    slashes = len(data[:start]) - len(data[:start].rstrip(b"\\"))
    if slashes % 2:
        raise PlaceholderProblem(f"{{{{ }}}} after a backslash {where}: the backslash would escape the value's quoting")
    node: Node | None = root.descendant_for_byte_range(start, start + size)
    context: str | None = None
    found: list[tuple[int, PlaceholderProblem]] = []
    while node is not None:
        kind = node.type
        if context is None and kind == "string":
            context = "quoted"
        elif context is None and kind not in ("word", "concatenation", "string_content"):
            context = "word"
        try:
            _check_node(node, kind, data, start, where, table)
        except PlaceholderProblem as problem:
            found.append((0 if isinstance(problem, _Unnamed) else 1, problem))
        node = node.parent
    if found:
        raise max(reversed(found), key=lambda item: item[0])[1]  # the outermost named place
    return context or "word"


class _Unnamed(PlaceholderProblem):
    """A refusal for a place the checks do not name (a node type not listed): reported only when no
    named place refuses the same placeholder."""


def _refuse(where: str, context: str, problem: type[PlaceholderProblem] = PlaceholderProblem) -> PlaceholderProblem:
    return problem(
        f"{{{{ }}}} {context} {where}: a value may stand only as a word of a command (or part of one, "
        "or inside double quotes), a redirect target or an assignment's value"
    )


def _check_node(node: Node, kind: str, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    if kind in _PASS:
        return
    if kind in _HEREDOC:
        raise PlaceholderProblem(
            f"{{{{ }}}} in a here-document {where}: pass the value with the handler's `stdin:` instead"
        )
    rejected = _REJECTED.get(kind)
    if rejected is not None:
        raise _refuse(where, rejected)
    check = _NODE_CHECKS.get(kind)
    if check is None:
        raise _refuse(where, f"inside a {kind.replace('_', ' ')}", _Unnamed)
    check(node, data, start, where, table)


def _in_substitution(node: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    if data[node.start_byte : node.start_byte + 1] == b"`":
        raise PlaceholderProblem(f"{{{{ }}}} inside backticks {where}: write $( ) instead")


def _in_compound(node: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    if data[node.start_byte :].startswith(b"(("):
        raise _refuse(where, "inside arithmetic (( ))")


def _in_test(node: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    brackets = "[[ ]]" if data[node.start_byte :].startswith(b"[[") else "[ ]"
    raise _refuse(where, f"inside a {brackets} test")


def _in_assignment(node: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    if not _within(node.children_by_field_name("value"), start):
        raise _refuse(where, "as a variable name")
    name = node.child_by_field_name("name")
    variable = data[name.start_byte : name.end_byte].decode() if name is not None else ""
    if table.is_dangerous_env(variable):
        raise PlaceholderProblem(
            f"{{{{ }}}} as the value of {variable} {where}: that variable loads code or picks programs"
        )


def _in_redirect(node: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    if not _within(node.children_by_field_name("destination"), start):
        raise _refuse(where, "as a file descriptor")


def _in_for(node: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    if not _within(node.children_by_field_name("value"), start):
        raise _refuse(where, "as a loop variable")


def _in_case_item(node: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    if _within(node.children_by_field_name("value"), start):
        raise _refuse(where, "in a case pattern")


def _in_function(node: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    if not _within(node.children_by_field_name("body"), start):
        raise _refuse(where, "as a function name")


def _in_declaration(node: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    for child in node.named_children:
        if child.type in ("word", "variable_name", "concatenation", "string") and _within([child], start):
            raise _refuse(where, "as a name a declaration evaluates")


def _in_pipeline(node: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    after = [child for child in node.named_children if child.start_byte >= start]
    for later in after:
        runner = _runs_input(later, data, table)
        if runner is not None:
            raise PlaceholderProblem(f"{{{{ }}}} piped into {runner}, which runs its input as code {where}")


def _nowhere(node: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    """A node that holds the marker only inside a part checked on its own (`case WORD in`)."""


_NAME_BUILTINS = frozenset({"declare", "typeset", "local", "export", "readonly"})
"""Builtins whose operands are `NAME` or `NAME=value`: a value in the name part is evaluated
(`declare 'a[$(cmd)]'` runs cmd)."""
_NAME_AFTER: Mapping[str, frozenset[str]] = {
    "printf": frozenset({"-v"}),
    "test": frozenset({"-v", "-R"}),
    "wait": frozenset({"-p"}),
}
"""Builtins where the word after one of these options is a variable name (`printf -v NAME`)."""
_ALL_NAMES = frozenset({"read", "mapfile", "readarray", "getopts", "unset"})
"""Builtins whose operands are variable names (`read 'a[$(cmd)]'` runs cmd)."""
_READ_VALUES = frozenset({"-p", "-d", "-t", "-u", "-n", "-N", "-i"})
_SED = frozenset({"sed", "gsed"})
_AWK = frozenset({"awk", "gawk", "mawk", "nawk"})
_PROGRAM_OPTIONS_WITH_VALUE: Mapping[str, frozenset[str]] = {
    **dict.fromkeys(_SED, frozenset({"-l", "--line-length"})),
    **dict.fromkeys(_AWK, frozenset({"-F", "-v", "--assign", "--field-separator"})),
}
_PERMUTES = frozenset({"rg", "sed", "gsed", "split", "gsplit", "make", "gmake", "ssh", "vim", "vi", "gdb"})
"""Programs that read options after operands too, up to `--` (GNU getopt's permutation, rg's parser):
`rg x . --pre=rm` runs `rm` on every file it searches, `sed p file "-e1e cmd"` runs cmd; ssh after the
host (`ssh HOST -oProxyCommand=CMD`), vim and gdb after a file (`vim FILE -c CMD`, `gdb FILE -ex=CMD`)."""
_ENDS_OPTIONS = ("python", "pypy")
"""Interpreters whose code option ends the option list (`python -c CODE ARG...`): what follows is
the code's arguments. Others (`perl -e`, `node -e`, `sed -e`) read more options after it."""
_MARKER_RE = re.compile(rb"toolrtVALUE[0-9]+x")


class _Words:
    """One command's words: their values after quote removal, and which one holds the placeholder."""

    def __init__(self, command: Node, data: bytes, start: int) -> None:
        from .words import evaluate

        nodes = [
            child
            for child in command.children
            if child.is_named and child.type not in ("variable_assignment", *_REDIRECTS, "comment")
        ]
        self.nodes = [
            node.named_children[0] if node.type == "command_name" and node.named_child_count == 1 else node
            for node in nodes
        ]
        self.values = [evaluate(node, {}, source=data).value for node in self.nodes]
        self.target = next((i for i, node in enumerate(nodes) if node.start_byte <= start < node.end_byte), -1)
        value = self.values[self.target] if self.target >= 0 else None
        found = _MARKER_RE.match(data, start)
        marker = found.group().decode() if found is not None else ""
        self.marker = marker
        self.leads = value is None or value.startswith(marker)
        """The value decides how the word begins (it may start with `-`)."""


def _check_command_word(command: Node, data: bytes, start: int, where: str, table: WrapperTable) -> None:
    """Reject the marker at `start` where the command, or a command it wraps, reads it as code: the
    program it runs, a script (`bash -c`, `eval`, `trap`), a code option's value (`python -c`), an
    option of a wrapper or interpreter that runs code, a variable name a builtin evaluates, or the
    value of a dangerous `env NAME=`. Wrappers are followed as the analyzer's `unwrap` does."""
    name = command.child_by_field_name("name")
    if name is not None and name.start_byte <= start < name.end_byte:
        raise PlaceholderProblem(f"{{{{ }}}} as the program a command runs {where}: name the program in the template")
    words = _Words(command, data, start)
    if words.target < 0:
        return  # a prefix assignment or a redirect: checked where it stands
    text = data[words.nodes[words.target].start_byte : words.nodes[words.target].end_byte].decode(errors="replace")
    variable = _ASSIGNED.match(text)
    if variable is not None and table.is_dangerous_env(variable.group(1)):
        raise PlaceholderProblem(
            f"{{{{ }}}} as the value of {variable.group(1)} {where}: that variable loads code or picks programs"
        )
    work = [(0, len(words.values))]
    while work:
        first, last = work.pop()
        if not first <= words.target < last:
            continue
        if words.target == first:
            raise PlaceholderProblem(
                f"{{{{ }}}} as the program a wrapped command runs {where}: name the program in the template"
            )
        head = words.values[first]
        if head is None:
            continue
        base = head.rpartition("/")[2]
        _check_builtin(base, words, first, where, table)
        wrapper = table.match(words.values, first)
        if wrapper is None:
            _check_program(base, words, first, last, where, table)
            continue
        work.extend(_check_wrapper(wrapper, words, first, last, where))


def _check_wrapper(wrapper: Wrapper, words: _Words, first: int, last: int, where: str) -> list[tuple[int, int]]:
    """Reject the marker where `wrapper` reads it as code or as an option; returns the commands it wraps."""
    inner = unwrap(wrapper, words.values, first, last)
    shown = " ".join(wrapper.name)
    if any(words.marker in script for script in inner.scripts) or inner.dynamic is not None:
        raise PlaceholderProblem(f"{{{{ }}}} in a word the shell or a program reads as code {where}: `{shown}` runs it")
    begins = min((start_ for start_, _ in inner.commands), default=last)
    if wrapper.kind == "shell":
        operands = [i for i in range(first + 1, last) if not (words.values[i] or "").startswith(("-", "+"))]
        operands = [i for i in operands if (words.values[i - 1] or "") not in wrapper.options_with_value]
        if operands and operands[0] == words.target and not inner.scripts:
            raise PlaceholderProblem(f"{{{{ }}}} as the script {shown} runs {where}: name the script in the template")
        begins = operands[0] if operands else last
    options = wrapper.script_options or wrapper.kind in ("shell", "none", "argument")
    if options and first < words.target < begins and words.leads:
        previous = words.values[words.target - 1] or ""
        if previous not in wrapper.options_with_value:
            raise PlaceholderProblem(
                f"{{{{ }}}} where {shown} reads its options {where}: a value starting with - could be one that "
                "runs code; write the option and its value as one word (--file={{ x }}), or put -- before it"
            )
    return list(inner.commands)


def _runs_input(node: Node, data: bytes, table: WrapperTable) -> str | None:
    """The program a pipeline stage runs that reads its input as code (`| bash`, `| sudo sh -s`,
    `| python3`), or None."""
    from .words import evaluate

    if node.type == "redirected_statement":
        body = node.child_by_field_name("body")
        node = body if body is not None else node
    if node.type != "command":
        return None
    nodes = [child for child in node.named_children if child.type not in ("variable_assignment", *_REDIRECTS)]
    values = [
        evaluate(n.named_children[0] if n.type == "command_name" and n.named_child_count else n, {}, source=data).value
        for n in nodes
    ]
    first, last = 0, len(values)
    while first < last and values[first] is not None:
        head = values[first] or ""
        base = head.rpartition("/")[2]
        if base in table.unseen:
            return base  # `parallel` runs commands built from its input
        wrapper = table.match(values, first)
        if wrapper is None:
            options = table.code_options_of(base)
            if options is None or base.rstrip("0123456789.-") in _SED | _AWK:
                return None
            operands = [v for v in values[first + 1 : last] if v is None or v == "-" or not v.startswith("-")]
            return base if not operands or operands[0] == "-" else None
        inner = unwrap(wrapper, values, first, last)
        if inner.reads_stdin:
            return " ".join(wrapper.name)
        if not inner.commands:
            return None
        first, last = inner.commands[0]
        inner_head = (values[first] or "").rpartition("/")[2]
        if wrapper.feeds and (table.match(values, first) is not None or table.code_options_of(inner_head) is not None):
            # `xargs sh -c`, `xargs env`: the input becomes words of a command that runs words as code.
            return f"{' '.join(wrapper.name)} {inner_head}"
    return None


def _check_builtin(base: str, words: _Words, first: int, where: str, table: WrapperTable) -> None:
    target, values = words.target, words.values
    previous = values[target - 1] if target - 1 >= first else None
    named = False
    if base == "let":
        raise PlaceholderProblem(f"{{{{ }}}} inside arithmetic (let) {where}")
    if base in table.unseen:
        raise PlaceholderProblem(f"{{{{ }}}} in an argument of {base} {where}: {table.unseen[base]}")
    if base in _NAME_BUILTINS:
        value = values[target]
        named = value is None or "=" not in value or value.index("=") > value.find(words.marker)
    elif base in _ALL_NAMES:
        named = base != "read" or previous not in _READ_VALUES
    elif base in _NAME_AFTER:
        named = previous in _NAME_AFTER[base]
    elif base in ("source", "."):
        named = target == first + 1
        if named:
            raise PlaceholderProblem(f"{{{{ }}}} as the script {base} runs {where}: name the script in the template")
    if named:
        raise PlaceholderProblem(f"{{{{ }}}} as a variable name {base} evaluates {where}")


def _check_program(base: str, words: _Words, first: int, last: int, where: str, table: WrapperTable) -> None:
    """Code options (`python -c`), the program operand of sed and awk, and an interpreter's leading
    options, where a value starting with `-` could be a code option."""
    global_options = table.global_options.get(base)
    if global_options is not None and global_options.ask:
        _check_global_options(base, words, first, last, where, global_options.options_with_value, global_options.ask)
    options = table.code_options_of(base)
    if options is not None:
        _check_code_options(base, words, first, last, where, options)


def _check_code_options(base: str, words: _Words, first: int, last: int, where: str, options: frozenset[str]) -> None:
    """The marker among the options of a program that runs code, or as its program operand."""
    program = base.rstrip("0123456789.-")
    index = first + 1
    explicit = False
    counted = True  # every option word so far took the words the table says (`one_word`, `takes_value`)
    while index < last:
        value = words.values[index]
        is_target = index == words.target
        if value is None and not is_target and program not in _PERMUTES:
            return
        counted = counted and (value is not None or is_target)  # unknown: an operand, or an option
        text = value or ""
        if (text == "--" and not is_target and counted) or _awk_exec(program, base, words, index, where):
            return  # what follows is operands: a script file (`mawk -W exec FILE`) and its arguments
        takes_code = _takes_code(program, text, options)
        if takes_code and index + 1 == words.target:
            raise PlaceholderProblem(
                f"{{{{ }}}} in a word the shell or a program reads as code {where}: `{base} {text}` runs it"
            )
        if is_target:
            _check_program_target(base, words, text, options, explicit, where)
            return
        if takes_code and program.startswith(_ENDS_OPTIONS):
            return
        if takes_code:
            explicit = True
            index += 2
            continue
        if counted and (text in _PROGRAM_OPTIONS_WITH_VALUE.get(program, ()) or takes_value(base, text)):
            if index + 1 == words.target:
                return
            index += 2
            continue
        if not text.startswith("-"):
            if program in _PERMUTES:  # an operand, yet the words after it are still read for options
                explicit, index = True, index + 1
                continue
            return  # the first operand: the program or script; what follows are its arguments
        # an option the table does not read as one word may take the next one as its value (`rg
        # --context-separator -m`, `rg -nr -e`, `mawk -W -F`): an option word after it, `--` included,
        # may be a value, and the word after that an option, so no later word ends or takes one
        counted = counted and one_word(base, text)
        index += 1


def _takes_code(program: str, option: str, options: frozenset[str]) -> bool:
    """Whether `option` of `program` takes code (a script or a script file) as its value."""
    return (
        option in options
        or (program in _SED and option in _SED_CODE)
        or (program in _AWK and option in _AWK_CODE)
        or ("=" not in option and _names_code_option(program, option, options))
    )


def _awk_exec(program: str, base: str, words: _Words, index: int, where: str) -> bool:
    """Whether the word at `index` is mawk's `-W exec FILE` (`-Wexec`, or any prefix of exec: `-W e`),
    which runs FILE as the program like `-f` and ends the options; the marker in FILE is refused."""
    text = words.values[index] or ""
    name = words.values[index + 1] if text == "-W" and index + 1 < len(words.values) else text[2:]
    if program not in _AWK or not text.startswith("-W") or not name or not "exec".startswith(name):
        return False
    file = index + (2 if text == "-W" else 1)
    if words.target == file:
        raise PlaceholderProblem(
            f"{{{{ }}}} in a word the shell or a program reads as code {where}: `{base} -W exec` runs it"
        )
    return True


_SED_CODE = ("-e", "--expression", "-f", "--file")
_AWK_CODE = ("-f", "--file")


def _names_code_option(program: str, word: str, options: frozenset[str]) -> bool:
    """Whether the long option of `word` (`--filt`, `--ev=TEXT`) abbreviates one that takes code:
    getopt_long takes any unambiguous prefix of a long option, so `split --filt=CMD` runs CMD and `make
    --ev=TEXT` expands TEXT. Every prefix counts (one that is ambiguous only stops the program)."""
    known = (*options, *(_SED_CODE if program in _SED else ()), *(_AWK_CODE if program in _AWK else ()))
    return long_option(word.partition("=")[0], known) is not None


def _check_program_target(
    base: str, words: _Words, text: str, options: frozenset[str], explicit: bool, where: str
) -> None:
    """The marker in an option or operand word of a program that runs code (`text`: the word)."""
    if words.leads:
        raise PlaceholderProblem(
            f"{{{{ }}}} where {base} reads its options {where}: a value starting with - could be one that "
            f"runs code ({', '.join(sorted(options)) or 'its program'}); put -- before it"
        )
    attached = any(text.startswith(option) for option in options if option.startswith("-"))
    if attached or text.startswith("--expression=") or _names_code_option(base.rstrip("0123456789.-"), text, options):
        raise PlaceholderProblem(f"{{{{ }}}} in a word the shell or a program reads as code {where}: `{base}` runs it")
    if not text.startswith("-") and not explicit:
        raise PlaceholderProblem(f"{{{{ }}}} as the program {base} runs {where}: name it in the template")


def _check_global_options(
    base: str,
    words: _Words,
    first: int,
    last: int,
    where: str,
    with_value: frozenset[str],
    ask: Mapping[str, str],
) -> None:
    """`git -c {{ x }}`, `git {{ x }} log`: a value among the options that can run code."""
    index = first + 1
    while index < last:
        value = words.values[index]
        if index == words.target:
            if words.leads:
                raise PlaceholderProblem(f"{{{{ }}}} among {base}'s global options {where}: {', '.join(sorted(ask))}")
            return
        if value is None or not value.startswith("-"):
            return
        if value in with_value and index + 1 == words.target:
            if value in ask:
                raise PlaceholderProblem(f"{{{{ }}}} as the value of {base} {value} {where}: {ask[value]}")
            return
        index += 2 if value in with_value else 1


# Where a marker may stand, by the kind of each node that holds it (other kinds refuse it).
_NODE_CHECKS: Mapping[str, Callable[[Node, bytes, int, str, WrapperTable], None]] = {
    "command_substitution": _in_substitution,
    "compound_statement": _in_compound,
    "test_command": _in_test,
    "variable_assignment": _in_assignment,
    "variable_assignments": _nowhere,
    "file_redirect": _in_redirect,
    "for_statement": _in_for,
    "case_statement": _nowhere,
    "case_item": _in_case_item,
    "function_definition": _in_function,
    "declaration_command": _in_declaration,
    "command": _check_command_word,
    "pipeline": _in_pipeline,
}
