"""What a build keeps for the next one: per Runtime, through the previous snapshot, bounded by the config."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from pathlib import Path

from toolrt.api import Runtime

Factory = Callable[..., Path]

TOOL = """\
id: {id}
description: "Echo {id}, version {v}."
parameters: {{type: object, properties: {{}}}}
handler: {{argv: [echo, "{id} {v}"]}}
"""
PERMISSIONS = 'permission:\n  "*": allow\n'


def _tools(version: str = "1") -> dict[str, str]:
    return {name: TOOL.format(id=name, v=version) for name in ("alpha", "beta")}


def test_a_reload_takes_unchanged_tools_from_the_previous_snapshot(make_project: Factory) -> None:
    root = make_project(_tools(), permissions=PERMISSIONS)
    rt = Runtime.load(root)
    first = rt.snapshot
    (root / "tools.d" / "beta.yaml").write_text(TOOL.format(id="beta", v="22"), encoding="utf-8")
    rt.reload()
    second = rt.snapshot
    assert second is not first
    assert second.tools["alpha"] is first.tools["alpha"]
    assert second.permissions is first.permissions
    assert second.tools["beta"] is not first.tools["beta"]
    assert "version 22" in second.tools["beta"].description


def test_what_a_runtime_keeps_is_bounded_by_its_config_not_by_its_saves(make_project: Factory) -> None:
    root = make_project(_tools(), permissions=PERMISSIONS)
    rt = Runtime.load(root)
    kept = (len(rt.snapshot.reuse.files), len(rt.snapshot.reuse.compiled), len(rt.snapshot.reuse.permissions))
    first = weakref.ref(rt.snapshot)
    for save in range(2, 12):
        version = "v" * save  # a new size each time: a save is seen even within one timestamp tick
        (root / "tools.d" / "beta.yaml").write_text(TOOL.format(id="beta", v=version), encoding="utf-8")
        (root / "permissions.yaml").write_text(PERMISSIONS + "#" * save + "\n", encoding="utf-8")
        rt.reload()
        assert f"version {version}." in rt.snapshot.tools["beta"].description
    reuse = rt.snapshot.reuse
    assert (len(reuse.files), len(reuse.compiled), len(reuse.permissions)) == kept == (4, 2, 1)
    gc.collect()
    assert first() is None  # no chain back to older snapshots


def test_two_runtimes_of_one_project_share_no_compiled_state(make_project: Factory) -> None:
    root = make_project(_tools(), permissions=PERMISSIONS)
    one, two = Runtime.load(root), Runtime.load(root)
    assert one.snapshot.digest == two.snapshot.digest
    assert one.snapshot.tools["alpha"] is not two.snapshot.tools["alpha"]
    assert one.snapshot.permissions is not two.snapshot.permissions
    (root / "tools.d" / "alpha.yaml").write_text(TOOL.format(id="alpha", v="2"), encoding="utf-8")
    one.reload()
    assert "version 2." in one.snapshot.tools["alpha"].description
    assert "version 1." in two.snapshot.tools["alpha"].description  # the other Runtime did not reload


def test_a_file_saved_back_to_an_earlier_content_is_read_again(make_project: Factory) -> None:
    """The key is the file's stat signature: equal text written again is a new read, not a stale hit."""
    root = make_project(_tools())
    rt = Runtime.load(root)
    path = root / "tools.d" / "alpha.yaml"
    path.write_text(TOOL.format(id="alpha", v="two"), encoding="utf-8")
    rt.reload()
    path.write_text(TOOL.format(id="alpha", v="1"), encoding="utf-8")
    rt.reload()
    assert "version 1." in rt.snapshot.tools["alpha"].description


def test_a_changed_description_file_is_a_change_on_reload(make_project: Factory) -> None:
    tool = "id: described\ndescription_file: described.md\nparameters: {type: object}\nhandler: {argv: [echo]}\n"
    root = make_project({"described": tool})
    (root / "tools.d" / "described.md").write_text("First words.\n", encoding="utf-8")
    rt = Runtime.load(root)
    digest = rt.snapshot.digest
    (root / "tools.d" / "described.md").write_text("Second, longer words.\n", encoding="utf-8")
    rt.reload()
    assert rt.snapshot.tools["described"].description == "Second, longer words.\n"
    assert rt.snapshot.digest != digest
