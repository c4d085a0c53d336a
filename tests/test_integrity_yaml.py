"""Attacks on the config: YAML alias bombs, self-referencing aliases, a reload that crashes, template escapes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from toolrt import Runtime
from toolrt.config.loader import load_yaml_text
from toolrt.errors import ConfigError

# Nine levels of ten aliases each: 10**9 strings once expanded, in under 300 bytes of YAML.
BOMB = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [
        f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [{','.join(['*' + chr(ord('a') + i - 1)] * 10)}]"
        for i in range(1, 9)
    ]
)
SELF_REFERENCES = ["&a [*a]", "a: &a {b: *a}", "&a {<<: *a}", "x: &x {y: [1, {z: *x}]}"]


def _load(text: str) -> list[object]:
    return [document.data for document in load_yaml_text(text, path=Path("x.yaml"), display="tools.d/x.yaml")]


def test_an_alias_bomb_is_a_located_error() -> None:
    """Refused as soon as the expansion passes its bound (benchmarks/bench_guards.py times it: goal 100 ms)."""
    assert len(BOMB.encode()) < 400
    with pytest.raises(ConfigError, match=r"tools.d/x.yaml:\d+:\d+: .*aliases expand to more than") as caught:
        _load(BOMB)
    problem = caught.value.problems[0]
    # The line is the anchored value's (an alias has no position of its own); the pointer is where it was used.
    assert problem.line >= 1 and problem.pointer.startswith("/")


@pytest.mark.parametrize("text", SELF_REFERENCES)
def test_a_self_referencing_alias_is_a_located_error(text: str) -> None:
    with pytest.raises(ConfigError, match=r"tools.d/x.yaml:1:\d+: .*refers to itself"):
        _load(text)


def _deep_flow(levels: int) -> str:
    return "[" * levels + "]" * levels


def _deep_block(levels: int) -> str:
    return "".join(" " * level + "a:\n" for level in range(levels - 1)) + " " * (levels - 1) + "a: 1\n"


@pytest.mark.parametrize("shape", [_deep_flow, _deep_block], ids=["flow", "block"])
@pytest.mark.parametrize("levels", [300, 5000])
def test_deep_nesting_is_a_located_error_whichever_layer_stops_first(shape: Callable[[int], str], levels: int) -> None:
    """At 300 levels toolrt's bound (200) stops the build at the node one level too deep; at 5000,
    libyaml's own bound (1000 today) stops the parser first, and its error is reported in toolrt's
    words where the parser stopped."""
    with pytest.raises(ConfigError) as caught:
        _load(shape(levels))
    [problem] = caught.value.problems
    assert problem.file == "tools.d/x.yaml" and problem.line >= 1 and problem.column >= 1, problem
    assert problem.message == "values are nested deeper than 200 levels", problem
    depth = problem.column - 1 if shape is _deep_flow else problem.line - 1  # levels opened before it
    assert depth > 200, problem
    if levels == 300:  # toolrt's own bound: exactly where the 201st level starts
        assert (problem.line, problem.column) == ((1, 202) if shape is _deep_flow else (202, 202)), problem


def test_deep_nesting_is_located_by_the_pure_python_parser_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without libyaml, PyYAML's composer recurses once per level and runs out of stack first."""
    import yaml

    import toolrt.config.loader as loader

    pure = type("ConfigLoader", (yaml.SafeLoader,), dict(vars(loader._Loader)))
    monkeypatch.setattr(loader, "_Loader", pure)
    assert not isinstance(loader._Loader(""), yaml.CSafeLoader)
    with pytest.raises(ConfigError) as caught:
        _load(_deep_flow(800))  # past the stack's depth (not toolrt's bound, which would stop at 1:202)
    [problem] = caught.value.problems
    assert problem.file == "tools.d/x.yaml" and problem.line == 1 and problem.column > 800, problem
    assert problem.message == "values are nested deeper than 200 levels"


def test_ordinary_anchors_and_aliases_stay_legal() -> None:
    text = "base: &base {type: string, minLength: 1}\nname: *base\nmerged: {<<: *base, maxLength: 9}\n"
    assert _load(text) == [
        {
            "base": {"type": "string", "minLength": 1},
            "name": {"type": "string", "minLength": 1},
            "merged": {"type": "string", "minLength": 1, "maxLength": 9},
        }
    ]


def test_a_reload_that_fails_for_any_reason_keeps_the_last_good_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n", encoding="utf-8")
    rt = Runtime.load(tmp_path)
    before = rt.status().generation
    import toolrt.api

    def crash(root: Path, **options: object) -> object:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(toolrt.api, "build_snapshot", crash)
    status = rt.reload()
    assert status.generation == before
    assert status.last_error is not None and "RecursionError" in str(status.last_error)
    assert "read" in {spec["name"] for spec in rt.specs("mcp")}


def test_a_bomb_saved_while_serving_keeps_the_tools_up(tmp_path: Path) -> None:
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: true\n", encoding="utf-8")
    rt = Runtime.load(tmp_path)
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "tools.d" / "bomb.yaml").write_text(BOMB + "\n", encoding="utf-8")
    status = rt.reload()  # benchmarks/bench_guards.py times it (goal: 2 s)
    assert status.last_error is not None and "aliases expand" in str(status.last_error)
    assert "read" in {spec["name"] for spec in rt.specs("mcp")}


def test_config_templates_render_in_jinja2s_sandbox(tmp_path: Path) -> None:
    from toolrt.build.templates import compile_template, render

    escape = "{{ (x ~ '').__class__.__mro__[1].__subclasses__() }}"
    template = compile_template(escape, frozenset({"x"}))
    import jinja2.exceptions

    with pytest.raises(jinja2.exceptions.SecurityError, match="unsafe"):
        render(template, {"x": "a"}, frozenset({"x"}), tmp_path)
