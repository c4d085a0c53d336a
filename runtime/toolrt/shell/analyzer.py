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

import os
import posixpath
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from ..permissions.model import UNNAMED, PermissionRequest
from . import limits
from .arity import prefix
from .braces import expand_braces
from .globs import GLOB_OPTIONS, GLOB_VARIABLES, glob_options, glob_paths
from .named import named_commands
from .operands import not_paths, operand_programs
from .parser import parse
from .paths import PathScope, fs_safe, path_candidate
from .programs import unseen_code
from .python_code import inert_python, inline_code, stdin_code
from .unwrap import unwrap
from .variables import CODE_VARIABLES, PROMPTS, assigned_names, prompt_code, traces
from .words import Word, alternative, evaluate
from .wrappers import WrapperTable
from .writes import copies, written

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
_PLAIN_WORDS = frozenset(("word", "number", "raw_string"))
_REDIRECTS = frozenset(("file_redirect", "heredoc_redirect", "herestring_redirect"))
_BINARY = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
_SUBSTITUTION = re.compile(r"\$\((?!\()|`")  # `$(` or a backtick, not the `$((` of arithmetic
# What bash expands inside text tree-sitter leaves as one leaf: `$(`, backticks, `$[`.
_HIDDEN = re.compile(r"\$[(\[]|`")
# Leaves whose text bash still expands (quoted and literal leaves are not among them).
_EXPANDED_LEAVES = frozenset(("word", "string_content", "regex", "extglob_pattern"))
# Names in arithmetic text (not the letters of `0x1f`, `16#ff` or a `-eq` operator).
_ARITHMETIC_NAME = re.compile(r"(?<![0-9A-Za-z_#-])[A-Za-z_][A-Za-z0-9_]*")
_ARITHMETIC_TEST = re.compile(r"\s-(?:eq|ne|lt|le|gt|ge)\s|\s-v\s")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_ARITHMETIC_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)[ \t]*=(?!=)[ \t]*([+-]?[0-9]+)\b")
_GLOB_CHARS = re.compile(r"[*?\[]")
_EXTGLOB = re.compile(r"[?*+@!]\(")  # `@(a|b)`, `!(x)`: patterns once `extglob` is on
_MAX_COMBINATIONS = 16
_BRACKETS_AND_SUBSTITUTIONS = re.compile(r"[\[\]`]|\$\(")
_FD_DUPLICATION = frozenset((">&", "<&"))
_XARGS_REPLACE = frozenset(("-I", "-i", "--replace"))
_UNKNOWN = "\0unknown"  # not yet computed; NUL never occurs in a path
_MAX_COPIED = 2_000  # names below a copied directory that are checked one by one
_MAX_WALKED = 20_000  # entries below the directories a symlink-following program walks
_CUT_COMMAND_BYTES = 4_096  # of a command cut short by the node budget, judged by the rules
MAX_READ_PATHS = 1_024
"""Paths named by one line that are checked against the `read` rules; past this the rest are not."""


@dataclass(slots=True)
class Findings:
    """What one analysis collected; `requests()` turns it into the call's permission requests."""

    patterns: dict[str, None] = field(default_factory=dict)
    always: dict[str, None] = field(default_factory=dict)
    directories: dict[str, None] = field(default_factory=dict)
    unseen: dict[tuple[tuple[str, ...], str], None] = field(default_factory=dict)
    """(patterns, reason) of each part that could not be seen."""
    line: str = ""
    """The whole command line: the commands it visibly names are checked against deny rules
    whenever part of it could not be seen."""
    named: dict[str, None] = field(default_factory=dict)
    """More commands the line may run, found another way (what a glob command name matches)."""
    unnamed: bool = False
    """Some command the line may run could not be listed (a glob matching too many programs)."""
    expand_globs: bool = True
    """Resolve globs against the file system; False for `check` and `tests:` patterns."""
    deadline: float = field(default_factory=lambda: time.monotonic() + limits.TIME_BUDGET)
    written: dict[str, None] = field(default_factory=dict)
    """Absolute paths the commands write: redirect targets and written operands (writes.yaml)."""
    emitted: int = 0
    """Commands the line runs so far, in the order bash runs them (inline Python counts as inert only
    when nothing ran before it that could have written a module it imports)."""
    trapped: bool = False
    """Whether the line (or a script it runs) sets a trap: a line's final `cd` then still counts."""
    globbing: str | None = None
    """What changed how later globs match (`shopt -s nocaseglob`, `GLOBIGNORE`, `bash -O`), anywhere in
    the line or the scripts it runs (`eval 'shopt -s nocaseglob'; cat [L]NK/x`)."""
    read: dict[str, None] = field(default_factory=dict)
    """Absolute paths the line names as operands or redirects (bounded by `MAX_READ_PATHS`): the bash
    tool asks `read` for them, so a rule that denies reading a file binds `cat` as it binds `read`."""

    def fail_closed(self, text: str, reason: str) -> None:
        """Text the analyzer cannot see into: judged as the ruleset's fallback, at least ask, and
        denied when the line visibly names a command a rule denies."""
        self.unseen[((text,), reason)] = None

    def unseen_command(self, patterns: tuple[str, ...], reason: str) -> None:
        """A command the analyzer parsed but whose effect it cannot see (a loader variable)."""
        self.unseen[(patterns, reason)] = None

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def requests(self) -> tuple[PermissionRequest, ...]:
        """`external_directory` first (as dispatch checks it), then `bash`, then the unseen ones."""
        out: list[PermissionRequest] = []
        if self.directories:
            globs = tuple(posixpath.join(directory, "*") for directory in self.directories)
            out.append(PermissionRequest("external_directory", globs, globs))
        if self.patterns:
            out.append(PermissionRequest("bash", tuple(self.patterns), tuple(self.always)))
        named, complete = named_commands(self.line) if self.unseen else ((), True)
        complete = complete and not self.unnamed
        if self.named:
            named = tuple(dict.fromkeys((*named, *self.named)))
        for patterns, reason in self.unseen:
            if not complete:
                reason += "; the commands it may run could not all be checked against the rules"
            out.append(
                PermissionRequest(
                    "bash", patterns, (), floor=None if complete else "deny", reason=reason, opaque=True, named=named
                )
            )
        return tuple(out)


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
) -> None:
    """Add the requests of `text` to `findings`.

    `cwd` is the working directory, or the directories it may be (None: not known). `inherited`
    holds reasons that apply to every command inside (a script run by a shell whose environment
    loads code); `known` the variables whose values the text inherits.
    """
    cwds = cwd if isinstance(cwd, tuple) else (cwd,)
    if not findings.line:
        findings.line = text
    _Analysis(scope, table, findings, cwds, depth, inherited, known).run(text)
    if depth == 0 and "\\\n" in text:
        # bash joins a backslash-newline before it reads words (`r\<newline>m` is `rm`); tree-sitter
        # splits there. Both readings are analysed: the union is never weaker than either.
        joined = text.replace("\\\n", "")
        _Analysis(scope, table, findings, cwds, depth, inherited, known).run(joined)


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
_MAX_CWDS = 8
# Builtins that neither run anything nor write anything (with no redirection): no request at all.
_INERT = frozenset(("true", "false", ":", "set", "shopt"))
# Reserved words bash reads at a command's start. tree-sitter leaves some compound commands unparsed
# (`time { ...; }`, `! { ...; }`, `coproc NAME { ...; }`) and offers the reserved word as a command name.
_RESERVED = frozenset(
    ("{", "}", "!", "if", "then", "elif", "else", "fi", "do", "done", "case", "esac", "while", "until", "for",
     "select", "function", "in", "[[", "]]")
)  # fmt: skip
# Builtins that take variable names, where a name with an array subscript (`a[$(cmd)]`) is evaluated
# as arithmetic and runs the command: builtin → (options whose value is a name, options that take
# another value, whether the operands are names).
_NAME_BUILTINS: Mapping[str, tuple[frozenset[str], frozenset[str], bool]] = MappingProxyType(
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


class _Analysis:
    __slots__ = (
        "arithmetic",
        "assigned",
        "chains",
        "cwd_real",
        "cwds",
        "deferred",
        "deferred_names",
        "written",
        "depth",
        "findings",
        "first_error",
        "inherited",
        "known",
        "scope",
        "source",
        "table",
        "text",
        "traced",
        "unseen_prompt",
    )

    def __init__(
        self,
        scope: PathScope,
        table: WrapperTable,
        findings: Findings,
        cwds: tuple[str | None, ...],
        depth: int,
        inherited: tuple[str, ...],
        known: Mapping[str, str] | None,
    ) -> None:
        self.scope = scope
        self.table = table
        self.findings = findings
        self.cwds = cwds
        self.cwd_real: str | None = _UNKNOWN
        self.known: dict[str, str] = dict(known) if known is not None else {"HOME": scope.home}
        self.assigned: dict[str, list[str | None]] = {}
        """Every value the text assigns to each variable (None: not literal), wherever it sits."""
        self.deferred: list[tuple[Word, tuple[str | None, ...]]] = []
        """Operands holding variables, checked once every assignment of the text is known."""
        self.deferred_names: list[tuple[Word, list[str | None]]] = []
        """Command names made of variables (`$a$b`), named for the deny rules with their values."""
        self.written: set[str] = set()
        """Files the text writes through redirections (a script it then runs is not seen)."""
        self.arithmetic: list[tuple[Node, str]] = []
        """Names arithmetic evaluates, checked at the end for the same reason."""
        self.depth = depth
        self.inherited = inherited
        self.source = b""
        self.text = ""
        self.first_error: Node | None = None
        self.chains: list[dict[str | None, None]] = []
        """For each `&&` list being walked, every working directory set inside it so far."""
        self.traced = False
        """Whether the text turns on xtrace (`set -x`), which expands `PS4` before every command."""
        self.unseen_prompt = False
        """Whether the text gives `PS4` a value only known when it runs."""

    # -- driver ---------------------------------------------------------------------------------

    def run(self, text: str) -> None:
        self.text = text
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
        if tree is None:
            self._out_of_time()
            return
        root = tree.root_node
        self._set_pwd()
        self._walk(root)
        self._resolve_deferred()
        if root.has_error:
            where = ""
            if self.first_error is not None:
                row, column = self.first_error.start_point
                where = f" (syntax error at line {row + 1}, column {column + 1})"
            self.findings.fail_closed(text, f"the command could not be parsed{where}")

    def _walk(self, root: Node) -> None:
        """Visit every node in document order (so `cd` affects what follows); stops at a limit."""
        # Entries carry the parent: tree-sitter builds a new object for every `.parent` access.
        stack: list[tuple[Node | _Restore, Node | None, int]] = [(root, None, 0)]
        visited = 0
        while stack:
            entry, parent, nesting = stack.pop()
            if isinstance(entry, _Restore):
                self._restore(entry)
                continue
            node = entry
            visited += 1
            if not visited & 255 and self.findings.out_of_time():
                self._out_of_time()
                return
            if visited > limits.MAX_NODES:
                self._too_large(None)
                return
            kind = node.type
            if kind == "command":
                # Plain words hold no commands; only the rest of a command's children are walked.
                # Its words count against the budget too (before they are read), so a huge flat
                # command cannot hide.
                visited += node.named_child_count
                if visited > limits.MAX_NODES:
                    self._too_large(node)
                    return
                children = self._command(node, parent)
            else:
                if kind == "file_redirect":
                    self._redirect(node, parent)
                elif kind == "declaration_command" or kind == "unset_command":
                    self._declaration(node, parent)
                elif kind == "variable_assignment":
                    self._record_assignment(node)
                    self._standalone_assignment(node, parent)
                    self._assigned_subscript(node)
                elif kind == "arithmetic_expansion" or kind == "c_style_for_statement":
                    self._arithmetic(node)
                elif kind == "compound_statement" and node.child_count and node.children[0].type == "((":
                    self._arithmetic(node)
                elif kind == "test_command":
                    self._test(node)
                elif kind == "expansion":
                    self._expansion(node)
                elif kind == "heredoc_redirect":
                    self._heredoc(node)
                elif kind in _EXPANDED_LEAVES:
                    self._leaf(node)
                elif kind == "for_statement":
                    self._for_values(node)
                elif kind == "ERROR":
                    if self.first_error is None:
                        self.first_error = node
                if kind in _LEAVES:
                    continue
                children = node.named_children
            if kind in _NESTING:
                nesting += 1
                if nesting > limits.MAX_NESTING:
                    self.findings.fail_closed(self.text, f"the command nests deeper than {limits.MAX_NESTING} levels")
                    return
            if kind == "list" and any(child.type == "&&" for child in node.children):
                stack.append((_Restore(self.cwds, merge=True, chain=True), None, nesting))
                self.chains.append({})
            if kind in _SUBSHELLS:
                stack.append((_Restore(self.cwds, merge=False), None, nesting))
            elif kind == "function_definition" or kind == "pipeline":
                # A function body runs when called (maybe never); each part of a pipeline is a subshell.
                stack.append((_Restore(self.cwds, merge=kind == "function_definition"), None, nesting))
            for index in range(len(children) - 1, -1, -1):
                stack.append((children[index], node, nesting))
                if kind == "pipeline" and index:
                    stack.append((_Restore(self.cwds, merge=False), None, nesting))

    # -- commands -------------------------------------------------------------------------------

    def _command(self, node: Node, parent: Node | None) -> list[Node]:
        """Record the command's requests; returns the children that may hold more commands."""
        assignments: list[Node] = []
        name: Node | None = None
        words: list[Word] = []
        nested: list[Node] = []
        start = -1
        globbed = False
        for child in node.named_children:
            kind = child.type
            if name is None:
                if kind == "command_name":
                    name = child
                    if start < 0:
                        start = child.start_byte
                    name_word = child.named_children[0] if child.named_child_count == 1 else child
                    word = evaluate(name_word, self.known, source=self.source)
                    if word.kind not in _PLAIN_WORDS:
                        nested.append(child)
                    elif word.kind == "word":
                        self._hidden_in_word(name_word, word.raw)
                    globbed = globbed or word.glob
                    words.append(word)
                    continue
                if kind == "variable_assignment":
                    assignments.append(child)
                elif kind in _REDIRECTS and start < 0:
                    start = child.start_byte
            elif kind not in _REDIRECTS:
                word = evaluate(child, self.known, kind, source=self.source)
                if kind == "word":
                    self._hidden_in_word(child, word.raw)
                globbed = globbed or word.glob
                words.append(word)
            if kind not in _PLAIN_WORDS:
                nested.append(child)
        redirected = parent is not None and parent.type == "redirected_statement"
        end = parent.end_byte if redirected and parent is not None else node.end_byte
        if name is None:
            # Only redirections (`> file`): it still writes, so it still asks.
            if start >= 0:
                self.findings.patterns[self._slice(start, end)] = None
            return nested
        if globbed and any(word.glob and word.value is not None and "{" in word.value for word in words):
            expanded = self._expand_words(words)
            if expanded is None:
                self.findings.fail_closed(self._slice(start, end), "a brace expansion makes too many words to check")
                return nested
            words = expanded
        reasons = list(self.inherited)
        for assignment in assignments:
            reasons.extend(self._assignment_reasons(assignment))
        if (
            words[0].value == "cd"
            and self.depth == 0  # a script's last `cd` moves the shell that runs it (`eval 'cd ..'; cat x`)
            and not self.findings.trapped  # an EXIT trap set before it runs after it, in the new directory
            and not reasons
            and not redirected
            and all(word.value is not None for word in words)
            and self._last_command(node, parent)
        ):
            return nested  # the line ends with it: where it goes changes nothing, and nothing runs there
        rest = self._slice(node.end_byte, end) if redirected else ""
        program = posixpath.basename(words[0].value) if words[0].value else ""
        text = not_paths(program, [word.value for word in words[1:]]) if program in operand_programs() else None
        self._check_paths(words, text=text)
        self._segments(node, parent, words, start, end, rest, reasons)
        return nested

    def _hidden_in_word(self, node: Node, raw: str) -> None:
        """`\\`rm\\`` inside backticks: bash unescapes and runs it; tree-sitter sees a plain word."""
        if "`" in raw or "$(" in raw or "$[" in raw:
            self._fail(node, f"`{_brief(raw)}` holds a command substitution that could not be analysed")

    def _expand_words(self, words: list[Word]) -> list[Word] | None:
        """Brace expansion makes words (`{rm,-rf,x}` is three): bash does it before anything else."""
        out: list[Word] = []
        for word in words:
            value = word.value
            if not word.glob or value is None or "{" not in value:
                out.append(word)
                continue
            options = expand_braces(value)
            if options is None:
                return None
            for option in options:
                glob = _GLOB_CHARS.search(option) is not None
                out.append(word._replace(value=option, prefix=option, glob=glob, shape=option))
        return out

    def _segments(
        self,
        node: Node,
        parent: Node | None,
        words: list[Word],
        start: int,
        end: int,
        rest: str,
        reasons: list[str],
    ) -> None:
        """The command and each command it wraps, outermost first."""
        values = [word.value for word in words]
        count = len(words)
        work: list[tuple[int, int, list[str], str]] = [(0, count, reasons, "")]
        while work:
            first, last, inherited, feeder = work.pop(0)
            text = self._slice(
                start if first == 0 else words[first].node.start_byte,
                end if last == count else words[last - 1].node.end_byte,
            )
            head = words[first]
            if head.value is None or head.glob:
                if head.value is not None:
                    self._glob_names(head.value, values[first + 1 : last])
                elif head.variables:
                    self.deferred_names.append((head, values[first + 1 : last]))
                self.findings.fail_closed(text, f"the command name `{_brief(head.raw)}` is only known when it runs")
                continue
            if head.value in _RESERVED:
                self.findings.fail_closed(
                    text, f"`{head.value}` starts a compound command the parser did not read (after time, ! or coproc)"
                )
                continue
            own = list(inherited)
            redirects = rest if last == count else ""
            if head.value in ("cd", "pushd", "popd"):  # the builtins; `/x/cd` is some program
                self._cd(words, first, last, text, name=head.value, certain=first == 0 and _then(node, parent))
                if own:
                    self.findings.unseen_command((text,), "; ".join(dict.fromkeys(own)))
                elif redirects:
                    self.findings.patterns[text + redirects] = None
                continue
            if head.value == "trap":
                self.findings.trapped = True
            if head.value in ("set", "shopt") and traces(head.value, values[first + 1 : last]):
                self.traced = True
            if head.value == "shopt" and (changed := glob_options(values[first + 1 : last])) is not None:
                self.findings.globbing = f"`shopt {_brief(changed)}`"
            elif head.value.rpartition("/")[2] in ("bash", "sh") and _shell_glob_option(values[first + 1 : last]):
                self.findings.globbing = f"`{_brief(text)}`"
            if head.value in _INERT and not own and not redirects:
                # `true`, `:`, `set -e`, `shopt -s nullglob`: nothing runs, nothing is written.
                if head.value != "shopt" or all(
                    w.value is not None and "expand_aliases" not in w.value for w in words[first:last]
                ):
                    continue
            wrapper = self.table.match(values, first)
            if feeder and wrapper is not None:
                self.findings.fail_closed(
                    text, f"`{feeder}` adds words to `{head.value}` when it runs, which may make them a command"
                )
            inner = unwrap(wrapper, values, first, last) if wrapper is not None else None
            if inner is not None:
                for variable in inner.assignments:
                    if self.table.is_dangerous_env(variable):
                        own.append(_env_reason(variable))
            self._emit(words, first, last, text, rest if last == count else "", own)
            self._unseen(node, parent, words, first, last, text)
            if wrapper is not None and wrapper.kind == "shell" and inner is not None and not inner.scripts:
                self._script_file(words, first, last, text)
            self._writes(values[first:last], text, fed=feeder == "xargs")
            if inner is None:
                continue
            if inner.dynamic is not None:
                self.findings.fail_closed(text, inner.dynamic)
            fed = " ".join(wrapper.name) if wrapper is not None and wrapper.feeds else ""
            if (
                fed == "xargs"
                and inner.commands
                and any(_has_option(value, _XARGS_REPLACE) for value in values[first + 1 : inner.commands[0][0]])
            ):
                fed = "xargs -I"  # it puts its input where `{}` stands, and appends nothing
            for inner_first, inner_last in inner.commands:
                work.append((inner_first, inner_last, own, fed))
            if wrapper is not None and wrapper.dialect != "bash" and (inner.scripts or inner.reads_stdin):
                self.findings.fail_closed(text, f"`{head.value}` runs text in a language other than bash's")
                continue
            for script in inner.scripts:
                self._script(script, text, own)
            if inner.reads_stdin:
                self._shell_input(node, parent, text, own)

    def _glob_names(self, pattern: str, args: list[str | None]) -> None:
        """The programs a glob in command position matches now, named for the deny rules."""
        tail = " ".join(arg for arg in args if arg is not None)
        if not self.findings.expand_globs:
            return
        for cwd in self.cwds:
            matches = glob_paths(pattern, cwd)
            if matches is None:
                self.findings.unnamed = True
                return
            for match in matches:
                name = posixpath.basename(match)
                self.findings.named[f"{name} {tail}" if tail else name] = None

    def _unseen(self, node: Node, parent: Node | None, words: list[Word], first: int, last: int, text: str) -> None:
        """What this command does that the analyzer cannot see: the command table, code in another
        language, a configured alias, a script fed or written by the line itself."""
        name = words[first].value or ""
        base = name.rpartition("/")[2]
        args = [word.value for word in words[first + 1 : last]]
        reason = self.table.unseen.get(base)
        if reason is not None:
            self.findings.fail_closed(text, reason)
        elif base == "shopt" and "expand_aliases" in args:
            self.findings.fail_closed(text, "shopt -s expand_aliases lets an alias make a name run other commands")
        elif base == "let":
            self._arithmetic_names(node, " ".join(word.raw for word in words[first + 1 : last]))
        elif base in ("source", "."):
            self._script_file(words, first, last, text)
        if base in _NAME_BUILTINS and name == base:  # the builtin, not some /usr/bin/test
            why = _evaluated_names(base, words[first + 1 : last])
            if why is not None:
                self.findings.fail_closed(text, why)
        assigned = assigned_names(base, args) if name == base else None
        for variable in assigned or ():
            if variable is not None:  # an unknown name failed closed above (`_evaluated_names`)
                self._assign(variable, None, text, how=f"`{base}`")
        options = self.table.code_options_of(base)
        code = inline_code(base, args)
        if code is None and stdin_code(base, args) and self._fed(node, parent):  # the cheap test first
            code = self._fed_text(node, parent)
        inert = (
            code is not None
            and self.findings.emitted <= 1  # this command only: nothing before it wrote a module
            and not self.findings.written
            and inert_python(code, self.cwds)
        )
        if options is not None and not inert:
            why = unseen_code(base, options, args, self._fed(node, parent))
            if why is not None:
                self.findings.fail_closed(text, why)
        follow = self.table.follow_options.get(base)
        if follow is not None and any(_has_option(arg, follow) for arg in args):
            self._walked_links(base, args)
        known = self.table.subcommands.get(base)
        if known is not None:
            subcommand = self._subcommand(base, args)
            if subcommand is not None and subcommand not in known:
                alias = f"`{base} {_brief(subcommand)}` may be an alias from {base}'s configuration"
                self.findings.fail_closed(text, alias + ", which can run any program")

    def _subcommand(self, base: str, args: list[str | None]) -> str | None:
        """The first word after the command's global options ("" when only known at run time)."""
        options = self.table.global_options.get(base)
        index = 0
        while index < len(args):
            arg = args[index]
            if arg is None:
                return ""
            if not arg.startswith("-"):
                return arg
            if options is not None and "=" not in arg and arg in options.options_with_value:
                index += 1
            index += 1
        return None

    def _fed(self, node: Node, parent: Node | None) -> bool:
        """Whether a here-document or here-string feeds the command."""
        holders = [node] if parent is None or parent.type != "redirected_statement" else [node, parent]
        return any(
            child.type in ("heredoc_redirect", "herestring_redirect")
            for holder in holders
            for child in holder.named_children
        )

    def _fed_text(self, node: Node, parent: Node | None) -> str | None:
        """The literal text one quoted here-document feeds the command (`python3 - <<'EOF'`), else None."""
        holders = [node] if parent is None or parent.type != "redirected_statement" else [node, parent]
        redirects = [child for holder in holders for child in holder.named_children if child.type == "heredoc_redirect"]
        if len(redirects) != 1 or any(c.type == "herestring_redirect" for h in holders for c in h.named_children):
            return None
        start = next((c for c in redirects[0].named_children if c.type == "heredoc_start"), None)
        if start is None or not any(q in self._slice(start.start_byte, start.end_byte) for q in "'\"\\"):
            return None  # an unquoted body is expanded first: not literal
        bodies = self._heredoc_bodies(redirects[0])
        return bodies[0] if len(bodies) == 1 else None

    def _script_file(self, words: list[Word], first: int, last: int, text: str) -> None:
        """`source FILE`, `bash FILE`: a file inside the project is a command under its own rules;
        one this line writes, one outside the project, or one fed by the line is not seen."""
        operand: Word | None = None
        for word in words[first + 1 : last]:
            if word.value is not None and word.value.startswith(("-", "+")) and word.value not in ("-",):
                continue
            operand = word
            break
        if operand is None:
            return
        if operand.kind == "process_substitution" or operand.value is None:
            self.findings.fail_closed(text, f"`{_brief(text)}` runs a script produced when it runs")
            return
        value = operand.value
        if value == "-" or value.startswith(("/dev/", "/proc/")):
            self.findings.fail_closed(text, f"`{_brief(text)}` runs commands fed to it")
            return
        for cwd in self.cwds:
            absolute = self.scope.expand(value, cwd)
            if absolute is None:
                continue
            absolute = posixpath.normpath(absolute)
            if absolute in self.written:
                self.findings.fail_closed(text, f"`{_brief(text)}` runs a script this command writes")
                return
            if not self.scope.inside(absolute) or self.scope.external(absolute, None):
                self.findings.fail_closed(text, f"`{_brief(text)}` runs a script outside the project")
                return

    def _emit(self, words: list[Word], first: int, last: int, text: str, rest: str, reasons: list[str]) -> None:
        self.findings.emitted += 1
        tokens: list[str] = []
        dynamic_at = -1
        for word in words[first:last]:
            value = word.value
            if value is None:
                if dynamic_at < 0:
                    dynamic_at = len(tokens)
                tokens.append(word.raw)
            else:
                tokens.append(value)
        literal = tokens if dynamic_at < 0 else tokens[:dynamic_at]
        patterns = [text, " ".join(tokens) + rest]
        base = tokens[0]
        if "/" in base:
            # `/bin/rm -rf x` must meet the rules written for `rm`.
            base = posixpath.basename(posixpath.normpath(base))
            patterns.append(" ".join([base, *tokens[1:]]) + rest)
        if base in self.table.global_options:
            stripped = self._without_global_options(base, literal, reasons)
            if stripped is not None:
                patterns.append(" ".join(stripped + tokens[len(literal) :]) + rest)
                literal = stripped
        named = prefix(literal)
        # An "always" rule is a wildcard: a `*` or `?` the model wrote (`git '*'`) would become one.
        always = " ".join(named) + " *" if not any("*" in t or "?" in t for t in named) else None
        unique = tuple(dict.fromkeys(patterns))
        if reasons:
            self.findings.unseen_command(unique, "; ".join(dict.fromkeys(reasons)))
            return
        found = self.findings.patterns
        for pattern in unique:
            found[pattern] = None
        if always is not None:
            self.findings.always[always] = None

    def _without_global_options(self, base: str, literal: list[str], reasons: list[str]) -> list[str] | None:
        """`git -C dir -c k=v push x` → `git push x` (and the reasons `-c` brings); None if none apply."""
        options = self.table.global_options.get(base)
        if options is None:
            return None
        index = 1
        while index < len(literal) and literal[index].startswith("-") and literal[index] != "--":
            name, equals, _ = literal[index].partition("=")
            short = name[:2] if not name.startswith("--") else name
            reason = options.ask.get(name) or options.ask.get(short)
            if reason is not None:
                reasons.append(reason)
            if not equals and name in options.options_with_value:
                index += 2
            else:
                index += 1
        if index == 1:
            return None
        return [base, *literal[index:]]

    def _last_command(self, node: Node, parent: Node | None) -> bool:
        """Whether nothing of the text runs after `node`: only blanks, `;`, `&` or comments follow it,
        and it sits in no loop, function or subshell that could run it before something else."""
        end = (parent if parent is not None and parent.type == "redirected_statement" else node).end_byte
        rest = self.source[end:]
        if rest.strip(b" \t\r\n;&"):
            return False
        holder = parent
        while holder is not None:
            if holder.type not in ("list", "program", "redirected_statement"):
                return False
            holder = holder.parent
        return True

    def _cd(self, words: list[Word], first: int, last: int, text: str, *, name: str, certain: bool = False) -> None:
        """`cd`/`pushd`/`popd`: the working directory may be the new one or (the change may fail)
        the old one; both stay candidates, except before `&&`, where what follows runs only in the
        new one (`cd src && make && cd ..` ends where it started). Where it goes is unknown,
        relative paths fail closed."""
        target: Word | None = None
        for word in words[first + 1 : last]:
            if word.value is not None and word.value.startswith(("-", "+")) and word.value != "-":
                continue
            target = word
            break
        if name == "popd" or (target is not None and target.value == "-"):
            self.findings.fail_closed(text, f"`{_brief(text)}` goes back to a directory not known here")
            self._set_cwds((*self.cwds, None))
            return
        if target is None:
            self._set_cwds((*self.cwds, self.scope.home))
            return
        if target.value is None or target.glob:
            self.findings.fail_closed(text, f"cd goes to `{_brief(target.raw)}`, which is only known when it runs")
            self._set_cwds((*self.cwds, None))
            return
        targets: list[str | None] = []
        for cwd in self.cwds:
            absolute = self.scope.expand(target.value, cwd) if target.value else cwd
            targets.append(posixpath.normpath(absolute) if absolute is not None else None)
        self._set_cwds(tuple(targets) if certain else (*self.cwds, *targets))

    def _set_cwds(self, cwds: tuple[str | None, ...]) -> None:
        unique = tuple(dict.fromkeys(cwds))
        if len(unique) > _MAX_CWDS:
            self.findings.fail_closed(self.text, "the working directory could be too many places to follow")
            unique = (None,)
        self.cwds = unique
        self.cwd_real = _UNKNOWN
        self._set_pwd()
        for seen in self.chains:
            seen.update(dict.fromkeys(unique))

    def _set_pwd(self) -> None:
        if len(self.cwds) == 1 and self.cwds[0] is not None:
            self.known["PWD"] = self.cwds[0]
        else:
            self.known.pop("PWD", None)

    def _restore(self, entry: _Restore) -> None:
        if entry.chain:
            seen = tuple(self.chains.pop())
            self._set_cwds((*entry.cwds, *seen, *self.cwds))
            return
        self._set_cwds((*entry.cwds, *self.cwds) if entry.merge else entry.cwds)

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
        )

    def _shell_input(self, node: Node, parent: Node | None, text: str, reasons: list[str]) -> None:
        """A shell without `-c` runs its input: fail closed when something feeds it, parse heredocs."""
        scripts: list[str] = []
        fed = False
        holder = node
        redirects = [child for child in node.named_children if child.type in _REDIRECTS]
        if parent is not None and parent.type == "redirected_statement":
            holder = parent
            redirects.extend(parent.named_children)
        if redirects:
            for redirect in redirects:
                if redirect.type == "heredoc_redirect":
                    fed = True
                    scripts.extend(self._heredoc_bodies(redirect))
                elif redirect.type == "herestring_redirect":
                    fed = True
                    for content in redirect.named_children:
                        value = evaluate(content, self.known, source=self.source).value
                        if value is not None:
                            scripts.append(value)
                elif redirect.type == "file_redirect" and self._operator(redirect) == "<":
                    fed = True
        pipeline = holder.parent
        if pipeline is not None and pipeline.type == "pipeline":
            if pipeline.named_children[0] != holder:
                fed = True
            outer = pipeline.parent
            if outer is not None and outer.type == "heredoc_redirect":
                fed = True
                scripts.extend(self._heredoc_bodies(outer))
        if not fed:
            return
        self.findings.fail_closed(text, "a shell runs the commands fed to its input")
        for script in scripts:
            self._script(script, text, reasons)

    def _heredoc_bodies(self, redirect: Node) -> list[str]:
        return [
            self._slice(child.start_byte, child.end_byte)
            for child in redirect.named_children
            if child.type == "heredoc_body"
        ]

    # -- other statements -----------------------------------------------------------------------

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
        why = _evaluated_names(keyword, operands)
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

    def _standalone_assignment(self, node: Node, parent: Node | None) -> None:
        if parent is not None and parent.type in ("command", "declaration_command"):
            return
        name = self._variable_name(node)
        if name and self.table.is_dangerous_env(name):
            self._fail(node, _env_reason(name))

    def _assignment_reasons(self, node: Node) -> list[str]:
        reasons: list[str] = []
        name = self._variable_name(node)
        if name and self.table.is_dangerous_env(name):
            reasons.append(_env_reason(name))
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
            self._fail(node, f"the array subscript `{_brief(subscript)}` is arithmetic, which runs its command")
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
            self._assign(name, value, text, how=f"`{_brief(text)}`")
        if _HIDDEN.search(text):
            self._fail(node, f"`{_brief(text)}` holds a command substitution that could not be analysed")
        elif text.startswith("${!"):
            self._fail(node, f"`{_brief(text)}` expands a variable named by another value")
        elif "@P" in text:
            self._fail(node, f"`{_brief(text)}` expands a value as a prompt, which can run commands")
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
                if _HIDDEN.search(text):
                    self._fail(body, "a here-document holds a command substitution that could not be analysed")

    def _leaf(self, node: Node) -> None:
        text = self._slice(node.start_byte, node.end_byte)
        if _HIDDEN.search(text):
            self._fail(node, f"`{_brief(text)}` holds a command substitution that could not be analysed")

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
            self.findings.fail_closed(text, f"{how} {_env_reason(name)}")

    def _code_value(self, name: str, value: str | None, text: str, how: str) -> None:
        """A value bash runs: a prompt (`PS4='$(…)'` runs on every traced command) or
        `PROMPT_COMMAND`. A literal one is analysed as the code it is; any other fails closed."""
        if value is None:
            if name == "PS4":
                self.unseen_prompt = True
            self.findings.fail_closed(text, f"{how} sets {name} to a value only known when it runs; bash runs it")
            return
        self._script(prompt_code(value) if name in PROMPTS else value, text, [f"{how} {_env_reason(name)}"])

    # -- paths ----------------------------------------------------------------------------------

    def _check_paths(self, words: list[Word], *, skip_first: bool = True, text: frozenset[int] | None = None) -> None:
        """Check the words (after the command's name) that may be paths; `text` holds the positions,
        counted after the name, that the program reads as text, patterns or scripts."""
        base = self._cwd_real()
        for position, word in enumerate(words[1:] if skip_first else words):
            if text and position in text and not word.glob and not word.defaults:
                continue  # text the program prints or matches; a glob or a default still names paths
            if self.findings.globbing is not None and not word.glob and _EXTGLOB.search(word.raw):
                self._changed_glob(word.raw)
            value = word.value
            if value is None:
                for default in word.defaults:
                    if default is None:
                        why = f"`{_brief(word.raw)}` may take a default only known when it runs"
                        self.findings.fail_closed(word.raw, why)
                    elif default and default[0] != "-":
                        self._path(default, glob=_GLOB_CHARS.search(default) is not None)
                self._dynamic_path(word, self.cwds)
                continue
            if not value:
                continue
            if value[0] == "-":
                candidates = _option_values(value)
            elif (
                base is not None
                and not word.glob
                and value[0] != "~"
                and "/" not in value
                and "=" not in value
                and value != "."
                and value != ".."
                and fs_safe(value)
            ):
                # A bare name in a directory known to be inside the project: only an existing
                # entry of that name (a symlink) can lead out, and most names do not exist.
                if os.access(base + "/" + value, os.F_OK, follow_symlinks=False):
                    self._external(value)
                continue
            else:
                candidates = [value]
                key, equals, rest = value.partition("=")
                if equals and rest and "/" not in key:
                    candidates.append(rest)  # `dd if=../x`, `GIT_DIR=../x`
            for candidate in candidates:
                self._path(candidate, glob=word.glob)

    def _path(self, candidate: str, *, glob: bool, cwds: tuple[str | None, ...] | None = None) -> None:
        """Check one path-like text; a glob or brace word is checked as every path it may become."""
        expanded = expand_braces(candidate) if glob and "{" in candidate else [candidate]
        if expanded is None:
            self.findings.fail_closed(candidate, f"`{_brief(candidate)}` expands to too many words to check")
            return
        for each in expanded:
            path = path_candidate(each)
            if path is None:
                continue
            if glob and _GLOB_CHARS.search(path):
                self._glob(path, cwds)
            else:
                self._external(path, cwds)

    def _glob(self, pattern: str, cwds: tuple[str | None, ...] | None) -> None:
        """A glob is checked as the paths it matches now (bounded), and as its literal directory."""
        self._external(pattern, cwds)
        if self.findings.globbing is not None:
            self._changed_glob(pattern)
        if not self.findings.expand_globs:
            return
        for cwd in self.cwds if cwds is None else cwds:
            matches = glob_paths(pattern, cwd)
            if matches is None:
                self.findings.fail_closed(pattern, f"`{_brief(pattern)}` matches too many paths to check")
                return
            for match in matches:
                self._external(match, (cwd,))

    def _changed_glob(self, pattern: str) -> None:
        why = f"`{_brief(pattern)}` is matched under the glob options the line changed ({self.findings.globbing})"
        self.findings.fail_closed(pattern, why + ", which this analysis does not model")

    def _dynamic_path(self, word: Word, cwds: tuple[str | None, ...]) -> None:
        """An operand only known when it runs: its literal start is checked now, and a word made of
        variables is checked again at the end, with every value the text assigns them."""
        slash = word.prefix.rfind("/")
        if slash >= 0:
            self._external(word.prefix[: slash + 1], cwds)
        if word.variables:
            self.deferred.append((word, cwds))
        elif word.variables is None or _path_like(word.shape):
            # `cat $(echo ../x)`, `cat ${x/a/../x}`: what a substitution or an edited value gives may be any path
            self.findings.fail_closed(word.raw, f"`{_brief(word.raw)}` is a path only known when it runs")

    def _resolve_deferred(self) -> None:
        """Operands made of variables, with every value the text gives them; arithmetic names;
        command names made of variables, named for the deny rules (split as bash splits words)."""
        for word, args in self.deferred_names:
            tail = " ".join(arg for arg in args if arg is not None)
            for value, _ in self._values(word) or ():
                split = " ".join(value.split())
                if split:
                    base = posixpath.basename(split.split(" ", 1)[0])
                    for name in (split, base + split[len(split.split(" ", 1)[0]) :]):
                        self.findings.named[f"{name} {tail}" if tail else name] = None
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
            if assigned_unknown or _path_like(word.shape):
                self.findings.fail_closed(word.raw, f"`{_brief(word.raw)}` is a path only known when it runs")
        if self.traced and self.unseen_prompt:
            self.findings.fail_closed(self.text, "xtrace expands PS4, which the line sets to a value only known then")
        for node, name in self.arithmetic:
            assigned = self.assigned.get(name)
            if assigned is None or not all(v is not None and _INTEGER.fullmatch(v) for v in assigned):
                self._fail(node, f"arithmetic over `{name}`, whose value is not known here, can run a command")

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
        for known in combinations:
            again = evaluate(word.node, known, word.kind, source=self.source)
            if again.value is None:
                return None
            glob = again.glob or any(_GLOB_CHARS.search(known[name]) for name in names)
            results.append((again.value, glob))
        return results

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

    def _cwd_real(self) -> str | None:
        """The real path of the working directory while it is inside the project, else None."""
        if self.cwd_real is _UNKNOWN:
            only = self.cwds[0] if len(self.cwds) == 1 else None
            self.cwd_real = self.scope.real_inside(only) if only is not None else None
        return self.cwd_real

    def _redirect(self, node: Node, parent: Node | None) -> None:
        operator = self._operator(node)
        for destination in node.children_by_field_name("destination"):
            target = self._slice(destination.start_byte, destination.end_byte)
            if operator in _FD_DUPLICATION and (destination.type == "number" or target == "-"):
                continue
            word = evaluate(destination, self.known, source=self.source)
            if word.value is None:
                self._fail(parent or node, f"the redirect target `{_brief(word.raw)}` is only known when it runs")
                slash = word.prefix.rfind("/")
                if slash >= 0:
                    self._external(word.prefix[: slash + 1])
                continue
            if not word.value:
                continue
            if operator not in ("<", "<&", "<<<"):
                targets = [word.value]
                if word.glob and _GLOB_CHARS.search(word.value):  # `> permissions.ya?l` writes what it matches
                    targets.extend(self._written_matches(word.value, self._slice(node.start_byte, node.end_byte)))
                for target in targets:
                    for cwd in self.cwds:
                        absolute = self.scope.expand(target, cwd)
                        if absolute is not None:
                            self.written.add(posixpath.normpath(absolute))
                            self.findings.written[posixpath.normpath(absolute)] = None
            self._path(word.value, glob=word.glob)

    def _writes(self, values: list[str | None], text: str, *, fed: bool = False) -> None:
        """Record the operands the command writes (writes.yaml); an unknown one fails closed, and so
        do `find -exec`'s `{}` and the words `xargs` adds. A glob in a written operand writes every
        path it matches."""
        values = [None if value == "{}" else value for value in values]
        paths = written([*values, None] if fed else values)
        copied = copies(values)
        if copied is not None and copied[1] is not None:
            sources, destination = copied[0], copied[1]
            for source in sources:
                if source is None:
                    continue  # an unknown source: the destination itself is already written
                for cwd in self.cwds:
                    paths.extend(self._copied_names(source, destination, cwd))
        globbed = [path for path in paths if path and _GLOB_CHARS.search(path) and not path.endswith(UNNAMED)]
        for pattern in globbed:
            paths.extend(self._written_matches(pattern, text))  # matches are not globbed again
        for path in paths:
            if path is None:
                self.findings.fail_closed(text, "a file this command writes is only known when it runs")
            elif path:
                for cwd in self.cwds:
                    absolute = self.scope.expand(path, cwd)
                    if absolute is not None:
                        self.findings.written[posixpath.normpath(absolute)] = None

    def _written_matches(self, pattern: str, text: str) -> list[str]:
        """The paths a glob in a written operand matches now (`sed -i … *.yaml`); too many fail closed."""
        out: list[str] = []
        for cwd in self.cwds:
            matches = glob_paths(pattern, cwd)
            if matches is None:
                self.findings.fail_closed(text, f"`{_brief(pattern)}` matches too many files to check what it writes")
                return []
            out.extend(matches)
        return out

    def _walked_links(self, base: str, args: list[str | None]) -> None:
        """A program that follows symlinks while it walks (`grep -R`, `find -L`) reads wherever a link
        below its directories points: each link out of the project asks `external_directory` for its
        target, as naming the path would. The directory operands and the working directory are walked,
        up to `_MAX_WALKED` entries; past that the line fails closed."""
        roots: dict[str, str | None] = {}
        for cwd in self.cwds:
            # `.` too: `grep -R PATTERN` walks the working directory, and its pattern is no directory.
            for operand in (*(a for a in args if a is not None and not a.startswith("-")), "."):
                absolute = self.scope.expand(operand, cwd) if cwd is not None or operand[:1] in "/~" else None
                if absolute is not None and os.path.isdir(absolute) and not os.path.islink(absolute):
                    roots.setdefault(posixpath.normpath(absolute), cwd)
        seen = 0
        for top, cwd in roots.items():
            for directory, subdirectories, files in os.walk(top):
                for name in (*subdirectories, *files):
                    path = posixpath.join(directory, name)
                    if os.path.islink(path):
                        self._external(path, (cwd,))
                seen += len(subdirectories) + len(files)
                if seen > _MAX_WALKED:
                    reason = f"`{base}` follows symlinks through more files than can be checked"
                    self.findings.fail_closed(f"{base} {top}", reason)
                    return

    def _copied_names(self, source: str, destination: str, cwd: str | None) -> list[str]:
        """What copying `source` into `destination` may write besides the destination itself: the
        source's name inside it, and for a directory everything below (as `cp -r`, `rsync -a` do, with
        and without the directory's own name); past `_MAX_COPIED` names, the directory's unnamed files."""
        base = posixpath.basename(posixpath.normpath(source))
        out = [posixpath.join(destination, base)] if base not in ("", ".", "..", "/") else []
        absolute = self.scope.expand(source, cwd) if cwd is not None or source.startswith(("/", "~")) else None
        if absolute is None or not os.path.isdir(absolute):
            return out
        names: list[str] = []
        for directory, subdirectories, files in os.walk(absolute):
            relative = posixpath.relpath(directory, absolute)
            for name in (*subdirectories, *files):
                names.append(posixpath.normpath(posixpath.join(relative, name)))
            if len(names) > _MAX_COPIED:
                return [posixpath.join(destination, UNNAMED)]
        for name in names:
            out.append(posixpath.join(destination, name))
            if base not in ("", ".", "..", "/"):
                out.append(posixpath.join(destination, base, name))
        return out

    def _external(self, path: str, cwds: tuple[str | None, ...] | None = None) -> None:
        if path.startswith("~-"):
            self.findings.fail_closed(
                path, f"`{_brief(path)}` is under the previous directory, only known when it runs"
            )
            return
        for cwd in self.cwds if cwds is None else cwds:
            if cwd is None and path[0] not in "/~":
                continue  # the unknown directory already failed closed where it became unknown
            if len(self.findings.read) < MAX_READ_PATHS:
                absolute = self.scope.expand(path, cwd)
                if absolute is not None:
                    self.findings.read[posixpath.normpath(absolute)] = None
            for directory in self.scope.external(path, cwd):
                self.findings.directories[directory] = None

    # -- helpers --------------------------------------------------------------------------------

    def _operator(self, redirect: Node) -> str:
        for child in redirect.children:
            if not child.is_named:
                return child.type
        return ""

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

    def _fail(self, node: Node, reason: str) -> None:
        self.findings.fail_closed(self._slice(node.start_byte, node.end_byte), reason)

    def _slice(self, start: int, end: int) -> str:
        return self.source[start:end].decode("utf-8", "surrogateescape")


def _shell_glob_option(args: list[str | None]) -> bool:
    """Whether `bash -O OPTION` / `+O OPTION` sets or unsets a glob option for the script it runs."""
    return any(
        arg in ("-O", "+O") and index + 1 < len(args) and (args[index + 1] is None or args[index + 1] in GLOB_OPTIONS)
        for index, arg in enumerate(args)
    )


def _then(node: Node, parent: Node | None) -> bool:
    """Whether `&&` follows `node` in its list: what comes next runs only if it succeeded."""
    if parent is None or parent.type != "list":
        return False
    children = parent.children
    for index, child in enumerate(children):
        if child == node:
            return index + 1 < len(children) and children[index + 1].type == "&&"
    return False


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


def _evaluated_names(builtin: str, words: Sequence[Word]) -> str | None:
    """Why a builtin that takes variable names may run a command through one: a name with an array
    subscript holding a substitution (`read 'a[$(cmd)]'`, `test -v`, `printf -v`, `declare`), or a
    name only known when it runs. None when every name is a plain literal."""
    spec = _NAME_BUILTINS.get(builtin)
    if spec is None:
        return None
    name_options, value_options, operands = spec
    expect: str | None = None  # "name" or "value": what the next word is
    options_done = False
    for word in words:
        value = word.value
        if value is not None and _subscript_substitution(value):
            return f"`{builtin}` evaluates the array subscript of `{_brief(value)}`, which runs a command"
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


def _has_option(arg: str | None, options: frozenset[str]) -> bool:
    """`arg` is one of `options`, with an attached `=value`, or a cluster holding a short one (`-rL`)."""
    if arg is None or not arg.startswith("-"):
        return False
    if arg.partition("=")[0] in options:
        return True
    return arg[1:2] != "-" and any("-" + letter in options for letter in arg[1:])


def _option_values(word: str) -> list[str]:
    """Paths an option may carry: `--out=../x` → `../x`, `-o../x` → `../x`. Which short options take
    a value is not known here, so what follows the first letter of any cluster counts (`-la` names
    `a`: a `read` request for it adds nothing unless a `read` rule matches it, `cp -tlnk` names `lnk`)."""
    name, equals, value = word.partition("=")
    if equals:
        return [value] if value else []
    if len(word) > 2 and word[1] != "-":
        return [word[2:]]
    return []


def _path_like(raw: str) -> bool:
    """A word whose literal parts say it is a path (`$X/y`, `$PWD/../x`); dynamic parts are NUL."""
    return "/" in raw or ".." in raw or raw.startswith("~")


def _brief(text: str) -> str:
    """Source text quoted in a reason, cut short: reasons are read by people."""
    return text if len(text) <= 60 else text[:57] + "..."


def _env_reason(name: str) -> str:
    return f"sets {name}, which can change what runs"
