"""The fast paths of loading: documents without anchors build like the careful path; GC pausing nests."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from toolrt.config.collect import collector_paused
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


def test_the_fast_path_reports_duplicates_complex_keys_and_depth_like_the_careful_one() -> None:
    for suffix in ("", "# &\n"):
        with pytest.raises(ConfigError, match=r"t.yaml:2:1: duplicate key 'a' \(first at line 1\)"):
            _data("a: 1\na: 2\n" + suffix)
        with pytest.raises(ConfigError, match="a mapping key must be a plain value"):
            _data("? [1, 2]\n: x\n" + suffix)
        deep = "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2) + "\n"
        with pytest.raises(ConfigError, match=f"nested deeper than {MAX_DEPTH} levels"):
            _data(deep + suffix)


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
