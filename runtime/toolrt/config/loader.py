"""Read YAML config files into `Document`s that remember the line and column of every node.

This is the only module that reads config files. It uses libyaml's parser when present and builds
plain Python values itself, so that every value keeps its position for error messages.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, Problem
from .document import Document, child_pointer

__all__ = ["load_documents", "load_yaml_text"]

_STR_TAG = "tag:yaml.org,2002:str"
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_documents(path: Path, *, display: str | None = None) -> list[Document]:
    """Every YAML document of one file; raises `ConfigError` for unreadable files and bad YAML."""
    shown = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        reason = f"file is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        raise ConfigError([Problem(shown, 0, 0, "", reason)]) from None
    except OSError as exc:
        raise ConfigError([Problem(shown, 0, 0, "", f"cannot read file: {exc.strerror or exc}")]) from exc
    return load_yaml_text(text, path=path, display=shown)


def load_yaml_text(text: str, *, path: Path, display: str) -> list[Document]:
    """Parse YAML text (possibly several `---` documents) into located documents."""
    loader = _Loader(text)
    documents: list[Document] = []
    problems: list[Problem] = []
    try:
        position = -1
        while loader.check_node():
            node = loader.get_node()
            position += 1
            if node is None:
                continue
            data = _build(loader, node, None, problems, display)
            start = (node.start_mark.line + 1, node.start_mark.column + 1)
            documents.append(Document(path, data, display=display, text=text, index=position, start=start))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        what = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        raise ConfigError([Problem(display, line, column, "", f"YAML syntax error: {what}{context}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([Problem(display, 0, 0, "", f"YAML error: {exc}")]) from None
    finally:
        loader.dispose()
    if problems:
        raise ConfigError(problems)
    return documents


_Link = tuple[Any, "str | int"] | None
"""Where a node sits: (parent link, key or index); turned into a JSON pointer only for an error."""


def _pointer(link: _Link) -> str:
    keys: list[str | int] = []
    while link is not None:
        link, key = link
        keys.append(key)
    pointer = ""
    for key in reversed(keys):
        pointer = child_pointer(pointer, key)
    return pointer


def _build(loader: yaml.SafeLoader, node: yaml.Node, link: _Link, problems: list[Problem], display: str) -> Any:
    """Plain Python values from a composed node (marks are computed later, only if needed)."""
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolves `<<` merge keys
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = key_node.value if key_node.tag == _STR_TAG else loader.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                key = str(key) if isinstance(key, (int, float, bool)) or key is None else repr(key)
            if key in result:
                _duplicate(node, key_node, key, link, problems, display)
                continue
            result[key] = _build(loader, value_node, (link, key), problems, display)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_build(loader, item, (link, index), problems, display) for index, item in enumerate(node.value)]
    if node.tag == _STR_TAG:
        return node.value  # the common case, without the constructor's bookkeeping
    value = loader.construct_object(node, deep=True)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()  # JSON has no dates: keep what the author wrote
    return value


def _duplicate(
    mapping: yaml.MappingNode, key_node: yaml.Node, key: str, link: _Link, problems: list[Problem], display: str
) -> None:
    first = next(k for k, _ in mapping.value if str(k.value) == key)
    line, column = key_node.start_mark.line + 1, key_node.start_mark.column + 1
    message = f"duplicate key '{key}' (first at line {first.start_mark.line + 1})"
    problems.append(Problem(display, line, column, _pointer((link, key)), message))
