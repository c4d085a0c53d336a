"""The `lsp` tool's operations: the request each sends, and its answer as text the model can act on.

Positions are 1-based for the model (line and character as the `read` tool shows them) and 0-based
UTF-16 offsets for the protocol; answers are plain JSON (see `toolrt.lsp.client`) turned into lines
such as `src/app.py:12:5: def greet(name):` for locations and `Function greet (3:5)` for symbols.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ..beneath import open_checked
from ..errors import PathChanged
from .client import ServerClient

__all__ = ["OPERATIONS", "POSITIONAL", "Request", "format_results", "operation", "to_utf16"]

OPERATIONS = (
    "goToDefinition",
    "findReferences",
    "hover",
    "documentSymbol",
    "workspaceSymbol",
    "goToImplementation",
    "prepareCallHierarchy",
    "incomingCalls",
    "outgoingCalls",
)
POSITIONAL = frozenset(OPERATIONS) - {"documentSymbol", "workspaceSymbol"}

_CAPABILITY = {
    "goToDefinition": "definitionProvider",
    "findReferences": "referencesProvider",
    "hover": "hoverProvider",
    "documentSymbol": "documentSymbolProvider",
    "workspaceSymbol": "workspaceSymbolProvider",
    "goToImplementation": "implementationProvider",
    "prepareCallHierarchy": "callHierarchyProvider",
    "incomingCalls": "callHierarchyProvider",
    "outgoingCalls": "callHierarchyProvider",
}
_METHOD = {
    "goToDefinition": "textDocument/definition",
    "findReferences": "textDocument/references",
    "hover": "textDocument/hover",
    "goToImplementation": "textDocument/implementation",
    "prepareCallHierarchy": "textDocument/prepareCallHierarchy",
}
_KINDS = (
    "File Module Namespace Package Class Method Property Field Constructor Enum Interface Function Variable "
    "Constant String Number Boolean Array Object Key Null EnumMember Struct Event Operator TypeParameter"
).split()


@dataclass(frozen=True, slots=True)
class Request:
    """One `lsp` call: the operation, the file, a 0-based protocol position, the workspace query."""

    operation: str
    path: Path
    line: int = 0
    character: int = 0
    """UTF-16 code units, as the protocol counts them."""
    query: str = ""


def to_utf16(text: str, character: int) -> int:
    """The UTF-16 offset of the `character`-th code point (0-based) of a line."""
    return len(text[:character].encode("utf-16-le")) // 2


def _from_utf16(text: str, offset: int) -> int:
    units = 0
    for index, char in enumerate(text):
        if units >= offset:
            return index
        units += 2 if ord(char) > 0xFFFF else 1
    return len(text)


def operation(request: Request) -> Callable[[ServerClient, float], Awaitable[Any]]:
    """The coroutine function the manager runs against each server of the file."""
    from lsprotocol import types

    from .manager import unsupported

    document = types.TextDocumentIdentifier(uri=request.path.as_uri())
    position = types.Position(line=request.line, character=request.character)

    async def run(client: ServerClient, timeout: float) -> Any:
        if not client.supports(_CAPABILITY[request.operation]):
            return unsupported()
        op = request.operation
        if op == "documentSymbol":
            params: Any = types.DocumentSymbolParams(text_document=document)
            return await client.request("textDocument/documentSymbol", params, timeout)
        if op == "workspaceSymbol":
            return await client.request("workspace/symbol", types.WorkspaceSymbolParams(query=request.query), timeout)
        if op == "findReferences":
            params = types.ReferenceParams(
                text_document=document, position=position, context=types.ReferenceContext(include_declaration=True)
            )
            return await client.request(_METHOD[op], params, timeout)
        if op in _METHOD:
            params = types.TextDocumentPositionParams(text_document=document, position=position)
            return await client.request(_METHOD[op], params, timeout)
        prepared = types.CallHierarchyPrepareParams(text_document=document, position=position)
        items = await client.request("textDocument/prepareCallHierarchy", prepared, timeout)
        method = "callHierarchy/incomingCalls" if op == "incomingCalls" else "callHierarchy/outgoingCalls"
        calls: list[Any] = []
        for item in items if isinstance(items, list) else []:
            found = await client.request(method, {"item": item}, timeout)
            calls.extend(found if isinstance(found, list) else [])
        return calls

    return run


# --- answers as text ------------------------------------------------------------------------------


class _Files:
    """Lines of the files answers point into (read once each), for snippets and UTF-16 columns: only
    files `shows` allows (the call's read rules), each opened as `beneath` opens (no symlink followed),
    so an answer pointing into a denied file, or at a name swapped for a link to one, shows no line."""

    def __init__(self, root: Path, shows: Callable[[str], bool] | None = None) -> None:
        self.root = root
        self.shows = shows
        self._lines: dict[Path, list[str] | None] = {}

    def line(self, path: Path, number: int) -> str | None:
        if path not in self._lines:
            self._lines[path] = None
            try:
                if self.shows is None or self.shows(str(path)):
                    fd = open_checked(path, os.O_RDONLY | os.O_NONBLOCK)
                    with os.fdopen(fd, "rb") as stream:
                        if stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                            self._lines[path] = stream.read().decode("utf-8", errors="replace").splitlines()
            except (OSError, ValueError, PathChanged):
                pass  # no line shown: gone, not a regular file, or changed since the answer named it
        lines = self._lines[path]
        return lines[number] if lines is not None and 0 <= number < len(lines) else None

    def shown(self, path: Path) -> str:
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def where(self, uri: Any, start: Any) -> str:
        """`path:LINE:COL`, 1-based, the column in code points."""
        path = _path(uri)
        line, offset = _position(start)
        if path is None:
            return f"{uri}:{line + 1}:{offset + 1}"
        text = self.line(path, line)
        column = _from_utf16(text, offset) if text is not None else offset
        return f"{self.shown(path)}:{line + 1}:{column + 1}"


def _path(uri: Any) -> Path | None:
    if not isinstance(uri, str) or not uri.startswith("file://"):
        return None
    return Path(unquote(urlparse(uri).path))


def _position(start: Any) -> tuple[int, int]:
    if isinstance(start, Mapping):
        line, character = start.get("line"), start.get("character")
        if isinstance(line, int) and isinstance(character, int):
            return line, character
    return 0, 0


def _start(value: Any, key: str = "range") -> Any:
    found = value.get(key) if isinstance(value, Mapping) else None
    return found.get("start") if isinstance(found, Mapping) else None


def _kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, Mapping) else None
    return _KINDS[kind - 1] if isinstance(kind, int) and 1 <= kind <= len(_KINDS) else "Symbol"


def _locations(result: Any, files: _Files) -> Iterator[str]:
    for item in result if isinstance(result, list) else [result] if result else []:
        if not isinstance(item, Mapping):
            continue
        if "targetUri" in item:  # a LocationLink
            uri, start = item["targetUri"], _start(item, "targetSelectionRange") or _start(item, "targetRange")
        else:
            uri, start = item.get("uri"), _start(item)
        where = files.where(uri, start)
        path = _path(uri)
        text = files.line(path, _position(start)[0]) if path is not None else None
        yield f"{where}: {text.strip()}" if text and text.strip() else where


def _hover(result: Any) -> Iterator[str]:
    contents = result.get("contents") if isinstance(result, Mapping) else None
    for part in contents if isinstance(contents, list) else [contents]:
        if isinstance(part, str) and part.strip():
            yield part.strip()
        elif isinstance(part, Mapping) and isinstance(part.get("value"), str) and part["value"].strip():
            language = part.get("language")
            value = part["value"].strip()
            yield f"```{language}\n{value}\n```" if isinstance(language, str) else value


def _document_symbols(result: Any, files: _Files, path: Path, depth: int = 0) -> Iterator[str]:
    for item in result if isinstance(result, list) else []:
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            continue
        indent = "  " * depth
        detail = f" {item['detail']}" if isinstance(item.get("detail"), str) and item["detail"] else ""
        if "location" in item:  # SymbolInformation
            location = item["location"] if isinstance(item["location"], Mapping) else {}
            where = files.where(location.get("uri"), _start(location)).rsplit(":", 2)
            yield f"{indent}{_kind(item)} {item['name']}{detail} ({where[-2]}:{where[-1]})"
            continue
        where = files.where(path.as_uri(), _start(item, "selectionRange") or _start(item)).rsplit(":", 2)
        yield f"{indent}{_kind(item)} {item['name']}{detail} ({where[-2]}:{where[-1]})"
        yield from _document_symbols(item.get("children"), files, path, depth + 1)


def _symbol(item: Any, files: _Files, suffix: str = "") -> str | None:
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
        return None
    found = item.get("location")
    location: Mapping[str, Any] = found if isinstance(found, Mapping) else item
    start = _start(location, "selectionRange") or _start(location)
    where = files.where(location.get("uri"), start)
    container = item.get("containerName")
    inside = f" in {container}" if isinstance(container, str) and container else ""
    return f"{_kind(item)} {item['name']}{inside}  {where}{suffix}"


def _calls(result: Any, files: _Files, key: str) -> Iterator[str]:
    for call in result if isinstance(result, list) else []:
        if not isinstance(call, Mapping):
            continue
        ranges = call.get("fromRanges")
        at = [
            "{}:{}".format(*(n + 1 for n in _position(r.get("start"))))
            for r in (ranges if isinstance(ranges, list) else [])
            if isinstance(r, Mapping)
        ]
        suffix = f"  (calls at {', '.join(at)})" if at and key == "from" else ""
        line = _symbol(call.get(key), files, suffix)
        if line is not None:
            yield line


def _lines(operation: str, result: Any, files: _Files, path: Path) -> list[str]:
    if operation in ("goToDefinition", "findReferences", "goToImplementation"):
        return list(_locations(result, files))
    if operation == "hover":
        return list(_hover(result))
    if operation == "documentSymbol":
        return list(_document_symbols(result, files, path))
    if operation in ("workspaceSymbol", "prepareCallHierarchy"):
        found = (_symbol(item, files) for item in (result if isinstance(result, list) else []))
        return [line for line in found if line is not None]
    return list(_calls(result, files, "from" if operation == "incomingCalls" else "to"))


_HEADINGS = {
    "goToDefinition": "definition",
    "findReferences": "reference",
    "goToImplementation": "implementation",
    "documentSymbol": "symbol",
    "workspaceSymbol": "symbol",
    "prepareCallHierarchy": "call hierarchy item",
    "incomingCalls": "caller",
    "outgoingCalls": "callee",
}


def format_results(
    request: Request, results: Sequence[tuple[str, Any]], root: Path, shows: Callable[[str], bool] | None = None
) -> str:
    """The answers of every server as text; `No results found for OPERATION` when all are empty. Source
    lines come only from files `shows` allows (see `_Files`)."""
    files = _Files(root, shows)
    sections = [(name, _lines(request.operation, result, files, request.path)) for name, result in results]
    sections = [(name, lines) for name, lines in sections if lines]
    if not sections:
        return f"No results found for {request.operation}"
    parts = []
    for name, lines in sections:
        head = ""
        if request.operation in _HEADINGS:
            noun = _HEADINGS[request.operation]
            head = f"{len(lines)} {noun}{'' if len(lines) == 1 else 's'}"
            head += f" (from {name}):\n" if len(sections) > 1 else ":\n"
        elif len(sections) > 1:
            head = f"From {name}:\n"
        parts.append(head + "\n".join(lines))
    return "\n\n".join(parts)
