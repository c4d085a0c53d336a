"""The `question` tool: put one or more multiple-choice questions to the person through the host's questioner."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..call.context import ToolContext
from ..errors import ToolFailure

__all__ = ["format_answers", "question"]


async def question(args: Mapping[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Ask `questions` and summarise the answers; metadata `{answers}` holds one label list per question.

    Raises ToolFailure when the host has no questioner (headless runs: nobody can answer).
    """
    questions: Sequence[Mapping[str, Any]] = args["questions"]
    if ctx.questioner is None:
        raise ToolFailure(
            "No one can answer questions here: this session runs without a person at the keyboard. "
            "Make a reasonable assumption, say which one you made, and continue."
        )
    answers = await ctx.questioner(questions)
    count = len(questions)
    return {
        "title": f"Asked {count} question{'s' if count != 1 else ''}",
        "output": format_answers(questions, answers),
        "metadata": {"answers": [list(answer) for answer in answers]},
    }


def format_answers(questions: Sequence[Mapping[str, Any]], answers: Sequence[Sequence[str]]) -> str:
    """OpenCode's summary: `"Q"="A, B"` per question, `Unanswered` when no answer came back."""
    pairs = []
    for index, item in enumerate(questions):
        answer = answers[index] if index < len(answers) else ()
        pairs.append(f'"{item["question"]}"="{", ".join(answer) if answer else "Unanswered"}"')
    return (
        f"User has answered your questions: {', '.join(pairs)}. You can now continue with the user's answers in mind."
    )
