"""Commands: a simple command's words, the commands it wraps (`sudo`, `xargs`, `bash -c`), what of
it the analyzer cannot see, and the `bash` patterns the rules are matched against."""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING, NamedTuple

from .analysis_globals import GlobalOptionChecks
from .analysis_state import GLOB_CHARS, brief, env_reason, unanalysed_substitution, unknown_until_run
from .analysis_variables import NAME_BUILTINS, evaluated_names
from .arity import prefix
from .braces import expand_braces
from .facts import INERT, RESERVED, ProgramFacts, program_facts
from .globs import GLOB_OPTIONS, glob_options, glob_paths
from .long_options import long_option
from .operands import not_paths
from .programs import unseen_code
from .python_code import inert_python, inline_code, stdin_code
from .unwrap import Unwrapped, unwrap
from .variables import assigned_names, assignment_word, sets_keyword, traces
from .words import Word, evaluate
from .wrappers import Wrapper

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["PLAIN_WORDS", "REDIRECTS", "CommandChecks", "inert_builtin"]

PLAIN_WORDS = frozenset(("word", "number", "raw_string"))
REDIRECTS = frozenset(("file_redirect", "heredoc_redirect", "herestring_redirect"))
_XARGS_REPLACE = frozenset(("-I", "-i", "--replace"))
# Tokens tree-sitter-bash leaves out of a command's words (its `[[ ]]` operators, a word ending in `$`): bash
# reads each standing alone as a literal word.
_DROPPED = frozenset(("==", "=~"))
_LITERAL = re.compile(r"[A-Za-z0-9_./:@%+,=-]*")  # characters bash leaves as they are


class CommandChecks(GlobalOptionChecks):
    """Simple commands: their words, wrappers, unseen effects and patterns."""

    __slots__ = ()

    def _command(self, node: Node, parent: Node | None) -> list[Node]:
        """Record the command's requests; returns the children that may hold more commands."""
        named, words, assignments, nested, start = self._command_parts(node)
        redirected = parent is not None and parent.type == "redirected_statement"
        end = parent.end_byte if redirected and parent is not None else node.end_byte
        if not named:
            # Only redirections (`> file`): it still writes, so it still asks.
            if start >= 0:
                self.findings.patterns[self._slice(start, end)] = None
            return nested
        if [word for word in words if word.glob] and _braced(words):
            expanded = self._expand_words(words)
            if expanded is None:
                self.findings.fail_closed(self._slice(start, end), "a brace expansion makes too many words to check")
                return nested
            words = expanded
        reasons = list(self.inherited)
        for assignment in assignments:
            reasons.extend(self._assignment_reasons(assignment))
        if not reasons and not redirected and words[0].value == "cd" and self._final_cd(node, parent, words):
            return nested  # the line ends with it: where it goes changes nothing, and nothing runs there
        rest = self._slice(node.end_byte, end) if redirected else ""
        values = [word.value for word in words]
        program = values[0].rpartition("/")[2] if values[0] else ""
        self._check_paths(words, text=not_paths(program, values[1:]))
        self._segments(_new_command(_Command, (node, parent, words, values, start, end, rest)), reasons)
        return nested

    def _command_parts(self, node: Node) -> tuple[bool, list[Word], list[Node], list[Node], int]:
        """Whether the command has a name; its words (name first); the assignments before the name;
        the children that may hold more commands; where its text starts (-1: nowhere yet)."""
        words: list[Word] = []
        assignments: list[Node] = []
        nested: list[Node] = []
        start = -1
        children = node.named_children
        if node.child_count != len(children):
            children = self._with_dropped(node)
        for index, child in enumerate(children):
            kind = child.type
            if kind == "command_name":
                start = child.start_byte if start < 0 else start
                name = self._name_word(child)
                words.append(name)
                if name.kind not in PLAIN_WORDS:
                    nested.append(child)
                self._arguments(children, index + 1, words, nested)
                return True, words, assignments, nested, start
            if kind == "variable_assignment":
                assignments.append(child)
            elif kind in REDIRECTS and start < 0:
                start = child.start_byte
            if kind not in PLAIN_WORDS:
                nested.append(child)
        return False, words, assignments, nested, start

    def _with_dropped(self, node: Node) -> list[Node]:
        """The children of a command that holds tokens tree-sitter leaves out of its words (`==`, `=~`
        and `$` standing alone: `grep -e == FILE` has two arguments, not `-e FILE`), each kept as the
        word bash reads; one joined to a word (`-e$`) makes a word the tree does not hold, and the
        command fails closed."""
        children = node.children
        named = False  # the command's name is behind
        for index, child in enumerate(children):
            if child.is_named:
                named = named or child.type == "command_name"
                continue
            before = children[index - 1].end_byte if index else -1
            after = children[index + 1].start_byte if index + 1 < len(children) else -1
            raw = self._slice(child.start_byte, child.end_byte)
            if (
                not named
                or not _literal_dropped(child.type, raw)
                or child.start_byte == before
                or child.end_byte == after
            ):
                self._fail(node, f"the parser dropped `{brief(raw)}` from the command's words")
        return children

    def _arguments(self, children: list[Node], first: int, words: list[Word], nested: list[Node]) -> None:
        """The words after the command's name (into `words`), and the children that may hold more
        commands (into `nested`). A plain word is read here; any other goes through `evaluate`."""
        known, source = self.known, self.source
        for child in children[first:]:
            kind = child.type
            if not child.is_named:  # a token tree-sitter left out, the literal word bash reads (`_with_dropped`)
                raw = source[child.start_byte : child.end_byte].decode("utf-8", "surrogateescape")
                words.append(_new_word(Word, (raw, raw, raw, False, child, "word", (), "", ())))
                continue
            if kind == "word" or kind == "number":
                raw = source[child.start_byte : child.end_byte].decode("utf-8", "surrogateescape")
                if _PLAIN_WORD.search(raw) is None:  # as `evaluate` gives it, and nothing `_hidden`
                    shape = "" if kind == "word" else raw
                    words.append(_new_word(Word, (raw, raw, raw, False, child, kind, (), shape, ())))
                    continue
                word = evaluate(child, known, kind, source=source)
                if kind == "word" and _hidden(word.raw):
                    self._hidden_in_word(child, word.raw)
                words.append(word)
                continue
            if kind == "string" or kind == "raw_string":
                raw = source[child.start_byte : child.end_byte].decode("utf-8", "surrogateescape")
                if raw[1:2] != "~" and _QUOTED.fullmatch(raw) is not None:  # `"~"` is `./~` (`evaluate`)
                    # `"x"`, `'x'`: its value is what the quotes hold (as `evaluate` gives it), and
                    # nothing inside can run (no `$`, backtick or backslash): not walked.
                    value = raw[1:-1]
                    words.append(_new_word(Word, (raw, value, value, False, child, kind, (), value, ())))
                    continue
            if kind not in REDIRECTS:
                words.append(evaluate(child, known, kind, source=source))
            if kind not in PLAIN_WORDS:
                nested.append(child)

    def _name_word(self, name: Node) -> Word:
        children = name.named_children
        name_word = children[0] if len(children) == 1 else name
        if name_word.type == "word":
            raw = self.source[name_word.start_byte : name_word.end_byte].decode("utf-8", "surrogateescape")
            if _PLAIN_WORD.search(raw) is None:  # as `evaluate` gives it, and nothing `_hidden`
                return _new_word(Word, (raw, raw, raw, False, name_word, "word", (), "", ()))
        word = evaluate(name_word, self.known, source=self.source)
        if word.kind == "word" and _hidden(word.raw):
            self._hidden_in_word(name_word, word.raw)
        return word

    def _final_cd(self, node: Node, parent: Node | None, words: list[Word]) -> bool:
        """Whether the command is a plain `cd` the line ends with."""
        return (
            words[0].value == "cd"
            and self.depth == 0  # a script's last `cd` moves the shell that runs it (`eval 'cd ..'; cat x`)
            and not self.findings.trapped  # an EXIT trap set before it runs after it, in the new directory
            and self._last_command(node, parent)  # before the words: most `cd`s are followed by more
            and all(word.value is not None for word in words)
        )

    def _hidden_in_word(self, node: Node, raw: str) -> None:
        """`\\`rm\\`` inside backticks: bash unescapes and runs it; tree-sitter sees a plain word."""
        if _hidden(raw):
            self._fail(node, unanalysed_substitution(raw))

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
                glob = GLOB_CHARS.search(option) is not None
                out.append(word._replace(value=option, prefix=option, glob=glob, shape=option))
        return out

    def _segments(self, command: _Command, reasons: list[str]) -> None:
        """The command and each command it wraps, outermost first."""
        work = self._segment(command, 0, len(command.words), reasons, "")
        while work:  # most commands wrap none
            first, last, inherited, feeder = work.pop(0)
            work.extend(self._segment(command, first, last, inherited, feeder))

    def _segment(
        self, command: _Command, first: int, last: int, inherited: list[str], feeder: str
    ) -> list[tuple[int, int, list[str], str]]:
        """One command of `command.words[first:last]`; returns the commands it wraps (`feeder`: the
        wrapper that adds words to it when it runs). A line of plain commands runs the same checks through
        `analyzer._plain_command`, without its tree: a check added here belongs there too where it applies
        (`tests/test_bash_fast_paths.py` compares the two readings)."""
        words, values = command.words, command.values
        whole = last == len(words)
        start = command.start if first == 0 else _node(words[first]).start_byte
        end = command.end if whole else _node(words[last - 1]).end_byte
        text = self.source[start:end].decode("utf-8", "surrogateescape")  # self._slice(start, end)
        head = words[first].value
        if head is None or words[first].glob or head in RESERVED:
            self._unknown_name(words[first], values[first + 1 : last], text)
            return []
        own = list(inherited)
        redirects = command.rest if whole else ""
        facts = program_facts(self.table, head)
        mine = values[first:last] if first or not whole else values  # the command's own values, sliced once
        if facts.plain:
            # No table has anything to say about it: its patterns, and what its `-o`-like options write.
            self._emit(words, mine, first, text, redirects, own)
            self._writes(mine, text, fed=feeder == "xargs")
            return []
        if head in ("cd", "pushd", "popd"):  # the builtins; `/x/cd` is some program
            self._cd_segment(command, first, last, text, own, redirects)
            return []
        self._shell_state(head, values[first + 1 : last], text)
        if head in INERT and not own and not redirects and inert_builtin(head, mine):
            return []  # `true`, `:`, `set -e`, `shopt -s nullglob`: nothing runs, nothing is written
        wrapper = self._wrapper(values, first, mine, text, bool(feeder)) if facts.may_wrap else None
        if feeder and wrapper is not None:
            self.findings.fail_closed(
                text, f"`{feeder}` adds words to `{head}` when it runs, which may make them a command"
            )
        inner = unwrap(wrapper, values, first, last) if wrapper is not None else None
        if inner is not None:
            own.extend(env_reason(variable) for variable in inner.assignments if self.table.is_dangerous_env(variable))
        self._emit(words, mine, first, text, redirects, own)
        if facts.described:
            self._unseen(command.node, command.parent, words, values, first, last, text, own, facts)
        if wrapper is not None and wrapper.kind == "shell" and inner is not None and not inner.scripts:
            valued = wrapper.options_with_value
            self._script_file(words, first, last, text, own, valued=valued, bash=wrapper.dialect == "bash")
        if "/" in head:  # the program is a file (`./x`, and a `./bash` or `./sudo` the model may have written)
            self._run_file(head, text, own)
        if facts.interpreter:
            self._interpreted(head, values[first + 1 : last], text)
        self._writes(mine, text, fed=feeder == "xargs")
        if wrapper is None or inner is None:
            return []
        return self._wrapped(command, first, text, wrapper, inner, own)

    def _cd_segment(self, command: _Command, first: int, last: int, text: str, own: list[str], redirects: str) -> None:
        """`cd`, `pushd`, `popd`: where the line goes on in, and the command itself when it must ask."""
        head = command.values[first] or ""
        certain = first == 0 and _then(command.node, command.parent)
        self._cd(command.words, first, last, text, name=head, certain=certain)
        if own:
            self.findings.unseen_command((text,), "; ".join(dict.fromkeys(own)))
        elif redirects:
            self.findings.patterns[text + redirects] = None

    def _unknown_name(self, head: Word, args: list[str | None], text: str) -> None:
        """A command name only known when it runs (named for the deny rules where it can be), or a
        reserved word the parser offered as one."""
        if head.value is not None and not head.glob:
            reason = f"`{head.value}` starts a compound command the parser did not read (after time, ! or coproc)"
            self.findings.fail_closed(text, reason)
            return
        if head.value is not None:
            self._glob_names(head.value, args)
        elif head.variables:
            self.deferred_names.append((head, args))
        self.findings.fail_closed(text, unknown_until_run("the command name", head.raw))

    def _shell_state(self, head: str, args: list[str | None], text: str) -> None:
        """What a command changes in the shell for the rest of the line: a trap, xtrace, glob options."""
        if head == "trap":
            self.findings.trapped = True
        if head in ("set", "shopt") and traces(head, args):
            self.traced = True
        if head in ("set", "shopt") and sets_keyword(args, shopt=head == "shopt"):
            self.keyword = True
        if head == "shopt" and (changed := glob_options(args)) is not None:
            self.findings.globbing = f"`shopt {brief(changed)}`"
        elif head.rpartition("/")[2] in ("bash", "sh"):
            if _shell_glob_option(args):
                self.findings.globbing = f"`{brief(text)}`"
            if (why := shell_option_reason("bash", args)) is not None:
                self.findings.fail_closed(text, why)
            if sets_keyword(args):
                self.keyword = True  # for the script it runs (and, to be safe, for the rest of this line)
                self.findings.fail_closed(
                    text, f"`{brief(text)}` makes every NAME=value word an environment assignment"
                )

    def _wrapped(
        self, command: _Command, first: int, text: str, wrapper: Wrapper, inner: Unwrapped, own: list[str]
    ) -> list[tuple[int, int, list[str], str]]:
        """What a wrapper runs: the commands it wraps (returned, to be read next), the scripts it is
        given, the input a shell reads."""
        if inner.dynamic is not None:
            self.findings.fail_closed(text, inner.dynamic)
        fed = " ".join(wrapper.name) if wrapper.feeds else ""
        if (
            fed == "xargs"
            and inner.commands
            and any(has_option(value, _XARGS_REPLACE) for value in command.values[first + 1 : inner.commands[0][0]])
        ):
            fed = "xargs -I"  # it puts its input where `{}` stands, and appends nothing
        work = [(inner_first, inner_last, own, fed) for inner_first, inner_last in inner.commands]
        if wrapper.dialect != "bash" and (inner.scripts or inner.reads_stdin):
            self.findings.fail_closed(text, f"`{command.values[first]}` runs text in a language other than bash's")
            return work
        for script in inner.scripts:
            self._script(script, text, own)
        if inner.reads_stdin:
            self._shell_input(command.node, command.parent, text, own)
        return work

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

    def _unseen(
        self,
        node: Node | None,
        parent: Node | None,
        words: list[Word],
        values: list[str | None],
        first: int,
        last: int,
        text: str,
        reasons: list[str],
        facts: ProgramFacts,
    ) -> None:
        """What this command (a `described` one, by its `facts`) does that the analyzer cannot see:
        the command table, code in another language, a configured alias, a script fed or written by
        the line itself. `node` is None for a command read without its syntax tree (`plain_line`), which has
        no redirections and, being no builtin, is not read by `_unseen_builtin`."""
        base = (values[first] or "").rpartition("/")[2]
        args = values[first + 1 : last]  # the values of `words`
        if facts.builtin:  # all `_unseen_builtin` reads
            if node is None:  # `plain_line` reads no builtin: never the case
                self.findings.fail_closed(text, f"`{base}` is a builtin read only from the syntax tree")
            else:
                self._unseen_builtin(node, words, first, last, text, reasons)
        if facts.code:  # all `_unseen_code` reads
            self._unseen_code(node, parent, base, args, text)
        follow = self.table.follow_options.get(base)
        if follow is not None:
            for arg in args:
                if has_option(arg, follow):
                    self._walked_links(base, args)
                    break
        known = self.table.subcommands.get(base)
        if known is not None:
            subcommand = self._subcommand(base, args)
            if subcommand is not None and subcommand not in known:
                alias = f"`{base} {brief(subcommand)}` may be an alias from {base}'s configuration"
                self.findings.fail_closed(text, alias + ", which can run any program")

    def _unseen_builtin(
        self, node: Node, words: list[Word], first: int, last: int, text: str, reasons: list[str]
    ) -> None:
        """The command table's reasons, and what builtins do through names: aliases, `let`'s
        arithmetic, sourced scripts, variables they assign or evaluate."""
        name = words[first].value or ""
        base = name.rpartition("/")[2]
        args = [word.value for word in words[first + 1 : last]]
        reason = self.table.unseen.get(base)
        if reason is not None:
            self.findings.fail_closed(text, reason)
        elif base == "shopt" and (why := shell_option_reason("shopt", args)) is not None:
            self.findings.fail_closed(text, why)
        elif base == "let":
            self._arithmetic_names(node, " ".join(word.raw for word in words[first + 1 : last]))
        elif base in ("source", ".") and name == base:
            self._script_file(words, first, last, text, reasons)
        if base in NAME_BUILTINS and name == base:  # the builtin, not some /usr/bin/test
            why = evaluated_names(base, words[first + 1 : last])
            if why is not None:
                self.findings.fail_closed(text, why)
        assigned = assigned_names(base, args) if name == base else None
        for variable in assigned or ():
            if variable is not None:  # an unknown name failed closed above (`_evaluated_names`)
                self._assign(variable, None, text, how=f"`{base}`")

    def _unseen_code(
        self, node: Node | None, parent: Node | None, base: str, args: list[str | None], text: str
    ) -> None:
        """Code in another language the command runs, unless it is inline Python read as inert."""
        options = self.table.code_options_of(base)
        code = inline_code(base, args) if "-c" in args else None  # none without `-c`
        if code is None and node is not None and stdin_code(base, args) and self._fed(node, parent):  # cheap first
            code = self._fed_text(node, parent)
        inert = (
            code is not None
            and self.findings.emitted <= 1  # this command only: nothing before it wrote a module
            and not self.findings.written
            and inert_python(code, self.cwds)
        )
        if options is not None and not inert:
            why = unseen_code(base, options, args, lambda: self._fed(node, parent))
            if why is not None:
                self.findings.fail_closed(text, why)

    def _fed(self, node: Node | None, parent: Node | None) -> bool:
        """Whether a here-document or here-string feeds the command (`node` None: a command read without
        its syntax tree, `plain_line`, which has no redirections)."""
        if node is None:
            return False
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

    def _emit(
        self, words: list[Word], values: list[str | None], first: int, text: str, rest: str, reasons: list[str]
    ) -> None:
        """Record the patterns of the command `values` (the values of `words[first:]`'s command)."""
        self.findings.emitted += 1
        if None in values:  # the literal words are those before the first dynamic one
            tokens = [word.raw if word.value is None else word.value for word in words[first : first + len(values)]]
            literal = tokens[: values.index(None)]
        else:
            tokens = literal = values  # type: ignore[assignment]  # no None among them (a `cast` is a call)
        joined = " ".join(tokens) + rest
        if not reasons and not self.keyword and "/" not in tokens[0] and tokens[0] not in self.table.global_options:
            self._emit_patterns(text, joined, literal)  # the common command: what the rest gives it, directly
            return
        patterns = [text, joined]
        if self.keyword and any(assignment_word(token) for token in tokens):
            # After `set -k`, bash runs the command without its NAME=value words, which become its environment.
            tokens = literal = [token for token in tokens if not assignment_word(token)] or tokens[:1]
            patterns.append(" ".join(tokens) + rest)
            reasons = [*reasons, "after `set -k`, its NAME=value words are its environment, not its arguments"]
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
        named = " ".join(prefix(literal))
        # An "always" rule is a wildcard: a `*` or `?` the model wrote (`git '*'`) would become one.
        always = named + " *" if "*" not in named and "?" not in named else None
        if reasons:
            self.findings.unseen_command(tuple(dict.fromkeys(patterns)), "; ".join(dict.fromkeys(reasons)))
            return
        found = self.findings.patterns
        for pattern in patterns:  # in order, each once
            found[pattern] = None
        if always is not None:
            self.findings.always[always] = None

    def _emit_patterns(self, text: str, joined: str, literal: list[str]) -> None:
        """`_emit` of a command without reasons, `set -k`, a path as its name or global options: its text,
        its words joined, and the always-pattern of its arity prefix."""
        found = self.findings.patterns
        found[text] = None
        found[joined] = None
        named = " ".join(prefix(literal))
        if "*" not in named and "?" not in named:  # a `*` or `?` the model wrote would make it a wildcard
            self.findings.always[named + " *"] = None

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

    def _shell_input(self, node: Node, parent: Node | None, text: str, reasons: list[str]) -> None:
        """A shell without `-c` runs its input: fail closed when something feeds it, parse heredocs."""
        holder = node
        redirects = [child for child in node.named_children if child.type in REDIRECTS]
        if parent is not None and parent.type == "redirected_statement":
            holder = parent
            redirects.extend(parent.named_children)
        fed, scripts = self._redirected_input(redirects)
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

    def _redirected_input(self, redirects: list[Node]) -> tuple[bool, list[str]]:
        """Whether the redirections feed the command's input, and the scripts read from them."""
        scripts: list[str] = []
        fed = False
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
        return fed, scripts

    def _heredoc_bodies(self, redirect: Node) -> list[str]:
        return [
            self._slice(child.start_byte, child.end_byte)
            for child in redirect.named_children
            if child.type == "heredoc_body"
        ]


class _Command(NamedTuple):
    """A simple command being read: its node (and parent), words, their values, and where its text
    (with the redirections that follow it, `rest`) starts and ends."""

    node: Node
    parent: Node | None
    words: list[Word]
    values: list[str | None]
    start: int
    end: int
    rest: str


_new_command = tuple.__new__  # a `_Command` without the keyword-taking constructor, once per command


# A word without any of these is its own value (`evaluate`'s first case) and hides no substitution.
_PLAIN_WORD = re.compile(r"[\\*?\[{`$]")
# A quoted word whose value is the text between its quotes, and which holds nothing bash expands.
_QUOTED = re.compile(r"\"[^\\`$\"]*\"|'[^']*'")
_new_word = tuple.__new__  # a `Word` without the keyword-taking constructor, once per plain word


def _node(word: Word) -> Node:
    """The node of a word a wrapper's inner command starts or ends with: read from the tree, as a line
    with a wrapper always is (`plain_line` reads no wrapper)."""
    assert word.node is not None
    return word.node


def _literal_dropped(kind: str, raw: str) -> bool:
    """Whether a token of type `kind` tree-sitter left out of a command's words is the literal word `raw`
    (`==`, `=~`, `-a$`: a `$` that ends a word expands nothing)."""
    if kind == "$":
        return raw[-1:] == "$" and _LITERAL.fullmatch(raw, 0, len(raw) - 1) is not None
    return kind in _DROPPED and raw == kind


def _hidden(raw: str) -> bool:
    """Whether a plain word holds what bash runs as a command substitution (a backtick, `$(`, `$[`)."""
    return "`" in raw or "$(" in raw or "$[" in raw


def _braced(words: list[Word]) -> bool:
    """Whether a word holds a brace expansion (`{a,b}`) to expand before anything else."""
    return any(word.glob and word.value is not None and "{" in word.value for word in words)


def inert_builtin(head: str, values: list[str | None]) -> bool:
    """Whether a builtin of `INERT` does nothing here (`shopt -s expand_aliases` does something)."""
    return head != "shopt" or shell_option_reason("shopt", values[1:]) is None


# Shell options that change which commands run or where (`shopt -s`, `bash -O`): the line fails closed.
_RUNNING_OPTIONS = {
    "expand_aliases": "lets an alias make a name run other commands",
    "cdable_vars": "lets cd take a variable's value for its directory",
    "lastpipe": "runs a pipeline's last command in this shell, so a cd there moves what follows",
}


def shell_option_reason(program: str, args: list[str | None]) -> str | None:
    """Why `shopt ARGS` or `bash ARGS` (`-O OPTION`) turns on an option that changes what runs or
    where, or sets one only known when it runs; None when it does neither."""
    if program == "shopt":
        named = [arg for arg in args if arg is None or arg[:1] != "-"]
        if not any(arg is None or arg[:1] == "-" and "s" in arg for arg in args):
            named = [arg for arg in named if arg in ("expand_aliases",)]  # printing or unsetting: no change
    else:
        named = [args[index + 1] for index, arg in enumerate(args[:-1]) if arg == "-O"]
    for option in named:
        if option is None:
            return f"`{program}` sets a shell option only known when it runs"
        why = _RUNNING_OPTIONS.get(option)
        if why is not None:
            return f"{program} {'-s' if program == 'shopt' else '-O'} {option} {why}"
    return None


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


def has_option(arg: str | None, options: frozenset[str]) -> bool:
    """`arg` is one of `options`, with an attached `=value`, a prefix of a long one (`--deref` for
    `--dereference`: getopt_long takes any unambiguous prefix), or a cluster holding a short one (`-rL`)."""
    if arg is None or arg[:1] != "-":
        return False
    name = arg.partition("=")[0] if "=" in arg else arg
    if name in options:
        return True
    if arg[1:2] == "-":
        return long_option(name, options) is not None
    for letter in arg[1:]:  # a loop: cheaper than `any` over a generator
        if "-" + letter in options:
            return True
    return False
