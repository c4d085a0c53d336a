"""Jinja2 templates of tool definitions: text, shell-quoting and argv rendering, and load-time checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrt.templates import TemplateProblem, compile_argv, compile_template, render, render_argv

ROOT = Path("/project")
PARAMS = frozenset({"path", "items", "flag", "n", "on"})


def text(source: str, **args: Any) -> str:
    return render(compile_template(source, PARAMS), args, PARAMS, ROOT)


def shell(source: str, **args: Any) -> str:
    template = compile_template(source, PARAMS, shell=True)  # noqa: S604 (a template flag: nothing is run)
    return render(template, args, PARAMS, ROOT)


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
    ],
)
def test_shell_templates_quote_every_value(source: str, args: dict[str, Any], expected: str) -> None:
    assert shell(source, **args) == expected


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
            'echo "{{ path }}"',
            r"\{\{ \}\} inside double quotes \(template line 1\): values are shell-quoted automatically",
        ),
        ("echo '{{ path }}'", r"\{\{ \}\} inside single quotes \(template line 1\)"),
        ('echo "a $(cat {{ path }})"', r"inside double quotes"),
        ('echo ok\necho "x{{ path }}x"', r"inside double quotes \(template line 2\)"),
        (
            "cat <<EOF\n{{ path }}\nEOF",
            r"\{\{ \}\} after a here-document \(template line 2\) is not quoted by the shell; "
            r"pass the value with the handler's `stdin:` instead",
        ),
        ("cat <<'EOF'\n{{ path }}\nEOF", r"after a here-document"),
        ("cat <<-EOF\n\t{{ path }}\nEOF", r"after a here-document"),
        # accepted by the old quote scanner; the tree-sitter parse places them
        ("echo $(( 1 + {{ path }} ))", r"\{\{ \}\} inside arithmetic \$\(\( \)\) \(template line 1\)"),
        ("(( {{ path }} > 1 )) && echo big", r"inside arithmetic \(\( \)\)"),
        ("[[ $n -gt {{ path }} ]] && echo big", r"inside a \[\[ \]\] test \(template line 1\)"),
        ("echo `echo {{ path }}`", r"inside backticks \(template line 1\): write \$\( \) instead"),
        ("echo ok # {{ path }}", r"inside a comment"),
        ("echo ok\n# note {{ path }}\necho done", r"inside a comment \(template line 2\)"),
        ("case x in {{ path }}) echo hit;; esac", r"in a case pattern"),
        ("case {{ path }} in a) echo hit;; esac", r"as a case subject"),
        ("LD_PRELOAD={{ path }} ls", r"as the value of LD_PRELOAD \(template line 1\): that variable loads code"),
        ("export PATH={{ path }}; ls", r"as the value of PATH"),
        ("env GIT_CONFIG_GLOBAL={{ path }} git status", r"as the value of GIT_CONFIG_GLOBAL"),
        ("bash -c {{ path }}", r"in a word the shell or a program reads as code \(template line 1\)"),
        ("eval {{ path }}", r"reads as code"),
        ("python3 -c {{ path }}", r"reads as code"),
        ("{{ path }} --version", r"as the program a command runs \(template line 1\)"),
        ("echo $'{{ path }}'", r"inside \$'...' quotes"),
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
    # The compiled-away subset must be indistinguishable from Jinja2 with the same finalize and filters.
    from toolrt.templates import _jinja

    source = "".join(f"{text}{{{{ v{f} }}}}" for text, f in zip(literals, filters, strict=False)) + literals[-1]
    try:
        fast = compile_template(source, frozenset({"v"}), shell=shell)
    except TemplateProblem:
        return  # an expression inside quotes: rejected on both paths alike
    assert type(fast).__name__ == "_FastTemplate"
    context = {"v": value, "__root__": "/project"}
    assert fast.render(context) == _jinja(shell).from_string(source).render(context)
