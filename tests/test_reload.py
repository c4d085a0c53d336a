"""Hot reload: scripted change sources, real files through watchfiles, and calls racing a reload storm."""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt.api import Runtime
from toolrt.faces.watch import event_json, format_event
from toolrt.permissions.ask import AskRequest, Reply
from toolrt.reload import ChangeSet, Reloader, ReloadEvent, watch_targets

TOOL = """\
id: ver
description: "Echo the config version {v} followed by the number given."
title: "ver {v}"
parameters: {{type: object, properties: {{n: {{type: integer}}}}, required: [n]}}
handler: {{argv: ["echo", "{v} {{{{ n }}}}"]}}
permission: {{patterns: ["{{{{ n }}}}"], always: ["*"]}}
"""
BROKEN = 'id: ver\ndescription: "Echo the config\n'


def tool_text(version: str) -> str:
    return TOOL.format(v=version)


def make(root: Path, version: str = "v1", *, permissions: str | None = None) -> Path:
    (root / "tools.d").mkdir(parents=True, exist_ok=True)
    (root / "tools.d" / "ver.yaml").write_text(tool_text(version), encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    if permissions is not None:
        (root / "permissions.yaml").write_text(permissions, encoding="utf-8")
    return root


# --- scripted change source ---------------------------------------------------------------------


def test_broken_save_keeps_last_good_then_fix_clears(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = make(tmp_path)
    rt = Runtime.load(root)
    path = root / "tools.d" / "ver.yaml"
    edits = [BROKEN, BROKEN, tool_text("v2")]
    events: list[ReloadEvent] = []

    async def changes() -> AsyncIterator[ChangeSet]:
        for text in edits:
            path.write_text(text, encoding="utf-8")
            yield {(2, str(path))}

    async def main() -> None:
        reloader = Reloader(rt, changes=changes())
        reloader.subscribe(events.append)
        await reloader.run()

    with caplog.at_level(logging.INFO, logger="toolrt.reload"):
        anyio.run(main)
    broken, again, fixed = events
    assert broken.error is not None and not broken.repeated
    assert str(broken.error.problems[0]).startswith("tools.d/ver.yaml:2:")
    assert broken.status.generation == 1
    assert again.repeated and again.error is not None
    assert fixed.error is None and rt.status().last_error is None and fixed.status.generation == 2
    assert fixed.change is not None and fixed.change.changed == ("ver",)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "tools.d/ver.yaml:2:" in errors[0].getMessage()
    assert any("configuration fixed" in r.getMessage() for r in caplog.records)


def _delete(root: Path) -> None:
    (root / "tools.d" / "ver.yaml").unlink()


def _rename(root: Path) -> None:
    os.replace(root / "tools.d" / "ver.yaml", root / "tools.d" / "renamed.yaml")


def _atomic(root: Path) -> None:
    temp = root / "tools.d" / ".ver.yaml.tmp"
    temp.write_text(tool_text("v2"), encoding="utf-8")
    os.replace(temp, root / "tools.d" / "ver.yaml")


def _half(root: Path) -> None:
    (root / "tools.d" / "ver.yaml").write_text(tool_text("v2")[:70], encoding="utf-8")


def _unreadable(root: Path) -> None:
    (root / "tools.d" / "ver.yaml").chmod(0)


def _rmdir(root: Path) -> None:
    shutil.rmtree(root / "tools.d")


def _settings_garbage(root: Path) -> None:
    (root / "toolrt.yaml").write_text("builtin_tools: [\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("damage", "error_file", "title_after", "swapped"),
    [
        (_delete, None, None, True),  # the only tool file gone: an empty tools.d/ is valid, the tool is removed
        (_rename, None, "ver v1", False),  # same tool under another file name: same digest, no swap
        (_atomic, None, "ver v2", True),  # an editor's write-then-rename
        (_half, "tools.d/ver.yaml", "ver v1", False),
        (_unreadable, "tools.d/ver.yaml", "ver v1", False),
        (_settings_garbage, "toolrt.yaml", "ver v1", False),
        (_rmdir, None, None, True),  # no tools.d at all is a valid, empty project: the tool is reported removed
    ],
)
def test_bad_input_keeps_serving_and_reports(
    tmp_path: Path, damage: Callable[[Path], None], error_file: str | None, title_after: str | None, swapped: bool
) -> None:
    if damage is _unreadable and os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode")
    rt = Runtime.load(make(tmp_path))
    damage(tmp_path)
    event = anyio.run(Reloader(rt).reload_once)
    assert (event.change is not None, event.status.generation) == (swapped, 2 if swapped else 1)
    if error_file is None:
        assert event.error is None
    else:
        assert event.error is not None and event.change is None
        assert event.error.problems[0].file == error_file
        assert rt.status().last_error is event.error
    result = rt.call_sync("ver", {"n": 7})
    if title_after is None:
        assert event.change is not None and event.change.removed == ("ver",)
        assert result.error is not None
    else:
        assert (result.error, result.title, result.output) == (None, title_after, f"{title_after[4:]} 7\n")


def test_session_approvals_survive_a_swap(tmp_path: Path) -> None:
    rt = Runtime.load(make(tmp_path, permissions="permission:\n  ver: ask\n"))
    asked: list[AskRequest] = []

    async def always(request: AskRequest) -> Reply:
        asked.append(request)
        return Reply("always")

    async def main() -> None:
        first = await rt.call("ver", {"n": 1}, session="s", ask=always)
        assert first.error is None and len(asked) == 1
        (tmp_path / "tools.d" / "ver.yaml").write_text(tool_text("v2"), encoding="utf-8")
        event = await Reloader(rt).reload_once()
        assert event.change is not None and event.status.generation == 2
        again = await rt.call("ver", {"n": 2}, session="s")  # no asker: only the approval lets it run
        assert (again.error, again.output) == (None, "v2 2\n")
        other = await rt.call("ver", {"n": 2}, session="other")
        assert other.error is not None and "approval" in other.error.lower()

    anyio.run(main)


# --- real files through watchfiles --------------------------------------------------------------


async def _watching(rt: Runtime, action: Callable[[Reloader], Awaitable[None]]) -> None:
    reloader = Reloader(rt)
    ready = anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: reloader.run(ready=ready))
        # A safety net, not a budget: each action bounds its own waits; a loaded CI machine is slow.
        with anyio.fail_after(120):
            await ready.wait()
            await action(reloader)
        group.cancel_scope.cancel()


async def _until(reloader: Reloader, done: Callable[[], bool]) -> None:
    """Wait, reload after reload, until `done()` holds (listeners run on the loop: no thread hand-off)."""
    while not done():
        reloaded = anyio.Event()
        unsubscribe = reloader.subscribe(functools.partial(_set_event, reloaded))
        try:
            await reloaded.wait()
        finally:
            unsubscribe()


def _title(rt: Runtime) -> str | None:
    tool = rt.snapshot.tools.get("ver")
    return tool.definition.title if tool is not None else None


def test_watcher_sees_save_break_fix_and_directory_recreated(tmp_path: Path) -> None:
    rt = Runtime.load(make(tmp_path))
    path = tmp_path / "tools.d" / "ver.yaml"

    async def action(reloader: Reloader) -> None:
        _atomic(tmp_path)
        await _until(reloader, lambda: _title(rt) == "ver v2")
        path.write_text(BROKEN, encoding="utf-8")
        await _until(reloader, lambda: rt.status().last_error is not None)
        assert _title(rt) == "ver v2"
        shutil.rmtree(tmp_path / "tools.d")
        await _until(reloader, lambda: _title(rt) is None)
        assert rt.status().last_error is None
        make(tmp_path, "v3")  # a removed directory re-created: its parent was watched
        await _until(reloader, lambda: _title(rt) == "ver v3")

    anyio.run(_watching, rt, action)


def test_watch_targets_watch_parents_not_the_whole_root(tmp_path: Path) -> None:
    root = make(tmp_path)
    (root / "tools.d" / "docs").mkdir()
    targets = watch_targets(Runtime.load(root).snapshot)
    assert targets.directories == {root, root / "tools.d", root / "tools.d" / "docs"}
    assert targets.relevant(root / "toolrt.yaml") and targets.relevant(root / "tools.d" / "docs" / "x.md")
    assert not targets.relevant(root / "notes.txt") and not targets.relevant(root / ".toolrt.yaml.swp")


# --- the acceptance test ------------------------------------------------------------------------


@pytest.mark.usefixtures("untraced")  # four callers loop on calls all along: see conftest.untraced
@pytest.mark.slow  # forty saves, each awaited through the watcher
def test_calls_stay_consistent_while_the_config_is_rewritten(tmp_path: Path) -> None:
    """Calls from several tasks never fail and never mix two snapshots while saves alternate good and broken."""
    rt = Runtime.load(make(tmp_path, "v0"))
    path = tmp_path / "tools.d" / "ver.yaml"
    written = {"v0"}
    results: list[tuple[str, str, str | None]] = []
    done = anyio.Event()

    async def caller(worker: int) -> None:
        n = 0
        while not done.is_set():
            n += 1
            result = await rt.call("ver", {"n": worker * 100_000 + n})
            results.append((result.title, result.output, result.error))

    async def writer(reloader: Reloader) -> None:
        for i in range(1, 17):
            version = f"v{i}"
            text = tool_text(version) if i % 2 == 0 else BROKEN
            if i % 2 == 0:
                written.add(version)
            temp = path.with_name(".ver.tmp")
            temp.write_text(text, encoding="utf-8")
            os.replace(temp, path)
            # A hang guard, not a budget: with four callers busy on the loop, a machine at a load of
            # 14 took over 10 s to see one save.
            with anyio.fail_after(60):
                if i % 2 == 0:
                    await _until(reloader, lambda: _title(rt) == f"ver {version}")  # noqa: B023 (awaited here)
                else:
                    await _until(reloader, lambda: rt.status().last_error is not None)
        done.set()

    async def action(reloader: Reloader) -> None:
        async with anyio.create_task_group() as group:
            for worker in range(4):
                group.start_soon(caller, worker)
            group.start_soon(writer, reloader)

    anyio.run(_watching, rt, action)
    assert len(results) > 16
    versions_seen = set()
    for title, output, error in results:
        assert error is None
        version = title.removeprefix("ver ")
        assert version in written and output.startswith(f"{version} ")  # title and output from one snapshot
        versions_seen.add(version)
    assert len(versions_seen) > 2


# --- toolrt watch output ------------------------------------------------------------------------


def _events(tmp_path: Path, edits: list[tuple[str, str]]) -> list[ReloadEvent]:
    rt = Runtime.load(make(tmp_path))
    events: list[ReloadEvent] = []

    async def changes() -> AsyncIterator[ChangeSet]:
        for name, text in edits:
            target = tmp_path / name
            if text:
                target.write_text(text, encoding="utf-8")
            else:
                target.unlink()
            yield {(2, str(target))}

    reloader = Reloader(rt, changes=changes())
    reloader.subscribe(events.append)
    anyio.run(reloader.run)
    return events


ADD = 'id: two\ndescription: The second test tool, used to see an addition.\nhandler: {argv: ["true"]}\n'


@pytest.mark.parametrize(
    ("edits", "text", "record"),
    [
        ([("tools.d/two.yaml", ADD)], "reload 2: +two", {"added": ["two"], "ok": True, "errors": []}),
        ([("tools.d/ver.yaml", tool_text("v2"))], "reload 2: ~ver", {"changed": ["ver"], "ok": True}),
        (
            [("permissions.yaml", "permission:\n  ver: deny\n")],
            "reload 2: permission rules changed",
            {"permissions_changed": True},
        ),
        ([("toolrt.yaml", "builtin_tools: false\n")], "reload 1: no changes", {"added": [], "ok": True}),
        (
            [("tools.d/ver.yaml", BROKEN)],
            "reload 1: config invalid, still serving the last good config:\n  tools.d/ver.yaml:2:",
            {"ok": False, "generation": 1},
        ),
    ],
)
def test_watch_prints_each_reload(
    tmp_path: Path, edits: list[tuple[str, str]], text: str, record: dict[str, Any]
) -> None:
    (event,) = _events(tmp_path, edits)
    assert format_event(event).startswith(text)
    line = json.loads(json.dumps(event_json(event)))
    assert {key: line[key] for key in record} == record
    if not line["ok"]:
        assert line["errors"][0]["file"] == "tools.d/ver.yaml" and line["errors"][0]["line"] == 2


def test_watch_reports_a_repeated_error_briefly(tmp_path: Path) -> None:
    first, second = _events(tmp_path, [("tools.d/ver.yaml", BROKEN), ("tools.d/ver.yaml", BROKEN)])
    assert "\n" in format_event(first)
    assert format_event(second) == "reload 1: config still invalid (1 problem(s)), serving the last good config"


def test_a_changed_handler_module_is_imported_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "project"
    (root / "tools.d").mkdir(parents=True)
    (root / "toolrt.yaml").write_text("builtin_tools: false\n")
    (root / "tools.d" / "greet.yaml").write_text(
        "id: greet\ndescription: Says which version of its handler ran.\nhandler: {python: 'greeting:greet'}\n"
    )
    module = root / "greeting.py"
    module.write_text("async def greet(args, ctx):\n    return 'version one'\n")
    monkeypatch.setenv("TOOLRT_DATA_DIR", str(tmp_path / "data"))
    rt = Runtime.load(root)
    assert rt.call_sync("greet", {}).output == "version one"
    assert module in rt.snapshot.watched and watch_targets(rt.snapshot).relevant(module)  # watched too
    generation = rt.status().generation
    module.write_text("async def greet(args, ctx):\n    return 'version two, edited'\n")
    assert rt.reload().generation == generation + 1
    assert rt.call_sync("greet", {}).output == "version two, edited"
    assert rt.reload().generation == generation + 1  # nothing changed since: no swap


def _set_event(event: anyio.Event, _reload: ReloadEvent) -> None:
    event.set()
