"""The package's shape: the public surface, and imports that only point down the data flow."""

from __future__ import annotations

import ast
from pathlib import Path

import toolrt

PACKAGE = Path(toolrt.__file__).parent

# Lower layers first; a module may import only modules of its own layer or lower ones.
LAYERS: list[set[str]] = [
    {
        "errors",
        "result",
        "permissions.model",
        "config",
        "config.collect",
        "config.document",
        "config.resources",
        "config.reuse",
        "project_import",
        "scope",
    },
    {"config.loader", "config.validation", "config.model", "config.layers", "truncate", "audit"},
    {"settings"},
    {
        "sandbox",
        "sandbox.kernel",
        "sandbox.namespaces",
        "sandbox.forkserver",
        "sandbox.launcher",
        "sandbox.policy",
        "sandbox.support",
        "sandbox.seatbelt",
        "sandbox.bwrap",
        "sandbox.masks",
    },
    {"sandbox.plan", "sandbox.hint", "sandbox.config"},
    {"permissions.*", "specs.*", "providers.*", "shell.*", "execute.*", "sessions"},
    {"templates"},  # places shell-template values on the shell parse (shell.parser, shell.wrappers)
    {"call", "call.request", "call.events", "call.suspension"},
    {"context"},
    {"compiled"},
    {"snapshot"},
    {"call.locked_tools"},
    {"lsp.report", "lsp.servers"},
    {"lsp.client"},
    {"lsp.manager"},
    {"lsp.operations", "lsp.access", "lsp"},
    {"selection", "unasked"},
    {"call.titles", "call.record"},
    {"call.state"},
    {"call.active"},
    {"call.process_denies"},
    {"call.arguments", "call.permissions", "call.handlers", "call.commands", "builtin.*"},
    {"call.run", "call.truncation"},
    {"call.pipeline"},
    {"validate", "init", "api"},
    {
        "reload",
        "watch_cli",
        "validate_cli",
        "chat_cli",
        "lsp_cli",
        "serve_sessions",
        "serve_mcp",
        "cli",
        "__main__",
        "__init__",
    },
]


def _layer_of(module: str) -> int:
    for index, members in enumerate(LAYERS):
        for member in members:
            if module == member or (member.endswith(".*") and module.startswith(member[:-2] + ".")):
                return index
            if member.endswith(".*") and module == member[:-2]:
                return index
    raise AssertionError(f"module toolrt.{module} is in no layer: add it to LAYERS")


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "_builtin" in path.parts:
            continue
        relative = path.relative_to(PACKAGE).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(module: str, path: Path) -> set[str]:
    package = module.split(".")[:-1] if path.name != "__init__.py" else module.split(".")
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] if node.level > 1 else package
                name = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module and node.module.startswith("toolrt."):
                name = node.module.removeprefix("toolrt.")
            else:
                continue
            targets.add(name)
        elif isinstance(node, ast.Import):
            targets.update(a.name.removeprefix("toolrt.") for a in node.names if a.name.startswith("toolrt."))
    return {t for t in targets if t}


def test_imports_only_point_down_the_data_flow() -> None:
    modules = _modules()
    upward = []
    for module, path in modules.items():
        if module == "__init__":
            continue  # the package face re-exports from everywhere (lazily)
        own = _layer_of(module)
        for target in _imports(module, path):
            if target not in modules:
                continue
            if _layer_of(target) > own:
                upward.append(f"toolrt.{module} imports toolrt.{target}")
    assert upward == []


def test_all_is_sorted_and_complete() -> None:
    assert toolrt.__all__ == sorted(toolrt.__all__)
    for name in toolrt.__all__:
        assert getattr(toolrt, name) is not None, name
    assert toolrt.Runtime.__module__ == "toolrt.api"


def test_importing_runtime_does_not_import_heavy_modules() -> None:
    import subprocess
    import sys

    code = (
        "import sys, toolrt.cli, toolrt.specs, toolrt.snapshot;"
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


def test_the_public_surface_names_every_type_runtime_takes_or_returns() -> None:
    import re

    defined = _defined_types()
    source = (PACKAGE / "api.py").read_text(encoding="utf-8")
    runtime_class = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef) and n.name == "Runtime")
    used: dict[str, str] = {}
    for method in runtime_class.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or method.name.startswith("_"):
            continue
        arguments = method.args
        annotations = [a.annotation for a in [*arguments.args, *arguments.kwonlyargs] if a.annotation is not None]
        if arguments.kwarg is not None and arguments.kwarg.annotation is not None:
            annotations.append(arguments.kwarg.annotation)
        if method.returns is not None:
            annotations.append(method.returns)
        for annotation in annotations:
            for name in re.findall(r"[A-Za-z_]\w*", ast.unparse(annotation)):
                if name in defined:
                    used.setdefault(name, method.name)
    assert {"CallScope", "ToolResult", "ToolSet", "Decision", "ScopeFields"} <= set(used)
    missing = {name: method for name, method in used.items() if name not in toolrt.__all__}
    assert missing == {}
