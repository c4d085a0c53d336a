"""One yes/no question about each offered tool under the rules, answered once per compiled tool.

`toolrt serve` asks two questions of every offered tool whenever the snapshot changes: whether it runs
without asking (`build.unasked`) and whether its every call asks (`build.unaskable`). Each answer depends
only on the compiled tool and the permission config, and a reload keeps both objects for what it did not
change (`build.reuse`): after a save of one tool file only that tool is asked again, not the thousand others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..permissions.config import PermissionConfig
from .compiled import CompiledTool
from .selection import ToolSet
from .snapshot import Snapshot

__all__ = ["ToolVerdicts"]

Question = Callable[[CompiledTool, PermissionConfig, str | None], bool]
"""(tool, permission config, agent) → the answer; a pure function of the three."""


@dataclass
class _Answers:
    """The answers under one permission config, for the tools of one snapshot."""

    permissions: PermissionConfig
    tools: Mapping[str, CompiledTool]
    by_id: dict[str, tuple[CompiledTool, bool]] = field(default_factory=dict)
    """Tool id → the tool object answered for (held: the answer is its own) and the answer."""


class ToolVerdicts:
    """`question` answered per offered tool, kept while the tool object and the permission config stay the
    same objects; holds answers only for the tools of the latest snapshot asked about, per agent."""

    def __init__(self, question: Question) -> None:
        self._question = question
        self._by_agent: dict[str | None, _Answers] = {}

    def answers(self, snapshot: Snapshot, toolset: ToolSet, agent: str | None) -> tuple[bool, ...]:
        """The answer for each of `toolset.offered`, in order."""
        answers = self._current(snapshot, agent)
        permissions, by_id = answers.permissions, answers.by_id
        found: list[bool] = []
        for offered in toolset.offered:
            tool = offered.tool
            held = by_id.get(tool.id)
            if held is None or held[0] is not tool:
                held = by_id[tool.id] = (tool, self._question(tool, permissions, agent))
            found.append(held[1])
        return tuple(found)

    def _current(self, snapshot: Snapshot, agent: str | None) -> _Answers:
        answers = self._by_agent.get(agent)
        if answers is not None and answers.permissions is snapshot.permissions and answers.tools is snapshot.tools:
            return answers
        fresh = _Answers(snapshot.permissions, snapshot.tools)
        if answers is not None and answers.permissions is snapshot.permissions:
            tools = snapshot.tools
            fresh.by_id = {name: held for name, held in answers.by_id.items() if tools.get(name) is held[0]}
        self._by_agent[agent] = fresh
        return fresh
