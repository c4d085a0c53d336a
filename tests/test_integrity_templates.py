"""Shell templates under attack, with real shells: a model's value never runs as code.

Values travel as `TOOLRT_ARG_*` environment variables and the script only expands them, so each
attack value below runs through every accepted position (a word, part of a word, inside double
quotes, a redirect target, an assignment, a `for` list, a `$( )`) under bash and POSIX sh, and must
come out as the same bytes with no `pwned` file anywhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from toolrt.api import Runtime
from toolrt.errors import ConfigError

Writer = Callable[..., Path]

ATTACKS = [
    "$(touch pwned)",
    "; touch pwned",
    "`touch pwned`",
    "$'\\x3b' touch pwned",
    "a\ntouch pwned",
    "*",
    "-rf",
    '"; touch pwned; "',
    "${IFS}touch${IFS}pwned",
    "\\",
]

POSITIONS = {
    "word": "printf '[%s]' {{ v }}",
    "part": "printf '[%s]' --v={{ v }}",
    "quoted": "printf '[%s]' \"v={{ v }}!\"",
    "redirect": "printf '[%s]' {{ v }} > out.txt; cat out.txt; rm out.txt",
    "assignment": "x={{ v }}; printf '[%s]' \"$x\"",
    "for": "for a in {{ v }}; do printf '[%s]' \"$a\"; done",
    "substitution": "printf '[%s]' \"$(printf %s {{ v }})\"",
    "jinja": "{% if v %}printf '[%s]' {{ v }}{% endif %}",
}
EXPECTED = {"part": "--v={}", "quoted": "v={}!"}


def _tool(script: str, shell_path: str) -> str:
    return yaml.safe_dump(
        {
            "id": "t",
            "description": "Print the value.",
            "parameters": {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]},
            "handler": {"shell": script, "shell_path": shell_path, "cwd": "work"},
            "truncate": False,
        }
    )


@pytest.mark.parametrize("shell_path", ["/bin/bash", "/bin/sh"])
@pytest.mark.parametrize("position", sorted(POSITIONS))
def test_attack_values_stay_one_literal_word_in_every_accepted_position(
    make_project: Writer, position: str, shell_path: str
) -> None:
    root = make_project({"t": _tool(POSITIONS[position], shell_path)})
    (root / "work").mkdir()
    rt = Runtime.load(root)
    for value in ATTACKS:
        if position == "redirect" and value in ("*", "a\ntouch pwned"):
            continue  # a file name: one of these only names a file the script then removes
        result = rt.call_sync("t", {"v": value})
        assert result.error is None, result.error
        shown = EXPECTED.get(position, "{}").format(value)
        assert result.output == f"[{shown}]", (value, result.output)
        assert list((root / "work").iterdir()) == [], value
        assert not (root / "pwned").exists()


def test_a_value_that_is_a_file_name_is_written_as_named(make_project: Writer) -> None:
    root = make_project({"t": _tool("printf x > {{ v }}", "/bin/bash")})
    (root / "work").mkdir()
    rt = Runtime.load(root)
    for value in ("*", "a b; touch pwned", "$(touch pwned)"):
        assert rt.call_sync("t", {"v": value}).error is None
    assert sorted(p.name for p in (root / "work").iterdir()) == ["$(touch pwned)", "*", "a b; touch pwned"]


def test_the_script_holds_no_value_and_inherited_toolrt_arg_variables_are_cleared(
    make_project: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLRT_ARG_OTHER", "inherited")
    monkeypatch.setenv("TOOLRT_ARG_V", "inherited")
    tool = yaml.safe_load(_tool('printf "%s|%s|%s" "$0" "${TOOLRT_ARG_OTHER-unset}" {{ v }}', "/bin/bash"))
    tool["handler"]["env"] = {"allow": ["TOOLRT_*", "PATH"], "set": {"TOOLRT_ARG_SET": "x"}}
    root = make_project({"t": yaml.safe_dump(tool)})
    (root / "work").mkdir()
    result = Runtime.load(root).call_sync("t", {"v": "$(touch pwned)"})
    assert result.output == "/bin/bash|unset|$(touch pwned)"
    assert result.title == '/bin/bash -c printf "%s|%s|%s" "$0" "${TOOLRT_ARG_OTHER-unset}" \'$(touch pwned)\''[:80]


def test_a_nul_byte_in_a_value_is_a_clean_error(make_project: Writer) -> None:
    root = make_project({"t": _tool("printf %s {{ v }}", "/bin/sh")})
    (root / "work").mkdir()
    result = Runtime.load(root).call_sync("t", {"v": "a\0b"})
    assert result.error is not None
    assert "The value in TOOLRT_ARG_V contains a NUL byte" in result.error


@pytest.mark.parametrize("shell_path", ["/usr/bin/fish", "/bin/csh", "python3"])
def test_a_non_posix_shell_path_may_not_hold_placeholders(make_project: Writer, shell_path: str) -> None:
    with pytest.raises(ConfigError, match=rf"shell_path '{shell_path}' is not a POSIX shell .* use an argv: handler"):
        Runtime.load(make_project({"t": _tool("echo {{ v }}", shell_path)}))
    Runtime.load(make_project({"t": _tool("echo fixed", shell_path)}))  # no value: nothing to carry


@pytest.mark.parametrize("shell_path", ["/bin/dash", "/usr/bin/zsh", "/bin/ksh93", "bash5.2"])
def test_posix_family_shells_are_accepted(make_project: Writer, shell_path: str) -> None:
    Runtime.load(make_project({"t": _tool('echo "{{ v }}"', shell_path)}))


def test_a_jinja_template_is_placed_again_on_the_rendered_text(make_project: Writer) -> None:
    # `{% if %}` can open a quote the load-time check cannot see on both branches at once.
    # Here the load-time probe reads `echo '\'{{ v }}'\'`; `q` renders `echo '{{ v }}'`.
    script = "echo {% if v == 'q' %}'{% else %}\\'{% endif %}{{ v }}{% if v == 'q' %}'{% else %}\\'{% endif %}"
    root = make_project({"t": _tool(script, "/bin/bash")})
    (root / "work").mkdir()
    rt = Runtime.load(root)
    assert rt.call_sync("t", {"v": "x"}).output == "'x'\n"
    result = rt.call_sync("t", {"v": "q"})
    assert result.error is not None
    assert "shell template cannot run with these values: {{ }} inside single quotes (rendered line 1)" in result.error


def test_the_deny_analysis_reads_values_as_literals(make_project: Writer) -> None:
    tools = {"t": _tool('echo "{{ v }}" && {{ v }}x', "/bin/bash").replace("{{ v }}x", "echo done")}
    root = make_project(tools, permissions="permission:\n  bash:\n    'rm *': deny\n")
    (root / "work").mkdir()
    rt = Runtime.load(root)
    result = rt.call_sync("t", {"v": "$(rm -rf x)"})
    assert result.error is None and result.output == "$(rm -rf x)\ndone\n"


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ('sudo bash -c "{{ v }}"', r"reads as code \(template line 1\): `bash` runs it"),
        ("env FOO=1 sh -c {{ v }}", r"reads as code \(template line 1\): `sh` runs it"),
        ("timeout 5 bash -c {{ v }}", r"reads as code .*`bash` runs it"),
        ("nice xargs sh -c {{ v }}", r"reads as code .*`sh` runs it"),
        ('sudo -u root bash -c "echo $(printf %s {{ v }})"', r"reads as code .*`bash` runs it"),
        ("env -S {{ v }}", r"reads as code .*`env` runs it"),
        ("flock /tmp/l -c {{ v }}", r"reads as code .*`flock` runs it"),
        ("trap {{ v }} EXIT", r"reads as code .*`trap` runs it"),
        ("sudo {{ v }}", r"as the program a wrapped command runs"),
        ("find . -exec {{ v }} \\;", r"as the program a wrapped command runs"),
        ("bash {{ v }}", r"as the script bash runs"),
        ("source {{ v }}", r"as the script source runs"),
        ("su {{ v }} -c ls", r"where su reads its options .*could be one that runs code"),
        ("python3 {{ v }}", r"where python3 reads its options"),
        ("perl -e 'print 1' {{ v }}", r"where perl reads its options"),
        ("awk {{ v }} file", r"where awk reads its options"),
        ("sed -n {{ v }} file", r"where sed reads its options"),
        ("rg -c {{ v }} .", r"where rg reads its options .*--pre"),
        ("python3 -c {{ v }}", r"reads as code .*`python3 -c` runs it"),
        ("git {{ v }} log", r"among git's global options"),
        ("git -c {{ v }} log", r"as the value of git -c .*can run commands"),
        ("echo {{ v }} | bash", r"piped into bash, which runs its input as code"),
        ("printf %s {{ v }} | sudo sh -s", r"piped into sh"),
        ("echo {{ v }} | python3", r"piped into python3"),
        ("echo {{ v }} | xargs sh -c", r"piped into xargs sh, which runs its input as code"),
        ("echo {{ v }} | xargs env", r"piped into xargs env"),
        ("echo {{ v }} | parallel", r"piped into parallel"),
        ("read {{ v }}", r"as a variable name read evaluates"),
        ("printf -v {{ v }} %s 1", r"as a variable name printf evaluates"),
        ("test -v {{ v }}", r"as a variable name test evaluates"),
        ("let {{ v }}", r"inside arithmetic \(let\)"),
        ("builtin declare {{ v }}", r"as a variable name declare evaluates"),
        ("hash -p {{ v }} ls", r"in an argument of hash"),
    ],
)
def test_placeholders_are_followed_through_wrappers_and_refused_where_they_become_code(
    make_project: Writer, script: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        Runtime.load(make_project({"t": _tool(script, "/bin/bash")}))
    assert [p.pointer for p in caught.value.problems] == ["/handler/shell"]


RUNS_AS_DATA = [
    # (script, value, expected output): the value reaches the program as one argument, never as code.
    ("bash -c 'printf %s \"$1\"' _ {{ v }}", "$(touch pwned); `touch pwned`", "$(touch pwned); `touch pwned`"),
    ("timeout 5 printf %s {{ v }}", "-c", "-c"),
    ("nice -n 1 env FOO=1 printf %s {{ v }}", "$(touch pwned)", "$(touch pwned)"),
    ("python3 -c 'import sys; print(sys.argv[1])' {{ v }}", "-cimport os; os.system('touch pwned')", None),
    ("echo {{ v }} | cat", "; touch pwned", "; touch pwned\n"),
    ("sed -e 's/^/>/' -- {{ v }} 2>&1 || true", "-es/x/y/e touch pwned", None),
    ("rm -f -- {{ v }}; ls", "-rf", "keep\n"),
    # the value of an option that takes one (rg's -e) is never read as an option, `--pre` included
    ("rg -c -F -e {{ v }} -- . || true", "--pre=rm", None),
]


@pytest.mark.parametrize(("script", "value", "expected"), RUNS_AS_DATA)
def test_accepted_wrapper_and_option_positions_keep_the_value_data(
    make_project: Writer, script: str, value: str, expected: str | None
) -> None:
    root = make_project({"t": _tool(script, "/bin/bash")})
    (root / "work").mkdir()
    (root / "work" / "keep").write_text("x", encoding="utf-8")
    (root / "work" / "-rf").write_text("x", encoding="utf-8")
    result = Runtime.load(root).call_sync("t", {"v": value})
    if expected is not None:
        assert result.output == expected
    elif "python3" in script:
        assert result.output == value + "\n"
    assert sorted(p.name for p in (root / "work").iterdir()) in (["-rf", "keep"], ["keep"])
    assert not (root / "pwned").exists() and not (root / "work" / "pwned").exists()


# (script, value): an option the table does not read as one word (`rg --context-separator`, `mawk -W`,
# the `-r` ending the cluster `-nr`) takes the next word as its value, so the option word after it that
# the table says takes a value (`-m`, `-e`, `-F`) is that value, and the marker after it is an option
# or the program: `--pre=rm` deletes every file rg searches, a mawk program runs `system`.
MISREAD_OPTION_VALUES = [
    ("rg --context-separator -m {{ v }} -e x . || true", "--pre=rm", "where rg reads its options .*put -- before it"),
    ("rg -nr -e {{ v }} -e x . || true", "--pre=rm", "where rg reads its options .*put -- before it"),
    ("rg --context-separator -- {{ v }} -e x . || true", "--pre=rm", "where rg reads its options .*put -- before it"),
    ("mawk -W -- {{ v }} keep", 'BEGIN { system("touch pwned") }', "where mawk reads its options .*put -- before it"),
    ("python3 -W -- {{ v }}", "-cimport os; os.system('touch pwned')", "where python3 reads its options"),
    ("mawk -W -F {{ v }} keep", 'BEGIN { system("touch pwned") }', "where mawk reads its options .*put -- before it"),
    # GNU getopt and rg read options after operands too, up to `--`: the first operand ends nothing
    ("rg -e x . {{ v }} || true", "--pre=rm", "where rg reads its options .*put -- before it"),
    ("rg x keep {{ v }} || true", "--pre=rm", "where rg reads its options .*put -- before it"),
    ("sed s/a/b/ keep {{ v }} || true", "-e1e touch pwned", "where sed reads its options .*put -- before it"),
    ("split keep {{ v }} || true", "--filter=touch pwned", "where split reads its options .*put -- before it"),
    ("make keep {{ v }} || true", "--eval=$(shell touch pwned)", "where make reads its options .*put -- before it"),
    (
        "ssh -F /dev/null nohost.invalid {{ v }} true || true",
        "-oProxyCommand=touch pwned",
        "where ssh reads its options",
    ),
    ("vim -Nu NONE -es keep {{ v }} +q || true", "-c!touch pwned", "where vim reads its options"),
    ("gdb -batch keep {{ v }} || true", "-ex=shell touch pwned", "where gdb reads its options"),
    # mawk's `-W exec FILE` (or `-We FILE`) runs FILE as the program, like `-f FILE`
    ("mawk -W exec ./{{ v }} keep", "prog.awk", "reads as code .*`mawk -W exec` runs it"),
    ("mawk -We {{ v }} keep", "prog.awk", "reads as code .*`mawk -W exec` runs it"),
    # getopt_long takes any unambiguous prefix of a long option: `--filt` is split's `--filter`
    ("split --filt=x{{ v }} keep || true", "; touch pwned", "reads as code .*`split` runs it"),
    ("split keep --filt x{{ v }} || true", "; touch pwned", "reads as code .*`split --filt` runs it"),
    ("make --ev=x{{ v }} keep || true", "$(shell touch pwned)", "reads as code .*`make` runs it"),
    ("sed --expr=s/a/{{ v }}/ keep || true", "b/;1e touch pwned;#", "reads as code .*`sed` runs it"),
]


@pytest.mark.parametrize(("script", "value", "message"), MISREAD_OPTION_VALUES)
def test_a_value_the_program_may_read_as_an_option_is_refused(
    make_project: Writer, tmp_path: Path, script: str, value: str, message: str
) -> None:
    program = script.split()[0]
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")
    # the real program, run on the same words, reads the value as an option or its program and runs code
    work = tmp_path / "direct"
    work.mkdir()
    (work / "keep").write_text("x\n", encoding="utf-8")
    (work / "prog.awk").write_text('BEGIN { system("touch pwned") }\n', encoding="utf-8")
    line = script.replace("{{ v }}", '"$V"')
    subprocess.run(
        ["/bin/bash", "-c", line],
        cwd=work,
        env={**os.environ, "V": value},
        stdin=subprocess.DEVNULL,
        check=False,
        timeout=30,
    )
    names = {p.name for p in work.iterdir()}
    assert "pwned" in names or "keep" not in names
    with pytest.raises(ConfigError, match=message) as caught:
        Runtime.load(make_project({"t": _tool(script, "/bin/bash")}))
    assert [p.pointer for p in caught.value.problems] == ["/handler/shell"]
