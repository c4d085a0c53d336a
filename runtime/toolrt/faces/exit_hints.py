"""`toolrt validate`'s hint on exit statuses: programs whose status 1 is an answer, not a failure.

`grep` and `rg` exit 1 when nothing matches, `diff` and `cmp` when the inputs differ. An `argv:` tool
running one of them without `ok_exit` gets the default `[0]`, so "no match" comes back as an error result.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from ..build.snapshot import Snapshot
from ..config.model import ArgvHandler
from ..errors import Problem

__all__ = ["ANSWERING_ONE", "exit_status_problems"]

ANSWERING_ONE = {
    "grep": "finds nothing",
    "rg": "finds nothing",
    "diff": "finds differences",
    "cmp": "finds differences",
}
"""Programs whose exit status 1 is an answer, and what it answers."""


def exit_status_problems(snapshot: Snapshot) -> list[Problem]:
    """A warning, with the fix, for each `argv:` tool that starts one of `ANSWERING_ONE` without `ok_exit`."""
    problems: list[Problem] = []
    for tool in snapshot.tools.values():
        definition = tool.definition
        handler = definition.handler
        document = definition.document
        if not isinstance(handler, ArgvHandler) or document is None or not isinstance(document.data, dict):
            continue
        if "ok_exit" in (document.data.get("handler") or {}):
            continue
        program = PurePosixPath(handler.argv[0]).name
        if program not in ANSWERING_ONE:
            continue
        line, column = document.locate("/handler/argv/0")
        message = (
            f"{program} exits 1 when it {ANSWERING_ONE[program]}, which the default `ok_exit: [0]` makes an "
            f"error result; add `ok_exit: [0, 1]` to the handler when that is an answer "
            "(or `ok_exit: [0]` to keep it an error)"
        )
        problems.append(Problem(document.name, line, column, "/handler/argv/0", message, "warning"))
    return problems
