"""Wildcard matching, ported from OpenCode's wildcard tests (v1.1 semantics: `*` crosses `/`)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolrt.permissions.wildcard import compile_matcher, compile_pattern, expand_pattern, fold, literal_prefix, match


@pytest.mark.parametrize(
    ("text", "pattern", "expected"),
    [
        # glob tokens
        ("file1.txt", "file?.txt", True),
        ("file12.txt", "file?.txt", False),
        ("foo+bar", "foo+bar", True),
        # trailing " *" is optional; "ls*" is the dangerous prefix form
        ("ls", "ls *", True),
        ("ls -la", "ls *", True),
        ("ls foo bar", "ls *", True),
        ("ls", "ls*", True),
        ("lstmeval", "ls*", True),
        ("lstmeval", "ls *", False),
        ("git status", "git *", True),
        ("git", "git *", True),
        ("git commit -m foo", "git *", True),
        # backslashes fold to slashes on both sides
        ("C:\\Windows\\System32\\*", "C:/Windows/System32/*", True),
        ("C:/Windows/System32/drivers", "C:\\Windows\\System32\\*", True),
        # case-sensitive off Windows
        ("/users/test/file", "/Users/test/*", False),
        # `*` crosses `/` (upstream v1.1), which the `.env` defaults rely on
        ("/abs/dir/.env", "*.env", True),
        ("src/.env", "*.env", True),
        (".envrc", "*.env.*", False),
        ("a/b/c", "a*c", True),
        # anchored both ends
        ("xls -la", "ls *", False),
        ("ls -la\n", "ls", False),
        # dot-all: `*` and `?` match newlines too
        ("echo a\necho b", "echo *", True),
        ("a\nb", "a?b", True),
        # only the end of the pattern gets the optional tail
        ("git push", "git * push", False),
        ("", "*", True),
        ("", " *", True),
        ("x", " *", False),
    ],
)
def test_match(text: str, pattern: str, expected: bool) -> None:
    assert match(text, pattern) is expected


METACHARACTERS = ".^$+{}()|[]-#&~=!<>:,/\"'%@`;"


@pytest.mark.parametrize("char", list(METACHARACTERS))
def test_every_regex_metacharacter_is_literal(char: str) -> None:
    pattern = f"a{char}b"
    compiled = compile_pattern(pattern)
    assert match(f"a{char}b", pattern)
    assert compiled.fullmatch("axb") is None
    # the same character next to wildcards still compiles and stays literal
    assert match(f"pre a{char}{char}b post", f"* a{char}{char}b *")
    assert not match("pre axxb post", f"* a{char}{char}b *")


@pytest.mark.parametrize("pattern", ["(", ")", "[", "[a-", "{1", "a{2,1}", "\\", "*(?P<x>", "$^", "a|b", "(?i)A"])
def test_patterns_that_are_invalid_regexes_compile_and_match_themselves(pattern: str) -> None:
    assert isinstance(compile_pattern(pattern), re.Pattern)
    assert match(pattern.replace("\\", "/"), pattern)


def test_alternation_is_not_interpreted() -> None:
    assert not match("a", "a|b")
    assert not match("b", "a|b")


@pytest.mark.usefixtures("untraced")  # a property pass: see conftest.untraced
@given(st.text(alphabet=st.characters(blacklist_characters="*?\\"), max_size=20))
def test_a_pattern_without_wildcards_matches_exactly_itself(text: str) -> None:
    assert match(text, text)
    assert not match(text + "x", text)


def test_compile_is_cached() -> None:
    assert compile_pattern("src/*.py") is compile_pattern("src/*.py")


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("~/projects/*", "/home/u/projects/*"),
        ("~", "/home/u"),
        ("$HOME/projects/*", "/home/u/projects/*"),
        ("$HOME", "/home/u"),
        ("$HOMEfoo", "/home/ufoo"),
        ("/some/~/path", "/some/~/path"),
        ("~user/x", "~user/x"),
        ("x$HOME", "x$HOME"),
        ("$TOOLRT_DATA/plans/*", "/var/data/plans/*"),
        ("$TOOLRT_DATA", "/var/data"),
        ("$TOOLRT_DATAX", "$TOOLRT_DATAX"),
        ("src/$TOOLRT_DATA", "src/$TOOLRT_DATA"),
    ],
)
def test_expand_pattern(pattern: str, expected: str) -> None:
    assert expand_pattern(pattern, home="/home/u", data_dir="/var/data/") == expected


def test_data_variable_stays_literal_without_a_data_dir() -> None:
    assert expand_pattern("$TOOLRT_DATA/x", home="/h", data_dir=None) == "$TOOLRT_DATA/x"


@pytest.mark.parametrize(
    ("pattern", "prefix"),
    [("git status*", "git status"), ("ls *", "ls"), (" *", ""), ("*.env", ""), ("a?b", "a"), ("C:\\x\\*", "C:/x/")],
)
def test_literal_prefix(pattern: str, prefix: str) -> None:
    assert literal_prefix(pattern) == prefix


SHAPES = ["abc", "ab*", "*bc", "a*c", "*b*", "ab *", "a?c", "*.env.*", "a b *", " *", "*", "**", "a*b*c", "?", ""]


@pytest.mark.usefixtures("untraced")  # a property pass: see conftest.untraced
@pytest.mark.parametrize("pattern", SHAPES)
@given(text=st.text(alphabet="abc .\n/\\", max_size=8))
def test_fast_matchers_agree_with_the_regex(pattern: str, text: str) -> None:
    assert compile_matcher(pattern)(fold(text)) is (compile_pattern(pattern).fullmatch(fold(text)) is not None)
