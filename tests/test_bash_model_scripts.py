"""Scripts the model wrote are read, not trusted (issue 26 item 4).

The model writes `s.sh` (`rm -rf build` inside) with the `write` tool, or with a sandboxed bash call,
then runs it: `bash s.sh`, `sh s.sh`, `source s.sh`, `. ./s.sh`, `./s.sh`. Real bash shows each line
deletes `build/`; under a deny-list (`rm *: deny`) the analyzer must deny it, by reading the script's
text as if it were typed on the line. Other interpreters (`python3 p.py`) are opaque for the model's
scripts; the person's scripts, and the model's once approved with `toolrt trust`, keep being commands
under their own rules. One project, loaded once; the journal is the real one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from bash_oracle import ALLOW_LIST, DENY_LIST
from cli_helpers import run

from toolrt import Runtime
from toolrt.attribution import Journal
from toolrt.permissions.ask import AskRequest, Reply
from toolrt.permissions.evaluate import decide
from toolrt.permissions.model import Action, PermissionRequest
from toolrt.permissions.rules import Ruleset
from toolrt.shell import analyze_call

PERMISSIONS = 'permission:\n  "*": allow\n  bash: {"*": allow, "rm *": deny}\n  external_directory: ask\n'
DELETES = "echo cleaning\nrm -rf build\n"
HARMLESS = "echo hi\nls -la\n"


class _Project:
    def __init__(self, root: Path, rt: Runtime) -> None:
        self.root = root
        self.rt = rt

    def call(self, tool: str, args: dict[str, Any], *, approve: bool = False) -> Any:
        async def reject(request: AskRequest) -> Reply:
            return Reply("once" if approve else "reject")

        async def main() -> Any:
            with anyio.fail_after(30):
                return await self.rt.call(tool, args, ask=reject)

        return anyio.run(main)

    def write(self, name: str, content: str) -> None:
        """The model writes `name` with the `write` tool."""
        assert self.call("write", {"filePath": name, "content": content}).error is None

    def requests(self, line: str) -> tuple[PermissionRequest, ...]:
        return tuple(analyze_call({"command": line}, self.rt.snapshot.site))

    def action(self, line: str, ruleset: Ruleset = DENY_LIST) -> Action:
        return decide(self.requests(line), ruleset, locked=Ruleset()).action

    def reasons(self, line: str) -> str:
        return " | ".join(request.reason for request in self.requests(line) if request.reason)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Project]:
    root = tmp_path_factory.mktemp("scripts") / "proj"
    (root / "build").mkdir(parents=True)
    (root / "build" / "out.o").write_text("object", encoding="utf-8")
    (root / "permissions.yaml").write_text(PERMISSIONS, encoding="utf-8")
    (root / "mine.sh").write_text(DELETES, encoding="utf-8")  # the person's
    (root / "mine.py").write_text("print('mine')\n", encoding="utf-8")
    with Runtime.load(root, partial=True) as rt:
        made = _Project(root, rt)
        made.write("s.sh", DELETES)
        made.write("ok.sh", HARMLESS)
        made.write("p.py", "import shutil\nshutil.rmtree('build')\n")
        made.write("tool/__main__.py", "import shutil\nshutil.rmtree('build')\n")
        made.write("x.js", "require('fs').rmSync('build', {recursive: true})\n")
        made.write("py.sh", "#!/usr/bin/env python3\nimport shutil\nshutil.rmtree('build')\n")
        made.write("self.sh", "bash self.sh\n")
        made.write("tools/sudo", "rm -rf build\n")  # a wrapper's name: still the model's program
        made.write("big.sh", "echo hi\n" * 20_000)  # 160 KB: over the 100 KB budget
        made.write("nested.sh", "bash ok.sh && source s.sh\n")
        program = made.call(
            "bash", {"command": "printf '\\177ELF\\2\\1\\1' > bin.sh && chmod +x bin.sh", "description": "b"}
        )
        assert program.error is None and (root / "bin.sh").read_bytes() == b"\x7fELF\x02\x01\x01"
        made.write("rel.sh", "cat ../outside.txt\n")
        for name in ("s.sh", "ok.sh", "py.sh", "tools/sudo"):
            os.chmod(root / name, 0o755)  # the person's chmod changes no content: still the model's
        yield made


def _bash_deletes(root: Path, line: str, tmp_path: Path) -> bool:
    """The oracle: run `line` with real bash in a copy of the project; whether `build/` is gone after."""
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns(".toolrt"))
    subprocess.run(["bash", "-c", line], cwd=copy, capture_output=True, timeout=10, check=False)
    return not (copy / "build").exists()


@pytest.mark.parametrize(
    "line",
    [
        "bash s.sh",
        "sh s.sh",
        "source s.sh",
        ". ./s.sh",
        "./s.sh",
        "bash -o pipefail s.sh",
        "timeout 5 ./s.sh",
        "tools/sudo ls",
    ],
)
def test_a_denied_command_in_a_script_the_model_wrote_is_denied(project: _Project, line: str, tmp_path: Path) -> None:
    assert _bash_deletes(project.root, line, tmp_path), "real bash: the line deletes build/"
    assert project.action(line) == "deny"
    result = project.call("bash", {"command": line, "description": "run it"})
    assert result.error is not None and 'bash `rm -rf build`: deny, by rule bash: "rm *": deny' in result.error
    assert (project.root / "build" / "out.o").exists()


def test_a_script_the_line_writes_before_running_it_is_not_seen(project: _Project) -> None:
    for line in ("printf 'rm -rf build' > new.sh; bash new.sh", "cp s.sh copy.sh && ./copy.sh"):
        assert "runs a script this command writes" in project.reasons(line)
        assert project.action(line, ALLOW_LIST) == "deny"


def test_a_script_written_by_a_sandboxed_bash_call_is_read_too(project: _Project, tmp_path: Path) -> None:
    made = project.call("bash", {"command": "printf 'rm -rf build\\n' > t.sh", "description": "write a script"})
    assert made.error is None, made.error
    assert _bash_deletes(project.root, "bash t.sh", tmp_path)
    assert project.action("bash t.sh") == "deny"
    assert project.action("sub=1 bash t.sh") == "deny"


def test_the_persons_script_keeps_being_a_command_under_its_own_rules(project: _Project) -> None:
    assert project.action("bash mine.sh") == "allow"
    assert project.action("python3 mine.py") == "allow"
    assert [r.patterns for r in project.requests("bash mine.sh") if r.permission == "bash"] == [("bash mine.sh",)]
    assert project.action("bash gone.sh") == "allow", "nothing there: nobody wrote it"


def test_a_harmless_script_the_model_wrote_asks_nothing(project: _Project) -> None:
    """The false asks to avoid: the model's script is analysed, not refused."""
    for line in ("bash ok.sh", "./ok.sh", "source ok.sh", "bash ok.sh arg", "sh -e ok.sh"):
        assert project.action(line) == "allow", (line, project.reasons(line))
    assert {p for r in project.requests("bash ok.sh") for p in r.patterns} >= {"echo hi", "ls -la"}


def test_a_script_that_runs_the_models_script_is_read_through(project: _Project) -> None:
    assert project.action("bash nested.sh") == "deny"


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("python3 p.py", "`python3 p.py` runs p.py, which call `"),
        ("python3 -W ignore p.py", "its python3 code is not read here"),
        ("node x.js", "its node code is not read here"),
        ("python3 -m tool", "runs tool/__main__.py, which call `"),
        ("./py.sh", "its python3 code is not read here"),
        ("zsh ok.sh", "the shell that runs it does not speak bash's language"),
        ("bash big.sh", "big.sh is larger than 100000 bytes (160000), too large to analyse"),
        ("./bin.sh", "bin.sh is not text (a program or binary data)"),
        ("bash self.sh", "scripts run scripts more than 6 levels deep"),
    ],
)
def test_what_cannot_be_read_as_bash_fails_closed_with_a_reason(project: _Project, line: str, why: str) -> None:
    assert project.action(line) == "ask"
    assert project.action(line, ALLOW_LIST) == "deny"
    reasons = project.reasons(line)
    assert why in reasons
    assert "and the person has not approved (review and approve it with `toolrt trust" in reasons


def test_paths_inside_the_models_script_meet_the_rules(project: _Project) -> None:
    (project.root.parent / "outside.txt").write_text("secret", encoding="utf-8")
    requests = project.requests("bash rel.sh")
    assert any(r.permission == "external_directory" for r in requests)
    assert project.action("bash rel.sh") == "ask"


def test_a_link_out_of_the_project_to_a_program_the_person_has_is_not_read(project: _Project) -> None:
    """A virtual environment's `bin/python` links to the system's: the model made the link, not the
    program, so `venv/bin/python3 mine.py` asks nothing."""
    python = os.path.realpath(shutil.which("python3") or "/usr/bin/python3")
    link = f"mkdir -p venv/bin && ln -s {python} venv/bin/python3"
    made = project.call("bash", {"command": link, "description": "a venv"}, approve=True)  # the link leads out
    assert made.error is None, made.error
    assert project.action("venv/bin/python3 mine.py") == "allow", project.reasons("venv/bin/python3 mine.py")


def test_approved_with_toolrt_trust_the_script_is_the_persons(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "permissions.yaml").write_text(PERMISSIONS, encoding="utf-8")
    with Runtime.load(root, partial=True) as rt:
        project = _Project(root, rt)
        project.write("later.sh", DELETES)
        assert project.action("bash later.sh") == "deny"
        code, out, _ = run("trust", "later.sh", "--json", "--root", str(root))
        assert code == 1 and [Path(e["file"]).name for e in json.loads(out)["held"]] == ["later.sh"]
        assert "+rm -rf build" in json.loads(out)["held"][0]["change"]
        code, out, _ = run("trust", "later.sh", "--yes", "--json", "--root", str(root))
        assert code == 0 and [Path(e["file"]).name for e in json.loads(out)["approved"]] == ["later.sh"]
        assert project.action("bash later.sh") == "allow"  # the person's now: a command under its own rules
        project.write("later.sh", DELETES + "echo again\n")  # changed by the model again: read again
        assert project.action("bash later.sh") == "deny"


def test_lines_that_run_no_script_ask_the_journal_nothing(project: _Project, monkeypatch: pytest.MonkeyPatch) -> None:
    looked: list[Path] = []
    original = Journal.hold

    def hold(self: Journal, path: Path, root: Path, *, data: bytes | None = None) -> Any:
        looked.append(path)
        return original(self, path, root, data=data)

    monkeypatch.setattr(Journal, "hold", hold)
    for line in ("ls -la && git status", "cat a.txt | grep x > out.txt", "echo $HOME", "bash -c 'echo hi'", "make -j4"):
        project.requests(line)
    assert looked == []
    project.requests("bash ok.sh; ./ok.sh && source ok.sh")
    assert [path.name for path in looked] == ["ok.sh"], "one look-up per file and line"


@pytest.mark.parametrize("line", ["./a\x00b", "bash 'x\x00'", "python3 $'\\x01'\ud800", "source \udcff/x"])
def test_a_name_the_os_cannot_take_fails_closed_without_raising(project: _Project, line: str) -> None:
    assert project.action(line) == "ask"


def test_checked_patterns_do_not_depend_on_the_files_present(project: _Project) -> None:
    """`toolrt check bash 'bash s.sh'` and `tests:` judge the pattern as written."""
    assert project.rt.check("bash", "bash s.sh").action == "allow"
