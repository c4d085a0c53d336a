"""The fast paths of loading: documents without anchors build like the careful path; GC pausing nests."""

from __future__ import annotations

import datetime
import gc
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from toolrt.build.snapshot import build_snapshot
from toolrt.config.collect import collector_paused, pause_collector_during_builds
from toolrt.config.document import child_pointer
from toolrt.config.loader import MAX_DEPTH, load_yaml_text
from toolrt.errors import ConfigError

TEXT = """\
id: sample
count: 3
ratio: 0.5
on: yes
flag: true
nothing: null
when: 2024-01-02
7: seven
list: [1, "two", {three: 3}, [4]]
nested: {a: {b: {c: [true, ~]}}}
"""


def _data(text: str) -> list[object]:
    return [d.data for d in load_yaml_text(text, path=Path("t.yaml"), display="t.yaml")]


def test_a_document_without_anchors_builds_the_same_values_as_the_careful_path() -> None:
    fast = _data(TEXT)
    careful = _data(TEXT + "# an '&' in a comment takes the careful path\n")
    assert fast == careful
    assert fast[0] == {
        "id": "sample",
        "count": 3,
        "ratio": 0.5,
        "True": True,  # YAML 1.1: the key `on` is a boolean
        "flag": True,
        "nothing": None,
        "when": "2024-01-02",
        "7": "seven",
        "list": [1, "two", {"three": 3}, [4]],
        "nested": {"a": {"b": {"c": [True, None]}}},
    }


SCALARS = [
    *("0", "-12", "+7", "0o17", "017", "0x1F", "0b101", "1_000", "190:20:30", "3.", ".5", "-1.5e3", "6.8523015e+5"),
    *(".inf", "-.Inf", ".NaN", "1e3", "yes", "No", "ON", "off", "y", "n", "True", "FALSE", "~", "null", "Null"),
    *("2001-12-14", "2001-12-14t21:59:43.10-05:00", "'quoted 1'", '"2"', "plain text", "0.0.1", "1-2", ".", "+"),
    *("!!str 3", "!!int '4'", "!!float 1", "|\n  block 5\n", ">\n  folded yes\n", "~/path", "_", "1:2"),
    *("10", "1234567890123456789012", "!!int 010", "!!int '0'", "!!bool yes", "!!bool 'Off'", "yEs", "00"),
]


def _plain(value: object) -> object:
    """What the config loader keeps of a safe-loaded value: dates as their text."""
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value.isoformat() if isinstance(value, (datetime.date, datetime.datetime)) else value


def _key(key: object) -> str:
    """A mapping key as the config loader keeps it: text (a date's repr, as the careful path keeps it)."""
    if isinstance(key, str):
        return key
    return str(key) if isinstance(key, (int, float, bool)) or key is None else repr(key)


@pytest.mark.parametrize("scalar", SCALARS)
def test_tags_resolve_as_the_safe_loader_resolves_them(scalar: str) -> None:
    """The loader's own tag resolution (libyaml calls it per node) agrees with PyYAML's safe loader."""
    texts = [f"value: {scalar}\n"] + ([] if "\n" in scalar else [f"value: [{scalar}]\n", f"{scalar}: key\n"])
    for text in texts:
        expected = {_key(k): _plain(v) for k, v in yaml.safe_load(text).items()}
        got = _data(text)[0]
        assert isinstance(got, dict)
        assert repr(got) == repr(expected), text  # repr: NaN equals NaN, 1 differs from 1.0 and True
        assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]


def test_the_fast_path_reports_duplicates_complex_keys_and_depth_like_the_careful_one() -> None:
    for suffix in ("", "# &\n"):
        with pytest.raises(ConfigError, match=r"t.yaml:2:1: duplicate key 'a' \(first at line 1\)"):
            _data("a: 1\na: 2\n" + suffix)
        with pytest.raises(ConfigError, match="a mapping key must be a plain value"):
            _data("? [1, 2]\n: x\n" + suffix)
        deep = "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2) + "\n"
        with pytest.raises(ConfigError, match=f"nested deeper than {MAX_DEPTH} levels"):
            _data(deep + suffix)


@pytest.fixture
def opted_in() -> Iterator[None]:
    """The host opts in to paused collection during builds (the `toolrt` command and `toolrt serve` do)."""
    before = pause_collector_during_builds()
    yield
    pause_collector_during_builds(before)


def test_a_library_build_leaves_the_collector_alone() -> None:
    assert pause_collector_during_builds(False) is False  # no opt-in in library use (this test process)
    with collector_paused():
        assert gc.isenabled()
    assert gc.isenabled()


def test_the_toolrt_command_opts_in_and_a_call_of_its_main_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolrt.faces.cli import main

    (tmp_path / "toolrt.yaml").write_text("builtin_tools: false\n")
    before = pause_collector_during_builds(False)
    frozen = gc.get_freeze_count()
    try:
        assert main(["validate", "--root", str(tmp_path)]) == 0
        assert pause_collector_during_builds(False) is False  # an embedding caller passes argv
        assert gc.get_freeze_count() == frozen  # and keeps its heap to its own collector
        monkeypatch.setattr("sys.argv", ["toolrt", "validate", "--root", str(tmp_path)])
        assert main() == 0
        assert pause_collector_during_builds(False) is True  # the command line owns the process
        # its process ends next: what validate loaded is out of the shutdown's collections' way
        assert gc.get_freeze_count() > frozen
    finally:
        if frozen == 0:  # the test process's heap goes back to its collector
            gc.unfreeze()
        pause_collector_during_builds(before)


@pytest.mark.usefixtures("opted_in")
def test_the_collector_is_paused_inside_nested_and_concurrent_blocks_and_restored_after() -> None:
    assert gc.isenabled()
    inside = threading.Event()
    release = threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    with collector_paused():
        thread.start()
        assert inside.wait(10)
        with collector_paused():
            assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's block is still open
    release.set()
    thread.join(10)
    assert gc.isenabled()


class _Built:
    """A container made inside a paused block (tracked by the collector, like a snapshot's objects)."""


def _generation_of(target: object) -> int | None:
    return next((g for g in range(3) if any(o is target for o in gc.get_objects(g))), None)


@pytest.mark.usefixtures("opted_in")
def test_what_a_paused_block_kept_is_handed_to_the_oldest_generation_without_a_collector_pass() -> None:
    with collector_paused(age=True):
        kept = [_Built() for _ in range(5000)]
        cycle = _Built()
        cycle.itself = cycle  # type: ignore[attr-defined]
        gone = weakref.ref(cycle)
        del cycle
    assert gc.isenabled()
    assert gc.get_count()[0] < 100  # no young pass left owed for the block's objects
    assert _generation_of(kept[0]) == 2
    assert _generation_of(kept) == 2
    assert gone() is not None  # a cycle the block left behind waits in the oldest generation ...
    gc.collect()
    assert gone() is None  # ... and goes at the next full collection


@pytest.mark.usefixtures("opted_in")
def test_a_block_that_does_not_ask_leaves_what_it_made_young_as_before() -> None:
    gc.collect()
    with collector_paused():  # a reload: no walk over a frozen heap to decide
        with collector_paused(age=False):
            made = [_Built()]
    assert _generation_of(made) == 0


@pytest.mark.usefixtures("opted_in")
def test_a_frozen_heap_stays_frozen_across_a_paused_block() -> None:
    before = [_Built()]
    gc.freeze()
    try:
        with collector_paused(age=True):
            made = [_Built()]
        # `toolrt serve`'s settled heap is not thawed by a reload. The count itself may fall by a few: a
        # frozen object whose last reference goes (another thread's temporary) is freed as any other is.
        assert gc.get_freeze_count() > 0
        assert _generation_of(before) is None  # still in the permanent generation
        assert _generation_of(made) is not None
    finally:
        gc.unfreeze()


def test_mapping_keys_are_one_string_per_name_across_files() -> None:
    first = load_yaml_text("description: a\nparameters: {type: object}\n", path=Path("a.yaml"), display="a.yaml")
    second = load_yaml_text("parameters: {type: object}\ndescription: b\n", path=Path("b.yaml"), display="b.yaml")
    keys = {id(k): k for k in first[0].data} | {id(k): k for k in first[0].data["parameters"]}
    assert all(id(k) in keys for k in second[0].data)
    assert all(id(k) in keys for k in second[0].data["parameters"])
    assert first[0].data == {"description": "a", "parameters": {"type": "object"}}
    assert list(second[0].data) == ["parameters", "description"]
    anchored = load_yaml_text("base: &b {type: object}\nother: *b\n", path=Path("c.yaml"), display="c.yaml")
    assert next(iter(anchored[0].data["other"])) is next(iter(first[0].data["parameters"]))


def test_a_located_load_records_the_positions_a_lookup_would_find() -> None:
    text = "---\nfirst: 1\n---\nid: x\nparameters:\n  properties:\n    a/b: {type: string}\n    list: [1, {c: 2}]\n"
    located = load_yaml_text(text, path=Path("t.yaml"), display="t.yaml", located=True)
    lazy = load_yaml_text(text, path=Path("t.yaml"), display="t.yaml")
    assert located[1].marks and not lazy[1].marks  # recorded while parsing vs found on the first lookup
    pointers = ["", "/id", "/parameters/properties/a~1b", "/parameters/properties/list/1/c", "/missing/deep"]
    for fast, slow in zip(located, lazy, strict=True):
        assert [fast.locate(p) for p in pointers] == [slow.locate(p) for p in pointers]
    assert located[1].locate("/parameters/properties/list/1/c") == (8, 16)


def test_pointers_escape_tilde_and_slash_and_leave_other_keys_as_written() -> None:
    assert child_pointer("/a", "b/c~d") == "/a/b~1c~0d"
    assert child_pointer("", "~1") == "/~01"
    assert child_pointer("/x", "plain key") == "/x/plain key"
    assert child_pointer("/list", 3) == "/list/3"
    text = "tools:\n  a/b: {x~y: [1]}\n"
    located = load_yaml_text(text, path=Path("t.yaml"), display="t.yaml", located=True)[0]
    assert located.locate("/tools/a~1b/x~0y/0") == (2, 15)
    assert located.locate("/tools/a~1b/x~0y") == (2, 9)


_PLAIN_TOOL = """\
id: plain_{i}
description: A tool with no when, truncate, env or annotations.
parameters: {{type: object, properties: {{name: {{type: string}}}}}}
handler: {{argv: [echo, "{{{{ name }}}}"]}}
"""


def test_tools_that_leave_defaults_share_one_value_each_and_a_set_value_is_its_own(tmp_path: Path) -> None:
    """A build holds one `when`, `truncate`, process options and empty mapping for every tool that sets none,
    not one per tool (fewer objects the collector follows at 10,000 tools); a tool that sets them gets its own."""
    tools = tmp_path / "tools.d"
    tools.mkdir()
    (tmp_path / "toolrt.yaml").write_text("builtin_tools: false\n")
    for i in range(3):
        (tools / f"plain_{i}.yaml").write_text(_PLAIN_TOOL.format(i=i))
    (tools / "set.yaml").write_text(
        "id: set\ndescription: d\nparameters: {type: object}\nwhen: {flags: [plan_mode]}\ntruncate: {max_lines: 5}\n"
        "annotations: {read_only: true}\nhandler: {argv: [env], env: {set: {A: b}}, ok_exit: [0, 1]}\n"
    )
    snapshot = build_snapshot(tmp_path)
    plain = [snapshot.tools[f"plain_{i}"] for i in range(3)]
    for attribute in ("when", "truncate", "annotations"):
        assert len({id(getattr(c.definition, attribute)) for c in plain}) == 1, attribute
    assert len({id(c.definition.handler.options) for c in plain}) == 1  # type: ignore[union-attr]
    first = plain[0]
    assert first.definition.when.flags == () and first.definition.truncate is not None
    assert first.definition.truncate.max_lines is None and dict(first.env_set) == {}
    assert first.definition.handler.options.ok_exit == (0,)  # type: ignore[union-attr]
    own = snapshot.tools["set"]
    assert own.definition.when.flags == ("plan_mode",) and own.definition.truncate is not None
    assert own.definition.truncate.max_lines == 5 and dict(own.definition.annotations) == {"read_only": True}
    assert own.definition.handler.options.ok_exit == (0, 1)  # type: ignore[union-attr]
    assert dict(own.env_set) == {"A": "b"}
