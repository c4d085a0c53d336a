"""Shell templates under attack, with real shells: a model's value never runs as code.

Values travel as `TOOLRT_ARG_*` environment variables and the script only expands them, so each
attack value below runs through every accepted position (a word, part of a word, inside double
quotes, a redirect target, an assignment, a `for` list, a `$( )`) under bash and POSIX sh, and must
come out as the same bytes with no `pwned` file anywhere.
"""

from __future__ import annotations

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
