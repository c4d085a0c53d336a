"""Run the `toolrt` command line in-process, as the CLI tests do."""

from __future__ import annotations

import io

from toolrt.faces.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    """`toolrt ARGV…`: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()
