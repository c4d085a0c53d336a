"""Reload keeps the last good code: a project's handler modules (and the project modules they import) are
compiled and imported before a reload swaps them in; a broken save keeps the previous code serving and says
where it broke; the watch line names what changed."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import pytest
from processes import after_the_last_process, before_the_next_process

from toolrt.api import Runtime
from toolrt.faces.watch import event_json, format_event
from toolrt.reload import ChangeSet, Reloader, ReloadEvent

Factory = Callable[..., Path]

GREET = """\
id: greet
description: Says which version of its handler ran, for the reload tests.
parameters: {type: object, properties: {}}
handler: {python: "tools_code.greeting:greet"}
"""
HANDLER = "from .words import WORD\n\n\ndef greet(args, ctx):\n    return WORD + ' {version}'\n"
WORDS = "WORD = 'hello'\n"


def _project(make_project: Factory, version: str = "one") -> Path:
    return make_project(
        {"greet": GREET},
        modules={
            "tools_code.__init__": "",
            "tools_code.greeting": HANDLER.format(version=version),
            "tools_code.words": WORDS,
        },
    )


def _reloads(rt: Runtime, edits: list[tuple[str, str]], outputs: list[str] | None = None) -> list[ReloadEvent]:
    """Each edit saved, then one reload through a Reloader (as the watcher would run it); with `outputs`,
    what `greet` answers after each reload."""
    events: list[ReloadEvent] = []

    async def changes() -> AsyncIterator[ChangeSet]:
        for name, text in edits:
            path = rt.root / name
            path.write_text(text, encoding="utf-8")
            yield {(2, str(path))}
            if outputs is not None:
                result = await rt.call("greet", {})
                outputs.append(result.output or str(result.error))

    async def main() -> None:
        reloader = Reloader(rt, changes=changes())
        reloader.subscribe(events.append)
        await reloader.run()

    anyio.run(main)
    return events


def test_a_broken_handler_keeps_the_previous_code_serving_until_a_fix(make_project: Factory) -> None:
    rt = Runtime.load(_project(make_project))
    outputs: list[str] = []
    broken = HANDLER.format(version="two").replace("return", "return (")
    syntax, again, fixed = _reloads(
        rt,
        [
            ("tools_code/greeting.py", broken),
            ("tools_code/greeting.py", broken + "\n"),
            ("tools_code/greeting.py", HANDLER.format(version="three")),
        ],
        outputs,
    )
    assert syntax.error is not None and syntax.change is None and syntax.status.generation == 1
    (problem,) = syntax.error.problems
    assert (problem.file, problem.line) == ("tools_code/greeting.py", 5)
    assert "SyntaxError" in problem.message and "the code in use is kept" in problem.message
    assert format_event(syntax).startswith(
        "reload 1: config invalid, still serving the last good config:\n  tools_code/greeting.py:5:"
    )
    assert again.repeated, "the same failure is reported once"
    assert fixed.error is None and fixed.fixed and fixed.change is not None
    assert fixed.change.code_changed == ("greet",) and fixed.change.code_files == ("tools_code/greeting.py",)
    assert format_event(fixed) == "reload 2: handler code changed (tools_code/greeting.py: greet); valid again"
    assert event_json(fixed)["code_changed"] == ["greet"] and event_json(fixed)["fixed"] is True
    assert outputs == ["hello one", "hello one", "hello three"]


def test_an_imported_module_failing_at_import_is_located_and_the_old_modules_serve(make_project: Factory) -> None:
    rt = Runtime.load(_project(make_project))
    outputs: list[str] = []
    failing, fixed = _reloads(
        rt,
        [
            ("tools_code/words.py", "import os\n\nWORD = undefined_name\n"),
            ("tools_code/words.py", "WORD = 'hi'\n"),
        ],
        outputs,
    )
    assert failing.error is not None and failing.change is None
    (problem,) = failing.error.problems
    assert (problem.file, problem.line) == ("tools_code/words.py", 3)
    assert "NameError" in problem.message and "tools_code.greeting:greet" in problem.message
    assert fixed.change is not None and fixed.change.code_changed == ("greet",)
    assert fixed.change.code_files == ("tools_code/words.py",), "a module the handler imports is its code too"
    assert outputs == ["hello one", "hi one"]  # the Reloader imported the code in use before the broken save


def test_a_handler_that_loses_its_function_is_located_in_the_yaml(make_project: Factory) -> None:
    rt = Runtime.load(_project(make_project))
    outputs: list[str] = []
    (renamed,) = _reloads(rt, [("tools_code/greeting.py", "def hello(args, ctx):\n    return 'renamed'\n")], outputs)
    assert renamed.error is not None
    (problem,) = renamed.error.problems
    assert problem.file.endswith("greet.yaml") and problem.line == 4
    assert "has no attribute 'greet'" in problem.message
    assert outputs == ["hello one"]


@pytest.mark.parametrize(
    ("name", "text", "shown"),
    [
        ("toolrt.yaml", "builtin_tools: false\ntoolsets: {mine: [greet]}\n", "reload 2: settings changed"),
        ("permissions.yaml", "permission:\n  greet: deny\n", "reload 2: permission rules changed"),
        ("tools.d/greet.yaml", GREET.replace("Says which", "Tells which"), "reload 2: ~greet"),
    ],
)
def test_the_watch_line_names_what_changed(make_project: Factory, name: str, text: str, shown: str) -> None:
    rt = Runtime.load(_project(make_project))
    (event,) = _reloads(rt, [(name, text)])
    assert format_event(event) == shown


ECHO = """\
id: echo
description: Echoes a fixed word, for the doom-loop tests; its file does not change.
parameters: {type: object, properties: {}}
handler: {argv: [echo, same]}
"""
LOOP = "stopped as a loop"


def test_a_reload_that_changes_a_tools_code_or_definition_clears_only_its_loop_history(make_project: Factory) -> None:
    root = _project(make_project)
    (root / "tools.d" / "echo.yaml").write_text(ECHO, encoding="utf-8")
    rt = Runtime.load(root)
    rt.import_code()
    before_the_next_process()  # the project the person made is not the echo's either
    assert [rt.call_sync("echo", {}).error for _ in range(2)] == [None, None]
    after_the_last_process()  # the person's edit below is not one of the echo's
    (root / "tools_code" / "words.py").write_text("WORD = 'hey'\n", encoding="utf-8")  # imported by greet's module
    assert rt.reload().last_error is None
    echo = rt.call_sync("echo", {})
    assert echo.error is not None and LOOP in echo.error, "a tool the reload did not change keeps its history"
    assert [rt.call_sync("greet", {}).output for _ in range(2)] == ["hey one", "hey one"]
    (root / "tools_code" / "words.py").write_text("WORD = 'hi'\n", encoding="utf-8")
    assert rt.reload().last_error is None
    assert rt.call_sync("greet", {}).output == "hi one", "new code: not a loop of the old"
    (root / "tools.d" / "greet.yaml").write_text(GREET.replace("Says which", "Tells which"), encoding="utf-8")
    assert rt.reload().last_error is None
    assert [rt.call_sync("greet", {}).error for _ in range(2)] == [None, None], "a new definition: history cleared"
    looped = rt.call_sync("greet", {})
    assert looped.error is not None and LOOP in looped.error, "the guard still stops a loop after a reload"


def test_development_mode_turns_the_guard_into_a_warning(
    make_project: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    rt = Runtime.load(_project(make_project))
    rt.development = True
    outputs = [rt.call_sync("greet", {}) for _ in range(3)]
    assert [result.error for result in outputs] == [None, None, None]
    assert outputs[2].output.startswith("hello one\n\n<toolrt_metadata>\ntoolrt development mode: this is the same")
    assert "outside development mode it would be stopped as a loop" in outputs[2].output
    assert any("development mode" in record.getMessage() for record in caplog.records)
    rt.development = False
    looped = rt.call_sync("greet", {})
    assert looped.error is not None and LOOP in looped.error


def test_handler_code_that_does_not_import_at_start_is_reported_and_its_fix_announced(make_project: Factory) -> None:
    root = _project(make_project)
    (root / "tools_code" / "greeting.py").write_text("def greet(args, ctx):\n    return )\n", encoding="utf-8")
    rt = Runtime.load(root)
    outputs: list[str] = []
    edits = [
        ("tools.d/greet.yaml", GREET.replace("Says which", "Tells which")),
        ("tools_code/greeting.py", HANDLER.format(version="fixed")),
    ]
    start, other, fixed = _reloads(rt, edits, outputs)
    assert start.initial and start.error is not None
    assert str(start.error.problems[0]).startswith("tools_code/greeting.py:2:")
    assert format_event(start).startswith("generation 1: handler code does not import (its tools fail until a save")
    assert other.change is not None and other.error is not None and other.repeated and not other.fixed
    assert fixed.fixed and outputs[1] == "hello fixed" and "syntax" in outputs[0]


def test_toolrt_watch_prints_a_broken_handler_once_in_red_and_its_fix(make_project: Factory, tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    import toolrt

    root = _project(make_project)
    env = {**os.environ, "PYTHONPATH": str(Path(toolrt.__file__).parent.parent), "TOOLRT_DATA_DIR": str(tmp_path / "d")}
    argv = [sys.executable, "-m", "toolrt", "watch", "--root", str(root), "--color", "always"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    lines: list[str] = []

    def until(text: str) -> None:
        deadline = time.monotonic() + 30
        while not any(text in line for line in lines):
            assert time.monotonic() < deadline and process.poll() is None, "".join(lines)
            lines.append(process.stdout.readline())  # type: ignore[union-attr]

    try:
        until("watching ")
        (root / "tools_code" / "greeting.py").write_text("def greet(args, ctx):\n    return (\n", encoding="utf-8")
        until("tools_code/greeting.py:2:")
        (root / "tools_code" / "greeting.py").write_text(HANDLER.format(version="back"), encoding="utf-8")
        until("valid again")
    finally:
        process.terminate()
        _, err = process.communicate(timeout=30)
    assert "\033[31mreload 1: config invalid, still serving the last good config:\033[0m\n" in lines
    assert "\033[32mreload 2: handler code changed (tools_code/greeting.py: greet); valid again\033[0m\n" in lines
    assert "SyntaxError" not in err, "printed once: not again by the reload logger on stderr"
