"""The package's shape: the public surface, and imports that only point down the data flow."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path

import pytest

import toolrt

PACKAGE = Path(toolrt.__file__).parent

# The floors, lowest first: one a folder, plus the package's ground and top modules. A module may import
# only modules of its own floor or lower ones (lazy imports included), and no two units (a folder, or a
# top-level module) import each other, directly or round about.
LAYERS: list[set[str]] = [
    # ground: what every floor may name
    {"errors", "result", "scope", "audit", "truncate", "attribution", "beneath", "telemetry", "addresses"},
    {"config.*"},  # YAML → located documents, layered settings
    {"specs.*"},  # JSON Schema → each provider's function specs
    {"providers.*"},  # provider messages ↔ calls and results
    {"permissions.*"},  # rules, evaluation, asks
    {"shell.*"},  # bash analysis
    {"sandbox.*"},  # the OS sandbox
    {"execute.*"},  # processes in the sandbox
    {"build.*"},  # documents → Snapshot → ToolSet
    {"lsp.*"},  # language servers
    {"store.*"},  # state that outlives a call
    {"call.*"},  # the pipeline, and the handler context
    {"builtin.*"},  # the built-in tools
    {"host.*"},  # the Runtime's parts of their own: sessions, deprecated names
    {"api", "reload", "__init__", "context"},  # top: the Runtime, its reloader, the package face, 0.1's name
    {"faces.*", "__main__"},  # the front ends
]


def _layer_of(module: str) -> int:
    for index, members in enumerate(LAYERS):
        for member in members:
            if module == member:
                return index
            if member.endswith(".*") and (module == member[:-2] or module.startswith(member[:-1])):
                return index
    raise AssertionError(f"module toolrt.{module} is in no layer: add it to LAYERS")


def _unit_of(module: str) -> str:
    """The unit a module belongs to: its top-level folder, or itself at the top."""
    return module.split(".")[0]


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "_builtin" in path.parts:
            continue
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The package's modules that `module` imports, anywhere in its body (lazy imports included)."""
    if path.name == "__init__.py":
        package = [] if module == "__init__" else module.split(".")
    else:
        package = module.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module == "toolrt" or (node.module or "").startswith("toolrt."):
                name = node.module.removeprefix("toolrt").removeprefix(".")  # type: ignore[union-attr]
            else:
                continue
            submodules = {f"{name}.{a.name}".lstrip(".") for a in node.names} & modules.keys()
            targets |= submodules or {name or "__init__"}
        elif isinstance(node, ast.Import):
            targets.update(a.name.removeprefix("toolrt.") for a in node.names if a.name.startswith("toolrt."))
    return {target for target in targets if target in modules and target != module}


def _edges() -> list[tuple[str, str]]:
    modules = _modules()
    return [(module, target) for module, path in modules.items() for target in _imports(module, path, modules)]


def test_every_module_is_on_a_floor() -> None:
    for module in _modules():
        _layer_of(module)


@pytest.mark.slow
def test_imports_only_point_down_the_data_flow() -> None:
    upward = [f"toolrt.{a} imports toolrt.{b}" for a, b in _edges() if _layer_of(b) > _layer_of(a)]
    assert upward == []


def test_no_two_units_import_each_other() -> None:
    graph: dict[str, set[str]] = {}
    for module, target in _edges():
        if _unit_of(module) != _unit_of(target):
            graph.setdefault(_unit_of(module), set()).add(_unit_of(target))
    cycles = []
    for unit in sorted(graph):
        path, stack = [unit], [iter(sorted(graph[unit]))]
        while stack:  # depth first from `unit`, reporting the ways back to it
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                path.pop()
            elif step == unit:
                cycles.append(" → ".join([*path, unit]))
            elif step not in path and step > unit:  # each cycle once, from its smallest unit
                path.append(step)
                stack.append(iter(sorted(graph.get(step, ()))))
    assert cycles == []


def _texts(path: Path) -> set[str]:
    """The string literals of a module that are not docstrings nor names (`__all__` entries)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        if not node.value.isidentifier()
    }


def test_a_message_is_written_in_one_module() -> None:
    """A text of 25 characters or more (a refusal, a reason, a hint) is written once: two copies of a
    message drift apart. Say it in one function or constant and import that."""
    places: dict[str, list[str]] = {}
    for module, path in _modules().items():
        for text in _texts(path):
            if len(text) >= 25:
                places.setdefault(text, []).append(module)
    assert {text: sorted(found) for text, found in places.items() if len(found) > 1} == {}


def test_the_package_top_holds_at_most_twelve_modules() -> None:
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(top) <= 12, top


def test_no_module_is_over_700_lines() -> None:
    """Small modules of one concern each: a module that grows past 700 lines is split by its concerns."""
    longer = {
        path.relative_to(PACKAGE).as_posix(): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > 700
    }
    assert longer == {}


def test_the_version_is_one_in_pyproject_the_package_and_the_changelog() -> None:
    """`toolrt.__version__`, pyproject's `version` and the CHANGELOG's newest release heading agree."""
    root = Path(__file__).resolve().parent.parent
    [declared] = re.findall(r'^version = "([^"]+)"$', (root / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    newest = re.search(r"^## (\S+) — ", (root / "CHANGELOG.md").read_text(encoding="utf-8"), re.M)
    assert newest is not None
    assert toolrt.__version__ == declared == newest.group(1)


def test_all_is_sorted_and_complete() -> None:
    assert toolrt.__all__ == sorted(toolrt.__all__)
    for name in toolrt.__all__:
        assert getattr(toolrt, name) is not None, name
    assert toolrt.Runtime.__module__ == "toolrt.api"


def test_importing_runtime_does_not_import_heavy_modules() -> None:
    import subprocess
    import sys

    code = (
        "import sys, toolrt.faces.cli, toolrt.specs, toolrt.build.snapshot;"
        "print(sorted(m for m in ('mcp', 'watchfiles', 'jinja2', 'jsonschema', 'pydantic', 'tree_sitter')"
        " if m in sys.modules))"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


def _defined_types() -> set[str]:
    """Names of the classes and type aliases the package defines (found statically, nothing imported)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target = node.targets[0].id
                if target[:1].isupper() and not target.isupper() and isinstance(node.value, ast.Subscript):
                    names.add(target)  # `Asker = Callable[[AskRequest], Awaitable[Reply]]`
    return names


HOST_FACING = {"api.py": "Runtime", "host/sessions.py": "Sessions", "host/deprecated.py": "DeprecatedNames"}
"""The classes whose public members a host calls: the Runtime (with its deprecated names) and `rt.sessions`."""
INSIDES = {"Snapshot", "Store", "Settings", "ResolvedSettings"}
"""Exported for annotations; what they hold is the config's and the store's, not members a host calls."""
TOUCHED_ELSEWHERE = {"LspError", "ToolCall", "StreamAccumulator", "DescribeInfo", "Action", "Severity"}
"""Types a host meets outside the Runtime's signatures: `ctx.lsp` raises `LspError`, a host's own loop gets
`ToolCall`s from a `StreamAccumulator`, a `describe:` hook receives `DescribeInfo`, and the two literals are
what `Decision.action` and `Problem.severity` hold."""


def _types_named(function: ast.FunctionDef | ast.AsyncFunctionDef, defined: set[str]) -> set[str]:
    """The package's types in a public function's annotations (but `self`'s) and in its docstring's Raises."""
    arguments = function.args
    parameters = [*arguments.posonlyargs, *arguments.args][1:]  # every host-facing function here is a method
    annotations = [a.annotation for a in [*parameters, *arguments.kwonlyargs] if a.annotation is not None]
    if arguments.kwarg is not None and arguments.kwarg.annotation is not None:
        annotations.append(arguments.kwarg.annotation)
    if function.returns is not None:
        annotations.append(function.returns)
    found = {name for a in annotations for name in re.findall(r"[A-Za-z_]\w*", ast.unparse(a)) if name in defined}
    _, _, raises = (ast.get_docstring(function) or "").partition("Raises:")
    return found | {name for name in re.findall(r"^\s+(\w+):", raises, re.M) if name in defined}


def _members_types(node: ast.ClassDef, defined: set[str]) -> dict[str, str]:
    """Each package type a class's public methods take, return or raise and its public fields hold → where."""
    used: dict[str, str] = {}
    for member in node.body:
        if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and not member.name.startswith("_"):
            for name in _types_named(member, defined):
                used.setdefault(name, f"{node.name}.{member.name}")
        elif isinstance(member, ast.AnnAssign) and isinstance(member.target, ast.Name):
            if not member.target.id.startswith("_"):
                for name in re.findall(r"[A-Za-z_]\w*", ast.unparse(member.annotation)):
                    if name in defined:
                        used.setdefault(name, f"{node.name}.{member.target.id}")
    return used


def _classes() -> dict[str, list[ast.ClassDef]]:
    found: dict[str, list[ast.ClassDef]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(node)
    return found


@pytest.mark.slow
def test_the_public_surface_names_every_type_a_host_touches() -> None:
    """Every type the Runtime's and `rt.sessions`' public methods take, return or raise, and every type the
    fields and methods of those types name in turn, is importable from `toolrt` (one level down: the
    snapshot's, the store's and the settings' insides are theirs)."""
    defined = _defined_types()
    classes = _classes()
    used: dict[str, str] = {}
    for path, name in HOST_FACING.items():
        tree = ast.parse((PACKAGE / path).read_text(encoding="utf-8"))
        [host] = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name]
        used.update(_members_types(host, defined))
    for name in sorted(set(used) - INSIDES):
        for node in classes.get(name, []):
            for inner, where in _members_types(node, defined).items():
                used.setdefault(inner, where)
    assert {"CallScope", "ToolResult", "ToolSet", "Decision", "ScopeFields", "Sessions", "PatternDecision"} <= set(used)
    assert {"UsageError", "StoreError", "ConfigError"} <= set(used)  # named in the Raises of load, store, approve
    missing = {name: where for name, where in used.items() if name not in toolrt.__all__ and not name.startswith("_")}
    assert missing == {}
    assert TOUCHED_ELSEWHERE - set(toolrt.__all__) == set()


def test_the_types_hosts_met_before_they_were_exported_are_the_ones_the_package_uses() -> None:
    """`LspError`, `ToolCall` and `DescribeInfo` are the package's own classes, not copies, and every
    provider's stream accumulator is a `toolrt.StreamAccumulator`."""
    from toolrt.build.compiled import DescribeInfo
    from toolrt.errors import LspError
    from toolrt.providers import anthropic, gemini, openai, openai_responses
    from toolrt.providers.model import ToolCall

    assert (toolrt.LspError, toolrt.ToolCall, toolrt.DescribeInfo) == (LspError, ToolCall, DescribeInfo)
    for module in (openai, openai_responses, anthropic, gemini):
        assert isinstance(module.StreamAccumulator(), toolrt.StreamAccumulator), module.__name__
    assert not isinstance(object(), toolrt.StreamAccumulator)


OLD_STARTER = """
from toolrt.context import ToolContext


def shout(args, ctx: ToolContext) -> str:
    return args["text"].upper() + " in " + ctx.root.name
"""


def test_a_handler_written_against_0_1_module_paths_still_runs(tmp_path: Path) -> None:
    """`toolrt init` 0.1 wrote `from toolrt.context import ToolContext` into projects: after the move
    such a handler imports and runs; importing the old name warns that it is deprecated."""
    import subprocess
    import sys

    root = tmp_path / "old"
    (root / "tools.d").mkdir(parents=True)
    (root / "starter_tools.py").write_text(OLD_STARTER, encoding="utf-8")
    (root / "tools.d" / "shout.yaml").write_text(
        "id: shout\ndescription: Shouts.\nparameters: {type: object, properties: {text: {type: string}}}\n"
        "handler: {python: 'starter_tools:shout'}\n",
        encoding="utf-8",
    )
    code = (
        "import anyio, sys; from toolrt import Runtime; rt = Runtime.load(sys.argv[1]);"
        "print(anyio.run(lambda: rt.call('shout', {'text': 'hi'})).output)"
    )
    run = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "HI in old"
    warned = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", "import toolrt.context"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert warned.returncode != 0
    assert "toolrt.context is deprecated: import ToolContext from toolrt" in warned.stderr
