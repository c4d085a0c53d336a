"""The project the provider tests run against, and the one model turn they script for every provider.

The turn holds seven calls: two `meet` calls that finish only when both run at once (parallel), a
text read, an image read (an attachment), a denied read, a read with bad arguments, and a call to
a tool that does not exist.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from conftest import write_project

PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

MEET = """
import anyio

_STATE = {}

async def meet(args, ctx):
    # Finishes only when two calls run at the same time: proves the pipeline ran them concurrently.
    event = _STATE.setdefault("event", anyio.Event())
    _STATE["count"] = _STATE.get("count", 0) + 1
    if _STATE["count"] >= 2:
        event.set()
    with anyio.fail_after(20):
        await event.wait()
    return "met " + args["name"]
"""

MEET_TOOL = """
id: meet
description: Wait for the other meet call of the same turn, then say which name arrived.
parameters:
  type: object
  properties:
    name: {type: string, description: who arrives}
  required: [name]
handler: {python: "meeting:meet"}
parallel: true
"""

PERMISSIONS = """
permission:
  read: {"*": allow, "*secret.txt": deny}
"""

# (id, name, arguments) of the scripted turn; `BAD_ARGUMENTS` stands for a provider's malformed arguments.
BAD_ARGUMENTS = object()
CALLS: list[tuple[str, str, Any]] = [
    ("call_meet_a", "meet", {"name": "a"}),
    ("call_meet_b", "meet", {"name": "b"}),
    ("call_notes", "read", {"filePath": "notes.txt"}),
    ("call_pixel", "read", {"filePath": "pixel.png"}),
    ("call_secret", "read", {"filePath": "secret.txt"}),
    ("call_bad", "read", BAD_ARGUMENTS),
    ("call_fly", "fly", {"to": "moon"}),
]


def json_calls(bad: str = "{not json") -> list[tuple[str, str, str]]:
    """The turn's calls with JSON-text arguments (OpenAI); the bad call sends text that is not JSON."""
    return [(i, n, bad if a is BAD_ARGUMENTS else json.dumps(a)) for i, n, a in CALLS]


def object_calls() -> list[tuple[str, str, Any]]:
    """The turn's calls with object arguments (Anthropic, Gemini); the bad call's filePath is a number."""
    return [(i, n, {"filePath": 5} if a is BAD_ARGUMENTS else a) for i, n, a in CALLS]


def make_provider_project(root: Path) -> Path:
    write_project(
        root,
        tools={"meet": MEET_TOOL},
        permissions=PERMISSIONS,
        modules={"meeting": MEET},
        builtin_tools=True,
    )
    (root / "notes.txt").write_text("remember the milk\n", encoding="utf-8")
    (root / "secret.txt").write_text("the password\n", encoding="utf-8")
    (root / "pixel.png").write_bytes(PIXEL_PNG)
    return root
