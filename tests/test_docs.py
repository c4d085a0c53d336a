"""Docs that cannot rot: every code block of README.md and docs/ runs, parses or says why not (see
doc_blocks.py for the markers); every config key, permission key and setting is documented; the
CHANGELOG and the docs link only to files that exist."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
import yaml
from doc_blocks import MARKERS, PAGES, REPO, Block, blocks, sample_repository, tool_environment
from measured import unmeasured

from toolrt.build.snapshot import build_snapshot
from toolrt.config.resources import SCHEMA_NAMES, builtin_root, schema
from toolrt.faces.project_checks import RUNTIME_PERMISSIONS

DOCS = REPO / "docs"


def test_every_block_has_a_marker() -> None:
    problems = []
    for page in PAGES:
        for block in blocks(page):
            if block.marker not in MARKERS:
                problems.append(f"{block.where}: no <!-- test: {'|'.join(MARKERS)} --> comment above the block")
            elif block.marker == "skip" and len(block.argument) < 10:
                problems.append(f"{block.where}: `skip` needs a reason (why the block cannot run)")
            elif block.marker == "file" and not block.argument:
                problems.append(f"{block.where}: `file` needs the PATH to write the block to")
    assert not problems, "\n".join(problems)


def _syntax(block: Block) -> None:
    language = block.language
    if language in ("yaml", "yml"):
        list(yaml.safe_load_all(block.text))
    elif language == "json":
        json.loads(block.text)
    elif language == "python":
        compile(block.text, block.where, "exec")
    elif language in ("bash", "sh", "shell"):
        checked = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True)
        assert checked.returncode == 0, f"{block.where}: {checked.stderr}"
    else:
        raise AssertionError(f"{block.where}: `syntax` does not know the language {language!r}")


def _run(block: Block, repo: Path, env: dict[str, str]) -> str:
    """Run the block; its output (stdout and stderr as they interleaved)."""
    if block.language in ("bash", "sh", "shell"):
        command = ["bash", "-euo", "pipefail", "-c", block.text]
    elif block.language == "python":
        command = [sys.executable, "-c", block.text]
    else:
        raise AssertionError(f"{block.where}: `run` does not know the language {block.language!r}")
    done = subprocess.run(
        command, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60
    )
    report = f"{block.where} failed ({done.returncode}):\n{block.text}\n{done.stdout}"
    assert done.returncode == 0, report
    return done.stdout


def _workflow(block: Block) -> None:
    workflow = yaml.safe_load(block.text)
    assert isinstance(workflow, dict) and workflow.get("jobs"), f"{block.where}: a workflow needs jobs"
    for name, job in workflow["jobs"].items():
        assert job.get("runs-on") and job.get("steps"), f"{block.where}: job {name} needs runs-on and steps"
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), f"{block.where}: a step has either uses or run: {step}"


def _pre_commit_config(block: Block, tmp_path: Path) -> None:
    config = tmp_path / "pre-commit-config.yaml"
    config.write_text(block.text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-config", str(config)], capture_output=True, text=True
    )
    assert done.returncode == 0, f"{block.where}: {done.stdout}{done.stderr}"


@pytest.mark.slow  # runs every block: dozens of `toolrt` processes per page
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_page_blocks_run_and_parse(page: Path, tmp_path: Path) -> None:
    # The examples' `toolrt` processes take paths the CLI's own tests measure: not measured here.
    env = unmeasured(tool_environment(tmp_path / "home"))
    repo = sample_repository(tmp_path / "repo", env)
    printed: tuple[Block, str] | None = None
    for block in blocks(page):
        if block.marker == "run":
            printed = (block, _run(block, repo, env))
        elif block.marker == "output":
            assert printed is not None, f"{block.where}: an `output` block follows a `run` block"
            assert printed[1] == block.text, f"{block.where}: {printed[0].where} printed\n{printed[1]}"
        elif block.marker == "file":
            target = repo / block.argument
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text, encoding="utf-8")
        elif block.marker == "syntax":
            _syntax(block)
        elif block.marker == "workflow":
            _workflow(block)
        elif block.marker == "pre-commit-config":
            _pre_commit_config(block, tmp_path)


# --- coverage: what exists is documented ------------------------------------------------------------


def _documented_names(page: Path) -> set[str]:
    """Names a page mentions as code: `inline` spans (and their words) and the keys of its YAML blocks."""
    text = page.read_text(encoding="utf-8")
    names: set[str] = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        names.add(span.strip())
        names.update(re.findall(r"[A-Za-z_][\w-]*", span))
    for block in blocks(page):
        names.update(re.findall(r"(?:^|[{,\s])-?\s*\"?([A-Za-z_$][\w-]*)\"?\s*:", block.text, flags=re.M))
        names.update(re.findall(r"\b(TOOLRT_[A-Z0-9_]+)", block.text))
    return names


def _schema_keys(node: Any, root: Mapping[str, Any]) -> Iterator[str]:
    """Every property name of a JSON Schema, through $defs, combinators and items."""
    if isinstance(node, Mapping):
        for name, value in node.get("properties", {}).items():
            yield name
            yield from _schema_keys(value, root)
        for key, value in node.items():
            if key in ("$defs", "definitions"):
                for definition in value.values():
                    yield from _schema_keys(definition, root)
            elif key in ("items", "additionalProperties", "not", "if", "then", "else") or key.endswith("Of"):
                yield from _schema_keys(value, root)
    elif isinstance(node, list):
        for item in node:
            yield from _schema_keys(item, root)


@pytest.mark.parametrize(
    ("name", "page"), [("tool", "tools.md"), ("permissions", "permissions.md"), ("project", "configuration.md")]
)
def test_every_config_key_is_documented(name: str, page: str) -> None:
    document = schema(name)
    keys = set(_schema_keys(document, document)) - {"type", "$schema"}
    missing = sorted(keys - _documented_names(DOCS / page))
    assert not missing, f"docs/{page} does not mention these {name} keys: {', '.join(missing)}"


def permission_keys() -> set[str]:
    """Every permission key a built-in tool asks, the built-in rules name, or the runtime asks itself."""
    snapshot = build_snapshot(builtin_root())
    keys = {tool.permission_key for tool in snapshot.tools.values() if not tool.definition.internal}
    rules = yaml.safe_load((builtin_root() / "permissions.yaml").read_text(encoding="utf-8"))
    scopes = [rules.get("permission") or {}] + [a.get("permission") or {} for a in rules.get("agents", {}).values()]
    keys |= {key for scope in scopes if isinstance(scope, dict) for key in scope if key != "*"}
    return keys | set(RUNTIME_PERMISSIONS)


def test_every_permission_key_is_documented() -> None:
    missing = sorted(permission_keys() - _documented_names(DOCS / "permissions.md"))
    assert not missing, f"docs/permissions.md does not mention these permission keys: {', '.join(missing)}"


def environment_variables() -> set[str]:
    """Every TOOLRT_* name the runtime reads: literals in its source and pydantic-settings fields."""
    names: set[str] = set()
    for path in (REPO / "runtime" / "toolrt").rglob("*.py"):
        names |= set(re.findall(r"\b(TOOLRT_[A-Z0-9]+(?:_[A-Z0-9]+)*)\b", path.read_text(encoding="utf-8")))
    from toolrt.config import settings as settings_module

    def fields(cls: type, prefix: str) -> Iterator[str]:
        for item in dataclasses.fields(cls):
            name = f"{prefix}{item.name.upper()}"
            default = item.default_factory() if item.default_factory is not dataclasses.MISSING else item.default
            if dataclasses.is_dataclass(default):
                yield from fields(type(default), f"{name}__")
            else:
                yield name

    model = getattr(settings_module, "Settings", None)
    if isinstance(model, type) and dataclasses.is_dataclass(model):
        names |= set(fields(model, "TOOLRT_"))
    return names


def test_every_environment_variable_and_setting_is_documented() -> None:
    documented = _documented_names(DOCS / "configuration.md")
    # A name that ends in `_` is a prefix (TOOLRT_FLAG_<NAME>): documented with a placeholder.
    missing = sorted(
        n for n in environment_variables() if n not in documented and not any(d.startswith(n) for d in documented)
    )
    assert not missing, f"docs/configuration.md does not mention: {', '.join(missing)}"


FORMAT_NAMES = ("SKILL.md",)
"""File names that name a format (the file of every skill: `skill://<name>/SKILL.md`), not a file here."""


def _links(path: Path) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if not re.match(r"[a-z]+:", target) and not target.startswith("#"):
                yield number, target.split("#")[0]
        for document in re.findall(r"(?<![\w/.-])([\w./-]+\.md)\b", line):
            if document.rsplit("/", 1)[-1] not in FORMAT_NAMES:
                yield number, document


@pytest.mark.parametrize("path", [REPO / "CHANGELOG.md", *PAGES], ids=lambda p: str(p.relative_to(REPO)))
def test_documents_refer_only_to_files_in_the_repository(path: Path) -> None:
    missing = sorted(
        {
            f"{path.relative_to(REPO)}:{line}: {target}"
            for line, target in _links(path)
            if not (path.parent / target).exists() and not (REPO / target).exists()
        }
    )
    assert not missing, "references to files that are not in the repository:\n" + "\n".join(missing)


_VALUES = ("examples", "default", "const", "enum")
"""Keywords whose content is data (an example `output:` schema), not a schema to describe."""


def _undescribed(node: Any, path: str = "") -> Iterator[str]:
    if isinstance(node, Mapping):
        for name, value in node.get("properties", {}).items():
            if isinstance(value, Mapping) and not str(value.get("description", "")).strip():
                yield f"{path}/properties/{name}"
        for key, value in node.items():
            if key not in _VALUES:
                yield from _undescribed(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _undescribed(item, f"{path}/{index}")


@pytest.mark.parametrize("name", ["tool", "permissions", "project", "settings"])
def test_schemas_describe_every_property_for_editors(name: str) -> None:
    missing = list(_undescribed(schema(name)))
    assert not missing, f"schemas/{name}.schema.json: properties without a description: {missing}"


_SUBSCHEMA = ("items", "additionalProperties", "propertyNames", "contains", "not", "if", "then", "else")
_SUBSCHEMAS = ("oneOf", "anyOf", "allOf", "prefixItems")
_NAMED_SUBSCHEMAS = ("properties", "patternProperties", "$defs", "dependentSchemas")


def _examples(node: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    """(JSON pointer of the schema node, example) for every `examples` entry, walking schema keywords only
    (a property named `examples` is not a keyword)."""
    if not isinstance(node, Mapping):
        return
    for example in node.get("examples", []):
        yield pointer, example
    for key in _SUBSCHEMA:
        yield from _examples(node.get(key), f"{pointer}/{key}")
    for key in _SUBSCHEMAS:
        for index, item in enumerate(node.get(key, [])):
            yield from _examples(item, f"{pointer}/{key}/{index}")
    for key in _NAMED_SUBSCHEMAS:
        for name, item in node.get(key, {}).items():
            yield from _examples(item, f"{pointer}/{key}/{name.replace('~', '~0').replace('/', '~1')}")


@pytest.mark.parametrize("name", list(SCHEMA_NAMES))
def test_every_schema_example_validates_where_it_sits(name: str) -> None:
    root = schema(name)
    assert root.get("examples"), f"schemas/{name}.schema.json has no top-level examples for completion"
    registry: referencing.Registry[Any] = referencing.Registry().with_resources(
        (schema(n)["$id"], referencing.Resource.from_contents(schema(n))) for n in SCHEMA_NAMES
    )
    invalid = [
        f"{pointer or '/'}: {example!r}: {error.message}"
        for pointer, example in _examples(root)
        for error in jsonschema.Draft202012Validator(
            {"$ref": f"{root['$id']}#{pointer}"}, registry=registry
        ).iter_errors(example)
    ]
    assert not invalid, f"schemas/{name}.schema.json: examples its own schema rejects:\n" + "\n".join(invalid)


def test_the_example_walk_checks_nested_examples_against_their_node() -> None:
    """The walk must reach nested nodes and skip a property named `examples`, or the test above proves little."""
    found = dict(_examples(schema("settings")))
    assert found["/properties/timeout"] == 300
    assert any(pointer.startswith("/$defs/agent") for pointer, _ in _examples(schema("permissions")))
    tool_pointers = [pointer for pointer, _ in _examples(schema("tool"))]
    assert "" in tool_pointers and not any(p.endswith("/properties/examples") for p in tool_pointers)


@pytest.mark.parametrize("name", ["tool", "project"])
def test_schema_examples_are_valid_documents(name: str, tmp_path: Path) -> None:
    examples = schema(name).get("examples")
    assert examples, f"schemas/{name}.schema.json has no examples for completion"
    for example in examples:
        target = tmp_path / ("tools.d/example.yaml" if name == "tool" else "toolrt.yaml")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(example), encoding="utf-8")
        assert build_snapshot(tmp_path) is not None  # raises ConfigError with file:line when invalid
