"""`json_get`: read one value out of a JSON file by a dotted key path."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio

from toolrt import ToolContext, ToolFailure

MAX_BYTES = 5 * 1024 * 1024


async def json_get(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """The value at `key` (dots between object keys, integers index arrays) in the JSON file `filePath`."""
    path = ctx.resolve(args["filePath"])
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ToolFailure(f"{path} is {size} bytes; json_get reads files up to 5 MB. Use grep on it instead.")
        document = json.loads(await anyio.Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ToolFailure(f"File not found: {path}. Check the path with glob.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ToolFailure(f"{path} is not valid JSON ({error}). Read it with the read tool instead.") from None

    value: Any = document
    walked: list[str] = []
    for part in args["key"].split(".") if args["key"] else []:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            where = ".".join(walked) or "the top level"
            raise ToolFailure(f"No key {part!r} at {where} of {path}. It has: {_children(value)}.")
        walked.append(part)
    return {
        "title": f"{args['filePath']}: {args['key'] or '(whole document)'}",
        "output": json.dumps(value, indent=2, ensure_ascii=False),
        "metadata": {"type": type(value).__name__},
    }


def _children(value: Any) -> str:
    """What the model could have asked for instead, at the point where the key path stopped matching."""
    if isinstance(value, dict):
        return ", ".join(map(str, value)) or "no keys"
    if isinstance(value, list):
        return f"indexes 0-{len(value) - 1}" if value else "no items"
    return "nothing below it (it is a single value)"
