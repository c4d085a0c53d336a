"""Script files a line runs: `bash FILE`, `source FILE`, `./FILE`, `python3 FILE`.

A file inside the project is a command under its own rules while the person wrote it. One the model
wrote (`scripts.model_script`, from the attribution journal) is read: run by a bash-like shell, or
directly with no `#!` line or a bash one, its text is analysed as if typed on the line; run by any
other interpreter, or unreadable as bash text, it fails closed with the reason.
"""

from __future__ import annotations

import os
import posixpath

from . import limits
from .analysis_state import brief
from .analysis_variables import VariableChecks
from .paths import fs_safe
from .scripts import BASH_SHEBANGS, ModelScript, model_script, shebang
from .words import Word

__all__ = ["INTERPRETERS", "ScriptChecks"]

INTERPRETERS = frozenset(
    ("python", "pypy", "perl", "ruby", "node", "nodejs", "deno", "bun", "php", "lua", "luajit", "Rscript", "julia",
     "osascript", "pwsh", "tclsh", "expect", "fish", "csh", "tcsh")
)  # fmt: skip
"""Programs whose first existing file operand is a script in a language other than bash's (looked up
without a version: `python3.12`). Other shells are wrappers (`wrappers.yaml`, dialect `other`)."""


def interpreter(program: str) -> bool:
    base = program.rpartition("/")[2]
    return base in INTERPRETERS or base.rstrip("0123456789.-") in INTERPRETERS


class ScriptChecks(VariableChecks):
    """What a line runs from files, checked against the attribution journal."""

    __slots__ = ()

    def _script_file(
        self,
        words: list[Word],
        first: int,
        last: int,
        text: str,
        reasons: list[str],
        *,
        valued: frozenset[str] = frozenset(),
        bash: bool = True,
    ) -> None:
        """`source FILE`, `bash FILE`: a file inside the project is a command under its own rules
        unless the model wrote it (then it is read); one this line writes, one outside the project,
        or one fed by the line is not seen. `valued`: the shell's options that take a value; `bash`:
        whether the shell reads bash's language."""
        operand = _operand(words[first + 1 : last], valued)
        if operand is None:
            return
        if operand.kind == "process_substitution" or operand.value is None:
            self.findings.fail_closed(text, f"`{brief(text)}` runs a script produced when it runs")
            return
        value = operand.value
        if not value:
            return  # `bash ''`: no file has an empty name, so nothing runs (bash reports it and exits)
        if value == "-" or value.startswith(("/dev/", "/proc/")):
            self.findings.fail_closed(text, f"`{brief(text)}` runs commands fed to it")
            return
        for absolute in self._script_paths(value, text):
            if not self.scope.inside(absolute) or self.scope.external(absolute, None):
                self.findings.fail_closed(text, f"`{brief(text)}` runs a script outside the project")
                return
            if self._looks_up():
                found = self._model_script(absolute)
                if found is not None:
                    self._run_model_script(found, value, text, reasons, bash=bash, direct=False)

    def _run_file(self, name: str, text: str, reasons: list[str]) -> None:
        """`./x`, `bin/x`: the program is the file; the model's is read when bash would run it."""
        if not self._looks_up():
            return
        for absolute in self._script_paths(name, text):
            if self.scope.inside(absolute):
                found = self._model_script(absolute)
                if found is not None:
                    self._run_model_script(found, name, text, reasons, bash=True, direct=True)

    def _interpreted(self, program: str, args: list[str | None], text: str) -> None:
        """`python3 s.py`: the first operand that names an existing file is the script; the model's is
        opaque (its language is not read here). `python3 -m NAME` runs `NAME.py` (or its package's
        `__main__.py`) from the working directory, which Python searches first."""
        if not self._looks_up():
            return
        module = False
        for arg in args:
            if arg == "-m" and program.rpartition("/")[2].startswith(("python", "pypy")):
                module = True
                continue
            if arg is None or not arg or (arg.startswith("-") and not module):
                continue
            names = _module_files(arg) if module else (arg,)
            existing = [
                absolute
                for name in names
                for absolute in self._script_paths(name, text)
                if self.scope.inside(absolute) and fs_safe(absolute) and os.path.isfile(absolute)
            ]
            for absolute in existing:
                found = self._model_script(absolute)
                if found is not None:
                    language = program.rpartition("/")[2]
                    shown = posixpath.relpath(absolute, self.scope.root) if module else arg
                    self._opaque(found, shown, text, f"its {language} code is not read here")
            if existing or module:
                return

    def _script_paths(self, value: str, text: str) -> list[str]:
        """The absolute paths `value` may name (one per working directory); fails closed (and gives
        none) when the line writes it first, or when a working directory is only known when it runs."""
        found: list[str] = []
        for cwd in self.cwds:
            absolute = self.scope.expand(value, cwd)
            if absolute is None:
                if self._looks_up():
                    self.findings.fail_closed(text, f"`{brief(text)}` runs {value} from a directory known when it runs")
                continue
            absolute = posixpath.normpath(absolute)
            if absolute in self.written or absolute in self.findings.written:
                self.findings.fail_closed(text, f"`{brief(text)}` runs a script this command writes")
                return []
            found.append(absolute)
        return found

    def _model_script(self, absolute: str) -> ModelScript | None:
        journal = self.scope.journal
        if journal is None or not fs_safe(absolute):  # a NUL or lone surrogate: the line failed closed as binary
            return None
        cache = self.findings.scripts
        if absolute not in cache:
            cache[absolute] = model_script(journal, self.scope.root_real, absolute)
        return cache[absolute]

    def _looks_up(self) -> bool:
        """Whether scripts are looked up in the journal: there is one, and this is a call, not a pattern
        being checked (which must not depend on the files present)."""
        return self.scope.journal is not None and self.findings.expand_globs

    def _run_model_script(
        self, found: ModelScript, value: str, text: str, reasons: list[str], *, bash: bool, direct: bool
    ) -> None:
        """Analyse the model's script as bash text, or fail closed saying why it cannot be."""
        if found.text is None:
            self._opaque(found, value, text, found.problem or "it cannot be read")
            return
        if not bash:
            self._opaque(found, value, text, "the shell that runs it does not speak bash's language")
            return
        language = shebang(found.text) if direct else ""  # a shell given the file ignores its #! line
        if language is None:
            self._opaque(found, value, text, "its #! line gives its interpreter arguments not read here")
            return
        if language and language not in BASH_SHEBANGS:
            self._opaque(found, value, text, f"its {language} code is not read here")
            return
        if self.depth + 1 > limits.MAX_SCRIPT_DEPTH:
            self._opaque(found, value, text, f"scripts run scripts more than {limits.MAX_SCRIPT_DEPTH} levels deep")
            return
        self._script(found.text, text, reasons)

    def _opaque(self, found: ModelScript, value: str, text: str, why: str) -> None:
        self.findings.fail_closed(text, f"`{brief(text)}` runs {_written(found, value)}, and {why}")


def _written(found: ModelScript, value: str) -> str:
    if found.call_id is None:
        return value
    by = f"call `{found.call_id}`" if found.call_id else "a tool call"
    return (
        f"{value}, which {by} wrote and the person has not approved (review and approve it with `toolrt trust {value}`)"
    )


def _module_files(name: str) -> tuple[str, ...]:
    """The files `python -m NAME` may run from the working directory (`a.b` → `a/b.py`, `a/b/__main__.py`)."""
    if not name or name.startswith((".", "-")) or "/" in name:
        return ()
    path = name.replace(".", "/")
    return (path + ".py", path + "/__main__.py")


def _operand(words: list[Word], valued: frozenset[str]) -> Word | None:
    """The script operand of `source`/`bash`: the first word that is not an option (or its value)."""
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        value = word.value
        if value is not None and value.startswith(("-", "+")) and value != "-":
            if value == "--":
                continue
            skip = value in valued
            continue
        return word
    return None
