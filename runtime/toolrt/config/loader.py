"""Read YAML config files into `Document`s that remember the line and column of every node.

This is the only module that reads config files. It uses libyaml's parser when present and builds
plain Python values itself, so that every value keeps its position for error messages.
"""

from __future__ import annotations

import datetime
import operator
import sys
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, Problem
from .document import NO_MARKS, Document, child_pointer, document_start, node_marks

__all__ = ["load_documents", "load_yaml_text"]

_STR_TAG = "tag:yaml.org,2002:str"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"
_INT_TAG = "tag:yaml.org,2002:int"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BOOLS: dict[str, bool] = dict(_SafeLoader.bool_values)
_WILDCARD = tuple(_SafeLoader.yaml_implicit_resolvers.get(None, ()))
_IMPLICIT: dict[str, tuple[tuple[str, Any], ...]] = {
    first: (*resolvers, *_WILDCARD)
    for first, resolvers in _SafeLoader.yaml_implicit_resolvers.items()
    if first is not None
}
"""YAML 1.1's implicit tags of plain scalars by first character, as the safe loader knows them at import
(a resolver another library registers later does not change what a config means)."""


def _resolve(self: Any, kind: Any, value: Any, implicit: tuple[bool, bool]) -> str:
    """The safe loader's tag resolution without its path-resolver bookkeeping: libyaml's composer calls
    this once per node, so it is a third of the Python work of reading a config file."""
    if kind is yaml.ScalarNode:
        if implicit[0]:
            for tag, regexp in _IMPLICIT.get(value[:1], _WILDCARD):
                if regexp.match(value):
                    return str(tag)
        return _STR_TAG
    return _SEQ_TAG if kind is yaml.SequenceNode else _MAP_TAG


_intern = sys.intern
"""Mapping keys are interned: the same few dozen names recur in every tool file, so a large config holds
one string per name instead of one per occurrence (and looks them up by identity)."""


_Loader: type[yaml.SafeLoader] = type(
    "ConfigLoader",
    (_SafeLoader,),
    {
        "resolve": _resolve,
        # Path resolvers are never registered for config files: nothing to track per node. libyaml's
        # composer calls these two hooks around every node, so they are C functions that do nothing
        # with what they get (`descend_resolver(parent, index)`, `ascend_resolver()`), not Python ones.
        "descend_resolver": staticmethod(operator.is_),
        "ascend_resolver": staticmethod(tuple),
    },
)


def load_documents(path: Path, *, display: str | None = None, located: bool = False) -> list[Document]:
    """Every YAML document of one file; raises `ConfigError` for unreadable files and bad YAML.

    With `located`, every value's line and column are recorded while parsing (`Document.marks`),
    for a caller that will report many problems; otherwise they are found again on the first lookup."""
    shown = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        reason = f"file is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        raise ConfigError([Problem(shown, 0, 0, "", reason)]) from None
    except OSError as exc:
        raise ConfigError([Problem(shown, 0, 0, "", f"cannot read file: {exc.strerror or exc}")]) from exc
    return load_yaml_text(text, path=path, display=shown, located=located)


def load_yaml_text(text: str, *, path: Path, display: str, located: bool = False) -> list[Document]:
    """Parse YAML text (possibly several `---` documents) into located documents."""
    loader = _Loader(text)
    # Without '&' there are no anchors (so no aliases) and without '<<' no merge keys: values are built
    # without the alias bookkeeping (most files; a '&' inside a string only takes the careful path).
    plain = "&" not in text and "<<" not in text
    documents: list[Document] = []
    problems: list[Problem] = []
    try:
        position = -1
        while loader.check_node():
            node = loader.get_node()
            position += 1
            if node is None:
                continue
            if plain:
                data = _build_plain(loader, node, None, problems, display, 0)
            else:
                data = _build(loader, node, None, problems, _Expansion(display))
            start = document_start(node.start_mark.line + 1, node.start_mark.column + 1)
            marks = node_marks(node) if located else NO_MARKS
            documents.append(Document(path, data, marks, display=display, text=text, index=position, start=start))
    except yaml.MarkedYAMLError as exc:
        raise ConfigError([_syntax_problem(exc, text, display)]) from None
    except yaml.YAMLError as exc:
        raise ConfigError([Problem(display, 0, 0, "", f"YAML error: {exc}")]) from None
    except _Refused as refused:
        raise ConfigError([refused.problem]) from None
    except RecursionError:  # PyYAML's pure-Python composer recurses once per level: it may stop first
        mark = loader.get_mark() if hasattr(loader, "get_mark") else None
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        raise ConfigError([Problem(display, line, column, "", _TOO_DEEP)]) from None
    finally:
        loader.dispose()
    if problems:
        raise ConfigError(problems)
    return documents


_OPENERS = {"a quoted scalar": "quote", "a flow sequence": "'['", "a flow mapping": "'{'"}


def _syntax_problem(exc: yaml.MarkedYAMLError, text: str, display: str) -> Problem:
    """A YAML syntax error as a located problem that says what to do.

    An unclosed quote or bracket is reported where it opened (the parser only notices at the end
    of the file); a tab names the tab (YAML indents with spaces only).
    """
    mark = exc.problem_mark or exc.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
    what = exc.problem or "invalid YAML"
    if "maximum nesting depth" in what:  # libyaml's own limit (1000 levels): where it stopped, in our words
        return Problem(display, line, column, "", _TOO_DEEP)
    context = exc.context or ""
    opened = next((name for phrase, name in _OPENERS.items() if context.endswith(phrase)), None)
    if opened is not None and exc.context_mark is not None and exc.problem_mark is not None:
        start = exc.context_mark
        if "end of stream" in what or (start.line != exc.problem_mark.line and opened != "quote"):
            ending = {"quote": "the closing quote", "'['": "the closing ']'", "'{'": "the closing '}'"}[opened]
            message = (
                f"YAML syntax error: the {opened} opened here is never closed "
                f"(the parser reached line {exc.problem_mark.line + 1} looking for {ending})"
            )
            return Problem(display, start.line + 1, start.column + 1, "", message)
    if mark is not None and _char_at(text, mark.index) == "\t":
        message = "YAML syntax error: a tab character; YAML indents with spaces only (replace the tab with spaces)"
        return Problem(display, line, column, "", message)
    suffix = f" ({context})" if context else ""
    return Problem(display, line, column, "", f"YAML syntax error: {what}{suffix}")


def _char_at(text: str, index: int) -> str:
    return text[index] if 0 <= index < len(text) else ""


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


MAX_ALIAS_EXPANSION = 10_000
"""Values an aliased node may add to a document once expanded (a config that needs more is not a config)."""
MAX_DEPTH = 200
"""Nesting depth of mappings and sequences, aliases followed."""
_TOO_DEEP = f"values are nested deeper than {MAX_DEPTH} levels"


class _Refused(Exception):
    """Expansion stopped: the problem says where and why."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


def _problem_at(node: yaml.Node, link: _Link, display: str, message: str) -> _Refused:
    mark = node.start_mark
    return _Refused(Problem(display, mark.line + 1, mark.column + 1, _pointer(link), message))


class _Expansion:
    """Counts what a document's aliases add and watches depth and cycles while values are built."""

    def __init__(self, display: str) -> None:
        self.display = display
        self.seen: set[int] = set()
        self.expanded = 0
        self.active: set[int] = set()

    def enter(self, node: yaml.Node, link: _Link, depth: int) -> None:
        key = id(node)
        if key in self.active:
            raise _problem_at(node, link, self.display, "an alias refers to itself (a value that contains itself)")
        if depth > MAX_DEPTH:
            raise _problem_at(node, link, self.display, _TOO_DEEP)
        if key in self.seen:
            self.expanded += 1
            if self.expanded > MAX_ALIAS_EXPANSION:
                message = f"aliases expand to more than {MAX_ALIAS_EXPANSION} values (an alias bomb?)"
                raise _problem_at(node, link, self.display, message)
        else:
            self.seen.add(key)


def _check_merges(node: yaml.MappingNode, link: _Link, display: str, chain: tuple[int, ...] = ()) -> None:
    """Refuse a `<<` merge that (through other merges) includes its own mapping, before PyYAML loops on it."""
    chain = (*chain, id(node))
    for key_node, value_node in node.value:
        if key_node.tag != "tag:yaml.org,2002:merge":
            continue
        targets = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        for target in targets:
            if isinstance(target, yaml.MappingNode):
                if id(target) in chain:
                    raise _problem_at(key_node, link, display, "an alias refers to itself (a merge of its own mapping)")
                _check_merges(target, link, display, chain)


def _build(
    loader: yaml.SafeLoader,
    node: yaml.Node,
    link: _Link,
    problems: list[Problem],
    expansion: _Expansion,
    depth: int = 0,
) -> Any:
    """Plain Python values from a composed node (marks are computed later, only if needed)."""
    if isinstance(node, yaml.MappingNode):
        expansion.enter(node, link, depth)
        expansion.active.add(id(node))
        _check_merges(node, link, expansion.display)
        loader.flatten_mapping(node)  # resolves `<<` merge keys
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _intern(key_node.value) if key_node.tag == _STR_TAG else _construct(loader, key_node, link, expansion)
            if not isinstance(key, str):
                key = str(key) if isinstance(key, (int, float, bool)) or key is None else repr(key)
            if key in result:
                _duplicate(node, key_node, key, link, problems, expansion.display)
                continue
            result[key] = _build(loader, value_node, (link, key), problems, expansion, depth + 1)
        expansion.active.discard(id(node))
        return result
    if isinstance(node, yaml.SequenceNode):
        expansion.enter(node, link, depth)
        expansion.active.add(id(node))
        items = [
            _build(loader, item, (link, index), problems, expansion, depth + 1) for index, item in enumerate(node.value)
        ]
        expansion.active.discard(id(node))
        return items
    if node.tag == _STR_TAG:
        expansion.enter(node, link, depth)
        return node.value  # the common case, without the constructor's bookkeeping
    value = _construct(loader, node, link, expansion)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()  # JSON has no dates: keep what the author wrote
    return value


def _build_plain(
    loader: yaml.SafeLoader, node: yaml.Node, link: _Link, problems: list[Problem], display: str, depth: int
) -> Any:
    """`_build` for a document without anchors or merge keys: every node is visited once."""
    kind = type(node)
    if kind is yaml.ScalarNode:
        tag = node.tag
        if tag == _STR_TAG:
            return node.value
        text = node.value
        if tag == _INT_TAG and text.isdigit() and text.isascii() and (text[0] != "0" or len(text) == 1):
            return int(text)  # a plain decimal (a leading 0 is YAML 1.1's octal: the constructor's)
        if tag == _BOOL_TAG and (known := _BOOLS.get(text.lower())) is not None:
            return known
        value = loader.construct_object(node, deep=True)
        return value.isoformat() if isinstance(value, (datetime.date, datetime.datetime)) else value
    if depth > MAX_DEPTH:
        raise _problem_at(node, link, display, _TOO_DEEP)
    if kind is yaml.SequenceNode:
        return [
            _build_plain(loader, item, (link, index), problems, display, depth + 1)
            for index, item in enumerate(node.value)
        ]
    assert isinstance(node, yaml.MappingNode)
    result: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if key_node.tag == _STR_TAG:
            key = _intern(key_node.value)
        else:
            if type(key_node) is not yaml.ScalarNode:
                raise _problem_at(key_node, link, display, "a mapping key must be a plain value, not a list or mapping")
            key = loader.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                key = str(key) if isinstance(key, (int, float, bool)) or key is None else repr(key)
        if key in result:
            _duplicate(node, key_node, key, link, problems, display)
            continue
        result[key] = _build_plain(loader, value_node, (link, key), problems, display, depth + 1)
    return result


def _construct(loader: yaml.SafeLoader, node: yaml.Node, link: _Link, expansion: _Expansion) -> Any:
    """A scalar (or a complex mapping key) through PyYAML's constructor, counted like any value."""
    expansion.enter(node, link, 0)
    if not isinstance(node, yaml.ScalarNode):
        raise _problem_at(node, link, expansion.display, "a mapping key must be a plain value, not a list or mapping")
    return loader.construct_object(node, deep=True)


def _duplicate(
    mapping: yaml.MappingNode, key_node: yaml.Node, key: str, link: _Link, problems: list[Problem], display: str
) -> None:
    first = next(k for k, _ in mapping.value if str(k.value) == key)
    line, column = key_node.start_mark.line + 1, key_node.start_mark.column + 1
    message = f"duplicate key '{key}' (first at line {first.start_mark.line + 1})"
    problems.append(Problem(display, line, column, _pointer((link, key)), message))
