"""Project handler modules import per project root, never through sys.path."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from toolrt import Runtime

Factory = Callable[..., Path]

TOOL = """
id: whoami
description: Says which project's handler module answered.
parameters: {type: object, properties: {}}
handler: {python: "handlers:whoami"}
"""

PACKAGE_TOOL = """
id: helper
description: A handler in a package that imports a sibling module relatively.
parameters: {type: object, properties: {}}
handler: {python: "project_tools.entry:run"}
"""


def handlers(name: str) -> str:
    return f"def whoami(args, ctx):\n    return {name!r}\n"


def test_two_runtimes_with_same_named_handler_modules_side_by_side(make_project: Factory) -> None:
    path_before = list(sys.path)
    first = Runtime.load(make_project({"whoami": TOOL}, modules={"handlers": handlers("first")}))
    second = Runtime.load(make_project({"whoami": TOOL}, modules={"handlers": handlers("second")}))
    assert first.call_sync("whoami", {}).output == "first"
    assert second.call_sync("whoami", {}).output == "second"
    assert first.call_sync("whoami", {}).output == "first"
    assert sys.path == path_before  # no project root left on sys.path
    assert "handlers" not in sys.modules  # and nothing under the bare name for others to trip over


def test_a_changed_module_reloads_for_its_own_runtime_only(make_project: Factory) -> None:
    first_root = make_project({"whoami": TOOL}, modules={"handlers": handlers("first")})
    first = Runtime.load(first_root)
    second = Runtime.load(make_project({"whoami": TOOL}, modules={"handlers": handlers("second")}))
    assert (first.call_sync("whoami", {}).output, second.call_sync("whoami", {}).output) == ("first", "second")
    (first_root / "handlers.py").write_text(handlers("first, edited") + "\n# longer\n", encoding="utf-8")
    first.reload()
    assert first.call_sync("whoami", {}).output == "first, edited"
    assert second.call_sync("whoami", {}).output == "second"


def test_packages_import_their_own_modules_relatively(make_project: Factory) -> None:
    root = make_project(
        {"helper": PACKAGE_TOOL},
        modules={
            "project_tools.__init__": "",
            "project_tools.util": "def shout(text):\n    return text.upper()\n",
            "project_tools.entry": "from .util import shout\n\ndef run(args, ctx):\n    return shout('relative')\n",
        },
    )
    assert Runtime.load(root).call_sync("helper", {}).output == "RELATIVE"


def test_installed_modules_import_normally(make_project: Factory) -> None:
    tool = TOOL.replace("handlers:whoami", "json:dumps")
    rt = Runtime.load(make_project({"whoami": tool}))
    result = rt.call_sync("whoami", {})
    assert result.error is not None and "dumps" in result.error  # json.dumps ran (and failed on its arguments)


@pytest.mark.parametrize("name", ["first", "second"])
def test_validate_imports_from_the_project_root_too(make_project: Factory, name: str) -> None:
    from toolrt.build.snapshot import build_snapshot
    from toolrt.faces.project_checks import python_handler_problems

    snapshot = build_snapshot(make_project({"whoami": TOOL}, modules={"handlers": handlers(name)}))
    assert python_handler_problems(snapshot) == []


class _CountedRoot:
    """A guarded root that counts how often an import asked whether a module lies beneath it."""

    asked = 0

    def __init__(self, path: str) -> None:
        self.path = path

    def __fspath__(self) -> str:
        _CountedRoot.asked += 1
        return self.path


def test_an_installed_module_is_imported_without_looking_at_the_guarded_roots(
    make_project: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process that loaded many projects guards many roots: an import of the standard library or of an
    # installed package (thousands, for an SDK) must not be checked against each of them.
    from toolrt.build import project_import

    rt = Runtime.load(make_project({"greet": TOOL}, modules={"handlers": handlers("a")}))
    rt.close()
    roots = {f"_toolrt_project_{n}": (_CountedRoot(f"/nonexistent/root{n}"), None) for n in range(50)}
    monkeypatch.setattr(project_import, "_guards", {**project_import._guards, **roots})
    for name in ("calendar", "yaml.composer", "pytest"):  # the standard library, site-packages
        assert project_import._finder.find_spec(name, None) is None
    assert _CountedRoot.asked == 0
    assert project_import._finder.find_spec("helpers_nowhere_to_be_found", None) is None
