"""Variables and the statements that are not commands: assignments by every route, arithmetic,
tests, parameter expansions, declarations, and the checks deferred until every value is known."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from .analysis_paths import PathChecks, path_like
from .analysis_state import GLOB_CHARS, brief, env_reason, runtime_path, unanalysed_substitution
from .arity import prefix
from .globs import GLOB_VARIABLES
from .variables import CODE_VARIABLES, PROMPTS, prompt_code
from .words import Word, alternative, evaluate

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["HIDDEN", "NAME_BUILTINS", "VariableChecks", "evaluated_names"]

_SUBSTITUTION = re.compile(r"\$\((?!\()|`")  # `$(` or a backtick, not the `$((` of arithmetic
# What bash expands inside text tree-sitter leaves as one leaf: `$(`, backticks, `$[`.
HIDDEN = re.compile(r"\$[(\[]|`")
_ARITHMETIC_NAME = re.compile(r"(?<![0-9A-Za-z_#-])[A-Za-z_][A-Za-z0-9_]*")
_ARITHMETIC_TEST = re.compile(r"\s-(?:eq|ne|lt|le|gt|ge)\s|\s-v\s")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_ARITHMETIC_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)[ \t]*=(?!=)[ \t]*([+-]?[0-9]+)\b")
_MAX_COMBINATIONS = 16
_BRACKETS_AND_SUBSTITUTIONS = re.compile(r"[\[\]`]|\$\(")
# Builtins that take variable names, where a name with an array subscript (`a[$(cmd)]`) is evaluated
# as arithmetic and runs the command: builtin → (options whose value is a name, options that take
# another value, whether the operands are names).
NAME_BUILTINS: Mapping[str, tuple[frozenset[str], frozenset[str], bool]] = MappingProxyType(
    {
        "test": (frozenset(("-v", "-R")), frozenset(), False),
        "[": (frozenset(("-v", "-R")), frozenset(), False),
        "read": (frozenset(("-a",)), frozenset(("-d", "-i", "-n", "-N", "-p", "-t", "-u")), True),
        "printf": (frozenset(("-v",)), frozenset(), False),
        "wait": (frozenset(("-p",)), frozenset(), False),
        "getopts": (frozenset(), frozenset(), True),
        "unset": (frozenset(), frozenset(), True),
        **dict.fromkeys(("declare", "typeset", "local", "export", "readonly"), (frozenset(), frozenset(("-I",)), True)),
    }
)


class VariableChecks(PathChecks):
    """Assignments, arithmetic, tests, expansions and declarations; the deferred checks."""

    __slots__ = ()

    def _declaration(self, node: Node, parent: Node | None) -> None:
        """`export`, `declare`, `local`, `readonly`, `typeset`, `unset`: a command of their own."""
        end = parent.end_byte if parent is not None and parent.type == "redirected_statement" else node.end_byte
        text = self._slice(node.start_byte, end)
        keyword = node.children[0].type if node.child_count else ""
        reasons = list(self.inherited)
        for child in node.named_children:
            if child.type == "word":
                flags = self._slice(child.start_byte, child.end_byte)
                if flags.startswith(("-", "+")) and ("i" in flags or "n" in flags):
                    reasons.append(f"`{keyword} {flags}` makes later values be evaluated as arithmetic or names")
        for child in node.named_children:
            if child.type == "variable_assignment":
                reasons.extend(self._assignment_reasons(child))
        operands = [
            evaluate(child, self.known, source=self.source)
            for child in node.named_children
            if child.type not in ("variable_assignment", "variable_name")  # a plain name evaluates nothing
            and not self._slice(child.start_byte, child.end_byte).startswith(("-", "+"))
        ]
        why = evaluated_names(keyword, operands)
        if why is not None:
            reasons.append(why)
        self._emit_plain(text, keyword, reasons, inert=end == node.end_byte)

    def _emit_plain(self, text: str, keyword: str, reasons: list[str], *, inert: bool = False) -> None:
        if inert and not reasons:
            return  # `export X=1`, `local y`, `unset z`: they only set the shell's own variables
        if reasons:
            self.findings.unseen_command((text,), "; ".join(dict.fromkeys(reasons)))
            return
        self.findings.patterns[text] = None
        self.findings.always[" ".join(prefix([keyword])) + " *"] = None

    def _record_assignment(self, node: Node) -> None:
        name = self._variable_name(node)
        if not name:
            return
        value = node.child_by_field_name("value")
        literal: str | None = ""
        if value is not None:
            literal = evaluate(value, self.known, source=self.source).value if value.type != "array" else None
        if (node.named_child_count and node.named_children[0].type == "subscript") or any(
            child.type == "+=" for child in node.children
        ):
            literal = None
        self.assigned.setdefault(name, []).append(literal)
        if name in GLOB_VARIABLES:
            self.findings.globbing = name
        if name in CODE_VARIABLES:
            self._code_value(name, literal, self._slice(node.start_byte, node.end_byte), "the assignment")

    def _standalone_assignment(self, node: Node, parent: Node | None) -> None:
        if parent is not None and parent.type in ("command", "declaration_command"):
            return
        name = self._variable_name(node)
        if name and self.table.is_dangerous_env(name):
            self._fail(node, env_reason(name))

    def _assignment_reasons(self, node: Node) -> list[str]:
        reasons: list[str] = []
        name = self._variable_name(node)
        if name and self.table.is_dangerous_env(name):
            reasons.append(env_reason(name))
        value = node.child_by_field_name("value")
        if value is not None and _SUBSTITUTION.search(self._slice(value.start_byte, value.end_byte)):
            reasons.append(f"the value of {name} comes from a command")
        return reasons

    def _assigned_subscript(self, node: Node) -> None:
        """`a[SUBSCRIPT]=value`: an indexed array's subscript is arithmetic, quoted or not, so a
        substitution in it runs (`a['$(cmd)']=1`) and so does a name whose value holds one."""
        target = node.named_children[0] if node.named_child_count else None
        if target is None or target.type != "subscript" or target.named_child_count < 2:
            return
        index = target.named_children[1]
        subscript = self._slice(index.start_byte, index.end_byte)
        if "$(" in subscript or "`" in subscript:
            self._fail(node, f"the array subscript `{brief(subscript)}` is arithmetic, which runs its command")
        else:
            self._arithmetic_names(node, subscript)

    def _variable_name(self, node: Node) -> str:
        target = node.named_children[0] if node.named_child_count else None
        if target is not None and target.type == "subscript":
            target = target.named_children[0] if target.named_child_count else None
        if target is None:
            return ""
        return self._slice(target.start_byte, target.end_byte)

    def _arithmetic(self, node: Node) -> None:
        start, end = node.start_byte, node.end_byte
        if node.type == "c_style_for_statement":
            # Only the `((init; test; step))` header; the body is walked as commands.
            start = next((child.start_byte for child in node.children if child.type == "(("), start)
            end = next((child.end_byte for child in node.children if child.type == "))"), end)
        text = self._slice(start, end)
        if _SUBSTITUTION.search(text):
            self._fail(node, "arithmetic expansion runs a command substitution")
        self._arithmetic_names(node, text)

    def _arithmetic_names(self, node: Node, text: str) -> None:
        """Arithmetic evaluates a variable's value as an expression, recursively, and a value like
        `a[$(...)]` runs a command: only names this line set to a literal integer are safe."""
        for name in dict.fromkeys(match.group() for match in _ARITHMETIC_NAME.finditer(text)):
            self.arithmetic.append((node, name))
        # `((i = 0))` assigns as well as reads: a literal integer is a value like any other.
        for match in _ARITHMETIC_ASSIGNMENT.finditer(text):
            self.assigned.setdefault(match.group(1), []).append(match.group(2))

    def _test(self, node: Node) -> None:
        text = self._slice(node.start_byte, node.end_byte)
        if _subscript_substitution(text):
            self._fail(node, "an array subscript in a test runs a command substitution")
        if _ARITHMETIC_TEST.search(text):
            self._arithmetic_names(node, text)

    def _expansion(self, node: Node) -> None:
        """`${...}`: operands tree-sitter leaves opaque, indirection, prompt expansion, arithmetic,
        and the assignment `${NAME:=word}` makes."""
        text = self._slice(node.start_byte, node.end_byte)
        parts = alternative(node, self.source)
        if parts is not None and parts[1] in (":=", "="):
            name, _, word = parts
            value = evaluate(word, self.known, source=self.source).value if word is not None else ""
            self._assign(name, value, text, how=f"`{brief(text)}`")
        if HIDDEN.search(text):
            self._fail(node, unanalysed_substitution(text))
        elif text.startswith("${!"):
            self._fail(node, f"`{brief(text)}` expands a variable named by another value")
        elif "@P" in text:
            self._fail(node, f"`{brief(text)}` expands a value as a prompt, which can run commands")
        else:
            # `${a[i]}` and `${v:off:len}` evaluate arithmetic; `${x:-word}` does not.
            name_end = 2
            while name_end < len(text) and (text[name_end].isalnum() or text[name_end] == "_"):
                name_end += 1
            tail = text[name_end:-1]
            if tail.startswith("[") and tail[1:2] not in ("@", "*"):
                self._arithmetic_names(node, tail[1 : tail.find("]") if "]" in tail else len(tail)])
            elif tail.startswith(":") and tail[1:2] not in ("-", "=", "?", "+"):
                self._arithmetic_names(node, tail[1:])

    def _heredoc(self, node: Node) -> None:
        """An unquoted here-document's body is expanded: substitutions tree-sitter left as text run."""
        start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
        if start is None or any(q in self._slice(start.start_byte, start.end_byte) for q in "'\"\\"):
            return
        for body in node.named_children:
            if body.type == "heredoc_body":
                text = self._slice(body.start_byte, body.end_byte)
                if HIDDEN.search(text):
                    self._fail(body, "a here-document holds a command substitution that could not be analysed")

    def _leaf(self, node: Node) -> None:
        text = self._slice(node.start_byte, node.end_byte)
        if HIDDEN.search(text):
            self._fail(node, unanalysed_substitution(text))

    def _for_values(self, node: Node) -> None:
        """`for NAME in WORDS` and `select NAME in WORDS`: NAME is assigned each word (or the
        positional parameters, not known here, when there is no `in`)."""
        values = [evaluate(child, self.known, source=self.source) for child in node.children_by_field_name("value")]
        self._check_paths(values, skip_first=False)
        variable = node.child_by_field_name("variable")
        if variable is None:
            return
        name = self._slice(variable.start_byte, variable.end_byte)
        text = self._slice(node.start_byte, (node.child_by_field_name("body") or node).start_byte).rstrip()
        for value in [word.value for word in values] if values else [None]:
            self._assign(name, value, text, how="the loop")

    def _assign(self, name: str, value: str | None, text: str, *, how: str) -> None:
        """An assignment by any route but `NAME=value` (loops, `${NAME:=word}`, builtins): its value
        is recorded, and a variable that loads code or is run as code is checked."""
        self.assigned.setdefault(name, []).append(value)
        if name in GLOB_VARIABLES:
            self.findings.globbing = name
        if name in CODE_VARIABLES:
            self._code_value(name, value, text, how)
        elif self.table.is_dangerous_env(name):
            self.findings.fail_closed(text, f"{how} {env_reason(name)}")

    def _code_value(self, name: str, value: str | None, text: str, how: str) -> None:
        """A value bash runs: a prompt (`PS4='$(…)'` runs on every traced command) or
        `PROMPT_COMMAND`. A literal one is analysed as the code it is; any other fails closed."""
        if value is None:
            if name == "PS4":
                self.unseen_prompt = True
            self.findings.fail_closed(text, f"{how} sets {name} to a value only known when it runs; bash runs it")
            return
        self._script(prompt_code(value) if name in PROMPTS else value, text, [f"{how} {env_reason(name)}"])

    def _resolve_deferred(self) -> None:
        """Operands made of variables, with every value the text gives them; arithmetic names;
        command names made of variables, named for the deny rules (split as bash splits words)."""
        if self.deferred_names:
            self._name_deferred_commands()
        if self.deferred:
            self._check_deferred_operands()
        if self.traced and self.unseen_prompt:
            self.findings.fail_closed(self.text, "xtrace expands PS4, which the line sets to a value only known then")
        for node, name in self.arithmetic:
            assigned = self.assigned.get(name)
            if assigned is None or not all(v is not None and _INTEGER.fullmatch(v) for v in assigned):
                self._fail(node, f"arithmetic over `{name}`, whose value is not known here, can run a command")

    def _name_deferred_commands(self) -> None:
        for word, args in self.deferred_names:
            tail = " ".join(arg for arg in args if arg is not None)
            for value, _ in self._values(word) or ():
                split = " ".join(value.split())
                if split:
                    base = posixpath.basename(split.split(" ", 1)[0])
                    for name in (split, base + split[len(split.split(" ", 1)[0]) :]):
                        self.findings.named[f"{name} {tail}" if tail else name] = None

    def _check_deferred_operands(self) -> None:
        for word, cwds in self.deferred:
            values = self._values(word)
            if values is not None:
                for value, glob in values:
                    if value and value[0] != "-":
                        self._path(value, glob=glob, cwds=cwds)
                continue
            # A variable the text sets from something not literal (`X=$(cat f)`) may hold any
            # path; one it never sets comes from the environment, and counts where it is path-like.
            assigned_unknown = any(None in self.assigned.get(name, ()) for name in word.variables or ())
            if assigned_unknown or path_like(word.shape):
                self.findings.fail_closed(word.raw, runtime_path(word.raw))

    def _values(self, word: Word) -> list[tuple[str, bool]] | None:
        """Every value `word` takes with the values the text assigns its variables (bounded), or None."""
        names = word.variables or ()
        choices: list[list[str]] = []
        for name in names:
            values = self.assigned.get(name)
            if not values or None in values:
                return None
            choices.append([v for v in values if v is not None])
        results: list[tuple[str, bool]] = []
        combinations: list[dict[str, str]] = [dict(self.known)]
        for name, options in zip(names, choices, strict=True):
            combinations = [{**known, name: option} for known in combinations for option in options]
            if len(combinations) > _MAX_COMBINATIONS:
                return None
        if word.node is None:  # a plain word holds no variable: never the case
            return None
        for known in combinations:
            again = evaluate(word.node, known, word.kind, source=self.source)
            if again.value is None:
                return None
            glob = again.glob or any(GLOB_CHARS.search(known[name]) for name in names)
            results.append((again.value, glob))
        return results


def _subscript_substitution(text: str) -> bool:
    """A `$(` or backtick between a `[` and its `]` (an array subscript, evaluated as arithmetic).
    One pass: a regex of the form `\\[[^]]*\\$\\(` would be quadratic on `[[[[...`."""
    inside = False
    for match in _BRACKETS_AND_SUBSTITUTIONS.finditer(text):
        token = match.group()
        if token == "[":
            inside = True
        elif token == "]":
            inside = False
        elif inside:
            return True
    return False


def evaluated_names(builtin: str, words: Sequence[Word]) -> str | None:
    """Why a builtin that takes variable names may run a command through one: a name with an array
    subscript holding a substitution (`read 'a[$(cmd)]'`, `test -v`, `printf -v`, `declare`), or a
    name only known when it runs. None when every name is a plain literal."""
    spec = NAME_BUILTINS.get(builtin)
    if spec is None:
        return None
    name_options, value_options, operands = spec
    expect: str | None = None  # "name" or "value": what the next word is
    options_done = False
    for word in words:
        value = word.value
        if value is not None and _subscript_substitution(value):
            return f"`{builtin}` evaluates the array subscript of `{brief(value)}`, which runs a command"
        if expect is not None:
            if expect == "name" and value is None:
                return f"`{builtin}` takes a variable name that is only known when it runs"
            expect = None
            continue
        if value is not None and not options_done and len(value) > 1 and value[0] == "-":
            if value == "--":
                options_done = True
                continue
            for position in range(1, len(value)):
                option = "-" + value[position]
                if option in name_options or option in value_options:
                    if position + 1 == len(value):
                        expect = "name" if option in name_options else "value"
                    break
            continue
        if operands and value is None:
            return f"`{builtin}` takes a variable name that is only known when it runs"
    return None
