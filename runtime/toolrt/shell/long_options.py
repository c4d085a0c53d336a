"""Long options as getopt_long reads them: any unambiguous prefix of a long option's name names it
(`--out` for `--output`, `--reg` for `--regexp`), and git and argparse read them the same way. The
tables (operands, writes, wrappers, code options) list full names; each reads a word through here."""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["long_option"]


def long_option(name: str, options: Collection[str]) -> str | None:
    """The option of `options` that `name` (a word without its `=value`) names: itself when listed, else
    the first in `options`' order that begins with it (an ambiguous prefix stops the program, so reading it
    as any of them is never weaker); None when `name` is no long option (`--x`…) or names none of them."""
    if name[:2] != "--" or len(name) < 3:
        return None
    if name in options:
        return name
    for option in options:  # a loop: cheaper than `next` over a generator, and read for every long word
        if option.startswith(name):
            return option
    return None
