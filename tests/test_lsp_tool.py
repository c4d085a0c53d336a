"""The `lsp` tool against a real language server (pylsp) in a small fixture project."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import load, lsp_settings

from toolrt import Runtime
from toolrt.result import ToolResult

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("collect_garbage")]

CORE = '''\
def greet(name):
    """Say hello to someone."""
    return f"Hello, {name}!"


class Greeter:
    def run(self):
        return greet("from the class")
'''
MAIN = """\
from greetings.core import greet


def main():
    print(greet("world"))
    print(greet("again"))
"""


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    root = tmp_path_factory.mktemp("lsp-tool")
    (root / "pyproject.toml").write_text("[project]\nname = 'greetings'\n", encoding="utf-8")
    (root / "greetings").mkdir()
    (root / "greetings" / "__init__.py").write_text("", encoding="utf-8")
    (root / "greetings" / "core.py").write_text(CORE, encoding="utf-8")
    (root / "main.py").write_text(MAIN, encoding="utf-8")
    rt = load(root, lsp_settings(), flags={"lsp_tool": True})
    yield rt
    rt.close()


def lsp(rt: Runtime, **args: Any) -> ToolResult:
    return rt.call_sync("lsp", args)


def test_the_tool_is_behind_its_flag_and_asks_its_own_permission(runtime: Runtime) -> None:
    assert "lsp" not in Runtime.load(runtime.root).tools().names()
    assert "lsp" in runtime.tools().names()
    [request] = runtime.check_call("lsp", {"operation": "documentSymbol", "filePath": "main.py"})[1]
    assert (request.permission, request.patterns, request.always) == ("lsp", ("main.py",), ("*",))


def test_go_to_definition_crosses_files(runtime: Runtime) -> None:
    result = lsp(runtime, operation="goToDefinition", filePath="main.py", line=5, character=11)
    assert result.error is None
    assert result.title == "goToDefinition main.py:5:11"
    assert result.output == "1 definition:\ngreetings/core.py:1:5: def greet(name):"


def test_find_references_lists_every_use_with_its_line(runtime: Runtime) -> None:
    result = lsp(runtime, operation="findReferences", filePath="greetings/core.py", line=1, character=5)
    assert result.output.splitlines() == [
        "5 references:",
        "greetings/core.py:1:5: def greet(name):",
        'greetings/core.py:8:16: return greet("from the class")',
        "main.py:1:28: from greetings.core import greet",
        'main.py:5:11: print(greet("world"))',
        'main.py:6:11: print(greet("again"))',
    ]


def test_hover_and_document_symbols(runtime: Runtime) -> None:
    hover = lsp(runtime, operation="hover", filePath="main.py", line=5, character=11)
    assert hover.output == "greet(name)\n\nSay hello to someone."
    symbols = lsp(runtime, operation="documentSymbol", filePath="greetings/core.py")
    assert symbols.output == "3 symbols:\nFunction greet (1:1)\nClass Greeter (6:1)\nMethod run (7:5)"


def test_an_operation_the_server_lacks_says_so(runtime: Runtime) -> None:
    result = lsp(runtime, operation="incomingCalls", filePath="greetings/core.py", line=1, character=5)
    assert result.error is None
    assert result.output == "No results found for incomingCalls (pylsp does not support incomingCalls)"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"operation": "hover", "filePath": "main.py"}, "hover needs `line` and `character` (1-based"),
        ({"operation": "documentSymbol", "filePath": "missing.py"}, "File not found: "),
        ({"operation": "documentSymbol", "filePath": "pyproject.toml"}, "No LSP server available for this file type"),
        ({"operation": "hover", "filePath": "main.py", "line": 0, "character": 1}, "/line"),
    ],
)
def test_mistakes_get_an_error_that_says_what_to_do(runtime: Runtime, args: dict[str, Any], error: str) -> None:
    result = runtime.call_sync("lsp", args)
    assert result.error is not None and error in result.error


def test_a_server_that_fails_is_named_in_the_error_and_tried_again(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = 1\n", encoding="utf-8")
    with load(tmp_path, lsp_settings(["/bin/false"]), flags={"lsp_tool": True}) as rt:
        first = lsp(rt, operation="documentSymbol", filePath="app.py")
        assert first.error is not None
        assert first.error.startswith("language server pylsp (/bin/false) exited with status 1")
        second = lsp(rt, operation="documentSymbol", filePath="app.py")  # the back-off of a first failure is 0 s
        assert second.error is not None and "language server pylsp (/bin/false)" in second.error
        [status] = rt.language_servers()
        assert status.state == "failed" and "exited with status 1" in status.last_error
