"""Bounds that keep bash analysis fast on hostile input; past any of them the analysis fails closed."""

from __future__ import annotations

__all__ = ["MAX_INPUT_BYTES", "MAX_NESTING", "MAX_NODES", "MAX_SCRIPT_DEPTH", "TIME_BUDGET"]

MAX_INPUT_BYTES = 100_000
"""Longer command text is not parsed at all."""

MAX_NODES = 10_000
"""Syntax-tree nodes and words visited per parsed text; a 2 KB script has about a thousand."""

MAX_NESTING = 64
"""Substitutions, subshells and groups nested inside one another."""

MAX_SCRIPT_DEPTH = 6
"""Levels of command strings parsed again (`bash -c`, `eval`, `watch`, heredocs fed to a shell)."""

TIME_BUDGET = 0.05
"""Seconds one analysis may take (parse included) before it stops and fails closed; ordinary
commands take tens of microseconds. The scan for denied commands in what could not be seen comes
on top and is bounded by `named.MAX_SCAN_CHARS`."""
