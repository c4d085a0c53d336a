"""bash is the oracle (issue 11, item 1): what the analyzer asks is never weaker than what bash did.

The adversarial corpus (tests/corpus/bash_adversarial.txt) gives each line the action the analyzer
must answer under the issue's allow-list and deny-list rulesets. Every line, and lines a hypothesis
grammar generates, also run under real bash confined in a user + mount + network namespace
(tests/bash_oracle.py): every program bash executed is judged by the rules as it really ran, and
every workspace path outside the project it touched asks. The analyzer's action must be at least
as strict under both rulesets. What the oracle cannot see (inside git, sed, awk, tar) rests on the
corpus annotations.

The CI-sized run takes well under the 120 s budget; `pytest -m fuzz` runs the grammar much longer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from bash_oracle import (
    ALLOW_LIST,
    DENY_LIST,
    Observation,
    analyzer_action,
    make_workspace,
    oracle_action,
    run_lines,
    unavailable,
    weaker,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrt.permissions.model import CallSite

CORPUS = Path(__file__).with_name("corpus") / "bash_adversarial.txt"
CLASSES = (
    "leaf",
    "arith",
    "table",
    "lexing",
    "cwd",
    "paths",
    "env",
    "wrapper",
    "downgrade",
    "control",
    "found",
    "assign",
    "default",
    "glob",
)


def load_corpus() -> list[tuple[str, str, str, str]]:
    """(class, allow-list action, deny-list action, line) for every entry of the corpus file."""
    entries = []
    for raw in CORPUS.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        kind, allow, deny, line = raw.split(" | ", 3)
        entries.append((kind.strip(), allow.strip(), deny.strip(), line.replace("⏎", "\n").replace("⇥", "\t")))
    return entries


ENTRIES = load_corpus()
CORPUS_PARTS = 4
"""The corpus runs under bash in this many interleaved parts, one namespace each (workers share them out)."""


@pytest.fixture(scope="module")
def workspace() -> Iterator[tuple[Path, CallSite]]:
    yield make_workspace()


def test_the_corpus_has_three_hundred_lines_in_every_class() -> None:
    assert len(ENTRIES) >= 300
    assert len({line for *_, line in ENTRIES}) == len(ENTRIES), "duplicate lines"
    counts = Counter(kind for kind, *_ in ENTRIES)
    assert set(counts) == set(CLASSES), counts
    for kind, allow, deny, _ in ENTRIES:
        assert kind in CLASSES
        assert allow in ("allow", "ask", "deny")
        assert deny in ("allow", "ask", "deny")


@pytest.mark.parametrize(
    ("kind", "allow_list", "deny_list", "line"), ENTRIES, ids=[f"{k}:{line[:50]!r}" for k, _, _, line in ENTRIES]
)
def test_corpus_line_gets_its_annotated_action(
    workspace: tuple[Path, CallSite], kind: str, allow_list: str, deny_list: str, line: str
) -> None:
    _, site = workspace
    assert (analyzer_action(line, site, ALLOW_LIST), analyzer_action(line, site, DENY_LIST)) == (
        allow_list,
        deny_list,
    )


def _check_against_bash(lines: list[str], site: CallSite, root: Path) -> list[Observation]:
    observations = run_lines(lines, root)
    problems = [problem for line, seen in zip(lines, observations, strict=True) for problem in weaker(line, seen, site)]
    assert not problems, "\n".join(problems)
    return observations


@pytest.mark.slow  # every corpus line under strace and real bash
@pytest.mark.parametrize("part", range(CORPUS_PARTS), ids=lambda part: f"part{part + 1}of{CORPUS_PARTS}")
def test_the_analyzer_is_never_weaker_than_what_bash_did_with_the_corpus(
    workspace: tuple[Path, CallSite], part: int
) -> None:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    root, site = workspace
    observations = _check_against_bash([line for *_, line in ENTRIES[part::CORPUS_PARTS]], site, root)
    # The oracle is not blind in this part: denied programs really ran, outside files were touched.
    assert any(oracle_action(seen, DENY_LIST) == "deny" for seen in observations)
    assert any(seen.outside for seen in observations)


def test_the_oracle_sees_the_programs_that_ran_and_the_files_outside(workspace: tuple[Path, CallSite]) -> None:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    root, _ = workspace
    lines = ["rm -rf x", "git push origin main", "echo hi > ../outside/new", "touch y", "ls"]
    rm, git, outside, touch, ls = run_lines(lines, root)
    assert [argv[0].rpartition("/")[2] for argv in rm.execs] == ["rm"]
    assert git.execs and git.execs[0][0].endswith("/git") and git.execs[0][1:3] == ("push", "origin")
    assert outside.execs == () and outside.outside == (str(root / "outside" / "new"),)
    assert [argv[0].rpartition("/")[2] for argv in touch.execs] == ["touch"] and touch.outside == ()
    assert [oracle_action(seen, DENY_LIST) for seen in (rm, git, outside, touch, ls)] == [
        "deny",
        "deny",
        "ask",
        "allow",
        "allow",
    ]


# -- the grammar ------------------------------------------------------------------------------------

PAYLOADS = ["rm -rf x", "curl -s evil.example", "git push origin main", "touch y", "cat ../outside/secret", "ls"]
QUOTED = [
    "{P}",
    "'{P}'",
    '"{P}"',
    "$'{P}'",
]
CONTEXTS = [
    "{P}",
    "echo $({P})",
    "echo `{P}`",
    'echo "$({P})"',
    "echo ${{x:-$({P})}}",
    "echo ${{x:=`{P}`}}",
    "cat <({P})",
    "({P})",
    "{{ {P}; }}",
    "{P} | cat",
    "true && {P}",
    "false || {P}",
    "if true; then {P}; fi",
    "for i in 1; do {P}; done",
    "f() {{ {P}; }}; f",
    "eval {Q}",
    "bash -c {Q}",
    "sh -c {Q}",
    "echo {Q} | bash",
    "bash <<< {Q}",
    "cat <<EOF | bash\n{P}\nEOF",
    "cat <<EOF\n$({P})\nEOF",
    'x={Q}; eval "$x"',
    "(( a[$({P})] ))",
    "echo $(( $({P}) ))",
    "timeout 5 {P}",
    "env -i {P}",
    "nice {P}",
    "echo x | xargs {P}",
    "find . -maxdepth 0 -exec {P} \\;",
    "trap {Q} EXIT",
    "cd sub && {P}",
    "(cd ..; {P})",
    "cd .. ; cd project; {P}",
    "{P} > ../outside/out",
    "{P} 2>&1 >> lnk/new",
    "X=../outside; {P} $X/canary",
    # shapes the oracle found beyond the classes
    "env 'BASH_FUNC_ls%%=() {{ {P}; }}' bash -c ls",
    "x={Q}; $x",
    "read -r c <<< {Q}; $c",
    'set -- {P}; "$@"',
    'f() {{ "$@"; }}; f {P}',
]


@st.composite
def generated_lines(draw: st.DrawFn) -> str:
    payload = draw(st.sampled_from(PAYLOADS))
    quoting = draw(st.sampled_from(QUOTED))
    quoted = quoting.replace("{P}", payload) if "'" not in payload else f'"{payload}"'
    line = _fill(draw(st.sampled_from(CONTEXTS)), payload, quoted)
    if draw(st.booleans()):
        # Compose: a second context around the first, or chained after it.
        outer = draw(st.sampled_from(CONTEXTS))
        if "{Q}" in outer:
            line = f"{draw(st.sampled_from(['true', 'ls']))}; {line}"
        else:
            line = _fill(outer, line, line)
    return line


def _fill(context: str, payload: str, quoted: str) -> str:
    """A context with its payload in place; `{{` and `}}` in a context are literal braces."""
    parts = context.replace("{{", "\0").replace("}}", "\1").replace("{Q}", quoted).replace("{P}", payload)
    return parts.replace("\0", "{").replace("\1", "}")


def _grammar_run(lines: list[str]) -> None:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    root, site = make_workspace()
    _check_against_bash(lines, site, root)


@pytest.mark.usefixtures("untraced")  # the analyzer on generated lines: see conftest.untraced
@pytest.mark.slow  # generated lines under strace and real bash
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(generated_lines(), min_size=40, max_size=40, unique=True))
def test_generated_lines_are_never_weaker_than_bash(lines: list[str]) -> None:
    _grammar_run(lines)


@pytest.mark.usefixtures("untraced")  # the analyzer on generated lines: see conftest.untraced
@pytest.mark.fuzz
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(generated_lines(), min_size=100, max_size=100, unique=True))
def test_fuzz_generated_lines_are_never_weaker_than_bash(lines: list[str]) -> None:
    _grammar_run(lines)


def test_the_comparison_catches_an_analyzer_weaker_than_bash(workspace: tuple[Path, CallSite]) -> None:
    _, site = workspace
    ran_rm = Observation("echo hi", (("/usr/bin/rm", "-rf", "x"),), (), False)
    assert any("deny_list: analyzer allow" in problem for problem in weaker("echo hi", ran_rm, site))
    touched = Observation("echo hi", (), ("/w/outside/secret",), False)
    assert len(weaker("echo hi", touched, site)) == 2
    assert weaker("rm -rf x", ran_rm, site) == []
