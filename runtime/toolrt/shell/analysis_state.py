"""The state one analysis of a bash text carries, shared by the walk and its checks.

`AnalysisState` holds what the walk has learnt so far (working directories, variables, deferred
checks); the checks build on it in layers: paths and the working directory (`analysis_paths`),
variables and other statements (`analysis_variables`), commands (`analysis_commands`), and the walk
itself (`analyzer`), which runs a nested script through `script`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .findings import Findings
from .paths import PathScope
from .words import Word
from .wrappers import WrapperTable

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = [
    "GLOB_CHARS",
    "UNKNOWN_CWD",
    "AnalysisState",
    "brief",
    "env_reason",
    "runtime_path",
    "unanalysed_substitution",
    "unknown_until_run",
]

GLOB_CHARS = re.compile(r"[*?\[]")
UNKNOWN_CWD = "\0unknown"  # not yet computed; NUL never occurs in a path


class AnalysisState(ABC):
    """What the walk has learnt so far; the layers above add the checks."""

    __slots__ = (
        "arithmetic",
        "assigned",
        "chains",
        "cwd_real",
        "cwds",
        "deferred",
        "deferred_names",
        "written",
        "depth",
        "findings",
        "first_error",
        "inherited",
        "known",
        "scope",
        "source",
        "table",
        "text",
        "traced",
        "keyword",
        "unseen_prompt",
        "pwd_known",
    )

    def __init__(
        self,
        scope: PathScope,
        table: WrapperTable,
        findings: Findings,
        cwds: tuple[str | None, ...],
        depth: int,
        inherited: tuple[str, ...],
        known: Mapping[str, str] | None,
        keyword: bool = False,
    ) -> None:
        self.scope = scope
        self.table = table
        self.findings = findings
        self.cwds = cwds
        self.cwd_real: str | None = UNKNOWN_CWD
        self.known: dict[str, str] = dict(known) if known is not None else {"HOME": scope.home}
        self.assigned: dict[str, list[str | None]] = {}
        """Every value the text assigns to each variable (None: not literal), wherever it sits."""
        self.deferred: list[tuple[Word, tuple[str | None, ...]]] = []
        """Operands holding variables, checked once every assignment of the text is known."""
        self.deferred_names: list[tuple[Word, list[str | None]]] = []
        """Command names made of variables (`$a$b`), named for the deny rules with their values."""
        self.written: set[str] = set()
        """Files the text writes through redirections (a script it then runs is not seen)."""
        self.arithmetic: list[tuple[Node, str]] = []
        """Names arithmetic evaluates, checked at the end for the same reason."""
        self.depth = depth
        self.inherited = inherited
        self.source = b""
        self.text = ""
        self.first_error: Node | None = None
        self.chains: list[dict[str | None, None]] = []
        """For each `&&` list being walked, every working directory set inside it so far."""
        self.traced = False
        """Whether the text turns on xtrace (`set -x`), which expands `PS4` before every command."""
        self.keyword = keyword
        """Whether the text turns on `keyword` (`set -k`): a later command's `NAME=value` words are its environment."""
        self.unseen_prompt = False
        """Whether the text gives `PS4` a value only known when it runs."""
        self.pwd_known = True
        """Whether `$PWD` is the working directory: False when the text may set `PWD` itself."""

    @abstractmethod
    def _script(self, script: str, text: str, reasons: list[str]) -> None:
        """Analyse `script` as bash text run by this one (a string, a prompt, a here-document)."""

    def _operator(self, redirect: Node) -> str:
        for child in redirect.children:
            if not child.is_named:
                return child.type
        return ""

    def _fail(self, node: Node, reason: str) -> None:
        self.findings.fail_closed(self._slice(node.start_byte, node.end_byte), reason)

    def _slice(self, start: int, end: int) -> str:
        return self.source[start:end].decode("utf-8", "surrogateescape")


def brief(text: str) -> str:
    """Source text quoted in a reason, cut short: reasons are read by people."""
    return text if len(text) <= 60 else text[:57] + "..."


def unanalysed_substitution(text: str) -> str:
    """The reason a word fails closed when its command substitution could not be analysed."""
    return f"`{brief(text)}` holds a command substitution that could not be analysed"


def runtime_path(text: str) -> str:
    """The reason a path operand fails closed when what it names is only known when the line runs."""
    return f"`{brief(text)}` is a path only known when it runs"


def unknown_until_run(subject: str, text: str) -> str:
    """The reason a line fails closed when its `subject` (a command name, a redirect target) is only
    known when it runs."""
    return f"{subject} `{brief(text)}` is only known when it runs"


def env_reason(name: str) -> str:
    return f"sets {name}, which can change what runs"
