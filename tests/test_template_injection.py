"""Hostile argument values through the whole pipeline: `shell:` template tools and an `argv:` tool.

A shell template's values reach the shell as environment variables (`"${TOOLRT_ARG_VALUE}"`),
never as text in the script, under POSIX sh (dash) and bash, as words and inside double quotes.

The corpus is `tests/test_injection.py`'s PAYLOADS (it exercises the process runner directly); here
the same values go through `Runtime.call`: validation, template rendering, permission, execution.
Each payload tries to create `pwned` in the working directory or the canary file (its `CANARY` is
replaced by an absolute path outside the project); neither may ever appear, and the output must be
the payload itself.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from toolrt.api import Runtime
from toolrt.errors import ConfigError


def _corpus() -> list[str]:
    # Loaded by path: the tests directory is not a package, and pytest may import it under another name.
    path = Path(__file__).with_name("test_injection.py")
    spec = importlib.util.spec_from_file_location("_toolrt_injection_corpus", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    payloads: list[str] = module.PAYLOADS
    return payloads


PAYLOADS = _corpus()
Writer = Callable[..., Path]

TOOLS = {
    "shell_echo": """
        id: shell_echo
        description: Print the value through a shell template.
        parameters: {type: object, properties: {value: {type: string}}, required: [value]}
        handler:
          shell: "printf %s {{ value }}"
          cwd: work
        timeout: 20
        truncate: false
    """,
    "shell_quoted": """
        id: shell_quoted
        description: Print the value inside double quotes, under bash.
        parameters: {type: object, properties: {value: {type: string}}, required: [value]}
        handler:
          shell: 'printf %s "{{ value }}"'
          shell_path: /bin/bash
          cwd: work
        timeout: 20
        truncate: false
    """,
    "argv_echo": """
        id: argv_echo
        description: Print the value as one argv element.
        parameters: {type: object, properties: {value: {type: string}}, required: [value]}
        handler:
          argv: [printf, "%s", "{{ value }}"]
          cwd: work
        timeout: 20
        truncate: false
    """,
}


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory, project_writer: Writer) -> tuple[Runtime, Path, Path]:
    """(runtime, its empty working directory, the canary path outside the project)."""
    base = tmp_path_factory.mktemp("injection")
    root = project_writer(base / "project", TOOLS, settings=f"defaults: {{data_dir: {base / 'data'}}}\n")
    (root / "work").mkdir()
    return Runtime.load(root), root / "work", base / "canary"


def _shown(value: str) -> str:
    """What printf prints for the value, as the runner decodes it (undecodable bytes become U+FFFD)."""
    return os.fsencode(value).decode("utf-8", "replace")


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
@pytest.mark.parametrize("tool", ["shell_echo", "shell_quoted", "argv_echo"])
def test_payload_stays_data(tool: str, payload: str, arena: tuple[Runtime, Path, Path]) -> None:
    rt, work, canary = arena
    value = payload.replace("CANARY", str(canary))
    result = rt.call_sync(tool, {"value": value}, session=f"{tool}-{hash(value)}")
    assert list(work.iterdir()) == []
    assert not canary.exists()
    assert not (rt.root / "pwned").exists()
    assert result.error is None, result.error[:300] if result.error else None
    assert result.output == _shown(value)
    assert result.metadata["exit"] == 0


def test_corpus_is_the_shared_one() -> None:
    assert len(PAYLOADS) >= 70
    assert any("CANARY" in p for p in PAYLOADS)


@pytest.mark.parametrize("tool", ["shell_echo", "shell_quoted", "argv_echo"])
def test_nul_byte_is_a_clean_error_and_runs_nothing(tool: str, arena: tuple[Runtime, Path, Path]) -> None:
    rt, work, canary = arena
    result = rt.call_sync(tool, {"value": f"a\0; touch {canary}"})
    assert result.error is not None and "contains a NUL byte" in result.error
    assert list(work.iterdir()) == [] and not canary.exists()


@pytest.mark.parametrize("shell_path", ["/bin/sh", "/bin/bash"])
def test_list_parameter_in_shell_template_is_one_word_per_item(
    make_project: Writer, tmp_path: Path, shell_path: str
) -> None:
    canary = tmp_path / "canary"
    tools = {
        "many": f"""
            id: many
            description: Print each value on its own line.
            parameters:
              {{type: object, properties: {{values: {{type: array, items: {{type: string}}}}}}, required: [values]}}
            handler: {{shell: "printf '%s\\\\n' {{{{ values }}}}", shell_path: {shell_path}}}
            truncate: false
        """
    }
    rt = Runtime.load(make_project(tools))
    values = [p.replace("CANARY", str(canary)) for p in PAYLOADS if len(p) < 1000 and "\n" not in p and "\r" not in p]
    result = rt.call_sync("many", {"values": values})
    assert not canary.exists() and not (rt.root / "pwned").exists()
    assert result.output == "".join(_shown(v) + "\n" for v in values)


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("printf %s '{{ value }}'", r"\{\{ \}\} inside single quotes"),
        ('echo "$(( {{ value }} ))"', r"inside arithmetic"),
        ("cat <<EOF\n{{ value }}\nEOF", r"in a here-document \(template line 2\): pass the value with the handler's"),
        ("echo $(( {{ value }} + 1 ))", r"inside arithmetic \$\(\( \)\) \(template line 1\)"),
        ("[[ 1 -gt {{ value }} ]]", r"inside a \[\[ \]\] test"),
        ("echo `printf %s {{ value }}`", r"inside backticks"),
        ("echo hi # {{ value }}", r"inside a comment"),
        ("bash -c {{ value }}", r"reads as code"),
    ],
)
def test_unsafe_template_positions_are_rejected_at_load(make_project: Writer, script: str, message: str) -> None:
    definition = {
        "id": "bad",
        "description": "An unsafe template.",
        "parameters": {"type": "object", "properties": {"value": {"type": "string"}}},
        "handler": {"shell": script},
    }
    with pytest.raises(ConfigError, match=message) as caught:
        Runtime.load(make_project({"bad": yaml.safe_dump(definition)}))
    assert [p.pointer for p in caught.value.problems] == ["/handler/shell"]
    assert caught.value.problems[0].file.endswith("bad.yaml")
