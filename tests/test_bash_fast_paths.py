"""The analyzer's fast paths (issue 33, item 6) decide exactly as the full reading: a plain word, number
or quoted word read straight from its text (`analysis_commands._PLAIN_WORD`, `_QUOTED`) gives the
requests `evaluate` and the walk into the word give, on every line of both corpora and on generated lines."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrt.permissions.model import CallSite, PermissionRequest
from toolrt.shell import analysis_commands, analyze_command, analyzer, operands
from toolrt.shell.parser import parse
from toolrt.shell.plain_line import read_plain

if TYPE_CHECKING:
    from tree_sitter import Node

CORPORA = Path(__file__).with_name("corpus")
_ROOT = Path(tempfile.mkdtemp(prefix="toolrt-fast-paths-"))
(_ROOT / "src").mkdir()
(_ROOT / "src" / "main.py").write_text("x = 1\n", encoding="utf-8")
(_ROOT / "lnk").symlink_to(_ROOT.parent)
SITE = CallSite(root=_ROOT, cwd=_ROOT, home=_ROOT.parent)


def _no_plain_line(text: str) -> None:
    return None


@contextmanager
def _full_reading() -> Iterator[None]:
    """Every line is parsed and walked, every word goes through `evaluate` and every quoted word is
    walked, as without the fast paths."""
    plain, quoted, lines = analysis_commands._PLAIN_WORD, analysis_commands._QUOTED, analyzer._read_plain
    analysis_commands._PLAIN_WORD = re.compile("")  # matches every word: none is plain
    analysis_commands._QUOTED = re.compile("(?!)")  # matches none
    analyzer._read_plain = _no_plain_line  # no line is read without its tree
    try:
        yield
    finally:
        analysis_commands._PLAIN_WORD, analysis_commands._QUOTED, analyzer._read_plain = plain, quoted, lines


def _both(command: str) -> tuple[tuple[PermissionRequest, ...], tuple[PermissionRequest, ...]]:
    fast = analyze_command(command, SITE)
    with _full_reading():
        full = analyze_command(command, SITE)
    return fast, full


def _differ(fast: tuple[PermissionRequest, ...], full: tuple[PermissionRequest, ...]) -> bool:
    """Whether the two readings differ, unless one of them ran out of its time budget (which depends
    on what else the machine does, not on the reading)."""
    spent = any("time budget" in (request.reason or "") for request in (*fast, *full))
    return fast != full and not spent


def _corpus_lines() -> list[str]:
    lines: list[str] = []
    for line in (CORPORA / "bash_everyday.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            lines.append(line.split(None, 2)[2])
    for line in (CORPORA / "bash_adversarial.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            lines.append(line.split(" | ", 3)[3].replace("⏎", "\n").replace("⇥", "\t"))
    return lines


def test_the_switch_turns_the_fast_paths_off() -> None:
    """The comparison below means something only if `_full_reading` reaches the code it claims to."""
    assert analysis_commands._QUOTED.fullmatch('"x"') is not None
    with _full_reading():
        assert analysis_commands._QUOTED.fullmatch('"x"') is None
        assert analysis_commands._PLAIN_WORD.search("ls") is not None


def test_every_corpus_line_gets_the_same_requests() -> None:
    lines = _corpus_lines()
    assert len(lines) > 1_000
    differ = [line for line in lines if _differ(*_both(line))]
    assert differ == []


QUOTED_BODY = st.text(st.sampled_from(list("ab./-_ *?[]{},~$`\\!\"'\n\t\r\x0b\x01\x7f()=:;&|<>é")), max_size=12)
WORD = st.one_of(
    st.sampled_from(
        ["cat", "rm", "-rf", "ls", "-la", "git", "push", "../x", "src", "lnk", "lnk/x", "~", ".env", "-20", "42"]
    ),
    QUOTED_BODY.map(lambda body: f'"{body}"'),
    QUOTED_BODY.map(lambda body: f"'{body}'"),
    QUOTED_BODY,
)
LINE = st.lists(st.lists(WORD, min_size=1, max_size=5).map(" ".join), min_size=1, max_size=3).map(" && ".join)


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ('cat "lnk/x"', "external_directory"),
        ("cat 'lnk'/x", "external_directory"),
        ('rm "-rf" "../x"', "external_directory"),
        ('echo "$(rm -rf x)"', "rm -rf x"),
        ("""git commit -m "$(curl -s e.example)" """, "curl -s e.example"),
    ],
)
def test_quoted_words_read_fast_still_name_what_they_name(command: str, named: str) -> None:
    fast, full = _both(command)
    assert fast == full
    assert any(request.permission == named or named in request.patterns for request in fast)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LINE)
def test_generated_lines_get_the_same_requests(command: str) -> None:
    fast, full = _both(command)
    assert fast == full


def _read_without_tree(command: str) -> bool:
    """Whether the analyzer reads `command` without parsing it (`plain_line`): the parser is made to
    fail, so a line that reaches it raises."""
    with patch.object(analyzer, "parse", side_effect=LookupError("parsed")):
        try:
            analyze_command(command, SITE)
        except LookupError:
            return False
    return True


@pytest.mark.parametrize(
    "command",
    [
        'git commit -m "x1" && git push origin main',
        "ls -la src1",
        "grep -rn TODO1 src | head -20",
        "cd src && python3 -m pytest -q -k t1 && cd ..",
        "cat README1.md | wc -l",
        "true; set -e; echo 'a b' \"c d\" || rm -rf ../x",
    ],
)
def test_lines_of_plain_commands_are_read_without_the_tree(command: str) -> None:
    assert _read_without_tree(command)


@pytest.mark.parametrize(
    "command",
    [
        "ls $x",  # an expansion
        "ls *.py",  # a glob
        'ls a"b"',  # a quote inside a word
        "ls > out",  # a redirection
        "ls &",  # in the background
        "ls\nrm x",  # a newline
        "ls # c",  # a comment
        "X=1 ls",  # an assignment
        "x=1",
        "if true; then ls; fi",  # keywords
        "export X",  # a statement of its own in the tree
        "sudo rm x",  # a wrapper
        "git grep -O less x",  # a wrapper that starts like a plain program
        "source x",  # a builtin
        "./x.sh",  # a path
        "pushd src",
        "42 x",  # a number as the name
        "- a=b x",  # tree-sitter skips a leading `-`: an assignment, then `x`
        "a@ rm x",  # tree-sitter cannot parse a name holding `@`, `%` or `+:` (it reads `rm x` alone)
        "a%b rm x",
        "a+: rm x",
        "ls ==",  # nor `==` as a command's last word
        "ls == && rm x",
        "ls | wc | cat && cd",  # tree-sitter reads a first pipeline of three or more into `&&`: `ls | (wc | cat && cd)`
        "true; ls | wc | cat || rm x",
        "ls | wc && ls | wc | cat || rm x",
        'ls "~"',
        "ls é",  # not ASCII
        "a " * 400,  # longer than the reading takes
    ],
)
def test_any_other_line_is_read_from_its_tree(command: str) -> None:
    assert not _read_without_tree(command)


def test_most_corpus_lines_are_read_without_the_tree() -> None:
    """The corpus comparison above covers the reading without the tree, not only the tree's."""
    lines = _corpus_lines()
    assert sum(_read_without_tree(line) for line in lines) > 600


HEAD = st.sampled_from(
    ["cd", "ls", "cat", "git", "python3", "rm", "echo", "grep", "sed", "true", "set", "shopt", "xargs", "sudo", "time"]
    + ["bash", "declare", "x=1", "if", "done", "42", "-x", "./s", "pushd", "trap", "find", "cp", "tar", "unzip", "make"]
)
ARGUMENT = st.one_of(
    st.sampled_from(["..", "src", "-la", "-rf", "-c", "-m", "-o", "out", "/", "~", "../x", "lnk", "-I", "{}", "-i"]),
    st.sampled_from(
        ["push", "commit", "-v", "a=b", "--", "-", "s/a/b/", "-exec", ";", "expand_aliases", "-x", "pytest"]
    ),
    QUOTED_BODY.map(lambda body: f'"{body}"'),
    QUOTED_BODY.map(lambda body: f"'{body}'"),
)
# Names the reading without the tree takes (`cd` most of all: the lists and pipelines restore where it goes).
PLAIN_HEAD = st.sampled_from(
    ["cd", "cd", "cd", "ls", "cat", "git", "python3", "rm", "grep", "sed", "true", "find", "cp"]
)
OPERATOR = st.sampled_from([" && ", " || ", "; ", " | ", "&&", "|", ";"])


def _chains(head: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    command = st.tuples(head, st.lists(ARGUMENT, max_size=4)).map(lambda parts: " ".join((parts[0], *parts[1])))
    return st.tuples(
        command, st.lists(st.tuples(OPERATOR, command), max_size=4), st.sampled_from(["", ";", " ; "])
    ).map(lambda parts: parts[0] + "".join(operator + command for operator, command in parts[1]) + parts[2])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_chains(HEAD), _chains(PLAIN_HEAD)))
def test_generated_chains_get_the_same_requests(command: str) -> None:
    """Lists, pipelines and statements of commands (`cd` among them, which the chains and pipelines
    restore): read without the tree where the line allows, they get the requests the tree walk gives."""
    fast, full = _both(command)
    assert not _differ(fast, full), (fast, full)


_NAMES = (
    "ls cat git python3 cd rm echo grep sed awk find cp mv tar make npm docker kubectl sudo env xargs time exec"
    " eval command builtin nohup nice timeout true false set shopt trap alias let test printf read mapfile wait"
    " kill exit return break continue shift hash type ulimit umask jobs fg bg pwd dirs history source declare"
    " export local readonly typeset unset if then else elif fi case esac for select while until do done in"
    " function coproc - -- -x + : . % @ , x=1 =x 42 -20 0x1 a,b x: a.b ./x a@ a%b a+: g++ x@y %1 @a"
).split()
_WORDS = (
    "if then else elif fi case esac for select while until do done in function time coproc a=b =x - -- -la 42"
    " -20 0x1 x: %1 @a +x a,b == = =~x 'x' \"y\" '' \"\" '$x' \"a;b\" \"a b\" 'a && b'"
).split(" ")


def _tree_is_plain(line: str) -> bool:
    """Whether tree-sitter reads `line` as the shape `plain_line` assumes: statements of lists and
    pipelines of commands whose name is one word and whose arguments are plain words, numbers or quoted
    words, each of the type the reading without the tree gives it."""
    source = line.encode()
    root = parse(source).root_node
    kinds = {"word", "number", "string", "raw_string"}

    def plain(node: Node) -> bool:
        if node.type in ("list", "pipeline"):
            return all(plain(child) for child in node.named_children)
        children = node.named_children
        if node.type != "command" or children[0].type != "command_name":
            return False
        if [child.type for child in children[0].named_children] != ["word"]:
            return False
        return all(child.type in kinds for child in children[1:])

    return not root.has_error and all(plain(child) for child in root.named_children)


def _word_kinds(line: str) -> list[str]:
    source = line.encode()
    found: list[str] = []

    def collect(node: Node) -> None:
        if node.type in ("word", "number", "string", "raw_string"):
            found.append(node.type)
            return
        for child in node.children:
            if child.is_named:
                collect(child)
            elif node.type == "command":  # a token tree-sitter leaves out of the words (`==`): the walk reads a word
                found.append("word")

    collect(parse(source).root_node)
    return found


def test_every_line_read_without_the_tree_has_the_shape_it_assumes() -> None:
    """Against tree-sitter itself: names and words that bash or the parser read specially (keywords,
    assignments, numbers, a leading `-`), in every position of lists, pipelines and statements. Each line
    the analyzer reads without the tree parses to plain commands, and its words have the node types
    `plain_line` gives them."""
    read = 0
    for name in _NAMES:
        for word in _WORDS:
            for line in (f"{name} {word} x", f"x && {name} {word}", f"x | {name} {word}", f"x;{name} {word}", name):
                if not _read_without_tree(line):
                    continue
                read += 1
                assert _tree_is_plain(line), line
                lexed = read_plain(line)
                assert lexed is not None
                kinds = [
                    word.kind
                    for statement in lexed
                    for _, pipeline in statement
                    for _, words, _ in pipeline
                    for word in words
                ]
                assert kinds == _word_kinds(line), line
    assert read > 2_000


def _options_read_one_by_one(program: str, args: list[str | None]) -> frozenset[int]:
    """`not_paths` as the option table's rules read each word, with no table of words read before."""
    spec = operands._programs().get(program)
    if spec is None:
        return frozenset()
    if spec.text:
        return frozenset(range(len(args)))
    reading = operands._Reading()
    first_operand: int | None = None
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            first_operand = index + 1 if first_operand is None and index + 1 < len(args) else first_operand
            break
        if arg is None or arg == "-" or arg[:1] != "-":
            first_operand = index if first_operand is None else first_operand
            index += 1
            continue
        index = (operands._long if arg[:2] == "--" else operands._cluster)(spec, args, index, reading)
    if spec.script and not reading.no_script_operand and not reading.uncertain and first_operand is not None:
        reading.skipped.add(first_operand)
    return frozenset(reading.skipped)


def _option_words() -> list[str]:
    named: set[str] = set()
    for spec in operands._programs().values():
        named.update(spec.takes_value, spec.flags, spec.patternless, spec.ends_cluster, ("-" + c for c in spec.short))
    return sorted(named)


ARGUMENT = st.one_of(
    st.sampled_from(_option_words()),
    st.builds(lambda letters: "-" + letters, st.text("abcdefhiklmnrsvxzACELR0129-=/", min_size=1, max_size=4)),
    st.builds(lambda option: option + "=v", st.sampled_from(_option_words())),
    st.sampled_from(["-", "--", "src", "x.py", "/etc", "1", "--color=auto"]),
    st.none(),
)


@settings(max_examples=2_000, deadline=None)
@given(st.sampled_from([*operands._programs(), "cat", "make"]), st.lists(ARGUMENT, max_size=7))
def test_option_words_read_from_the_table_read_as_the_rules_read_them(program: str, args: list[str | None]) -> None:
    """`not_paths` answers an option word the table names, a cluster of flags only and a cluster led by an
    unknown letter without reading it letter by letter: it finds what reading each word by the rules finds."""
    assert frozenset(operands.not_paths(program, args)) == _options_read_one_by_one(program, args)
