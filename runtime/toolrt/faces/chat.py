"""`toolrt chat`: a terminal agent loop against any OpenAI-compatible endpoint, to watch a model use the tools.

Each user line starts a turn: the model streams its answer, every tool call it makes runs through
the pipeline (asks put to the person at the terminal) and is shown as it runs, and the results go
back until the model answers without tools. The project's config is reloaded before every request,
so an edited tool file is what the model sees next; a broken save keeps the last good tools.

When the input is not a terminal (piped lines), nobody can answer an ask: chat says so when it starts,
each call that asks is refused with that reason, and a line that is an answer to an ask (`once`, `o`,
`always`, `reject`, ..., or `yes`/`no` right after an ask was refused) is never sent to the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..api import Runtime
    from ..build.changes import SnapshotChange
    from ..call.events import CallEvent
    from ..providers.openai import StreamAccumulator
    from ..scope import CallScope

__all__ = ["MAX_ROUNDS", "run_chat"]

MAX_ROUNDS = 50
"""Model requests per user line; past it the turn stops and says so (a model stuck calling tools)."""
EXIT_WORDS = ("/exit", "/quit")
ASK_WORDS = frozenset({"o", "once", "a", "always", "r", "reject"})
"""What the terminal prompt takes as an answer to an ask, and nobody would say to a model on a line alone."""
ANSWER_WORDS = ASK_WORDS | {"y", "yes", "n", "no"}
"""Also answers to an ask, when one was just refused."""


def _short(value: Any, limit: int = 120) -> str:
    """Arguments on one line: JSON text as the model sent it, objects as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Screen:
    """What the person sees besides the model's text: calls as they run, reloads, errors."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.last_error: str | None = None
        self.refused = False
        """An ask was refused since the last line read (input not a terminal)."""

    def line(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def call_event(self, event: CallEvent) -> None:
        if event.kind == "running":
            self.line(f"  > {event.tool} {_short(event.data.get('input'))}")
        elif event.kind in ("completed", "error"):
            result = event.data["result"]
            if result.error is not None:
                first = result.error.strip().splitlines()[0] if result.error.strip() else "failed"
                self.line(f"  ! {event.tool}: {first}")
            else:
                self.line(f"  < {event.tool}: {result.title or 'done'}")

    def swapped(self, change: SnapshotChange) -> None:
        parts = [f"+{n}" for n in change.added] + [f"-{n}" for n in change.removed] + [f"~{n}" for n in change.changed]
        if change.permissions_changed:
            parts.append("permissions")
        self.line(f"[reloaded: {' '.join(parts) if parts else 'config'}]")

    def refusing_asker(self) -> Any:
        """The asker when input is not a terminal: every ask refused, saying why, and remembered."""
        from ..errors import DeniedError
        from ..permissions.evaluate import approval_required_message
        from ..permissions.model import Decision

        async def ask(request: Any) -> Any:
            self.refused = True
            self.line(f"  ! {request.tool}: asks for approval, refused: input is not a terminal")
            raise DeniedError(approval_required_message(Decision("ask", request.pending)))

        return ask

    def reload_failed(self, error: ConfigError) -> None:
        first = error.problems[0] if error.problems else None
        text = f"{first.file}:{first.line}: {first.message}" if first else str(error)
        if text != self.last_error:
            self.line(f"[config error, still using the last good tools: {text}]")
        self.last_error = text


async def run_chat(
    rt: Runtime,
    client: Any,
    *,
    model: str,
    scope: CallScope,
    ask: Any,
    questioner: Any,
    read_line: Callable[[str], str | None],
    out: TextIO,
    system: str | None = None,
    interactive: bool = True,
) -> int:
    """Talk until end of input or `/exit`; returns the exit code (0).

    `interactive=False` (input not a terminal): asks are refused and ask answers are not sent (module docstring).
    """
    import openai

    screen = _Screen(out)
    unsubscribe = rt.subscribe(screen.call_event)
    stop_swaps = rt.subscribe(screen.swapped, to="swaps")
    messages: list[Any] = [{"role": "system", "content": system}] if system else []
    screen.line(f"toolrt chat with {model}: {len(rt.tools(scope).offered)} tools. /exit or Ctrl-D to leave.")
    if not interactive:
        ask = screen.refusing_asker()
        screen.line(
            "[input is not a terminal: calls that ask for approval are refused, and answers to asks are not sent]"
        )
    try:
        while True:
            line = await anyio.to_thread.run_sync(read_line, "you> ")
            if line is None or line.strip() in EXIT_WORDS:
                return 0
            if not line.strip():
                continue
            word = line.strip().lower()
            if not interactive and (word in ASK_WORDS or (screen.refused and word in ANSWER_WORDS)):
                screen.line(f"[{line.strip()!r} answers an ask, and asks are refused here: not sent to the model]")
                continue
            screen.refused = False
            start = len(messages)
            messages.append({"role": "user", "content": line})
            for _ in range(MAX_ROUNDS):
                _reload(rt, screen)
                request: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
                specs = rt.specs("openai", scope)
                if specs:
                    request["tools"] = specs
                try:
                    turn = await _streamed_turn(client, request, out)
                except openai.OpenAIError as error:
                    screen.line(f"\n[the endpoint failed: {error}; this message was dropped, try again]")
                    del messages[start:]
                    break
                if turn.text:
                    out.write("\n")
                messages.append(turn.message())
                results = await rt.run_tool_calls("openai", turn.calls, scope, ask=ask, questioner=questioner)
                if not results:
                    break
                messages += results
            else:
                screen.line(f"[stopped after {MAX_ROUNDS} requests in one turn; say how to go on]")
    finally:
        unsubscribe()
        stop_swaps()


def _reload(rt: Runtime, screen: _Screen) -> None:
    """Load what was saved since the last request; a failed reload is shown once, until it is fixed."""
    status = rt.reload()
    if status.last_error is not None:
        screen.reload_failed(status.last_error)
    else:
        screen.last_error = None


async def _streamed_turn(client: Any, request: dict[str, Any], out: TextIO) -> StreamAccumulator:
    """One model turn, its text written to `out` as it streams in. Raises `openai.OpenAIError`."""
    from ..providers.openai import StreamAccumulator

    turn = StreamAccumulator()
    stream = await client.chat.completions.create(**request)
    async for chunk in stream:
        shown = len(turn.text)
        turn.feed(chunk)
        out.write(turn.text[shown:])
        out.flush()
    turn.finish()
    return turn
