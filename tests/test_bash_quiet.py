"""Quiet on everyday work (issue 26): lines that read, list or build inside the project ask nothing
beyond their own `bash` rule, while the same shapes that reach outside or write protected files still ask.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from toolrt.api import Runtime
from toolrt.permissions.model import CallSite, PermissionRequest
from toolrt.shell import analyze_call, analyze_command


def _extra(requests: tuple[PermissionRequest, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """What a line asks besides its plain `bash` patterns: derived requests and unseen parts."""
    return [(r.permission, r.patterns) for r in requests if r.permission != "bash" or r.opaque]


@pytest.fixture
def project(site: CallSite) -> CallSite:
    for directory in ("src", "build", "scripts"):
        (site.root / directory).mkdir()
    (site.root / "src" / "app.py").write_text("print(1)\n", encoding="utf-8")
    return site


@pytest.mark.parametrize(
    "command",
    [
        # short-option clusters name no path (issue 26, item 6)
        "ls -la",
        "git commit -am wip",
        "make -j4",
        "tail -n100 src/app.py",
        "tar -tvf a.tar",
        # archives listed, tested or printed write nothing (item 9)
        "unzip -l a.zip",
        "unzip -t a.zip",
        "unzip -c a.zip",
        "unzip -p a.zip src/app.py",
        "zipinfo a.zip",
        "git am --abort",
        # number ranges expand as comma lists do (item 9)
        "touch build/file{1..10}",
        "touch build/{a,b}.txt",
        # cd chains end where every checked cd leaves them (item 7)
        "cd src && python3 -m pytest -q && cd ..",
        # operands that are text, patterns, scripts or delimiters (item 6)
        "echo $HOME",
        "echo /etc/passwd",
        "printf '%s\\n' /",
        'cut -d "/" -f 2 src/app.py',
        "cut -d/ -f2 src/app.py",
        "sed -i '/^[[:space:]]*$/d' src/app.py",
        "awk '/foo/ {print $2}' src/app.py",
        "awk '$3 >= 50 && $1 <= 2' src/app.py",
        "awk -F/ '{print $1}' src/app.py",
        "git blame -L '/hello/',+10 src/app.py",
        "grep -rn /api/v1 src",
        "rg -g '*.py' /health src",
        "tr / _ < src/app.py",
    ],
)
def test_everyday_lines_ask_nothing_beyond_their_bash_rule(project: CallSite, command: str) -> None:
    assert [(p, pats) for p, pats in _extra(analyze_command(command, project)) if p != "read"] == []
    reads = [pats for p, pats in _extra(analyze_command(command, project)) if p == "read"]
    root = str(project.root)
    assert all(path.startswith(root + "/") for patterns in reads for path in patterns), reads


@pytest.mark.parametrize(
    ("command", "permission"),
    [
        ("gcc -I../include x.c", "external_directory"),  # an attached value that is a path still counts
        ("cat -n../secret", "external_directory"),
        ("touch ../x{1..3}", "external_directory"),
        ("grep -e /x ../secret", "external_directory"),  # with -e, every operand is a file
        ("sed -e /x/d ../secret", "external_directory"),
        ("cut -d/ -f2 ../secret", "external_directory"),
        ("echo hi > ../out", "external_directory"),  # a redirect is a path whatever the program
    ],
)
def test_the_same_shapes_reaching_out_still_ask(project: CallSite, command: str, permission: str) -> None:
    requests = analyze_command(command, project)
    assert any(r.permission == permission for r in requests), requests


@pytest.mark.parametrize(
    "command",
    ["ls -la", "ls -lah src", "ls -lI a src", "tail -n100 src/app.py", "grep -rn TODO src", "wc -l src/app.py"],
)
def test_a_cluster_of_flags_names_no_path(project: CallSite, command: str) -> None:
    """`ls -la` names no `a` (issue 26, item 6): even where `a`, `h` and `100` are symlinks out of the
    project, a cluster of the program's own flags (or an option and its count) asks nothing and names
    nothing for the `read` rules."""
    (project.root.parent / "outside").mkdir()
    for name in ("a", "ah", "h", "n", "rn", "100", "l", "I"):
        (project.root / name).symlink_to("../outside")
    requests = analyze_command(command, project)
    assert _extra(requests) == []
    named = {path.rpartition("/")[2] for request in analyze_call_reads(command, project) for path in request}
    assert named.isdisjoint({"a", "ah", "h", "n", "rn", "100", "l", "I"}), named


@pytest.mark.parametrize(
    "command", ["ls -lz", "cat -n../outside", "tail -f -- -n", "cat -- -n", "rm -rf -- -n", "ls -- -n*"]
)
def test_a_cluster_with_a_letter_the_table_does_not_know_still_names_a_path(project: CallSite, command: str) -> None:
    """And after `--` every word is an operand: `cat -- -n` reads the file `-n` (here a symlink out)."""
    (project.root.parent / "outside").mkdir()
    (project.root / "z").symlink_to("../outside")
    (project.root / "-n").symlink_to("../outside")
    requests = analyze_command(command, project)
    assert any(r.permission == "external_directory" for r in requests), requests


def analyze_call_reads(command: str, site: CallSite) -> list[tuple[str, ...]]:
    """The paths the bash tool asks `read` for, running `command` in `site`."""
    return [r.patterns for r in analyze_call({"command": command}, site) if r.permission == "read"]


# -- inline Python, read with Python's own ast (issue 26, item 5) ------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "import sys; print(sys.version)",
        "2 + 3",
        'import json; print(json.dumps({"a": [i * i for i in range(3)]}))',
        "import math as m; print(m.pi, max([1, 2]), sorted({3, 1}))",
        "from math import sqrt; print(f'{sqrt(2):.3f}')",
        "total = 0\nfor n in range(10):\n    total += n\nprint(total)",
    ],
)
def test_inert_inline_python_is_a_plain_command(project: CallSite, code: str) -> None:
    assert _extra(analyze_command(f"python3 -c {shlex.quote(code)}", project)) == []


@pytest.mark.parametrize(
    "code",
    [
        'import os; os.system("rm -rf x")',
        'print(open("/etc/passwd").read())',
        'sorted(["1"], key=eval)',  # a builtin outside the list, even as a value
        '__import__("os")',
        "import sys; sys.exit(3)",
        "import sys; print(sys.modules)",
        "import json; json.__loader__",
        "(lambda: 1)()",
        "import re; print(re.escape('a'))",  # re.py in the working directory shadows the module
        "print(1",  # a syntax error
        # found attacking the checker: rebound aliases reach other modules, builtins passed by value
        'import json, math as b, math as e; b = json.codecs; e = b.builtins; e.exec("1")',
        'import math as c; from json import codecs as c; print(*c.open("../outside/secret"))',
        '[0 for exec in ""]; max(["1"] * 2, key=exec)',
        'if 0: exec = 1\nmax(["1"], key=exec)',
        "import json; print(json.codecs)",
    ],
)
def test_any_other_inline_python_stays_opaque(project: CallSite, code: str) -> None:
    (project.root / "re.py").write_text("import os\n", encoding="utf-8")
    assert any(request.opaque for request in analyze_command(f"python3 -c {shlex.quote(code)}", project))


def test_inert_python_fed_by_a_quoted_here_document_is_a_plain_command(project: CallSite) -> None:
    assert _extra(analyze_command("python3 - <<'EOF'\nprint(sum(range(4)))\nEOF", project)) == []


@pytest.mark.parametrize(
    "command",
    [
        "python3 - <<'EOF'\nimport os\nos.system('rm -rf x')\nEOF",
        "python3 <<EOF\nprint(1 + $X)\nEOF",  # unquoted: the body is expanded before Python reads it
        "python3 - <<< 'print(1)'",
        "python3 script.py <<'EOF'\nprint(1)\nEOF",  # the here-document is the script's input, not code
    ],
)
def test_other_python_fed_by_input_stays_opaque(project: CallSite, command: str) -> None:
    (project.root / "script.py").write_text("import os\n", encoding="utf-8")
    requests = analyze_command(command, project)
    assert any(request.opaque for request in requests) or any(
        request.permission == "bash" and "script.py" in " ".join(request.patterns) for request in requests
    )


# -- derived requests follow their own rules (issue 26, item 8) --------------------------------------


@pytest.mark.parametrize(
    ("rules", "command", "expected", "reading"),
    [
        ('bash: {"*": allow}', "cat src/app.py", "allow", "allow"),  # no read rule: the bash rule decides
        ('bash: {"*": allow}\nread: {"*.py": ask}', "cat src/app.py", "ask", "ask"),  # a read rule decides
        ('bash: {"*": allow}\nread: {"*.py": deny}', "cat src/app.py", "deny", "deny"),
        ('bash: {"*": allow}', "cat ../outside.txt", "ask", "ask"),  # external_directory keeps asking
        ('bash: {"*": ask}', "cat src/app.py", "ask", "allow"),
    ],
)
def test_inherit_false_with_bash_rules_only_decides_cat_by_the_bash_rule(
    tmp_path: Path, rules: str, command: str, expected: str, reading: str
) -> None:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print(1)\n", encoding="utf-8")
    (root / "permissions.yaml").write_text(f"inherit: false\npermission:\n  {rules.replace(chr(10), chr(10) + '  ')}\n")
    rt = Runtime.load(root)
    decision, _ = rt.check_call("bash", {"command": command, "description": "read"})
    assert decision.action == expected
    read_tool, _ = rt.check_call("read", {"filePath": command.split()[-1]})
    assert read_tool.action == reading  # the read tool and bash agree on reading


@pytest.mark.parametrize("shadow", ["json.py", "enum.py", "functools.py", "json.pyc", "json", "operator.py"])
def test_inline_python_is_opaque_where_a_standard_module_can_be_shadowed(project: CallSite, shadow: str) -> None:
    """`python -c` puts the working directory first on `sys.path`, and `re` imports `enum`: a file that can
    stand in for any standard module makes the code opaque, import statement or not."""
    target = project.root / shadow
    if "." in shadow:
        target.write_text("import os\n", encoding="utf-8")
    else:
        target.mkdir()
    assert any(r.opaque for r in analyze_command("python3 -c 'import re; print(re.escape(\"a\"))'", project))
    # code imports without an `import` statement too: the idna codec imports `stringprep`
    assert any(r.opaque for r in analyze_command("""python3 -c 'print(str(b"x", "idna"))'""", project))


def test_inline_python_after_a_command_that_may_write_a_module_is_opaque(project: CallSite) -> None:
    line = "printf 'import os' > json.py; python3 -c 'import json; print(json.dumps(1))'"
    assert any(r.opaque for r in analyze_command(line, project))
    assert any(r.opaque for r in analyze_command("make && python3 -c 'import json'", project))


@pytest.mark.parametrize(
    ("command", "reaches_out"),
    [
        # `-i` is both a flag and an option whose value is the rest of its cluster: the rest (`.bak`) is
        # its value, so the script that follows is still the script (a pattern, not a path)
        ("sed -ni.bak /../../outside/d src/app.py", False),
        ("sed -nz /../../outside/d src/app.py", False),  # flags only: the script follows
        ("sed -nq /../../outside/d src/app.py", True),  # `q` is no option sed's row knows: maybe a value
        ("cut -d/ -f2 ../outside", True),  # `-d` takes the rest of its cluster; the operand is a file
    ],
)
def test_a_cluster_is_read_letter_by_letter_by_the_programs_table(
    project: CallSite, command: str, reaches_out: bool
) -> None:
    """Each short option's role in a cluster (ends it, takes a value, a flag, unknown) is compiled once per
    program, with the table's precedence: a letter that both ends a cluster and is a flag ends it."""
    requests = analyze_command(command, project)
    assert any(r.permission == "external_directory" for r in requests) is reaches_out, requests
