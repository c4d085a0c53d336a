"""The analyzer's fast paths (issue 33, item 6) decide exactly as the full reading: a plain word, number
or quoted word read straight from its text (`analysis_commands._PLAIN_WORD`, `_QUOTED`) gives the
requests `evaluate` and the walk into the word give, on every line of both corpora and on generated lines."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrt.permissions.model import CallSite, PermissionRequest
from toolrt.shell import analysis_commands, analyze_command

CORPORA = Path(__file__).with_name("corpus")
_ROOT = Path(tempfile.mkdtemp(prefix="toolrt-fast-paths-"))
(_ROOT / "src").mkdir()
(_ROOT / "src" / "main.py").write_text("x = 1\n", encoding="utf-8")
(_ROOT / "lnk").symlink_to(_ROOT.parent)
SITE = CallSite(root=_ROOT, cwd=_ROOT, home=_ROOT.parent)


@contextmanager
def _full_reading() -> Iterator[None]:
    """Every word goes through `evaluate` and every quoted word is walked, as without the fast paths."""
    plain, quoted = analysis_commands._PLAIN_WORD, analysis_commands._QUOTED
    analysis_commands._PLAIN_WORD = re.compile("")  # matches every word: none is plain
    analysis_commands._QUOTED = re.compile("(?!)")  # matches none
    try:
        yield
    finally:
        analysis_commands._PLAIN_WORD, analysis_commands._QUOTED = plain, quoted


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
