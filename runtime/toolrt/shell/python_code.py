"""Inline Python read with Python's own `ast`: `python3 -c CODE` that only computes and prints.

Code made only of what cannot reach the system is a plain command under its own rule; anything else
stays opaque (the analyzer's fail-closed action). Allowed: literals, arithmetic, comparisons,
comprehensions, f-strings, local names, `if`/`for`/`while`, assignments; calls to `print`, `len`,
`sum`, `min`, `max`, `sorted`, `range`, `str`, `int`, `float` and to the functions (and classes) of
`json`, `math`, `re` and `datetime` named as `module.function`; of `sys` only `sys.version`,
`sys.version_info` and `sys.argv`. No name or attribute starting with `_`, no other attribute, no
subscript of a module, no `def`, `class`, `lambda`, `with`, `try`, `global` or `del`, no other builtin
even as a value (`sorted(x, key=eval)` would run code), and no name of a builtin or a module rebound.
The code counts only where no file or directory in the working directory can stand in for a standard
module (`python -c` puts it first on `sys.path`; `re` imports `enum`, and `str(b, "idna")` imports
without an `import`), and the line wrote no file before.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import os
import re
import sys
from collections.abc import Sequence
from collections.abc import Set as AbstractSet

__all__ = ["inert_python", "inline_code", "is_python", "stdin_code"]

_BUILTINS = frozenset(("print", "len", "sum", "min", "max", "sorted", "range", "str", "int", "float"))
_MODULES = frozenset(("json", "math", "re", "datetime"))
_SYS = frozenset(("version", "version_info", "argv"))
_PYTHON = re.compile(r"python(?:[23](?:\.[0-9]+)?)?")
# Options that change nothing a line of code can do (isolation, buffering, warnings about bytes).
_HARMLESS = frozenset(("-I", "-E", "-s", "-S", "-B", "-u", "-O", "-OO", "-q", "-b", "-bb"))
_NODES = (
    ast.Module, ast.Expr, ast.Assign, ast.AugAssign, ast.Name, ast.Load, ast.Store, ast.Constant,
    ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
    ast.Call, ast.keyword, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp,
    ast.DictComp, ast.GeneratorExp, ast.comprehension, ast.IfExp, ast.Subscript, ast.Slice,
    ast.JoinedStr, ast.FormattedValue, ast.Starred, ast.If, ast.For, ast.While, ast.Pass, ast.Break,
    ast.Continue, ast.Import, ast.ImportFrom, ast.alias, ast.Attribute,
)  # fmt: skip
_MAX_CODE = 10_000


_BUILTIN_NAMES = frozenset(dir(builtins))
# Module names a file in the working directory could stand in for: `python -c` puts the working
# directory first on `sys.path`, and the allowed modules import others (`re` imports `enum`).
_SHADOWED = frozenset(sys.stdlib_module_names) | {"sitecustomize", "usercustomize"}
_SHADOW_SUFFIXES = (".py", ".pyc", ".pyw", ".so", ".pyd")
_MAX_ENTRIES = 2_000


@functools.cache
def _members(module: str) -> frozenset[str]:
    """The public names of an allowed module that are functions, classes or numbers (never a module,
    so `json.codecs` is not a way to reach others)."""
    namespace = vars(__import__(module))
    return frozenset(
        name
        for name, value in namespace.items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or inspect.isbuiltin(value) or inspect.isclass(value)
             or isinstance(value, (int, float)))
    )  # fmt: skip


def is_python(program: str) -> bool:
    """Whether `program` (a basename) is a Python whose inline code `inline_code` and `stdin_code` read."""
    return _PYTHON.fullmatch(program) is not None


def inline_code(program: str, args: Sequence[str | None]) -> str | None:
    """The CODE of `python[3[.N]] [harmless options] -c CODE [ARGS…]`, or None for any other form."""
    if not _PYTHON.fullmatch(program):
        return None
    for index, arg in enumerate(args):
        if arg == "-c":
            return args[index + 1] if index + 1 < len(args) else None
        if arg not in _HARMLESS:
            return None
    return None


def stdin_code(program: str, args: Sequence[str | None]) -> bool:
    """Whether `python[3] [harmless options] [-]` reads its program from its input (a here-document)."""
    return _PYTHON.fullmatch(program) is not None and all(arg in _HARMLESS or arg == "-" for arg in args)


def inert_python(code: str, cwds: Sequence[str | None]) -> bool:
    """Whether `code` only computes and prints (see the module docstring), run from any of `cwds`."""
    if len(code) > _MAX_CODE:
        return False
    try:
        tree = ast.parse(code, mode="exec")
    except (SyntaxError, ValueError):
        return False
    if not all(isinstance(node, _NODES) for node in ast.walk(tree)):
        return False
    bound = _imports(tree)
    if bound is None:
        return False
    modules, functions = bound
    if not _unshadowed(cwds):
        return False
    stored = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    if stored & (_BUILTIN_NAMES | modules.keys() | functions):
        return False  # `exec = …` somewhere makes `exec` elsewhere ambiguous; a rebound module is not one
    known = _BUILTINS | functions | modules.keys() | stored
    return all(_allowed(node, modules, functions, known) for node in ast.walk(tree))


def _imports(tree: ast.AST) -> tuple[dict[str, str], set[str]] | None:
    """(name bound → module, names imported from modules) of the code's imports, or None when it
    imports anything but the allowed modules (or a name starting with `_`)."""
    modules: dict[str, str] = {}
    functions: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in _MODULES | {"sys"} or (alias.asname or "").startswith("_"):
                    return None
                modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level or node.module not in _MODULES:
                return None
            for alias in node.names:
                if alias.name == "*" or alias.name.startswith("_") or (alias.asname or "").startswith("_"):
                    return None
                functions.add(alias.asname or alias.name)
    return modules, functions


def _unshadowed(cwds: Sequence[str | None]) -> bool:
    """Whether no file in the working directories can stand in for a standard module. Code imports
    without an `import` statement too (`str(b, "idna")` imports `encodings.idna`, which imports
    `stringprep`), and every import may reach any module (`re` imports `enum`, `functools`)."""
    for cwd in cwds:
        if cwd is None:
            return False
        try:
            entries = os.listdir(cwd)
        except OSError:
            return False
        if len(entries) > _MAX_ENTRIES:
            return False
        for entry in entries:
            stem = entry.split(".", 1)[0]
            if stem in _SHADOWED and (entry == stem or entry.endswith(_SHADOW_SUFFIXES)):
                return False
    return True


def _allowed(node: ast.AST, modules: dict[str, str], functions: set[str], known: AbstractSet[str]) -> bool:
    if isinstance(node, ast.Name):  # never a builtin outside the list, even as a value (`key=eval`)
        return not node.id.startswith("_") and node.id in known
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_") or not isinstance(node.value, ast.Name):
            return False
        module = modules.get(node.value.id)
        if module == "sys":
            return node.attr in _SYS
        return module in _MODULES and node.attr in _members(module)
    if isinstance(node, ast.Subscript):
        return not (isinstance(node.value, ast.Name) and node.value.id in modules)
    if isinstance(node, ast.Call):
        callee = node.func
        if isinstance(callee, ast.Name):
            return callee.id in _BUILTINS or callee.id in functions
        return (
            isinstance(callee, ast.Attribute)
            and isinstance(callee.value, ast.Name)
            and modules.get(callee.value.id) in _MODULES
        )
    return True
