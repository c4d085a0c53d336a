"""Every budget of the bash analyzer fails closed (issue 26, item 0): past a limit on size, nodes,
nesting, scripts parsed again, the scan for named commands or time, the line gets the fail-closed
action with a reason; it is never allowed, and a command the analyzer already read that a rule denies
is denied. Under rules that can deny nothing (`bash: ask`) such a line asks.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from bash_oracle import ALLOW_LIST, DENY_LIST
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrt.api import Runtime
from toolrt.permissions.evaluate import decide
from toolrt.permissions.model import CallSite, Rule
from toolrt.permissions.rules import Ruleset
from toolrt.shell import analyze_command, limits
from toolrt.shell.named import MAX_CANDIDATES, MAX_SCAN_CHARS

NO_RULES = Ruleset()
ASK_ONLY = Ruleset([Rule("bash", "*", "ask"), Rule("external_directory", "*", "ask")])
DENIED = "rm -rf build"

# Each builder makes a line of about `size` units of one limit with DENIED at `where` (0: first,
# 1: in the middle, 2: last); the sizes tried run from just under the limit to just over it.
Builder = Callable[[int, int], str]


def _commands(parts: list[str], where: int) -> list[str]:
    at = (0, len(parts) // 2, len(parts))[where]
    return [*parts[:at], DENIED, *parts[at:]]


def _words(size: int, where: int) -> str:
    """One command of `size` words: the denied command itself made long (`rm -rf a a … build`)."""
    half = "a " * (size // 2)
    return ("rm -rf " + "a " * size, "echo " + half + "; rm -rf " + half, "true; rm -rf " + "a " * size)[
        where
    ] + "build"


def _nodes(size: int, where: int) -> str:
    return "; ".join(_commands(["true"] * (size // 3), where))


def _bytes(size: int, where: int) -> str:
    head = "; ".join(_commands(["echo x"], where))
    return head + " #" + "y" * max(0, size - len(head) - 2)


def _nesting(size: int, where: int) -> str:
    inner = ["echo ok"] * 2
    return "echo " + "$(" * size + "; ".join(_commands(inner, where)) + ")" * size


def _scripts(size: int, where: int) -> str:
    line = "; ".join(_commands(["echo ok"], where))
    for _ in range(size):
        line = "bash -c " + shlex.quote(line)
    return line


def _scan(size: int, where: int) -> str:
    """Opaque text (a hidden substitution in a default) about `size` characters long."""
    filler = ["ls x"] * max(1, size // 5)
    return "echo ${x:-`" + "; ".join(_commands(filler, where)) + "`}"


def _candidates(size: int, where: int) -> str:
    """Opaque text naming about `size` distinct commands."""
    return "echo ${x:-`" + "; ".join(_commands([f"c{n}" for n in range(size)], where)) + "`}"


LIMITS: dict[str, tuple[Builder, int]] = {
    "words": (_words, limits.MAX_NODES),
    "nodes": (_nodes, limits.MAX_NODES),
    "bytes": (_bytes, limits.MAX_INPUT_BYTES),
    "nesting": (_nesting, limits.MAX_NESTING),
    "scripts": (_scripts, limits.MAX_SCRIPT_DEPTH),
    "scan": (_scan, MAX_SCAN_CHARS),
    "candidates": (_candidates, MAX_CANDIDATES),
}


@pytest.fixture(scope="module")
def budget_site(tmp_path_factory: pytest.TempPathFactory) -> CallSite:
    """One project for every drawn line (hypothesis runs many examples per test function)."""
    root = tmp_path_factory.mktemp("budgets")
    return CallSite(root=root, cwd=root, home=root.parent)


@settings(max_examples=60, deadline=None)
@given(
    limit=st.sampled_from(sorted(LIMITS)),
    offset=st.sampled_from((-2, -1, 0, 1, 2)),
    where=st.sampled_from((0, 1, 2)),
)
def test_a_denied_command_next_to_any_limit_is_never_allowed(
    budget_site: CallSite, limit: str, offset: int, where: int
) -> None:
    build, size = LIMITS[limit]
    line = build(size + offset if limit in ("nesting", "scripts") else size + offset * max(1, size // 100), where)
    requests = analyze_command(line, budget_site)
    assert decide(requests, DENY_LIST, locked=NO_RULES).action == "deny"
    assert decide(requests, ALLOW_LIST, locked=NO_RULES).action == "deny"
    assert decide(requests, ASK_ONLY, locked=NO_RULES).action == "ask"


@pytest.mark.parametrize("words", [9_999, 10_001, 40_000])
def test_a_long_command_cut_short_by_the_node_budget_is_denied_by_its_rule(site: CallSite, words: int) -> None:
    line = "rm -rf " + "a " * words + "build"
    requests = analyze_command(line, site)
    verdict = decide(requests, DENY_LIST, locked=NO_RULES)
    assert verdict.action == "deny"
    assert any(decision.rule == Rule("bash", "rm *", "deny") for decision in verdict.decisions)


@pytest.mark.parametrize("line", ["echo " + "a " * 50_000, "ls " + "a " * 50_000 + "&& git status"])
def test_a_fifty_thousand_word_line_asks_under_bash_ask(site: CallSite, line: str) -> None:
    """Speed never skips a check (issue 33): a line past the budgets asks where every rule only asks,
    and is denied by the allow-list however harmless its words."""
    requests = analyze_command(line, site)
    assert decide(requests, ASK_ONLY, locked=NO_RULES).action == "ask"
    assert decide(requests, ALLOW_LIST, locked=NO_RULES).action == "deny"


def test_past_the_node_budget_the_reason_says_so(site: CallSite, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "TIME_BUDGET", 30.0)  # the node budget, not the clock, ends the walk
    reasons = [r.reason or "" for r in analyze_command("rm -rf " + "a " * 10_001 + "build", site) if r.opaque]
    assert any(f"the command is too large to analyze (over {limits.MAX_NODES} syntax nodes)" in r for r in reasons)


def test_past_the_time_budget_a_denied_command_already_read_is_denied(
    site: CallSite, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "TIME_BUDGET", 0.0)
    for where in (0, 1, 2):  # long enough for the walk to look at the clock (every 256 nodes)
        line = " && ".join(_commands(["true"] * 400, where))
        requests = analyze_command(line, site)
        assert any("could not be analysed within its time budget" in (r.reason or "") for r in requests)
        assert decide(requests, DENY_LIST, locked=NO_RULES).action == "deny", line
        assert decide(requests, ASK_ONLY, locked=NO_RULES).action == "ask", line


def test_an_init_project_asks_for_a_ten_thousand_word_rm_and_runs_nothing(tmp_path: Path) -> None:
    """The issue's report: `toolrt init`'s `bash: ask` allowed `rm -rf a a … build` unasked, and
    `rt.call` ran it. Now it asks, and with nobody to ask, `build/` stays."""
    from toolrt.faces.init import write_starter

    root = tmp_path / "proj"
    write_starter(root)
    (root / "build").mkdir()
    rt = Runtime.load(root)
    line = "rm -rf " + "a " * 10_000 + "build"
    decision, _ = rt.check_call("bash", {"command": line, "description": "clean"})
    assert decision.action == "ask"

    async def call() -> str | None:
        with anyio.fail_after(30):
            return (await rt.call("bash", {"command": line, "description": "clean"})).error

    error = anyio.run(call)
    assert error is not None
    assert "no one is available to approve" in error
    assert (root / "build").is_dir()
