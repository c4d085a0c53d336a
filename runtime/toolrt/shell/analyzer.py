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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..permissions.model import PermissionRequest
from . import limits
from .arity import prefix
from .braces import expand_braces
from .named import MAX_SCAN_CHARS, named_commands
from .parser import parse
from .paths import PathScope, fs_safe, path_candidate
from .unwrap import unwrap
from .words import Word, evaluate
from .wrappers import WrapperTable

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
_SUBSTITUTION = re.compile(r"\$\(|`")
_BRACKETS_AND_SUBSTITUTIONS = re.compile(r"[\[\]`]|\$\(")
_FD_DUPLICATION = frozenset((">&", "<&"))
_UNKNOWN = "\0unknown"  # not yet computed; NUL never occurs in a path


@dataclass(slots=True)
class Findings:
    """What one analysis collected; `requests()` turns it into the call's permission requests."""

    patterns: dict[str, None] = field(default_factory=dict)
    always: dict[str, None] = field(default_factory=dict)
    directories: dict[str, None] = field(default_factory=dict)
    unseen: dict[tuple[tuple[str, ...], str], tuple[tuple[str, ...], bool]] = field(default_factory=dict)
    """(patterns, reason) of what could not be seen → (the commands its text names, all of them found)."""
    deadline: float = field(default_factory=lambda: time.monotonic() + limits.TIME_BUDGET)
    scan_left: int = MAX_SCAN_CHARS
    """Characters the search for named commands may still read (all unseen texts together)."""

    def fail_closed(self, text: str, reason: str) -> None:
        """Text the analyzer cannot see into: judged as the ruleset's fallback, at least ask, and
        denied when it visibly names a command a rule denies."""
        key = ((text,), reason)
        if key in self.unseen:
            return
        if len(text) > self.scan_left:
            self.scan_left = 0
            self.unseen[key] = ((), False)
            return
        self.scan_left -= len(text)
        self.unseen[key] = named_commands(text)

    def unseen_command(self, patterns: tuple[str, ...], reason: str) -> None:
        """A command the analyzer parsed but whose effect it cannot see (a loader variable): its own
        patterns are what a deny rule is checked against."""
        self.unseen.setdefault((patterns, reason), ((), True))

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
        for (patterns, reason), (named, complete) in self.unseen.items():
            if not complete:
                reason += "; it is too long to check every command it names against the rules"
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
    cwd: str | None,
    depth: int = 0,
    inherited: tuple[str, ...] = (),
) -> str | None:
    """Add the requests of `text` to `findings`; returns the working directory after it runs.

    `inherited` holds reasons that apply to every command inside (a script run by a shell whose
    environment loads code). The return value is None once a `cd` went somewhere unknown.
    """
    analysis = _Analysis(scope, table, findings, cwd, depth, inherited)
    analysis.run(text)
    return analysis.cwd


class _Analysis:
    __slots__ = (
        "cwd",
        "cwd_real",
        "depth",
        "findings",
        "first_error",
        "inherited",
        "scope",
        "source",
        "table",
        "text",
    )

    def __init__(
        self,
        scope: PathScope,
        table: WrapperTable,
        findings: Findings,
        cwd: str | None,
        depth: int,
        inherited: tuple[str, ...],
    ) -> None:
        self.scope = scope
        self.table = table
        self.findings = findings
        self.cwd = cwd
        self.cwd_real: str | None = _UNKNOWN
        self.depth = depth
        self.inherited = inherited
        self.source = b""
        self.text = ""
        self.first_error: Node | None = None

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
        self._walk(root)
        if root.has_error:
            where = ""
            if self.first_error is not None:
                row, column = self.first_error.start_point
                where = f" (syntax error at line {row + 1}, column {column + 1})"
            self.findings.fail_closed(text, f"the command could not be parsed{where}")

    def _walk(self, root: Node) -> None:
        """Visit every node in document order (so `cd` affects what follows); stops at a limit."""
        # Entries carry the parent: tree-sitter builds a new object for every `.parent` access.
        stack: list[tuple[Node, Node | None, int]] = [(root, None, 0)]
        visited = 0
        while stack:
            node, parent, nesting = stack.pop()
            visited += 1
            if not visited & 255 and self.findings.out_of_time():
                self._out_of_time()
                return
            if visited > limits.MAX_NODES:
                self.findings.fail_closed(
                    self.text, f"the command is too large to analyze (over {limits.MAX_NODES} syntax nodes)"
                )
                return
            kind = node.type
            if kind == "command":
                # Plain words hold no commands; only the rest of a command's children are walked.
                # Its words count against the budget too (before they are read), so a huge flat
                # command cannot hide.
                visited += node.named_child_count
                if visited > limits.MAX_NODES:
                    continue
                children = self._command(node, parent)
            else:
                if kind == "file_redirect":
                    self._redirect(node, parent)
                elif kind == "declaration_command" or kind == "unset_command":
                    self._declaration(node, parent)
                elif kind == "variable_assignment":
                    self._standalone_assignment(node, parent)
                elif kind == "arithmetic_expansion" or kind == "c_style_for_statement":
                    self._arithmetic(node)
                elif kind == "compound_statement" and node.child_count and node.children[0].type == "((":
                    self._arithmetic(node)
                elif kind == "test_command":
                    if _subscript_substitution(self._slice(node.start_byte, node.end_byte)):
                        self._fail(node, "an array subscript in a test runs a command substitution")
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
            for child in reversed(children):
                stack.append((child, node, nesting))

    # -- commands -------------------------------------------------------------------------------

    def _command(self, node: Node, parent: Node | None) -> list[Node]:
        """Record the command's requests; returns the children that may hold more commands."""
        home = self.scope.home
        assignments: list[Node] = []
        name: Node | None = None
        words: list[Word] = []
        nested: list[Node] = []
        start = -1
        for child in node.named_children:
            kind = child.type
            if name is None:
                if kind == "command_name":
                    name = child
                    if start < 0:
                        start = child.start_byte
                    name_word = child.named_children[0] if child.named_child_count == 1 else child
                    word = evaluate(name_word, home, source=self.source)
                    if word.kind not in _PLAIN_WORDS:
                        nested.append(child)
                    words.append(word)
                    continue
                if kind == "variable_assignment":
                    assignments.append(child)
                elif kind in _REDIRECTS and start < 0:
                    start = child.start_byte
            elif kind not in _REDIRECTS:
                words.append(evaluate(child, home, kind, source=self.source))
            if kind not in _PLAIN_WORDS:
                nested.append(child)
        redirected = parent is not None and parent.type == "redirected_statement"
        end = parent.end_byte if redirected and parent is not None else node.end_byte
        if name is None:
            # Only redirections (`> file`): it still writes, so it still asks.
            if start >= 0:
                self.findings.patterns[self._slice(start, end)] = None
            return nested
        reasons = list(self.inherited)
        for assignment in assignments:
            reasons.extend(self._assignment_reasons(assignment))
        rest = self._slice(node.end_byte, end) if redirected else ""
        self._check_paths(words)
        self._segments(node, parent, words, start, end, rest, reasons)
        return nested

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
        work: list[tuple[int, int, list[str]]] = [(0, count, reasons)]
        while work:
            first, last, inherited = work.pop(0)
            text = self._slice(
                start if first == 0 else words[first].node.start_byte,
                end if last == count else words[last - 1].node.end_byte,
            )
            head = words[first]
            if head.value is None or head.glob:
                self.findings.fail_closed(text, f"the command name `{_brief(head.raw)}` is only known when it runs")
                continue
            own = list(inherited)
            if head.value in ("cd", "pushd"):  # the builtins; `/x/cd` is some program that asks like any other
                self._cd(words, first, last, text)
                if head.value == "cd":
                    continue
            wrapper = self.table.match(values, first)
            inner = unwrap(wrapper, values, first, last) if wrapper is not None else None
            if inner is not None:
                for variable in inner.assignments:
                    if self.table.is_dangerous_env(variable):
                        own.append(_env_reason(variable))
            self._emit(words, first, last, text, rest if last == count else "", own)
            if inner is None:
                continue
            if inner.dynamic is not None:
                self.findings.fail_closed(text, inner.dynamic)
            for inner_first, inner_last in inner.commands:
                work.append((inner_first, inner_last, own))
            for script in inner.scripts:
                self._script(script, text, own)
            if inner.reads_stdin:
                self._shell_input(node, parent, text, own)

    def _emit(self, words: list[Word], first: int, last: int, text: str, rest: str, reasons: list[str]) -> None:
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

    def _cd(self, words: list[Word], first: int, last: int, text: str) -> None:
        target: Word | None = None
        for word in words[first + 1 : last]:
            if word.value is not None and word.value.startswith("-") and word.value != "-":
                continue
            target = word
            break
        self.cwd_real = _UNKNOWN
        if target is None:
            self.cwd = self.scope.home
            return
        if target.value is None or target.glob:
            self.findings.fail_closed(text, f"cd goes to `{_brief(target.raw)}`, which is only known when it runs")
            self.cwd = None
            return
        if target.value == "-":
            self.findings.fail_closed(text, "cd - goes back to a directory not known here")
            self.cwd = None
            return
        absolute = self.scope.expand(target.value, self.cwd) if target.value else self.cwd
        self.cwd = posixpath.normpath(absolute) if absolute is not None else None

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
            cwd=self.cwd,
            depth=self.depth + 1,
            inherited=tuple(reasons),
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
                        value = evaluate(content, self.scope.home, source=self.source).value
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
            if child.type == "variable_assignment":
                reasons.extend(self._assignment_reasons(child))
        self._emit_plain(text, keyword, reasons)

    def _emit_plain(self, text: str, keyword: str, reasons: list[str]) -> None:
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

    def _variable_name(self, node: Node) -> str:
        target = node.named_children[0] if node.named_child_count else None
        if target is not None and target.type == "subscript":
            target = target.named_children[0] if target.named_child_count else None
        if target is None:
            return ""
        return self._slice(target.start_byte, target.end_byte)

    def _arithmetic(self, node: Node) -> None:
        if _SUBSTITUTION.search(self._slice(node.start_byte, node.end_byte)):
            self._fail(node, "arithmetic expansion runs a command substitution")

    def _for_values(self, node: Node) -> None:
        values = [
            evaluate(child, self.scope.home, source=self.source) for child in node.children_by_field_name("value")
        ]
        self._check_paths(values, skip_first=False)

    # -- paths ----------------------------------------------------------------------------------

    def _check_paths(self, words: list[Word], *, skip_first: bool = True) -> None:
        base = self._cwd_real()
        for word in words[1:] if skip_first else words:
            value = word.value
            if value is not None:
                if not value or (value[0] == "-" and "=" not in value):
                    continue
                if (
                    base is not None
                    and not word.glob
                    and value[0] != "~"
                    and "/" not in value
                    and ":" not in value
                    and value != "."
                    and value != ".."
                    and fs_safe(value)
                ):
                    # A bare name in a directory known to be inside the project: only an existing
                    # entry of that name (a symlink) can lead out, and most names do not exist.
                    if os.access(base + "/" + value, os.F_OK, follow_symlinks=False):
                        self._external(value)
                    continue
                candidates = expand_braces(value) if word.glob and "{" in value else [value]
            else:
                slash = word.prefix.rfind("/")
                if slash < 0:
                    continue
                candidates = [word.prefix[: slash + 1]]
            for candidate in candidates:
                path = path_candidate(candidate)
                if path is not None:
                    self._external(path)

    def _cwd_real(self) -> str | None:
        """The real path of the working directory while it is inside the project, else None."""
        if self.cwd_real is _UNKNOWN:
            self.cwd_real = self.scope.real_inside(self.cwd) if self.cwd is not None else None
        return self.cwd_real

    def _redirect(self, node: Node, parent: Node | None) -> None:
        operator = self._operator(node)
        for destination in node.children_by_field_name("destination"):
            target = self._slice(destination.start_byte, destination.end_byte)
            if operator in _FD_DUPLICATION and (destination.type == "number" or target == "-"):
                continue
            word = evaluate(destination, self.scope.home, source=self.source)
            if word.value is None:
                self._fail(parent or node, f"the redirect target `{_brief(word.raw)}` is only known when it runs")
                slash = word.prefix.rfind("/")
                if slash >= 0:
                    self._external(word.prefix[: slash + 1])
                continue
            for candidate in expand_braces(word.value) if word.glob else [word.value]:
                if candidate:
                    self._external(candidate)

    def _external(self, path: str) -> None:
        for directory in self.scope.external(path, self.cwd):
            self.findings.directories[directory] = None

    # -- helpers --------------------------------------------------------------------------------

    def _operator(self, redirect: Node) -> str:
        for child in redirect.children:
            if not child.is_named:
                return child.type
        return ""

    def _out_of_time(self) -> None:
        budget = round(limits.TIME_BUDGET * 1000)
        self.findings.fail_closed(self.text, f"the command could not be analysed within its time budget ({budget} ms)")

    def _fail(self, node: Node, reason: str) -> None:
        self.findings.fail_closed(self._slice(node.start_byte, node.end_byte), reason)

    def _slice(self, start: int, end: int) -> str:
        return self.source[start:end].decode("utf-8", "surrogateescape")


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


def _brief(text: str) -> str:
    """Source text quoted in a reason, cut short: reasons are read by people."""
    return text if len(text) <= 60 else text[:57] + "..."


def _env_reason(name: str) -> str:
    return f"sets {name}, which can change what runs"
