"""The `task` tool's description hook: list the subagents the host offers (OpenCode task.txt's `{agents}`)."""

from __future__ import annotations

from ..build.compiled import DescribeInfo

__all__ = ["PLACEHOLDER", "describe"]

PLACEHOLDER = "{agents}"
_NO_DESCRIPTION = "This subagent should only be called manually by the user."


def describe(description: str, info: DescribeInfo) -> str:
    """The description with `- name: what it does` per subagent in place of `{agents}` (appended when absent)."""
    if info.subagents:
        listing = "\n".join(
            f"- {name}: {text.strip() or _NO_DESCRIPTION}" for name, text in sorted(info.subagents.items())
        )
    else:
        listing = "No subagents are available."
    if PLACEHOLDER in description:
        return description.replace(PLACEHOLDER, listing)
    return f"{description.rstrip()}\n\n{listing}"
