"""What a finished process's result tells the model besides its output: the exit status, a timeout,
an abort, or that nothing was printed, each with the next step it can take.

The model never sees a result's metadata, so these facts go into the output text, in a tagged block
after the output (`<bash_metadata>` for bash, as OpenCode tags its notes). For bash a non-zero exit
status is stated, never turned into an error result: `grep` finding nothing, `test -f` and `git diff
--exit-code` exit non-zero as a matter of course. An `argv:`/`shell:` tool declares which statuses are a
success (`ok_exit`, default `[0]`); the note then says which way its status counts.
"""

from __future__ import annotations

from .process import ProcessOutcome

__all__ = ["outcome_notes", "with_tagged_notes"]


def outcome_notes(
    tool: str, outcome: ProcessOutcome, timeout_ms: float, ok_exit: tuple[int, ...] | None = None
) -> list[str]:
    """The sentences the model needs about how the process ended (empty for output ending with exit 0).

    `ok_exit`: the statuses the tool declares a success (None: bash, where the model judges the status).
    """
    notes: list[str] = []
    if outcome.timed_out:
        notes.append(
            f"{tool} tool terminated command after exceeding timeout {timeout_ms:g} ms. "
            "If it needs more time, run it again with a larger timeout; if it was waiting for input, "
            "there is no terminal: pass the input as arguments, a file or a pipe."
        )
    elif outcome.aborted:
        notes.append("User aborted the command. Do not run it again unless the user asks you to.")
    elif outcome.exit_code and ok_exit is not None:
        status = outcome.exit_code
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        success = ", ".join(map(str, ok_exit))
        if status in ok_exit:
            notes.append(f"The command {how}, which the {tool} tool counts as success (success: {success}).")
        else:
            notes.append(
                f"The command {how}, which the {tool} tool counts as a failure (success: {success}). "
                "Read the output for the cause before calling it again."
            )
    elif outcome.exit_code:
        status = outcome.exit_code
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        notes.append(
            f"The command {how}. A non-zero status is not always a failure (grep finding nothing, "
            "test, diff): read the output to decide what to do next."
        )
    if not outcome.output.strip() and not outcome.timed_out and not outcome.aborted:
        if outcome.exit_code:
            notes.append("The command printed no output.")
        else:
            notes.append("The command succeeded (exit status 0) and printed no output.")
    return notes


def with_tagged_notes(output: str, notes: list[str], tag: str) -> str:
    """`output` followed by the notes in a `<tag>` block (OpenCode's layout: a blank line, then the block)."""
    if not notes:
        return output
    return f"{output}\n\n<{tag}>\n" + "\n".join(notes) + f"\n</{tag}>"
