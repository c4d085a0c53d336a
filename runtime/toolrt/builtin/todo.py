"""The `todowrite` and `todoread` tools: one task list per session, kept in the data directory.

The list lives in `<data_dir>/todos/<session>.json` and is replaced whole on every write, through a
temporary file and `os.replace`, so a crash mid-write leaves the previous list, never half of one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from ..call.context import ToolContext
from ..errors import ToolFailure

__all__ = ["todo_path", "todoread", "todowrite"]

# Session ids come from the host; anything that is not a plain file name is hashed, never joined as a path.
_SAFE_SESSION = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def todo_path(ctx: ToolContext) -> Path:
    """Where the session's list is stored; a session id that is not a safe file name is hashed."""
    session = ctx.session
    name = session if _SAFE_SESSION.fullmatch(session) else hashlib.sha256(session.encode()).hexdigest()
    return ctx.data_dir / "todos" / f"{name}.json"


async def todowrite(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Replace the session's list with `todos`; returns the list as JSON and `<open count> todos` as title."""
    todos = [dict(item) for item in args["todos"]]
    await anyio.to_thread.run_sync(_save, todo_path(ctx), todos)
    return _result(todos)


async def todoread(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """The session's current list (empty when nothing was written), in todowrite's output shape."""
    return _result(await anyio.to_thread.run_sync(_load, todo_path(ctx)))


def _result(todos: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    open_count = sum(1 for item in todos if item.get("status") != "completed")
    return {
        "title": f"{open_count} todos",
        "output": json.dumps(todos, indent=2, ensure_ascii=False),
        "metadata": {"todos": [dict(item) for item in todos]},
    }


def _save(path: Path, todos: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(todos, handle, indent=2, ensure_ascii=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _load(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as error:
        raise ToolFailure(
            f"The todo list at {path} cannot be read ({error}). Write a fresh list with todowrite."
        ) from error
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise ToolFailure(f"The todo list at {path} is not a list of todos. Write a fresh list with todowrite.")
    return data
