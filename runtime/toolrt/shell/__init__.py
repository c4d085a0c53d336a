"""Bash analysis with tree-sitter-bash: a command string → the permission requests it needs.

`analyze_command(command, site)` is the analyzer; `analyze_call(args, site)` is the
`permission: {analyzer: bash}` entry point. The arity table (arity.yaml) and the wrapper table
(wrappers.yaml) are data. The parser loads on first use, so importing this package is cheap.
"""

from __future__ import annotations

from .arity import prefix as arity_prefix
from .call import analyze_call, analyze_command
from .wrappers import Wrapper, WrapperTable, default_wrappers

__all__ = ["Wrapper", "WrapperTable", "analyze_call", "analyze_command", "arity_prefix", "default_wrappers"]
