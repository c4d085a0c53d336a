"""Attacks on toolrt's own config and other files that change how programs behave: `protected` paths.

A project that allows everything (even `protected: allow`) still asks before any route writes a
protected file; the locked file can make that a deny; a person's approval lets the write through.
Real files, real symlinks, real bash.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from toolrt import Runtime
from toolrt.permissions.ask import AskRequest, Reply

ALLOW_ALL = """\
permission:
  "*": allow
  bash: {"*": allow}
  edit: allow
  external_directory: allow
  protected: allow          # a project cannot lift the built-in ask
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "hello.yaml").write_text(
        "id: hello\ndescription: Says hello.\nparameters: {type: object}\nhandler: {argv: [echo, hello]}\n",
        encoding="utf-8",
    )
    (root / "permissions.yaml").write_text(ALLOW_ALL, encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: true\n", encoding="utf-8")
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "notes.txt").write_text("hello\n", encoding="utf-8")
    return root


def _call(
    root: Path, tool: str, args: dict[str, Any], *, reply: str | None = None, model: str | None = None
) -> tuple[Any, list[AskRequest]]:
    asked: list[AskRequest] = []

    async def asker(request: AskRequest) -> Reply:
        asked.append(request)
        assert reply is not None
        return Reply(reply)  # type: ignore[arg-type]

    async def main() -> Any:
        rt = Runtime.load(root)
        with anyio.fail_after(20):
            return await rt.call(tool, args, ask=asker if reply else None, model=model)

    return anyio.run(main), asked


def _blocked(result: Any, path: str) -> None:
    assert result.error is not None, result.output
    assert "protected" in result.error and path in result.error, result.error


@pytest.mark.parametrize(
    ("command", "path"),
    [
        ("echo 'x: 1' > permissions.yaml", "permissions.yaml"),
        ("printf 'id: x\\n' >> tools.d/evil.yaml", "tools.d/evil.yaml"),
        ("cp notes.txt tools.d/", "tools.d"),
        ("tee -a .envrc < notes.txt", ".envrc"),
        ("sed -i s/a/b/ toolrt.yaml", "toolrt.yaml"),
        ("sed --in s/a/b/ toolrt.yaml", "toolrt.yaml"),  # `--in-place`, abbreviated as getopt_long takes it
        ("chmod --reference=notes.txt toolrt.yaml", "toolrt.yaml"),  # no mode operand: every one is a file
        ("chgrp --ref notes.txt .git/hooks", ".git/hooks"),
        ("ln -sf /bin/true .git/hooks/pre-commit", ".git/hooks/pre-commit"),
        ("dd if=notes.txt of=.bashrc", ".bashrc"),
        ("git config core.hooksPath /tmp/hooks", ".git/config"),
        ("mv notes.txt .vscode/tasks.json", ".vscode/tasks.json"),
        ("install -m 755 notes.txt .git/hooks/post-checkout", ".git/hooks/post-checkout"),
        ("bash -c 'echo x >> .env'", ".env"),
    ],
)
def test_bash_writes_to_protected_paths_ask(project: Path, command: str, path: str) -> None:
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    result, _ = _call(project, "bash", {"command": command, "description": "attack"})
    _blocked(result, path)
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before


@pytest.fixture
def staged(project: Path) -> Path:
    """A project without `.envrc`, and everything a line needs to create one without naming it in a
    redirect: a staging directory holding it, an archive and a patch that create it."""
    import tarfile

    stage = project / "stage"
    stage.mkdir()
    (stage / ".envrc").write_text("export EVIL=1\n", encoding="utf-8")
    with tarfile.open(project / "e.tar", "w") as archive:
        archive.add(stage / ".envrc", arcname=".envrc")
    (project / "p.diff").write_text("--- /dev/null\n+++ b/.envrc\n@@ -0,0 +1 @@\n+export EVIL=1\n", encoding="utf-8")
    return project


@pytest.mark.parametrize(
    ("command", "path"),
    [
        ("tar -xf e.tar", "*"),
        ("tar xf e.tar", "*"),
        ("git apply p.diff", "*"),
        ("patch -p1 < p.diff", "*"),
        ("cp stage/.envrc .", ".envrc"),
        ("cp -r stage/. .", ".envrc"),
        ("cp -t . stage/.envrc", ".envrc"),
        ("ln -s stage/.envrc", ".envrc"),
        ("sort -o .envrc stage/.envrc", ".envrc"),
        ("uniq stage/.envrc .envrc", ".envrc"),
        ("find stage -name .envrc -fprint .envrc", ".envrc"),
        ("curl -so .envrc file://$PWD/stage/.envrc", ".envrc"),
    ],
)
def test_routes_that_create_a_protected_file_without_naming_it_in_a_redirect_ask(
    staged: Path, command: str, path: str
) -> None:
    result, _ = _call(staged, "bash", {"command": command, "description": "attack"})
    _blocked(result, path)
    assert not (staged / ".envrc").exists()


# Routes the writes table missed (issue 25's attack, issue 26 item 10): each asks `protected`, and the
# same line approved by the person really makes the protected file (real bash: the route is real).
MISSED_ROUTES = [
    ("install -d .vscode", ".vscode", ".vscode"),
    ("link stage/.envrc .envrc", ".envrc", ".envrc"),
    ("shuf -o .envrc stage/.envrc", ".envrc", ".envrc"),
    ("iconv -f utf-8 -t utf-8 -o .envrc stage/.envrc", ".envrc", ".envrc"),
    ("printf 'a\\nb\\nc\\n' | split -a 1 -l 1 - .envr", "*", ".envrc"),  # a prefix and a suffix
    ("printf 'a\\nb\\n' > lines; csplit -s -f .envr -b 'c%.0d' lines 2", "*", ".envrc"),
    # getopt_long takes any unambiguous prefix of a long option; the table matched only the full names.
    ("sort --out=.envrc stage/.envrc", ".envrc", ".envrc"),
    ("shuf --out .envrc stage/.envrc", ".envrc", ".envrc"),
    ("cp --target=. stage/.envrc", ".envrc", ".envrc"),
    ("cp stage/.envrc .envrc --suf .bak", ".envrc", ".envrc"),  # `.bak` was read as the destination
    ("uniq stage/.envrc .envrc --skip-f 0", ".envrc", ".envrc"),
    ("install --dir .vscode", ".vscode", ".vscode"),
    ("curl -s --head -o .envrc file://$PWD/stage/.envrc", ".envrc", ".envrc"),  # `--head`, not `--header`
    ("gzip -c stage/.envrc > e.gz; mv e.gz .envrc.gz; gunzip .envrc.gz", ".envrc", ".envrc"),  # FILE.gz → FILE
    ("xz -c stage/.envrc > .envrc.xz; xz -d .envrc.xz", ".envrc", ".envrc"),
    ("gpg --homedir stage --batch --out .envrc --enarmor stage/.envrc", ".envrc", ".envrc"),  # `--output`
    ("printf 'a\\nexport EVIL=1\\n.\\nw\\n' | ed -s .envrc", ".envrc", ".envrc"),  # ed writes what its input says
]


@pytest.mark.parametrize(("command", "asked", "made"), MISSED_ROUTES, ids=[route[0] for route in MISSED_ROUTES])
def test_write_routes_the_table_missed_ask_and_really_write_once_approved(
    staged: Path, command: str, asked: str, made: str
) -> None:
    before = {p: p.read_bytes() for p in staged.rglob("*") if p.is_file()}
    result, _ = _call(staged, "bash", {"command": command, "description": "attack"})
    _blocked(result, asked)
    assert {p: p.read_bytes() for p in staged.rglob("*") if p.is_file()} == before
    result, questions = _call(staged, "bash", {"command": command, "description": "attack"}, reply="once")
    assert result.error is None, result.error
    assert any(verdict.permission == "protected" for question in questions for verdict in question.pending)
    target = staged / made
    assert target.exists() and (target.is_dir() or before.get(target) != target.read_bytes())


@pytest.mark.parametrize(
    ("command", "patterns"),
    [
        ("git clone . tools.d", ("tools.d/*",)),
        ("git clone --config core.sshCommand=x https://example.invalid/r.git", ("r/*",)),
        ("git init tools.d", ("tools.d",)),
        ("git init --template=stage", (".git",)),
        ("git worktree add tools.d", ("tools.d/*", ".git/worktrees/*")),
        ("git checkout-index --prefix=tools.d/ -a", ("tools.d/*",)),
        ("git diff --output=.envrc", (".envrc",)),
        ("git format-patch -o tools.d HEAD~1", ("tools.d/*",)),
        ("git remote add evil https://example.invalid", (".git/config",)),
        ("git remote set-url origin https://example.invalid", (".git/config",)),
        ("git submodule add https://example.invalid/m.git", (".gitmodules", ".git/config", "m/*")),
        ("find . -print0 | cpio -p0 tools.d", ("tools.d/*",)),
        ("cc -o tools.d/p.yaml p.c", ("tools.d/p.yaml",)),
        ("make install --prefix=tools.d", ("tools.d/*",)),
        ("sed -i s/allow/ALLOW/ *.yaml", ("permissions.yaml", "toolrt.yaml")),  # what the glob matches
        ("echo x > permissions.ya?l", ("permissions.yaml",)),  # a redirect target is globbed too
        ("echo x > ~+/permissions.yaml", ("permissions.yaml",)),  # `~+` is the working directory
        ("find . -name '*.yaml' -delete", ("*",)),
        # git rewrites or deletes worktree files by pathspec: a commit before the path, a directory, `.`
        ("git checkout HEAD~1 permissions.yaml", ("permissions.yaml",)),
        ("git checkout -- .", ("*",)),
        ("git restore tools.d", ("tools.d", "tools.d/*")),
        ("git restore ':(glob)*.yaml'", ("*",)),
        ("git rm permissions.yaml", ("permissions.yaml",)),
        ("git clean -fdx", ("*",)),
        ("rsync -a --delete notes.txt tools.d", ("tools.d", "tools.d/*", "tools.d/notes.txt")),
        ("rsync -a --remove-source-files permissions.yaml notes.txt", ("*",)),
        ("mkfifo .envrc", (".envrc",)),
        ("mknod .envrc p", (".envrc",)),
    ],
)
def test_git_and_other_routes_into_protected_paths_ask_protected(
    project: Path, command: str, patterns: tuple[str, ...]
) -> None:
    rt = Runtime.load(project)
    decision, requests = rt.check_call("bash", {"command": command, "description": "attack"})
    assert decision.action == "ask"
    protected = [request for request in requests if request.permission == "protected"]
    assert sorted(pattern for request in protected for pattern in request.patterns) == sorted(patterns)


RUN_TIME_WRITE = "a file this command writes is only known when it runs"


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("find . -type f -exec sed -i s/allow/ALLOW/ {} \\;", "a file this command writes is only known when it runs"),
        (
            "find . -name '*.yaml' | xargs sed -i s/allow/ALLOW/",
            "a file this command writes is only known when it runs",
        ),
        ("split --filter='rm -rf build' notes.txt", "split"),
    ],
)
def test_writes_to_files_found_at_run_time_fail_closed(project: Path, command: str, reason: str) -> None:
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    result, _ = _call(project, "bash", {"command": command, "description": "attack"})
    assert result.error is not None and reason in result.error, result.error
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    "command",
    [
        "git diff --stat",
        "git remote -v",
        "git log --oneline -5",
        "sed -i s/a/b/ notes.txt",
        "install -d build",
        "git checkout main",
        "git restore notes.txt",
        "git restore --staged .",
        "git rm --cached permissions.yaml",
        "git clean -n",
        "rsync -a notes.txt build/",
        "mkfifo pipe",
    ],
)
def test_everyday_lines_near_those_routes_ask_nothing_protected(project: Path, command: str) -> None:
    rt = Runtime.load(project)
    _, requests = rt.check_call("bash", {"command": command, "description": "work"})
    assert [request for request in requests if request.permission == "protected"] == []


def test_an_approved_extraction_runs(staged: Path) -> None:
    result, asked = _call(staged, "bash", {"command": "tar -xf e.tar", "description": "unpack"}, reply="once")
    assert result.error is None, result.error
    protected = [r for request in asked for r in request.requests if r.permission == "protected"]
    assert [(r.patterns, r.always) for r in protected] == [(("*",), ())]  # "always" keeps nothing
    assert (staged / ".envrc").exists()


@pytest.mark.parametrize(
    "command",
    ["git init -q . && git add notes.txt", "cp notes.txt copy.txt", "echo hi > out.txt", "sed -n p toolrt.yaml"],
)
def test_ordinary_commands_and_writes_programs_make_on_their_own_do_not_ask(project: Path, command: str) -> None:
    result, _ = _call(project, "bash", {"command": command, "description": "work"})
    assert result.error is None, result.error


def test_write_edit_and_a_symlink_to_the_config_ask(project: Path) -> None:
    _blocked(_call(project, "write", {"filePath": "tools.d/x.yaml", "content": "id: x\n"})[0], "tools.d/x.yaml")
    (project / "innocent.yaml").symlink_to("permissions.yaml")
    _blocked(_call(project, "write", {"filePath": "innocent.yaml", "content": "{}\n"})[0], "permissions.yaml")
    assert (project / "permissions.yaml").read_text(encoding="utf-8") == ALLOW_ALL


def test_apply_patch_adds_and_moves_into_protected_paths_ask(project: Path) -> None:
    patch = "*** Begin Patch\n*** Add File: tools.d/evil.yaml\n+id: evil\n*** End Patch"
    _blocked(_call(project, "apply_patch", {"patchText": patch}, model="gpt-5")[0], "tools.d/evil.yaml")
    move = textwrap.dedent(
        """\
        *** Begin Patch
        *** Update File: notes.txt
        *** Move to: .git/hooks/pre-commit
        @@
        -hello
        +#!/bin/sh
        *** End Patch"""
    )
    _blocked(_call(project, "apply_patch", {"patchText": move}, model="gpt-5")[0], ".git/hooks/pre-commit")
    assert not (project / "tools.d" / "evil.yaml").exists() and not (project / ".git/hooks/pre-commit").exists()


def test_an_approval_lets_the_write_through(project: Path) -> None:
    result, asked = _call(project, "write", {"filePath": ".envrc", "content": "export A=1\n"}, reply="once")
    assert result.error is None, result.error
    assert [d.permission for d in asked[0].pending] == ["protected"]
    assert (project / ".envrc").read_text(encoding="utf-8") == "export A=1\n"


def test_the_locked_file_makes_it_a_deny(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked.yaml"
    locked.write_text("protected: [secrets]\npermission:\n  protected: deny\n", encoding="utf-8")
    monkeypatch.setenv("TOOLRT_LOCKED_PERMISSIONS", str(locked))
    result, asked = _call(project, "write", {"filePath": "secrets/k.txt", "content": "x"}, reply="once")
    assert result.error is not None and "prevents you" in result.error and asked == []
    # The locked file itself is protected by identity, wherever it lives.
    result, _ = _call(project, "bash", {"command": f"echo 'permission: {{}}' > {locked}", "description": "x"})
    assert result.error is not None and "prevents you" in result.error
    assert "protected: deny" in locked.read_text(encoding="utf-8")


def test_handler_modules_and_what_they_import_are_protected(project: Path) -> None:
    (project / "mytools").mkdir()
    (project / "mytools" / "__init__.py").write_text("", encoding="utf-8")
    (project / "mytools" / "helpers.py").write_text("VALUE = 1\n", encoding="utf-8")
    (project / "mytools" / "run.py").write_text(
        "from .helpers import VALUE\n\ndef run(args, ctx):\n    return str(VALUE)\n", encoding="utf-8"
    )
    (project / "tools.d" / "mine.yaml").write_text(
        "id: mine\ndescription: Says a value.\nparameters: {type: object}\nhandler: {python: 'mytools.run:run'}\n",
        encoding="utf-8",
    )
    result, _ = _call(project, "bash", {"command": "echo 'VALUE = 2' > mytools/helpers.py", "description": "x"})
    _blocked(result, "mytools/helpers.py")
    _blocked(_call(project, "edit", {"filePath": "mytools/run.py", "oldString": "x", "newString": "y"})[0], "run.py")


def test_a_project_tools_declared_paths_ask(project: Path) -> None:
    (project / "tools.d" / "save.yaml").write_text(
        textwrap.dedent(
            """\
            id: save
            description: Saves text to a file.
            parameters:
              type: object
              properties: {target: {type: string}, text: {type: string}}
              required: [target, text]
            handler: {argv: [sh, -c, 'printf %s "$1" > "$2"', sh, "{{ text }}", "{{ target }}"]}
            permission: {paths: [target]}
            """
        ),
        encoding="utf-8",
    )
    _blocked(_call(project, "save", {"target": "toolrt.yaml", "text": "audit: false"})[0], "toolrt.yaml")
    assert "audit" not in (project / "toolrt.yaml").read_text(encoding="utf-8")


def _shown(request: AskRequest) -> str:
    from toolrt.faces.serve_ask import ask_text
    from toolrt.permissions.shown import ask_lines

    terminal = "\n".join(ask_lines(request, indent="  "))
    elicitation = ask_text(request)  # the same lines, without the terminal's indent
    assert [line.strip() for line in elicitation.split("\n")] == [line.strip() for line in terminal.split("\n")]
    return terminal


def test_the_protected_ask_shows_the_diff_with_control_characters_escaped(project: Path) -> None:
    (project / ".envrc").write_text("export A=1\n", encoding="utf-8")
    content = "export A=2\x1b[2K\rexport SAFE=1\n"
    _, asked = _call(project, "write", {"filePath": ".envrc", "content": content}, reply="reject")
    diff = asked[0].metadata["diff"]
    assert "-export A=1\n+export A=2\x1b[2K\r" in diff and "+export SAFE=1\n" in diff
    shown = _shown(asked[0])
    assert "\x1b" not in shown and "\r" not in shown
    assert "the change to the protected file:" in shown
    assert "    +export A=2\\x1b[2K\\r\n" in shown
    assert (project / ".envrc").read_text(encoding="utf-8") == "export A=1\n"


def test_edit_and_apply_patch_asks_show_the_change_they_would_make(project: Path) -> None:
    (project / ".envrc").write_text("export A=1\nexport B=1\n", encoding="utf-8")
    _, asked = _call(project, "edit", {"filePath": ".envrc", "oldString": "B=1", "newString": "B=2"}, reply="reject")
    assert "-export B=1\n+export B=2\n" in asked[0].metadata["diff"]
    assert "    -export B=1" in _shown(asked[0])
    move = (
        "*** Begin Patch\n*** Update File: notes.txt\n*** Move to: .git/hooks/pre-commit\n"
        "@@\n-hello\n+#!/bin/sh\n*** End Patch"
    )
    _, asked = _call(project, "apply_patch", {"patchText": move}, reply="reject", model="gpt-5")
    assert "-hello\n+#!/bin/sh\n" in asked[0].metadata["diff"]
    assert (project / "notes.txt").exists() and not (project / ".git/hooks/pre-commit").exists()


def test_the_diff_in_an_ask_is_bounded(project: Path) -> None:
    from toolrt.builtin.preview import MAX_SHOWN_DIFF

    content = "".join(f"line {n}\n" for n in range(20_000))
    _, asked = _call(project, "write", {"filePath": ".envrc", "content": content}, reply="reject")
    diff = asked[0].metadata["diff"]
    assert len(diff) <= MAX_SHOWN_DIFF + 80
    assert diff.endswith("more characters of the diff not shown)\n")


def test_a_project_tool_declares_the_preview_its_protected_ask_shows(project: Path) -> None:
    (project / "previews.py").write_text(
        "def show(args, cwd):\n    return f'+{args[\"path\"]} in {cwd.name}\\n'\n", encoding="utf-8"
    )
    (project / "tools.d" / "stamp.yaml").write_text(
        textwrap.dedent(
            """\
            id: stamp
            description: Stamps a file.
            parameters: {type: object, properties: {path: {type: string}}, required: [path]}
            handler: {argv: [touch, "{{ path }}"]}
            permission: {paths: [path], preview: "previews:show"}
            """
        ),
        encoding="utf-8",
    )
    _, asked = _call(project, "stamp", {"path": ".envrc"}, reply="reject")
    assert [verdict.permission for verdict in asked[0].pending] == ["protected"]
    assert asked[0].metadata["diff"] == "+.envrc in proj\n"
    assert not (project / ".envrc").exists()


def test_a_tool_without_a_preview_hook_asks_without_a_diff(project: Path) -> None:
    (project / "tools.d" / "stamp.yaml").write_text(
        "id: stamp\ndescription: Stamps a file.\n"
        "parameters: {type: object, properties: {path: {type: string}}, required: [path]}\n"
        'handler: {argv: [touch, "{{ path }}"]}\npermission: {paths: [path]}\n',
        encoding="utf-8",
    )
    _, asked = _call(project, "stamp", {"path": ".envrc"}, reply="reject")
    assert [verdict.permission for verdict in asked[0].pending] == ["protected"]
    assert "diff" not in asked[0].metadata


def test_a_path_under_the_previous_directory_fails_closed(project: Path) -> None:
    rt = Runtime.load(project)
    decision, requests = rt.check_call(
        "bash", {"command": "cd .git && echo x > ~-/permissions.yaml", "description": "x"}
    )
    assert decision.action == "ask"
    assert any("previous directory" in (request.reason or "") for request in requests)
