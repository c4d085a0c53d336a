"""Jinja2 templates of tool definitions: text, shell (values in environment variables) and argv
rendering, and load-time checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrt.build.templates import (
    ShellCommand,
    TemplateProblem,
    compile_argv,
    compile_template,
    render,
    render_argv,
    render_shell,
)

ROOT = Path("/project")
PARAMS = frozenset({"path", "items", "flag", "n", "on"})


def text(source: str, **args: Any) -> str:
    return render(compile_template(source, PARAMS), args, PARAMS, ROOT)


def shell_command(source: str, **args: Any) -> ShellCommand:
    template = compile_template(source, PARAMS, shell=True)  # noqa: S604 (a template flag: nothing is run)
    return render_shell(template, args, PARAMS, ROOT)


def shell(source: str, **args: Any) -> str:
    return shell_command(source, **args).shown


def argv(elements: list[str], **args: Any) -> list[str]:
    return render_argv(compile_argv(elements, PARAMS), args, PARAMS, ROOT)


@pytest.mark.parametrize(
    ("source", "args", "expected"),
    [
        ("Read {{ path }}", {"path": "a.py"}, "Read a.py"),
        ("Read {{ path }}", {}, "Read "),
        ("{{ on }}/{{ n }}", {"on": True, "n": 3}, "true/3"),
        ("{{ path | abspath }}", {"path": "src/../a.py"}, "/project/a.py"),
        ("{{ path | abspath }}", {"path": "/etc/x"}, "/etc/x"),
        ("{{ path | relpath }}", {"path": "/project/src/a.py"}, "src/a.py"),
        ("{{ path | relpath }}", {"path": "/elsewhere/a.py"}, "../elsewhere/a.py"),
        ("{{ path | quote }}", {"path": "a b"}, "'a b'"),
        ("{% if flag %}-{{ flag }}{% endif %}", {}, ""),
    ],
)
def test_text_templates_render_values_as_they_are(source: str, args: dict[str, Any], expected: str) -> None:
    assert text(source, **args) == expected


@pytest.mark.parametrize(
    ("source", "args", "expected"),
    [
        ("ls {{ path }}", {"path": "a b"}, "ls 'a b'"),
        ("ls {{ path }}", {"path": "$(rm -rf /)"}, "ls '$(rm -rf /)'"),
        ("ls {{ path }}", {"path": "it's"}, "ls 'it'\"'\"'s'"),
        ("ls {{ path }}", {}, "ls ''"),
        ("ls {{ items }}", {"items": ["a", "b c", ";"]}, "ls a 'b c' ';'"),
        ("ls {{ items }}", {"items": []}, "ls "),
        ("head -n {{ n }} {{ on }}", {"n": 5, "on": False}, "head -n 5 false"),
        ("grep -e {{ path }} 2>/dev/null || true", {"path": "-v"}, "grep -e -v 2>/dev/null || true"),
        ('echo "hello {{ path }}!"', {"path": 'say "$(id)" `x` \\'}, 'echo "hello "\'say "$(id)" `x` \\\'"!"'),
        ("ls {{ path }}", {"path": "a\nb\rc\x1b"}, "ls $'a\\nb\\rc\\x1b'"),
        ('echo "x{{ path }}"', {"path": "a\nb"}, 'echo "x"$\'a\\nb\'""'),
        ('echo "{{ items }}"', {"items": ["a", "b"]}, 'echo "a b"'),
    ],
)
def test_shell_templates_show_every_value_quoted(source: str, args: dict[str, Any], expected: str) -> None:
    assert shell(source, **args) == expected


@pytest.mark.parametrize(
    ("source", "args", "script", "env"),
    [
        ("ls {{ path }}", {"path": "$(rm -rf /)"}, 'ls "${TOOLRT_ARG_PATH}"', {"TOOLRT_ARG_PATH": "$(rm -rf /)"}),
        ("ls {{ path }}", {}, 'ls "${TOOLRT_ARG_PATH}"', {"TOOLRT_ARG_PATH": ""}),
        (
            'echo "hi {{ path }}" {{ path }}',
            {"path": "x"},
            'echo "hi ${TOOLRT_ARG_PATH}" "${TOOLRT_ARG_PATH}"',
            {"TOOLRT_ARG_PATH": "x"},
        ),
        (
            "ls {{ items }}",
            {"items": ["a", "b c"]},
            'ls "${TOOLRT_ARG_ITEMS_0}" "${TOOLRT_ARG_ITEMS_1}"',
            {"TOOLRT_ARG_ITEMS_0": "a", "TOOLRT_ARG_ITEMS_1": "b c"},
        ),
        ("ls {{ items }}", {"items": []}, "ls ", {}),
        (
            "ls {{ path | abspath }} {{ on }}",
            {"path": "x", "on": True},
            'ls "${TOOLRT_ARG_PATH_ABSPATH}" "${TOOLRT_ARG_ON}"',
            {"TOOLRT_ARG_PATH_ABSPATH": "/project/x", "TOOLRT_ARG_ON": "true"},
        ),
        (
            "{% for i in items %}echo {{ i }};{% endfor %}",
            {"items": ["a", "b"]},
            'echo "${TOOLRT_ARG_0}";echo "${TOOLRT_ARG_1}";',
            {"TOOLRT_ARG_0": "a", "TOOLRT_ARG_1": "b"},
        ),
    ],
)
def test_shell_templates_pass_values_as_environment_variables(
    source: str, args: dict[str, Any], script: str, env: dict[str, str]
) -> None:
    command = shell_command(source, **args)
    assert command.script == script
    assert dict(command.env) == env


def test_environment_names_are_safe_and_unique() -> None:
    params = frozenset({"x_0", "x", "X"})
    template = compile_template("echo {{ x }} {{ x_0 }} {{ X }}", params, shell=True)  # noqa: S604
    command = render_shell(template, {"x": ["a"], "x_0": "b", "X": "c"}, params, ROOT)
    assert command.script == 'echo "${TOOLRT_ARG_X_0}" "${TOOLRT_ARG_X_0_}" "${TOOLRT_ARG_X}"'
    assert dict(command.env) == {"TOOLRT_ARG_X_0": "a", "TOOLRT_ARG_X_0_": "b", "TOOLRT_ARG_X": "c"}


@pytest.mark.parametrize(
    ("elements", "args", "expected"),
    [
        (["ls", "{{ path }}"], {"path": "a b"}, ["ls", "a b"]),
        (["ls", "{{ items }}"], {"items": ["a", "b c"]}, ["ls", "a", "b c"]),
        (["ls", "{{ items }}", "--"], {"items": []}, ["ls", "--"]),
        (["ls", "{{ flag }}", "x"], {}, ["ls", "x"]),
        (["ls", "{{- flag -}}", "x"], {}, ["ls", "x"]),
        (["ls", "--flag={{ flag }}"], {}, ["ls", "--flag="]),
        (["ls", "-n{{ n }}"], {"n": 3}, ["ls", "-n3"]),
        (["ls", "{{ n }}", "{{ on }}"], {"n": 0, "on": True}, ["ls", "0", "true"]),
        (["ls", "{{ path | abspath }}"], {"path": "x"}, ["ls", "/project/x"]),
        (["echo", "{{ items }} tail"], {"items": ["a"]}, ["echo", "['a'] tail"]),
        (["echo", "{{ path }}"], {"path": "; rm -rf / #"}, ["echo", "; rm -rf / #"]),
    ],
)
def test_argv_elements_render_separately_and_whole_expressions_expand(
    elements: list[str], args: dict[str, Any], expected: list[str]
) -> None:
    assert argv(elements, **args) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "echo {{ nope }}",
            r"template uses 'nope', which is not a declared parameter \(declared: flag, items, n, on, path\)",
        ),
        ("echo {{ path ", r"template syntax error: .* \(template line 1\)"),
        ("{% for x in %}", r"template syntax error"),
        ("echo {{ os.system }}", r"'os', which is not a declared parameter"),
    ],
)
def test_unknown_names_and_syntax_errors_fail_at_compile_time(source: str, message: str) -> None:
    with pytest.raises(TemplateProblem, match=message):
        compile_template(source, PARAMS)
    with pytest.raises(TemplateProblem, match=message):
        compile_argv(["x", source], PARAMS)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "echo '{{ path }}'",
            r"\{\{ \}\} inside single quotes \(template line 1\): a value may stand only as a word of a command",
        ),
        (
            "cat <<EOF\n{{ path }}\nEOF",
            r"\{\{ \}\} in a here-document \(template line 2\): pass the value with the handler's `stdin:` instead",
        ),
        ("cat <<'EOF'\n{{ path }}\nEOF", r"in a here-document"),
        ("cat <<-EOF\n\t{{ path }}\nEOF", r"in a here-document"),
        # accepted by the old quote scanner; the tree-sitter parse places them
        ("echo $(( 1 + {{ path }} ))", r"\{\{ \}\} inside arithmetic \$\(\( \)\) \(template line 1\)"),
        ("(( {{ path }} > 1 )) && echo big", r"inside arithmetic \(\( \)\)"),
        ("[[ $n -gt {{ path }} ]] && echo big", r"inside a \[\[ \]\] test \(template line 1\)"),
        ("echo `echo {{ path }}`", r"inside backticks \(template line 1\): write \$\( \) instead"),
        ("echo ok # {{ path }}", r"inside a comment"),
        ("echo ok\n# note {{ path }}\necho done", r"inside a comment \(template line 2\)"),
        ("case x in {{ path }}) echo hit;; esac", r"in a case pattern"),
        ("case x in a|{{ path }}) echo hit;; esac", r"in a case pattern"),
        ('[ "{{ path }}" = x ] && echo same', r"inside a \[ \] test"),
        ('echo "${x:-{{ path }}}"', r"inside a \$\{ \} expansion"),
        ("echo ${{ path }}", r"after a \$"),
        ('echo "\\{{ path }}"', r"after a backslash \(template line 1\)"),
        ("echo \\{{ path }}", r"after a backslash"),
        ("{{ path }}=1 ls", r"as a variable name"),
        ("echo ${a[{{ path }}]}", r"inside a \$\{ \} expansion|inside an array subscript"),
        ("for {{ path }} in a; do :; done", r"as a (loop )?variable"),
        ("declare {{ path }}", r"as a name a declaration evaluates|as a variable name"),
        ("unset {{ path }}", r"as a name unset removes|as a variable name"),
        ("for (( i = {{ path }}; i < 3; i++ )); do :; done", r"arithmetic"),
        ("LD_PRELOAD={{ path }} ls", r"as the value of LD_PRELOAD \(template line 1\): that variable loads code"),
        ("export PATH={{ path }}; ls", r"as the value of PATH"),
        ("env GIT_CONFIG_GLOBAL={{ path }} git status", r"as the value of GIT_CONFIG_GLOBAL"),
        ("bash -c {{ path }}", r"in a word the shell or a program reads as code \(template line 1\)"),
        ("eval {{ path }}", r"reads as code"),
        ("python3 -c {{ path }}", r"reads as code"),
        ("{{ path }} --version", r"as the program a command runs \(template line 1\)"),
        ("echo $'{{ path }}'", r"inside \$'...' quotes"),
        ('echo "$(( {{ path }} ))"', r"inside arithmetic"),
        ("{% if path %}\necho `cat {{ path }}`{% endif %}", r"inside backticks \(template line 2\)"),
    ],
)
def test_shell_positions_where_quoting_is_unsafe_are_rejected(source: str, message: str) -> None:
    with pytest.raises(TemplateProblem, match=message):
        compile_template(source, PARAMS, shell=True)  # noqa: S604 (a template flag: nothing is run)


@pytest.mark.parametrize(
    "source",
    [
        "echo {{ path }}",
        "echo \"fixed text\" {{ path }} 'more'",
        'echo \\"{{ path }}',  # escaped quote: the value is a word of its own
        "cat <<< {{ path }}",  # here-string, not a here-document: an ordinary word
        'x="a"; echo {{ path }}',
        "printf '%s\\n' {{ items }}",
        "tool --name={{ path }}",
        "head -n{{ path }} file",
        "sort < {{ path }} > {{ path }}.sorted",
        "NAME={{ path }} env",
        "echo $(cat {{ path }})",
        'echo "{{ path }}"',
        'echo "a $(cat {{ path }}) b"',
        'echo ok\necho "x{{ path }}x"',
        'echo "${HOME}/{{ path }}"',
        "case {{ path }} in a) echo {{ path }};; esac",
        'for f in {{ items }}; do echo "$f"; done',
        "x=({{ items }})",
        "f() { echo {{ path }}; }",
        "local x={{ path }}",
        "if grep -q {{ path }} f; then echo yes; fi",
        "git log -- {{ path }} | head",
        "{% if path %}ls {{ path }}{% endif %}",
    ],
)
def test_shell_positions_that_keep_the_value_one_word_are_accepted(source: str) -> None:
    compile_template(source, PARAMS, shell=True)  # noqa: S604 (a template flag: nothing is run)


def test_text_templates_allow_quotes_around_values() -> None:
    assert text('say "{{ path }}"', path="x") == 'say "x"'


_FAST_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.lists(st.text(max_size=5), max_size=3)
)


@pytest.mark.usefixtures("untraced")  # a property pass: see conftest.untraced
@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    literals=st.lists(st.text(alphabet="ab c/-_.'\"\n$", max_size=6), min_size=1, max_size=4),
    filters=st.lists(st.sampled_from(["", " | abspath", " | relpath", " | quote"]), min_size=1, max_size=3),
    value=_FAST_VALUES,
    shell=st.booleans(),
)
def test_fast_templates_render_exactly_as_jinja(
    literals: list[str], filters: list[str], value: Any, shell: bool
) -> None:
    # The compiled-away subset must be indistinguishable from Jinja2 with the same finalize and filters;
    # a `{# #}` comment sends the same template down the Jinja2 path.
    source = "".join(f"{text}{{{{ v{f} }}}}" for text, f in zip(literals, filters, strict=False)) + literals[-1]
    params = frozenset({"v"})
    try:
        fast = compile_template(source, params, shell=shell)
    except TemplateProblem:
        with pytest.raises(TemplateProblem):
            compile_template(source + "{# #}", params, shell=shell)
        return  # an expression where a value could become code: rejected on both paths alike
    slow = compile_template(source + "{# #}", params, shell=shell)
    if not shell:
        assert type(fast).__name__ == "_FastTemplate"
        assert render(fast, {"v": value}, params, ROOT) == render(slow, {"v": value}, params, ROOT)
        return
    fast_command = render_shell(fast, {"v": value}, params, ROOT)
    slow_command = render_shell(slow, {"v": value}, params, ROOT)
    assert fast_command.shown == slow_command.shown
    assert set(fast_command.env.values()) == set(slow_command.env.values())


def test_a_simple_template_compiles_once_per_source_and_parameters_and_a_broken_one_fails_every_time() -> None:
    names = frozenset({"path", "limit"})
    first = compile_template("{{ path }} at {{ limit }}", names)
    assert compile_template("{{ path }} at {{ limit }}", frozenset({"limit", "path"})) is first
    assert compile_template("{{ path }} at {{ limit }}", frozenset({"path", "limit", "x"})) is not first
    assert first.render({"path": "a", "limit": 3}) == "a at 3"
    shell = compile_template("grep -- {{ path }}", names, shell=True)  # noqa: S604
    assert compile_template("grep -- {{ path }}", names, shell=True) is shell  # noqa: S604
    assert compile_argv(["git", "{{ path }}"], names).elements == compile_argv(["git", "{{ path }}"], names).elements
    for _ in range(2):
        with pytest.raises(TemplateProblem, match="template uses 'other', which is not a declared parameter"):
            compile_template("{{ other }}", names)
        with pytest.raises(TemplateProblem, match="template uses 'other'") as raised:
            compile_argv(["echo", "{{ other }}"], names)
        assert raised.value.element == 1
