"""Hostile argument values must stay data: as an argv element, and shell-quoted into `/bin/sh -c`.

Every payload tries to create a file: `pwned` in the working directory, or the absolute canary path
substituted for `CANARY`. After each run the working directory must still be empty, the canary
absent, and the command's output must be the payload byte for byte (invalid UTF-8 aside, which comes
back as U+FFFD). The shell path is the mechanism the template layer uses: every value goes through
`shlex.quote`, and a list becomes several quoted words.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from toolrt.errors import ToolFailure
from toolrt.execute import ProcessOutcome, build_env, run_process

ENV = build_env()

PAYLOADS: list[str] = [
    # command separators and operators
    "; touch pwned",
    "&& touch pwned",
    "|| touch pwned",
    "| touch pwned",
    "& touch pwned",
    "x;touch pwned;x",
    "\ntouch pwned",
    "\r\ntouch pwned\n",
    "\ttouch\tpwned",
    "#; touch pwned",
    # substitutions
    "`touch pwned`",
    "$(touch pwned)",
    "$( touch CANARY )",
    "$((1+1))$(touch pwned)",
    "<(touch pwned)",
    ">(touch pwned)",
    "$'\\x3btouch pwned'",
    # quotes of every kind, balanced and not
    "'",
    '"',
    "`",
    "x'; touch pwned; '",
    'x"; touch pwned; "',
    'x"$(touch pwned)"',
    "'$(touch pwned)'",
    "'\"'\"'; touch pwned; echo '",
    "\\'; touch pwned #",
    "\u2018; touch pwned\u2019",  # typographic quotes
    "' \" ` $ \\ ; | & < > ( ) { } [ ]",
    # variables and IFS
    "$IFS;touch${IFS}pwned",
    "x;touch$IFS'pwned'",
    "IFS=x; touch pwned",
    "${HOME}",
    "$HOME",
    "${PATH:0:1}",
    "$0",
    "${IFS}",
    # globs and expansions
    "*",
    "../*",
    "/etc/pass*",
    "?[a-z]*",
    "{a,b}touch pwned",
    "~",
    "~root",
    "!!",
    # redirections
    "> pwned",
    ">> pwned",
    "2>pwned",
    "< /etc/passwd",
    "> CANARY",
    # leading dashes and option-looking values
    "-n",
    "--",
    "--help",
    "-rf /",
    "--output=pwned",
    "-e \\x41",
    # format strings and templates
    "%s%s%s%n",
    "%x %p %d %%",
    "{{ 7*7 }}",
    "{% for x in range(3) %}x{% endfor %}",
    "{{ ''.__class__.__mro__ }}",
    # backslashes
    "\\",
    "\\\\; touch pwned",
    "a\\\nb",
    # words that are commands only if something runs them
    "touch pwned",
    "eval touch pwned",
    "exec touch CANARY",
    # unicode and control characters
    "é ✓ 中文 🎉; touch pwned",
    "\u202e; touch pwned",  # right-to-left override
    "\u00a0;\u00a0touch pwned",  # no-break spaces
    "a\x1b[31mred\x1b[0m",
    "\x7f\x01\x02 control",
    # non-UTF-8 bytes (as surrogateescape text, the way Python carries them in argv)
    b"\xff\xfe; touch pwned".decode("utf-8", "surrogateescape"),
    b"\xc3(`touch pwned`\x80".decode("utf-8", "surrogateescape"),
    # very long
    "A" * 100_000 + "; touch pwned",
]


def run(argv: Sequence[str], cwd: Path) -> ProcessOutcome:
    async def main() -> ProcessOutcome:
        return await run_process(argv, cwd=cwd, env=ENV, timeout=20)

    return anyio.run(main)


@pytest.fixture
def arena(tmp_path: Path) -> tuple[Path, Path]:
    """(empty working directory, canary path outside it)."""
    work = tmp_path / "work"
    work.mkdir()
    return work, tmp_path / "canary"


def _arm(payload: str, canary: Path) -> str:
    return payload.replace("CANARY", str(canary))


def _shown(payload: str) -> str:
    """What printf prints for the payload, as the runner decodes it."""
    return os.fsencode(payload).decode("utf-8", "replace")


def _assert_untouched(work: Path, canary: Path) -> None:
    assert list(work.iterdir()) == []
    assert not canary.exists()


def test_corpus_is_large_enough() -> None:
    assert len(PAYLOADS) >= 50
    assert len(set(PAYLOADS)) == len(PAYLOADS)


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_argv_element_is_never_code(payload: str, arena: tuple[Path, Path]) -> None:
    work, canary = arena
    value = _arm(payload, canary)
    outcome = run(["printf", "%s", value], work)
    _assert_untouched(work, canary)
    assert (outcome.exit_code, outcome.output) == (0, _shown(value))


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_shell_quoted_value_is_never_code(payload: str, arena: tuple[Path, Path]) -> None:
    work, canary = arena
    value = _arm(payload, canary)
    outcome = run(["/bin/sh", "-c", "printf %s " + shlex.quote(value)], work)
    _assert_untouched(work, canary)
    assert (outcome.exit_code, outcome.output) == (0, _shown(value))


def test_shell_quoted_list_becomes_one_word_per_item(arena: tuple[Path, Path]) -> None:
    work, canary = arena
    values = [_arm(p, canary) for p in PAYLOADS if len(p) < 1000]
    outcome = run(["/bin/sh", "-c", "printf '%s\\n' " + " ".join(shlex.quote(v) for v in values)], work)
    _assert_untouched(work, canary)
    assert outcome.output == "".join(_shown(v) + "\n" for v in values)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("a\0; touch pwned", r"contains a NUL byte, which a command line cannot carry"),
        ("\0", r"contains a NUL byte"),
        ("B" * 1_000_000 + "; touch pwned", r"Argument list too long"),
    ],
    ids=["nul", "bare-nul", "1mb"],
)
@pytest.mark.parametrize("path", ["argv", "shell"])
def test_values_no_command_line_can_carry_fail_cleanly(
    payload: str, message: str, path: str, arena: tuple[Path, Path]
) -> None:
    work, canary = arena
    argv = ["printf", "%s", payload] if path == "argv" else ["/bin/sh", "-c", "printf %s " + shlex.quote(payload)]
    with pytest.raises(ToolFailure, match=message):
        run(argv, work)
    _assert_untouched(work, canary)
