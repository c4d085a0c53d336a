"""Mutation fuzzing of every YAML file toolrt ships: no edit makes validation raise or a reloader die.

Each example takes one shipped file (a built-in tool, the built-in permissions and settings, an
example project's tool, the `toolrt init` starter), applies one to three random edits (deleted or
duplicated lines, changed indentation, tabs, swapped lines, mistyped keys and values, broken quotes
and templates), writes it into a project and checks:

- `toolrt validate` (in-process) returns 0 or 1 and never raises; every problem names a real line of
  the file it blames, or the file alone (`FILE: message`, never `FILE:0:0`);
- a reloader that was serving the unedited project survives the edit, and keeps serving the last good
  snapshot when the edit broke the config.

The suite runs a short pass; `pytest -m fuzz` runs the long one.
"""

from __future__ import annotations

import json
import re
import shutil
import string
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from cli_helpers import run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrt import Runtime
from toolrt.config.resources import builtin_root
from toolrt.errors import Problem
from toolrt.faces.init import write_starter
from toolrt.reload import Reloader, ReloadEvent

REPO = Path(__file__).resolve().parent.parent
SHORT_EXAMPLES = 200
LONG_EXAMPLES = 3000


@dataclass(frozen=True)
class Target:
    """One shipped file placed in a project: edits are written to `root / relative`."""

    name: str
    root: Path
    relative: str
    original: str


def _targets(base: Path) -> list[Target]:
    targets: list[Target] = []
    builtin = builtin_root()
    empty = base / "builtin-overrides"
    (empty / "tools.d").mkdir(parents=True)
    for path in sorted((builtin / "tools.d").glob("*.yaml")):
        targets.append(Target(f"builtin {path.name}", empty, f"tools.d/{path.name}", path.read_text("utf-8")))
    for name in ("permissions.yaml", "toolrt.yaml"):
        targets.append(Target(f"builtin {name}", empty, name, (builtin / name).read_text("utf-8")))
    for example in sorted(p for p in (REPO / "examples").iterdir() if (p / "tools.d").is_dir()):
        copy = base / f"example-{example.name}"
        shutil.copytree(example, copy)
        for path in sorted((copy / "tools.d").glob("*.yaml")):
            relative = str(path.relative_to(copy))
            targets.append(Target(f"{example.name}/{relative}", copy, relative, path.read_text("utf-8")))
    starter = base / "starter"
    for path in write_starter(starter):
        if path.suffix in (".yaml", ".yml"):
            relative = str(path.relative_to(starter))
            targets.append(Target(f"init {relative}", starter, relative, path.read_text("utf-8")))
    return targets


_BASE = Path(tempfile.mkdtemp(prefix="toolrt-fuzz-"))
TARGETS = _targets(_BASE)
_RUNTIMES: dict[Path, Runtime] = {}


def _restore(target: Target) -> None:
    """Put the file back as shipped (a built-in placed in the override project is simply absent)."""
    path = target.root / target.relative
    if target.name.startswith("builtin "):
        path.unlink(missing_ok=True)
    else:
        path.write_text(target.original, encoding="utf-8")


# --- the edits ------------------------------------------------------------------------------------

VALUES = [
    "",
    "null",
    "~",
    "[",
    "{",
    "]",
    "'",
    '"',
    "[]",
    "{}",
    "-1",
    "0",
    "1e400",
    "true",
    "yes",
    "aks",
    "alow",
    "*",
    "&a",
    "*a",
    "!!python/object:os.system",
    "{{ x | joinn }}",
    "{{ filePath }",
    "{% if %}",
    "{{ 1 is strng }}",
    "'{{ unclosed",
    "\t",
    "a: b: c",
    "- item",
    "| \n  block",
    "no_such_module:run",
    "os:getcwd",
    "toolrt:__version__",
    "x" * 300,
]


def _split_key(line: str) -> tuple[str, str, str] | None:
    """(indent + key, ': ', value) of a `key: value` line, None for other lines."""
    if ":" not in line:
        return None
    key, _, value = line.partition(":")
    return key, ":", value


EDITS = ["delete", "duplicate", "indent", "tab", "swap", "key", "value", "quote", "template", "typo"]


@st.composite
def mutated(draw: st.DrawFn, text: str) -> tuple[str, list[str]]:
    """`text` after one to three random edits, and a description of each (for the failure report)."""
    lines = text.splitlines()
    done: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        if not lines:
            lines = [""]
        index = draw(st.integers(0, len(lines) - 1))
        line = lines[index]
        kind = draw(st.sampled_from(EDITS))
        if kind == "delete":
            del lines[index]
        elif kind == "duplicate":
            lines.insert(index, line)
        elif kind == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], line
        elif (edited := _edited_line(draw, kind, line)) is not None:
            lines[index] = edited
        else:
            continue
        done.append(f"{kind} at line {index + 1}")
    return "\n".join(lines) + "\n", done


def _edited_line(draw: st.DrawFn, kind: str, line: str) -> str | None:
    """`line` after one edit of `kind` inside it; None where that kind does not apply to the line."""
    parts = _split_key(line)
    if kind == "indent":
        return " " * draw(st.integers(0, 8)) + line.lstrip(" ")
    if kind == "tab":
        return "\t" + line
    if kind == "key" and parts:
        key, colon, value = parts
        position = draw(st.integers(0, max(len(key) - 1, 0)))
        letter = draw(st.sampled_from(string.ascii_lowercase + "_-"))
        return key[:position] + letter + key[position + 1 :] + colon + value
    if kind == "value" and parts:
        key, colon, _ = parts
        return f"{key}{colon} {draw(st.sampled_from(VALUES))}"
    if kind == "quote":
        position = draw(st.integers(0, len(line)))
        quote = draw(st.sampled_from(["'", '"']))
        return line.replace(quote, "", 1) if quote in line else line[:position] + quote + line[position:]
    if kind == "template":
        broken = draw(st.sampled_from(["}}", "{{", "| joinn }}", "{% endif %}", "{{ nope }}"]))
        return line.replace("}}", broken, 1) if "}}" in line else line + broken
    if kind == "typo" and line.strip():
        position = draw(st.integers(0, len(line) - 1))
        return line[:position] + line[position + 1 :]
    return None


# --- the checks -----------------------------------------------------------------------------------


def _line_count(path: Path) -> int:
    try:
        return len(path.read_text(encoding="utf-8", errors="replace").splitlines())
    except OSError:
        return 0


def _check_validate(root: Path) -> None:
    code, out, err = run("validate", "--root", str(root), "--format", "json")
    assert code in (0, 1), out + err
    MUTATIONS["invalid" if code == 1 else "valid"] += 1
    assert "Traceback" not in out + err
    report = json.loads(out)
    for problem in report["errors"] + report["warnings"]:
        file, line, column = problem["file"], problem["line"], problem["column"]
        assert file and problem["message"], problem
        where = Problem(file, line, column, problem["pointer"], problem["message"]).where
        assert not re.search(r":0(:|$)", where), problem  # `FILE: message`, never `FILE:0:0`
        if line == 0:
            assert column == 0, problem
            continue
        if file.startswith("<"):
            continue  # toolrt's own files, the environment
        path = Path(file) if Path(file).is_absolute() else Path.cwd() / file
        if not path.exists():
            path = root / file
        assert path.exists(), problem
        assert 1 <= line <= _line_count(path) + 1, problem


def _check_reload(target: Target) -> None:
    rt = _RUNTIMES.get(target.root)
    if rt is None:
        _restore(target)
        rt = _RUNTIMES[target.root] = Runtime.load(target.root)
    good = rt.snapshot.digest

    async def one_batch() -> AsyncIterator[set[tuple[int, str]]]:
        yield {(2, str(target.root / target.relative))}

    reloader = Reloader(rt, changes=one_batch())
    events: list[ReloadEvent] = []
    reloader.subscribe(events.append)
    anyio.run(reloader.run)
    assert len(events) == 1
    if events[0].error is not None:
        MUTATIONS["reloads kept the last good snapshot"] += 1
        assert rt.snapshot.digest == good, "a broken save replaced the last good snapshot"
        assert rt.status().last_error is not None


MUTATIONS = {"count": 0, "invalid": 0, "valid": 0, "reloads kept the last good snapshot": 0}


def _exercise(data: st.DataObject) -> None:
    target = data.draw(st.sampled_from(TARGETS), label="file")
    text, edits = data.draw(mutated(target.original), label="edits")
    MUTATIONS["count"] += 1
    path = target.root / target.relative
    try:
        path.write_text(text, encoding="utf-8")
        _check_validate(target.root)
        _check_reload(target)
    finally:
        _restore(target)
    # the runtime serves the shipped config again after the restoring save
    rt = _RUNTIMES[target.root]
    status = rt.reload()
    assert status.last_error is None, status.last_error


@pytest.mark.usefixtures("untraced")  # a property pass: see conftest.untraced
@pytest.mark.slow
@settings(
    max_examples=SHORT_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_mutated_shipped_files_are_located_problems(data: st.DataObject) -> None:
    _exercise(data)


@pytest.mark.usefixtures("untraced")  # a property pass: see conftest.untraced
@pytest.mark.fuzz
@settings(
    max_examples=LONG_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_mutated_shipped_files_long(data: st.DataObject) -> None:
    _exercise(data)


def test_every_shipped_yaml_file_is_a_target() -> None:
    names = {target.name for target in TARGETS}
    assert {f"builtin {p.name}" for p in (builtin_root() / "tools.d").glob("*.yaml")} <= names
    assert {"builtin permissions.yaml", "builtin toolrt.yaml", "init tools.d/word_count.yaml"} <= names
    assert any(name.startswith("python-handler/") for name in names)
    print(f"\nmutation fuzz over {len(TARGETS)} files, this session: {MUTATIONS}")
