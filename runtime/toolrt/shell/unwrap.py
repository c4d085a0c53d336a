"""Find the command a wrapper runs: `sudo -u root rm x` runs `rm x`, `bash -lc 'rm x'` runs the script `rm x`.

Works on argument values after quote removal (None for a word only known at run time). One call
peels one wrapper; the analyzer calls it again on each inner command, so `sudo env X=1 timeout 5 rm`
peels three.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .long_options import long_option
from .wrappers import Wrapper

__all__ = ["Unwrapped", "unwrap"]

_VARIABLE_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


@dataclass(frozen=True, slots=True)
class Unwrapped:
    """What a wrapper runs. Empty when it runs nothing (`command -v rm`, `sudo -l`)."""

    commands: tuple[tuple[int, int], ...] = ()
    """Index ranges `[start, end)` of the words of each inner command."""
    scripts: tuple[str, ...] = ()
    """Shell text the wrapper runs, to be parsed again."""
    assignments: tuple[str, ...] = ()
    """Names of variables the wrapper sets for the inner command (`env LD_PRELOAD=x cmd`)."""
    dynamic: str | None = None
    """Why the inner command cannot be known (a script held in a variable)."""
    reads_stdin: bool = False
    """A shell with neither `-c` nor a script file: it runs whatever arrives on its input."""


def unwrap(wrapper: Wrapper, words: Sequence[str | None], start: int, end: int) -> Unwrapped:
    """The inner commands of `words[start:end]`, which begins with `wrapper`'s name."""
    first = start + len(wrapper.name)
    if wrapper.kind == "shell":
        return _shell(wrapper, words, first, end)
    if wrapper.kind == "find":
        return _find(wrapper, words, first, end)
    return _options_then_command(wrapper, words, first, end)


def _is_option(wrapper: Wrapper, word: str, positionals: int) -> bool:
    """Whether `word` is an option of the wrapper. Once its operands are consumed (`timeout 5`), what
    follows is the command, except a script option (`flock FILE -c 'cmd'`)."""
    operands_done = wrapper.positionals > 0 and positionals == 0
    return (
        len(word) > 1
        and word[0] == "-"
        and (not operands_done or _long_name(wrapper, word.partition("=")[0]) in wrapper.script_options)
    )


def _long_name(wrapper: Wrapper, name: str) -> str:
    """The long option `name` abbreviates (`--split` for env's `--split-string`, `--open` for git grep's
    `--open-files-in-pager`), a script option before one that takes a value; `name` itself when it is
    exact or no such option begins with it."""
    if name[:2] != "--":
        return name  # (the common word: no list built)
    named = (*sorted(wrapper.script_options), *sorted(wrapper.options_with_value))
    return long_option(name, named) or name


def _with_script(
    wrapper: Wrapper,
    script: str,
    words: Sequence[str | None],
    rest_start: int,
    end: int,
    scripts: list[str],
    assignments: list[str],
) -> Unwrapped | None:
    """A script option's value: added to `scripts` (None: more options may follow), or what the
    wrapper runs."""
    if script == "":
        return Unwrapped(dynamic=f"`{' '.join(wrapper.name)}` runs a script that is not a literal string")
    if script.startswith("exec="):
        script = script[5:]  # `tar --checkpoint-action=exec=CMD`
    if wrapper.kind == "none":
        # Options that run scripts may come several times, anywhere (`tar`, `su USER -c`).
        scripts.append(script)
        return None
    # `env -S 'cmd a' b`: the split string, then the remaining operands (for `su -c` the operand is a
    # user name, not part of the command).
    rest = words[rest_start:end] if wrapper.kind == "command" else ()
    if any(part is None for part in rest):
        return Unwrapped(dynamic=f"`{' '.join(wrapper.name)}` runs a command that is not literal")
    scripts.append(" ".join([script, *(part for part in rest if part is not None)]))
    return Unwrapped(scripts=tuple(scripts), assignments=tuple(assignments))


def _options_then_command(wrapper: Wrapper, words: Sequence[str | None], index: int, end: int) -> Unwrapped:
    positionals = wrapper.positionals
    assignments: list[str] = []
    scripts: list[str] = []
    options_done = False
    while index < end:
        word = words[index]
        if word is None:
            if positionals or wrapper.kind == "none":
                positionals = max(positionals - 1, 0)
                index += 1
                continue
            break
        if not options_done and word == "--":
            options_done = True
            index += 1
            continue
        if not options_done and word == "-" and wrapper.kind == "command":
            index += 1  # `env - cmd` is `env -i cmd`
            continue
        if not options_done and _is_option(wrapper, word, positionals):
            step, stop, script = _option(wrapper, word, words, index, end)
            if stop:
                return Unwrapped(assignments=tuple(assignments))
            if script is not None:
                done = _with_script(wrapper, script, words, index + step, end, scripts, assignments)
                if done is not None:
                    return done
            index += step
            continue
        if wrapper.assignments and _is_assignment(word):
            assignments.append(word.partition("=")[0])
            index += 1
            continue
        if positionals or wrapper.kind == "none":
            positionals = max(positionals - 1, 0)
            index += 1
            continue
        break
    return _what_follows(wrapper, words, index, end, scripts, assignments)


def _what_follows(
    wrapper: Wrapper, words: Sequence[str | None], index: int, end: int, scripts: list[str], assignments: list[str]
) -> Unwrapped:
    """What the wrapper runs once its options end at `index`: a command, a script or its operand."""
    if wrapper.kind == "none" or index >= end:
        return Unwrapped(scripts=tuple(scripts), assignments=tuple(assignments))
    if wrapper.kind == "argument":
        script = words[index]
        if script is None:
            return Unwrapped(dynamic=f"`{' '.join(wrapper.name)}` runs a script that is not a literal string")
        return Unwrapped(scripts=(script,))
    if wrapper.kind == "script":
        rest = words[index:end]
        if any(part is None for part in rest):
            return Unwrapped(dynamic=f"`{' '.join(wrapper.name)}` runs a script that is not a literal string")
        return Unwrapped(scripts=(" ".join(part for part in rest if part is not None),))
    return Unwrapped(commands=((index, end),), assignments=tuple(assignments))


def _option(
    wrapper: Wrapper, word: str, words: Sequence[str | None], index: int, end: int
) -> tuple[int, bool, str | None]:
    """(words consumed, stops the command, script text or "" for a dynamic one) for the option `word`."""
    name, equals, value = word.partition("=")
    name = _long_name(wrapper, name)
    if name in wrapper.stop_options:
        return 1, True, None
    # Long options, an attached `=value`, and single-dash long names (`zip -TT`, `pwsh -Command`).
    named = name in wrapper.options_with_value or name in wrapper.script_options
    if word.startswith("--") or (equals and named) or (named and len(name) > 2):
        takes_next = not equals and (name in wrapper.options_with_value or name in wrapper.script_options)
        if name in wrapper.script_options:
            script = value if equals else _next(words, index, end)
            return (1 if equals else 2), False, script
        return (2 if takes_next else 1), False, None
    # A cluster of short options: `-iu root`, `-uroot`, `-n5`.
    for position in range(1, len(word)):
        option = "-" + word[position]
        attached = word[position + 1 :]
        if option in wrapper.stop_options:
            return 1, True, None
        if option in wrapper.script_options:
            if attached:
                return 1, False, attached
            return 2, False, _next(words, index, end)
        if option in wrapper.options_with_value:
            return (1 if attached else 2), False, None
    return 1, False, None


def _next(words: Sequence[str | None], index: int, end: int) -> str:
    if index + 1 >= end:
        return ""
    following = words[index + 1]
    return "" if following is None else following


def _shell(wrapper: Wrapper, words: Sequence[str | None], index: int, end: int) -> Unwrapped:
    command_flag = False
    stdin_flag = False
    while index < end:
        word = words[index]
        if word is None:
            break
        if word in ("--", "-"):
            index += 1
            break
        if len(word) < 2 or word[0] not in "-+":
            break
        if word in wrapper.options_with_value:
            index += 2
            continue
        if word.startswith("--"):
            index += 1
            continue
        letters = word[1:]
        if word[0] == "-":
            command_flag = command_flag or "c" in letters
            stdin_flag = stdin_flag or "s" in letters
        # `-eo pipefail`: a cluster ending in an option that takes a value consumes the next word.
        index += 2 if "-" + letters[-1] in wrapper.options_with_value else 1
    name = " ".join(wrapper.name)
    if command_flag:
        if index >= end:
            return Unwrapped()
        script = words[index]
        if script is None:
            return Unwrapped(dynamic=f"`{name} -c` runs a script that is not a literal string")
        return Unwrapped(scripts=(script,))
    if index < end and not stdin_flag:
        return Unwrapped()
    return Unwrapped(reads_stdin=True)


def _find(wrapper: Wrapper, words: Sequence[str | None], index: int, end: int) -> Unwrapped:
    commands: list[tuple[int, int]] = []
    while index < end:
        if words[index] not in wrapper.exec_options:
            index += 1
            continue
        first = index + 1
        stop = first
        while stop < end:
            word = words[stop]
            if word == ";" or (word == "+" and stop > first and words[stop - 1] == "{}"):
                break
            stop += 1
        if stop > first:
            commands.append((first, stop))
        index = stop + 1
    return Unwrapped(commands=tuple(commands))


def _is_assignment(word: str) -> bool:
    """`NAME=value` before the command. Like env, any name counts, not only a shell identifier:
    `BASH_FUNC_ls%%=() { ...; }` puts a function in a child bash's environment."""
    name, equals, _ = word.partition("=")
    return bool(equals) and bool(name) and name[0] in _VARIABLE_START and "/" not in name
