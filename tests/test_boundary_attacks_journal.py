"""Attacks on issue 25 item 1 through the attribution journal's keys: content the model wrote reaching a
module toolrt imports under a name the journal did not record.

A file tool writes in place; a hard link made earlier by `bash` (inside a process's lifetime, so every
time it touched is journalled) makes the written file a second name of a project module. The write
itself happens outside every process's lifetime and is recorded under the name it was made by. Real
bash through toolrt's `bash` tool, the real kernel sandbox, the ruleset `bash: {"*": allow}`; a marker
file outside the project proves the model's code ran.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from cli_helpers import run
from processes import after_the_last_process

from toolrt import Runtime
from toolrt.permissions.ask import AskRequest, Reply

PERMISSIONS = 'permission:\n  "*": allow\n  bash: {"*": allow}\n  edit: allow\n  write: allow\n  webfetch: deny\n'
TOOL = """\
id: plug
description: Runs one of the project's plugins, by name.
parameters: {type: object, properties: {name: {type: string}}, required: [name]}
handler: {python: "pkg.handler:run"}
"""
HANDLER = """\
import importlib

def run(args, ctx):
    name = args["name"]
    return importlib.import_module(f"{__package__}.plugins.{name}").NAME
"""
EVIL = 'import pathlib\npathlib.Path({marker!r}).write_text("the model\'s code ran")\nNAME = "model"\n'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "tools.d").mkdir(parents=True)
    (root / "pkg" / "plugins").mkdir(parents=True)
    (root / "permissions.yaml").write_text(PERMISSIONS, encoding="utf-8")
    (root / "tools.d" / "plug.yaml").write_text(TOOL, encoding="utf-8")
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pkg" / "handler.py").write_text(HANDLER, encoding="utf-8")
    (root / "pkg" / "plugins" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pkg" / "plugins" / "a.py").write_text('NAME = "person"\n', encoding="utf-8")
    _past_the_slack(root, tmp_path / "probe")
    return root


def _past_the_slack(root: Path, probe: Path) -> None:
    """Wait (20 s at most) until the file clock is past the person's files by more than the slack a
    process's lifetime starts with (20 ms): made just before the model's call, they would count as its."""
    newest = max(path.stat().st_ctime_ns for path in root.rglob("*"))
    give_up = time.monotonic() + 20
    while time.monotonic() < give_up:
        probe.write_text("tick")
        if probe.stat().st_ctime_ns > newest + 30_000_000:
            return
    raise AssertionError("the file clock did not move in 20 s")


async def _reject(request: AskRequest) -> Reply:
    return Reply("reject")


async def _approve(request: AskRequest) -> Reply:
    return Reply("once")


async def _run_the_script(request: AskRequest) -> Reply:
    """The person lets the model's `bash stage.sh` run (the analyzer reads a script the model wrote and asks
    for what it cannot prove): what the script then does must still meet the kernel and the journal."""
    bash_only = all(decision.permission == "bash" for decision in request.pending)
    return Reply("once" if request.tool == "bash" and bash_only else "reject")


@pytest.mark.parametrize(
    ("link", "plugin"),
    [
        # a new name for a plugin, linked to a stage file; the plugin directory's time refreshed by a write
        ("touch stage.py && ln stage.py pkg/plugins/b.py", "b"),
        # the person's own plugin linked to a stage file at the root (the plugin directory never changes)
        ("ln pkg/plugins/a.py stage.py", "a"),
    ],
)
def test_a_file_tool_write_through_a_hard_link_is_the_models_under_every_name(
    project: Path, tmp_path: Path, link: str, plugin: str
) -> None:
    marker = tmp_path / "outside" / "plugin-ran.txt"
    marker.parent.mkdir()

    async def attack() -> None:
        with Runtime.load(project, partial=True) as rt, anyio.fail_after(30):
            linked = await rt.call("bash", {"command": link, "description": "link"}, ask=_reject)
            assert linked.error is None, linked.error
            assert "landlock" in str(linked.metadata.get("sandbox", ""))  # the real kernel sandbox ran it
            after_the_last_process()
            assert (await rt.call("read", {"filePath": "stage.py"}, ask=_reject)).error is None
            content = EVIL.format(marker=str(marker))
            wrote = await rt.call("write", {"filePath": "stage.py", "content": content}, ask=_reject)
            assert wrote.error is None, wrote.error
            refresh = await rt.call("write", {"filePath": "pkg/plugins/notes.txt", "content": "-"}, ask=_reject)
            assert refresh.error is None, refresh.error

    anyio.run(attack)
    assert (project / "pkg" / "plugins" / f"{plugin}.py").read_text().endswith('NAME = "model"\n')

    async def person_calls() -> Any:
        with Runtime.load(project, partial=True) as rt, anyio.fail_after(30):
            return await rt.call("plug", {"name": plugin}, ask=_reject)

    result = anyio.run(person_calls)
    assert not marker.exists(), "the model's plugin ran inside toolrt"
    assert result.error is not None
    assert f"pkg/plugins/{plugin}.py was changed by the `write` tool" in result.error
    assert "toolrt trust" in result.error

    # `toolrt trust` shows the refused module (no tool file names it) and approving it lets it load.
    code, out, _ = run("trust", "--json", "--root", str(project))
    assert code == 1 and [Path(entry["file"]).name for entry in json.loads(out)["held"]] == [f"{plugin}.py"]
    assert not marker.exists()
    code, out, _ = run("trust", "--yes", "--json", "--root", str(project))
    assert code == 0 and [Path(entry["file"]).name for entry in json.loads(out)["approved"]] == [f"{plugin}.py"]
    assert anyio.run(person_calls).output == "model"
    assert marker.read_text() == "the model's code ran"  # the person approved it


def test_the_persons_plugin_still_loads(project: Path) -> None:
    async def person_calls() -> Any:
        with Runtime.load(project, partial=True) as rt, anyio.fail_after(30):
            return await rt.call("plug", {"name": "a"}, ask=_reject)

    result = anyio.run(person_calls)
    assert result.error is None and result.output == "person"


@pytest.mark.parametrize("approving", ["the script", "everything it asks"])
def test_a_long_protected_list_does_not_leave_the_journal_writable(
    project: Path, tmp_path: Path, approving: str
) -> None:
    """The data directory inside the sandbox's writable set (here under the temp directory, as in CI):
    the journal is mounted read-only, and no length of the person's `protected:` list (the kernel mounts
    at most 64 paths) may push it out, or the model wipes it and its own changes become the person's."""
    marker = tmp_path / "outside" / "plugin-ran.txt"
    marker.parent.mkdir()
    many = "".join(f"  - ./generated-{index}\n" for index in range(80))
    (project / "permissions.yaml").write_text(PERMISSIONS + "protected:\n" + many, encoding="utf-8")

    async def attack() -> Any:
        with Runtime.load(project, partial=True) as rt, anyio.fail_after(30):
            journal = rt.snapshot.data_dir / "attribution" / "journal.jsonl"
            assert journal.is_file()
            # The wipe goes through Python, which the analyzer cannot read into (a route the rules miss),
            # so the person approves running the script and only the kernel stands in the way.
            wipe = f"{sys.executable} -c 'import sys; open(sys.argv[1], \"w\")' {journal}"
            script = f"printf %s {shlex.quote(EVIL.format(marker=str(marker)))} > pkg/plugins/b.py\n{wipe}\n"
            staged = await rt.call("write", {"filePath": "stage.sh", "content": script}, ask=_reject)
            assert staged.error is None, staged.error
            # The person lets the script run, or even approves the `protected` and `external_directory` asks
            # naming the journal: an approval lifts the cover of what the person approved, never the journal's.
            person = _run_the_script if approving == "the script" else _approve
            ran = await rt.call("bash", {"command": "bash stage.sh", "description": "stage"}, ask=person)
            assert "landlock" in str(ran.metadata.get("sandbox", ""))
            assert "Read-only file system" in ran.output and "journal.jsonl" in ran.output, ran.output
            assert journal.stat().st_size > 0
            return await rt.call("plug", {"name": "b"}, ask=_reject)

    result = anyio.run(attack)
    assert (project / "pkg" / "plugins" / "b.py").is_file()
    assert not marker.exists(), "the model's plugin ran inside toolrt"
    assert result.error is not None and "changed by a process a tool started" in result.error


def _bash_while(project: Path, tmp_path: Path, person_edits: Any, command: str = "") -> tuple[Any, Any]:
    """Run `command` then wait in a `bash` call until `person_edits()` (run once the process started) is
    done; then reload. Signals live outside the root (a process's overlay does not see names made beside
    it) and outside its parent (an approved `external_directory` there would make the whole root writable)."""
    signals = tmp_path / "signals"
    signals.mkdir()
    started, done = signals / "started", signals / "done"
    script = f"{command}\ntouch {started}\nwhile [ ! -f {done} ]; do sleep 0.01; done\n"

    async def main() -> tuple[Any, Any]:
        with Runtime.load(project, partial=True) as rt, anyio.fail_after(30):

            async def person() -> None:
                while not started.exists():
                    await anyio.sleep(0.01)
                person_edits()
                done.write_text("")

            async with anyio.create_task_group() as group:
                group.start_soon(person)
                ran = await rt.call("bash", {"command": script, "description": "wait"}, ask=_reject)
            assert "landlock" in str(ran.metadata.get("sandbox", "")), ran
            return rt.reload(), rt.snapshot

    return anyio.run(main)


def test_the_persons_edit_of_read_only_config_during_a_bash_call_loads(project: Path, tmp_path: Path) -> None:
    tool = project / "tools.d" / "plug.yaml"

    def edit() -> None:
        tool.write_text(TOOL.replace("by name.", "by name, as the person wrote."), encoding="utf-8")
        (project / "tools.d" / "new.yaml").write_text(TOOL.replace("id: plug", "id: new"), encoding="utf-8")

    status, snapshot = _bash_while(project, tmp_path, edit)
    assert status.last_error is None, status.last_error
    assert snapshot.tools["plug"].description.endswith("as the person wrote.")
    assert "new" in snapshot.tools and not snapshot.held


def test_read_only_config_changed_through_another_name_of_it_is_held(project: Path, tmp_path: Path) -> None:
    """The person's tool file has a second name outside the read-only `tools.d/` (a hard link): the model
    rewrites it in place through that name while its own tool file is read-only."""
    tool = project / "tools.d" / "plug.yaml"
    os.link(tool, project / "shared-plug.yaml")
    changed = TOOL.replace("Runs one of the project's plugins, by name.", "The model's description.")
    command = f"printf %s {shlex.quote(changed)} > shared-plug.yaml"
    status, snapshot = _bash_while(project, tmp_path, lambda: None, command)
    assert tool.read_text() == changed  # the write got through to the read-only name
    assert "plug" not in snapshot.tools or snapshot.tools["plug"].description != "The model's description."
    assert status.last_error is not None and "changed by a process a tool started" in str(status.last_error)


def test_a_tool_file_swapped_between_its_parse_and_its_check_is_never_loaded(project: Path, tmp_path: Path) -> None:
    """With the sandbox off (a host's choice; or an approved external directory above the root), only the
    journal stands: a process flips the tool file between the model's content and the person's while the
    config reloads. The check must hold what was parsed, not whatever the file holds a moment later."""
    tool = project / "tools.d" / "plug.yaml"
    person = tool.read_text()
    (project / "model.yaml").write_text(person.replace("by name.", "THE MODEL'S."), encoding="utf-8")
    (project / "person.yaml").write_text(person, encoding="utf-8")
    stop = tmp_path / "signals" / "stop"
    stop.parent.mkdir()
    flip = (
        f"while [ ! -f {stop} ]; do cp model.yaml a && mv a tools.d/plug.yaml; "
        "cp person.yaml b && mv b tools.d/plug.yaml; done\n"
    )
    (project / "flip.sh").write_text(flip, encoding="utf-8")
    seen = {"model": 0, "person": 0, "held": 0}

    async def main() -> None:
        with Runtime.load(project, partial=True, settings={"sandbox.mode": "off"}) as rt, anyio.fail_after(30):

            async def reload_while_it_flips() -> None:
                while not (project / "a").exists() and not (project / "b").exists():
                    await anyio.sleep(0.005)  # the flipping has begun
                try:
                    for _ in range(40):
                        status = await anyio.to_thread.run_sync(rt.reload)
                        described = rt.snapshot.tools.get("plug")
                        if described is not None and "MODEL" in described.description:
                            seen["model"] += 1
                        seen["held" if status.last_error is not None else "person"] += 1
                finally:
                    stop.write_text("")

            async with anyio.create_task_group() as group:
                group.start_soon(reload_while_it_flips)
                ran = await rt.call("bash", {"command": "bash flip.sh", "description": "flip"}, ask=_reject)
                assert ran.error is None, ran.error

    anyio.run(main)
    assert seen["model"] == 0, f"the model's tool file loaded unapproved: {seen}"
    assert seen["held"] > 0  # the flips were seen, and held
