"""Bash command text → permission requests, by walking the tree-sitter-bash syntax tree.

Every command node counts, wherever it sits: lists, pipelines, subshells, groups, `$( )`,
backticks, process substitution, function bodies, loops and conditionals. Each gives a `bash`
pattern (its text with its redirections, as OpenCode) plus its quote-removed form, and an
`always` pattern (arity prefix + ` *`). Wrappers (wrappers.yaml) are peeled and the inner command
checked too; strings run by `bash -c`, `eval`, `watch` and heredocs fed to a shell are parsed
again. Every argument and redirection target that reaches outside the project asks
`external_directory`. Whatever cannot be known before it runs fails closed: a request with floor
`ask` and a reason the person and the model can read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from . import limits
from .analysis_commands import CommandChecks, inert_builtin
from .analysis_paths import redefines_cd, sets_pwd
from .facts import INERT, program_facts
from .findings import Findings
from .operands import not_paths
from .parser import INLINE_BYTES, parse
from .paths import PathScope
from .plain_line import Command, Pipeline, Statement, read_plain
from .wrappers import WrapperTable
from .writes import names_output

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["Findings", "analyze_text"]

# Node types that hold no command and no redirect: the walk does not descend into them.
_LEAVES = frozenset(
    (
        "word",
        "number",
        "raw_string",
        "ansi_c_string",
        "string_content",
        "variable_name",
        "special_variable_name",
        "comment",
        "file_descriptor",
        "heredoc_start",
        "heredoc_end",
        "heredoc_content",
        "test_operator",
        "regex",
        "extglob_pattern",
    )
)
_NESTING = frozenset(
    ("command_substitution", "process_substitution", "subshell", "compound_statement", "function_definition")
)
_BINARY = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# Leaves whose text bash still expands (quoted and literal leaves are not among them).
_EXPANDED_LEAVES = frozenset(("word", "string_content", "regex", "extglob_pattern"))
_CUT_COMMAND_BYTES = 4_096  # of a command cut short by the node budget, judged by the rules


def analyze_text(
    text: str,
    *,
    scope: PathScope,
    table: WrapperTable,
    findings: Findings,
    cwd: str | None | tuple[str | None, ...],
    depth: int = 0,
    inherited: tuple[str, ...] = (),
    known: Mapping[str, str] | None = None,
    keyword: bool = False,
) -> None:
    """Add the requests of `text` to `findings`.

    `cwd` is the working directory, or the directories it may be (None: not known). `inherited`
    holds reasons that apply to every command inside (a script run by a shell whose environment
    loads code); `known` the variables whose values the text inherits; `keyword`, whether the text
    runs with `set -k` on.
    """
    cwds = cwd if isinstance(cwd, tuple) else (cwd,)
    if not findings.line:
        findings.line = text
    _Analysis(scope, table, findings, cwds, depth, inherited, known, keyword).run(text)
    if depth == 0 and "\\\n" in text:
        # bash joins a backslash-newline before it reads words (`r\<newline>m` is `rm`); tree-sitter
        # splits there. Both readings are analysed: the union is never weaker than either.
        joined = text.replace("\\\n", "")
        _Analysis(scope, table, findings, cwds, depth, inherited, known, keyword).run(joined)


class _Restore:
    """A walk entry that puts the working directories back when a subshell's subtree is done, or
    (`chain`) widens them when an `&&` list is done: it may have stopped after any of its commands."""

    __slots__ = ("chain", "cwds", "merge")

    def __init__(self, cwds: tuple[str | None, ...], *, merge: bool, chain: bool = False) -> None:
        self.cwds = cwds
        self.merge = merge
        self.chain = chain


# Subtrees that run in a subshell: a `cd` inside ends with them.
_SUBSHELLS = frozenset(("subshell", "command_substitution", "process_substitution"))


class _Analysis(CommandChecks):
    """One bash text walked node by node, in document order."""

    __slots__ = ("visited",)

    visited: int
    """Nodes visited so far (the words of a command count before they are read)."""

    def run(self, text: str) -> None:
        self.text = text
        plain = _read_plain(text) if self.depth == 0 and not self.inherited else None
        if plain is not None and self._plain_heads(plain):
            self.source = text.encode()  # printable ASCII: nothing binary, far below every size limit
            if "(" in text or "function" in text or "PWD" in text:  # all `_start` reads
                self._start(text)
            else:
                self._set_pwd()
            self._plain_line(plain)
            if self.deferred or self.deferred_names or self.arithmetic or self.traced:
                self._resolve_deferred()  # all it reads
            return
        if _BINARY.search(text):
            self.findings.fail_closed(text, "the command contains binary or invalid characters")
        try:
            self.source = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            self.source = text.encode("utf-8", "replace")
        if len(self.source) > limits.MAX_INPUT_BYTES:
            self.findings.fail_closed(text, f"the command is longer than {limits.MAX_INPUT_BYTES} bytes")
            return
        tree = parse(self.source, self.findings.deadline)
        if tree is None or (len(self.source) > INLINE_BYTES and self.findings.out_of_time()):
            self._out_of_time()  # a long text whose parse spent the budget is not walked at all
            return
        root = tree.root_node
        self._start(text)
        self._walk(root)
        self._resolve_deferred()
        if root.has_error:
            where = ""
            if self.first_error is not None:
                row, column = self.first_error.start_point
                where = f" (syntax error at line {row + 1}, column {column + 1})"
            self.findings.fail_closed(text, f"the command could not be parsed{where}")

    def _start(self, text: str) -> None:
        """What the whole text says before any command of it is read: a `cd` function, a `PWD` of its own."""
        if redefines_cd(text):
            self.findings.cd_redefined = True
        if sets_pwd(text):
            self.pwd_known = False
            self.known.pop("PWD", None)  # nor what an outer text took it for
        self._set_pwd()

    def _walk(self, root: Node) -> None:
        """Visit every node in document order (so `cd` affects what follows); stops at a limit."""
        # Entries carry the parent: tree-sitter builds a new object for every `.parent` access.
        stack: list[tuple[Node | _Restore, Node | None, int]] = [(root, None, 0)]
        self.visited = 0
        while stack:
            entry, parent, nesting = stack.pop()
            if isinstance(entry, _Restore):
                self._restore(entry)
                continue
            self.visited += 1
            if (not self.visited & 255 or self.visited > limits.MAX_NODES) and self._spent():
                return
            kind = entry.type
            children = self._visit(entry, kind, parent)
            if children is None:
                return
            if (children or kind in _NESTING) and not self._descend(stack, entry, kind, children, nesting):
                return

    def _spent(self) -> bool:
        """Whether the time or node budget is spent (then the whole text has failed closed)."""
        if not self.visited & 255 and self.findings.out_of_time():
            self._out_of_time()
            return True
        if self.visited > limits.MAX_NODES:
            self._too_large(None)
            return True
        return False

    def _visit(self, node: Node, kind: str, parent: Node | None) -> Sequence[Node] | None:
        """Check one node of type `kind`; returns the children that may hold more (None: the node
        budget is spent)."""
        if kind == "command":
            # Plain words hold no commands; only the rest of a command's children are walked. Its
            # words count against the budget too (before they are read), so a huge flat command
            # cannot hide.
            self.visited += node.named_child_count
            if self.visited > limits.MAX_NODES:
                self._too_large(node)
                return None
            return self._command(node, parent)
        check = _CHECKS.get(kind)
        if check is not None:
            check(self, node, parent)
        return () if kind in _LEAVES else node.named_children

    def _descend(
        self,
        stack: list[tuple[Node | _Restore, Node | None, int]],
        node: Node,
        kind: str,
        children: Sequence[Node],
        nesting: int,
    ) -> bool:
        """Push the children of `node` (of type `kind`), with the entries that restore the working
        directories after them; False when the nesting limit is reached (the whole text has failed
        closed)."""
        if kind in _NESTING:
            nesting += 1
            if nesting > limits.MAX_NESTING:
                self.findings.fail_closed(self.text, f"the command nests deeper than {limits.MAX_NESTING} levels")
                return False
        if kind == "list" and "&&" in [child.type for child in node.children]:
            stack.append((_Restore(self.cwds, merge=True, chain=True), None, nesting))
            self.chains.append({})
        if kind in _SUBSHELLS:
            stack.append((_Restore(self.cwds, merge=False), None, nesting))
        elif kind in ("function_definition", "pipeline"):
            # A function body runs when called (maybe never); each part of a pipeline is a subshell.
            stack.append((_Restore(self.cwds, merge=kind == "function_definition"), None, nesting))
        if kind != "pipeline":
            stack.extend([(child, node, nesting) for child in reversed(children)])
            return True
        for index in range(len(children) - 1, -1, -1):
            stack.append((children[index], node, nesting))
            if index:
                stack.append((_Restore(self.cwds, merge=False), None, nesting))
        return True

    def _plain_heads(self, line: list[Statement]) -> bool:
        """Whether every command of a line read without its tree (`plain_line`) is one whose checks need
        nothing but its words: no assignment, keyword, statement, builtin, wrapper or path as its name
        (`cd` is read here too). Decided before anything is recorded, so the tree can still read the line."""
        if len(line) == 1 and len(line[0]) == 1 and len(line[0][0][1]) == 1:  # one command, the common line
            return self._plain_head(line[0][0][1][0])
        for statement in line:
            for _, pipeline in statement:
                for command in pipeline:
                    if not self._plain_head(command):
                        return False
        return True

    def _plain_head(self, command: Command) -> bool:
        _, words, values = command
        head = words[0].raw
        if words[0].kind != "word" or words[-1].raw == "==":
            return False  # tree-sitter cannot parse `ls ==`: the tree walk fails closed
        facts = self.table.facts.get(head) or program_facts(self.table, head)
        if not facts.plain_name:
            return False  # an assignment, a keyword, a statement, `- a=b x`, `a@ rm x` (`plain_name`)
        if facts.plain or head == "cd":
            return True
        if facts.builtin or "/" in head or head in ("pushd", "popd"):
            return False
        if not facts.may_wrap:
            return True
        return self.table.match(values, 0) is None and not self._wraps_past_options(head, values)

    def _plain_line(self, line: list[Statement]) -> None:
        """The line's statements in order, as `_walk` visits their tree (`plain_line` gives its shape)."""
        if len(line) == 1 and len(line[0]) == 1 and len(line[0][0][1]) == 1:  # one command, the common line
            self._plain_command(line[0][0][1][0], then=False, final=True)
            return
        final = line[-1][-1][1]  # the line's last pipeline
        for statement in line:
            entry = self.cwds  # what each `&&` list of the statement restores (`_descend`)
            for operator, _ in statement:
                if operator == "&&":
                    self.chains.append({})
            then = len(statement) > 1 and statement[1][0] == "&&"  # `_then`: the first command, before `&&`
            for operator, pipeline in statement:
                self._plain_pipeline(pipeline, then=then, final=pipeline is final)
                then = False
                if operator == "&&":
                    self._end_chain(entry)

    def _plain_pipeline(self, pipeline: Pipeline, *, then: bool, final: bool) -> None:
        """One pipeline; each part of a pipeline of several runs in a subshell (`_descend`)."""
        if len(pipeline) == 1:
            self._plain_command(pipeline[0], then=then, final=final)
            return
        entry = self.cwds
        for command in pipeline:
            self._plain_command(command, then=False, final=False)
            if self.cwds is not entry or self.chains:  # else `_set_cwds(entry)` changes nothing
                self._set_cwds(entry)  # `_restore` of the `_Restore(entry, merge=False)` after each part

    def _plain_command(self, command: Command, *, then: bool, final: bool) -> None:
        """One command of plain words, checked as `_command` and `_segment` check it from its tree:
        `then`, `&&` follows it in its list; `final`, the line ends with it (`_last_command`)."""
        text, words, values = command
        head = words[0].raw
        if head == "cd" and final and self.depth == 0 and not self.findings.trapped:
            return  # `_final_cd`: where the line's last `cd` goes changes nothing
        if len(words) > 1:  # the words `_check_paths` reads
            self._check_paths(words, text=not_paths(head, values[1:]))
        facts = self.table.facts.get(head) or program_facts(self.table, head)
        own: list[str] = []
        if facts.plain:
            self._emit(words, values, 0, text, "", own)
            if len(values) > 1 and names_output(values):  # all `_writes` reads of a program without a row
                self._writes(values, text)
            return
        if head == "cd":
            self._cd(words, 0, len(words), text, name=head, certain=then)
            return
        if head in _SHELL_STATE:
            self._shell_state(head, values[1:], text)
        if head in INERT and inert_builtin(head, values):
            return
        self._emit(words, values, 0, text, "", own)
        if facts.described:
            self._unseen(None, None, words, values, 0, len(words), text, own, facts)
        if facts.interpreter:
            self._interpreted(head, values[1:], text)
        self._writes(values, text)

    def _assignment(self, node: Node, parent: Node | None) -> None:
        self._record_assignment(node)
        self._standalone_assignment(node, parent)
        self._assigned_subscript(node)

    def _compound(self, node: Node) -> None:
        if node.child_count and node.children[0].type == "((":
            self._arithmetic(node)

    def _error(self, node: Node) -> None:
        if self.first_error is None:
            self.first_error = node

    def _restore(self, entry: _Restore) -> None:
        if entry.chain:
            self._end_chain(entry.cwds)
            return
        self._set_cwds((*entry.cwds, *self.cwds) if entry.merge else entry.cwds)

    def _end_chain(self, entry: tuple[str | None, ...]) -> None:
        """An `&&` list is done: it may have stopped after any of its commands, so the working directory
        is any it was in (`entry`: where the list began)."""
        seen = tuple(self.chains.pop())
        self._set_cwds((*entry, *seen, *self.cwds))

    def _script(self, script: str, text: str, reasons: list[str]) -> None:
        if self.depth + 1 > limits.MAX_SCRIPT_DEPTH:
            self.findings.fail_closed(
                text, f"commands are nested in strings more than {limits.MAX_SCRIPT_DEPTH} levels deep"
            )
            return
        analyze_text(
            script,
            scope=self.scope,
            table=self.table,
            findings=self.findings,
            cwd=self.cwds,
            depth=self.depth + 1,
            inherited=tuple(reasons),
            known=self.known,
            keyword=self.keyword,  # `eval` runs in this shell; a child shell may inherit it (SHELLOPTS)
        )

    def _too_large(self, command: Node | None) -> None:
        """The node budget is spent: the whole text fails closed, and so does the command being read
        (as far as the budget let it be read), so a rule that denies that command denies the line."""
        reason = f"the command is too large to analyze (over {limits.MAX_NODES} syntax nodes)"
        self.findings.fail_closed(self.text, reason)
        if command is not None:
            end = min(command.end_byte, command.start_byte + _CUT_COMMAND_BYTES)
            self.findings.fail_closed(self._slice(command.start_byte, end), reason)

    def _out_of_time(self) -> None:
        budget = round(limits.TIME_BUDGET * 1000)
        self.findings.fail_closed(self.text, f"the command could not be analysed within its time budget ({budget} ms)")


# What the walk checks at each kind of node besides commands: the walk table.
_CHECKS: Mapping[str, Callable[[_Analysis, Node, Node | None], None]] = MappingProxyType(
    {
        "file_redirect": _Analysis._redirect,
        "declaration_command": _Analysis._declaration,
        "unset_command": _Analysis._declaration,
        "variable_assignment": _Analysis._assignment,
        "arithmetic_expansion": lambda analysis, node, _: analysis._arithmetic(node),
        "c_style_for_statement": lambda analysis, node, _: analysis._arithmetic(node),
        "compound_statement": lambda analysis, node, _: analysis._compound(node),
        "test_command": lambda analysis, node, _: analysis._test(node),
        "expansion": lambda analysis, node, _: analysis._expansion(node),
        "heredoc_redirect": lambda analysis, node, _: analysis._heredoc(node),
        "for_statement": lambda analysis, node, _: analysis._for_values(node),
        "ERROR": lambda analysis, node, _: analysis._error(node),
        **dict.fromkeys(_EXPANDED_LEAVES, lambda analysis, node, _: analysis._leaf(node)),
    }
)


_read_plain = read_plain  # `tests/test_bash_fast_paths.py` turns the reading without the tree off here
# The names `_shell_state` reads (a name read without the tree holds no `/`).
_SHELL_STATE = frozenset(("trap", "set", "shopt", "bash", "sh"))
