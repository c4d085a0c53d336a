"""OpenCode's `replace` cases: each replacer, the order, uniqueness, replaceAll and the error texts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolrt.builtin.replacers import (
    MULTIPLE_MATCHES,
    NOT_FOUND,
    REPLACERS,
    SAME_STRINGS,
    Replacer,
    block_anchor,
    context_aware,
    escape_normalized,
    indentation_flexible,
    levenshtein,
    line_trimmed,
    multi_occurrence,
    replace,
    simple,
    trimmed_boundary,
    whitespace_normalized,
)
from toolrt.errors import ToolFailure


def test_replacers_run_in_opencode_order() -> None:
    assert [r.__name__ for r in REPLACERS] == [
        "simple",
        "line_trimmed",
        "block_anchor",
        "whitespace_normalized",
        "indentation_flexible",
        "escape_normalized",
        "trimmed_boundary",
        "context_aware",
        "multi_occurrence",
    ]


@pytest.mark.parametrize(
    ("replacer", "content", "find", "expected"),
    [
        (simple, "anything", "needle", ["needle"]),
        (line_trimmed, "def f():\n    return 1\n", "def f():\nreturn 1", ["def f():\n    return 1"]),
        (line_trimmed, "a\n  b  \nc", "b\n", ["  b  "]),
        (line_trimmed, "a\nb", "x", []),
        (
            block_anchor,
            "def f():\n    x = 1\n    y = 2\n    return x\n",
            "def f():\n    x = 100\n    y = 200\n    return x",
            ["def f():\n    x = 1\n    y = 2\n    return x"],
        ),
        (block_anchor, "start\nfoo\nend\nstart\nbar\nend", "start\nbaz\nend", ["start\nbar\nend"]),
        (block_anchor, "start\nfoo\nend\nstart\nbar\nend", "start\nqqqqqq\nend", []),
        (block_anchor, "a\nb\nc", "a\nc", []),
        (whitespace_normalized, "if  (a   &&  b) {\n}", "if (a && b) {", ["if  (a   &&  b) {"]),
        (whitespace_normalized, "x = foo(  a,  b  ) + 1", "foo( a, b )", ["foo(  a,  b  )"]),
        (whitespace_normalized, "one\n  two   three\nfour", "one\ntwo three", ["one\n  two   three"]),
        (
            indentation_flexible,
            "class A:\n    def f(self):\n        return 1\n",
            "def f(self):\n    return 1",
            ["    def f(self):\n        return 1"],
        ),
        (escape_normalized, 'say("hi")\n', 'say(\\"hi\\")', ['say("hi")', 'say("hi")']),
        (escape_normalized, "a\tb", "a\\tb", ["a\tb", "a\tb"]),
        (escape_normalized, 'x = "a\\nb"', 'x = "a\\\\nb"', ['x = "a\\nb"']),
        (trimmed_boundary, "x\nfoo()\ny", "  foo()  \n", ["foo()"]),
        (trimmed_boundary, "x\n  foo()\ny", "  foo()  ", ["foo()", "  foo()"]),
        (trimmed_boundary, "x\nfoo()\ny", "foo()", []),
        (context_aware, "a\nb\nc\nd\n", "a\nX\nc\nd", ["a\nb\nc\nd"]),
        (context_aware, "a\nb\nc\nd\n", "a\nX\nY\nd", []),
        (context_aware, "a\nb\nd", "a\nd", []),
        (multi_occurrence, "x x x", "x", ["x", "x", "x"]),
        (multi_occurrence, "abc", "", []),
    ],
)
def test_each_replacer_yields_its_candidates(replacer: Replacer, content: str, find: str, expected: list[str]) -> None:
    assert list(replacer(content, find)) == expected


@pytest.mark.parametrize(
    ("content", "old", "new", "replace_all", "expected"),
    [
        ("a = 1\nb = 2\n", "b = 2", "b = 3", False, "a = 1\nb = 3\n"),
        ("def f():\n    return 1\n", "def f():\nreturn 1", "def g():\n    return 2", False, "def g():\n    return 2\n"),
        ("if  (a   &&  b) {\n}", "if (a && b) {", "if (x) {", False, "if (x) {\n}"),
        ("a b a", "a", "c", True, "c b c"),
        ("one\ntwo\none\n", "one", "1", True, "1\ntwo\n1\n"),
        ("price = 1", "1", "$& $$ $'", False, "price = $& $$ $'"),
        ("unique\nline\nhere", "  unique\nline  ", "X", False, "X\nhere"),
    ],
)
def test_replace(content: str, old: str, new: str, replace_all: bool, expected: str) -> None:
    assert replace(content, old, new, replace_all) == expected


def test_a_later_replacer_wins_when_an_earlier_candidate_is_ambiguous() -> None:
    # "x = 1" occurs twice exactly; the block with its indentation-insensitive neighbours is unique.
    content = "x = 1\ndef f():\n    x = 1\n    return x\n"
    assert replace(content, "def f():\nx = 1", "def f():\n    x = 2") == "x = 1\ndef f():\n    x = 2\n    return x\n"


@pytest.mark.parametrize(
    ("content", "old", "new", "replace_all", "message"),
    [
        ("a\nb\na\n", "a", "c", False, MULTIPLE_MATCHES),
        ("a\nb\n", "zzz", "c", False, NOT_FOUND),
        ("a\nb\n", "zzz", "c", True, NOT_FOUND),
        ("a\nb\n", "a", "a", False, SAME_STRINGS),
        ("abc", "   ", "x", False, NOT_FOUND),
        ("abc", "   ", "x", True, NOT_FOUND),
    ],
)
def test_replace_errors(content: str, old: str, new: str, replace_all: bool, message: str) -> None:
    with pytest.raises(ToolFailure, match=f"^{re.escape(message)}$"):
        replace(content, old, new, replace_all)


def test_error_texts_are_opencode_v1_1() -> None:
    assert NOT_FOUND.startswith("oldString not found in content. Read the file again and copy the exact text")
    assert MULTIPLE_MATCHES == (
        "Found multiple matches for oldString. "
        "Provide more surrounding lines in oldString to identify the correct match."
    )
    assert SAME_STRINGS == "oldString and newString must be different"


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [("kitten", "sitting", 3), ("", "abc", 3), ("abc", "", 3), ("abc", "abc", 0), ("flaw", "lawn", 2), ("ab", "ba", 2)],
)
def test_levenshtein(a: str, b: str, distance: int) -> None:
    assert levenshtein(a, b) == distance
    assert levenshtein(b, a) == distance


@pytest.mark.usefixtures("untraced")  # a property pass: see conftest.untraced
@given(st.text(alphabet="ab\n ", max_size=30), st.text(alphabet="cd", min_size=1, max_size=5), st.text(max_size=5))
def test_a_unique_exact_substring_is_replaced_exactly_once(prefix: str, needle: str, new: str) -> None:
    content = prefix + needle + prefix
    if new == needle:
        return
    assert replace(content, needle, new) == prefix + new + prefix
