"""What a build keeps for the next one: per Runtime, through the previous snapshot, bounded by the config."""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest

from toolrt import attribution
from toolrt.api import Runtime
from toolrt.build.snapshot import build_snapshot
from toolrt.errors import ConfigError

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


def _settle_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files count as settled as soon as they are checked (their times need not be a second old)."""
    monkeypatch.setattr(attribution, "_SETTLED_NS", 0)


def test_a_reload_checks_the_tool_files_it_takes_over_on_their_listing(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    _settle_at_once(monkeypatch)
    root = make_project(_tools(), permissions=PERMISSIONS)
    rt = Runtime.load(root)
    stated: list[str] = []
    signature = attribution._signature

    def counted(path: Path) -> tuple[int, ...] | None:
        stated.append(path.name)
        return signature(path)

    monkeypatch.setattr(attribution, "_signature", counted)
    (root / "tools.d" / "beta.yaml").write_text(TOOL.format(id="beta", v="22"), encoding="utf-8")
    rt.reload()
    assert "version 22" in rt.snapshot.tools["beta"].description
    assert "beta.yaml" in stated  # parsed anew: checked on the bytes it was parsed from
    assert "alpha.yaml" not in stated  # taken over: its listing's signature is the settled one


def test_a_tool_file_rewritten_under_its_old_size_and_mtime_is_still_held(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reuse key (mtime, size, inode) does not see this write, so the build takes the old document
    # over; the listing's signature carries the new ctime, so the journal looks at the file again.
    _settle_at_once(monkeypatch)
    root = make_project(_tools(), permissions=PERMISSIONS)
    rt = Runtime.load(root)
    alpha = root / "tools.d" / "alpha.yaml"
    before = alpha.stat()
    with open(alpha, "r+b") as handle:  # in place: the same inode
        changed = handle.read().replace(b"version 1", b"version 9")
        handle.seek(0)
        handle.write(changed)
    os.utime(alpha, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = alpha.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    with pytest.raises(ConfigError, match=r"alpha\.yaml.*changed while toolrt read it"):
        build_snapshot(root, previous=rt.snapshot)
