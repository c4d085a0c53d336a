"""The person at the terminal: permission asks (once / always / reject) and the `question` tool's questions.

Each line is read in a daemon thread of its own (`PROMPTS_WAITING`), so Ctrl-C ends `toolrt` at once.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ..permissions.ask import AskRequest, Reply

__all__ = ["PROMPTS_WAITING", "fixed_asker", "terminal_asker", "terminal_questioner"]


PROMPTS_WAITING: set[int] = set()
"""Threads blocked reading a line from the terminal (see `_read_line`): process-wide on purpose, since
the terminal is the process's, not a Runtime's."""


async def _read_line(prompt: str) -> str | None:
    """One line typed at the terminal; None at end of input (Ctrl-D, a closed stdin).

    The read runs in a daemon thread of its own, so Ctrl-C ends `toolrt` at once (exit 130) instead
    of waiting for a worker thread stuck in `input()` until Enter.
    """
    import os
    import signal
    import threading

    import anyio
    import anyio.abc
    import anyio.from_thread
    import anyio.lowlevel

    done = anyio.Event()
    token = anyio.lowlevel.current_token()
    box: list[str | None] = []

    def read() -> None:
        PROMPTS_WAITING.add(threading.get_ident())
        try:
            # The prompt goes to stderr with the question: stdout carries the tool's output only.
            print(prompt, end="", file=sys.stderr, flush=True)
            box.append(input(""))
        except EOFError:
            box.append(None)
        finally:
            PROMPTS_WAITING.discard(threading.get_ident())
            try:
                anyio.from_thread.run_sync(done.set, token=token)
            except RuntimeError:
                pass  # the event loop is gone (Ctrl-C): nobody waits for the line any more

    def leave() -> None:
        # Ctrl-C while the person is asked: exit 130 at once, whatever the cancelled call would await.
        print(file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(130)

    async def on_interrupt(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        # Through the event loop's signal handling, not a bare handler: the kernel may hand a Ctrl-C to any
        # thread (the one blocked reading the line among them), and a bare handler then waited for the main
        # thread to run Python, which stayed asleep in the loop's wait; the loop's own handling wakes it.
        with anyio.open_signal_receiver(signal.SIGINT) as interrupts:
            task_status.started()
            async for _ in interrupts:
                leave()

    if threading.current_thread() is not threading.main_thread():  # signals are the main thread's to handle
        threading.Thread(target=read, name="toolrt-prompt", daemon=True).start()
        await done.wait()
        return box[0] if box else None
    previous = signal.getsignal(signal.SIGINT)
    try:
        async with anyio.create_task_group() as group:
            await group.start(on_interrupt)  # in place before the question is asked
            threading.Thread(target=read, name="toolrt-prompt", daemon=True).start()
            await done.wait()
            group.cancel_scope.cancel()
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
    return box[0] if box else None


_ONCE = ("o", "once", "y", "yes")


_ALWAYS = ("a", "always")


_REJECT = ("r", "reject", "n", "no")


def terminal_asker(out: TextIO) -> Any:
    """Ask at the terminal: once / always / reject. End of input rejects; another answer asks again."""
    from ..permissions.ask import Reply

    async def ask(request: AskRequest) -> Reply:
        from ..permissions.shown import ask_lines

        print("\n" + "\n".join(ask_lines(request, indent="  ")), file=sys.stderr, flush=True)
        while True:
            answer = await _read_line("allow? [o]nce / [a]lways / [r]eject: ")
            if answer is None:
                print("\n(end of input: rejected)", file=sys.stderr, flush=True)
                return Reply("reject")
            choice = answer.strip().lower()
            if choice in _ONCE:
                return Reply("once")
            if choice in _ALWAYS:
                return Reply("always")
            if choice in _REJECT:
                break
            print(f"answer o (once), a (always) or r (reject), not {answer.strip()!r}", file=sys.stderr, flush=True)
        message = await _read_line("message for the model (optional): ")
        return Reply("reject", (message or "").strip() or None)

    return ask


def terminal_questioner() -> Any:
    """Put the `question` tool's questions to the person at the terminal (numbers, or typed text)."""

    async def questioner(questions: Sequence[Mapping[str, Any]]) -> list[list[str]]:

        answers: list[list[str]] = []
        for item in questions:
            from ..permissions.shown import escape_controls

            options = [str(option.get("label", "")) for option in item.get("options", ())]
            header = escape_controls(str(item.get("header") or "Question"))
            lines = [f"\n{header}: {escape_controls(str(item['question']), keep_newlines=True)}"]
            lines.extend(f"  {number}. {escape_controls(label)}" for number, label in enumerate(options, 1))
            print("\n".join(lines), file=sys.stderr, flush=True)
            hint = "numbers, comma-separated" if item.get("multiple") else "a number"
            reply = await _read_line(f"answer ({hint}, or your own words): ")
            answers.append(_chosen((reply or "").strip(), options, multiple=bool(item.get("multiple"))))
        return answers

    return questioner


def _chosen(reply: str, options: Sequence[str], *, multiple: bool) -> list[str]:
    """The labels a reply picks (`2` or `1,3`), or the reply itself when it is not option numbers."""
    picks = [part.strip() for part in reply.split(",")] if multiple else [reply]
    if picks and all(p.isdigit() and 1 <= int(p) <= len(options) for p in picks):
        return [options[int(p) - 1] for p in picks]
    return [reply] if reply else []


def fixed_asker(kind: str) -> Any:
    from ..permissions.ask import Reply

    async def ask(request: AskRequest) -> Reply:
        return Reply(kind)  # type: ignore[arg-type]

    return ask
