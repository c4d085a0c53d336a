"""Tool-call ids that one response repeats: none of those calls runs, and each id is answered once.

A provider matches a tool result to its call by id; two calls under one id would both run and both be
answered under that id (which the provider rejects or pairs with the wrong call). Every call whose id
the turn repeats is refused before any call of the turn runs, and the result messages carry one
refusal per id, which every id-matching provider accepts (Gemini matches results to calls by
position, so it keeps one per call).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from .model import ToolCall
from .results import Pair

__all__ = ["answered_once", "refusal", "repeated_ids"]


def repeated_ids(calls: Sequence[ToolCall]) -> frozenset[str]:
    """The non-empty ids that more than one call of the turn carries."""
    counts = Counter(call.id for call in calls if call.id)
    return frozenset(id for id, count in counts.items() if count > 1)


def refusal(call: ToolCall, count: int) -> str:
    """What the model reads for a call whose id the turn repeats."""
    return (
        f"This call to '{call.name}' has the call id '{call.id}', which {count} calls of the same response "
        "carry; a result could not be matched to one of them, so none of them was run. "
        "Call the tools again, each with its own id."
    )


def answered_once(pairs: Iterable[Pair]) -> list[Pair]:
    """The pairs in order, keeping only the first pair of each id (calls without an id all stay)."""
    seen: set[str] = set()
    kept: list[Pair] = []
    for call, result in pairs:
        if call.id and call.id in seen:
            continue
        seen.add(call.id)
        kept.append((call, result))
    return kept
