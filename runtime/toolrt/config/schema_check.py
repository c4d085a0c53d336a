"""Check documents against `schemas/`: a compiled fast validator decides, jsonschema explains.

The fast path (jsonschema-rs, compiled once) answers "valid?" in microseconds. Only a document that
fails pays for importing `jsonschema` and building messages that name the file, line, column, what
was found and what was expected, with the closest valid key for a typo.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jsonschema_rs

from ..errors import Problem
from .document import Document, child_pointer
from .resources import SCHEMA_NAMES, schema

__all__ = ["check_document", "describe_value", "parameter_keyword_warnings", "parameter_schema_problems"]

_SCHEMA_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")
_ID_HINT = (
    "use letters, digits, '_' and '-', start with a letter or '_', at most 64 characters (every provider accepts these)"
)


@functools.cache
def _registry() -> jsonschema_rs.Registry:
    return jsonschema_rs.Registry([(schema(name)["$id"], schema(name)) for name in SCHEMA_NAMES])


@functools.cache
def _fast_validator(kind: str) -> Any:
    return jsonschema_rs.validator_for(schema(kind), registry=_registry())


def check_document(document: Document, kind: str) -> list[Problem]:
    """Problems of `document` against the `kind` schema (`tool`, `permissions`, `project`); [] if valid."""
    if _fast_validator(kind).is_valid(document.data):
        return []
    return [_problem(document, pointer, message) for pointer, message in _explain(kind, document.data)]


def parameter_schema_problems(document: Document, pointer: str, parameters: Mapping[str, Any]) -> list[Problem]:
    """Problems that make a tool's `parameters` unusable as a 2020-12 JSON Schema."""
    if jsonschema_rs.meta.is_valid(dict(parameters)):
        return []
    import jsonschema

    validator = jsonschema.Draft202012Validator(jsonschema.Draft202012Validator.META_SCHEMA)
    problems = []
    for error in validator.iter_errors(parameters):
        where = _pointer(pointer, error.absolute_path)
        if error.absolute_path and error.absolute_path[-1] == "type" and isinstance(error.instance, (str, list)):
            detail = f"{error.instance!r} is not a JSON Schema type (types: {', '.join(_SCHEMA_TYPES)})"
        else:
            detail = _message(error)
        problems.append(_problem(document, where, f"not a valid JSON Schema: {detail}"))
    return problems or [_problem(document, pointer, "not a valid JSON Schema")]


_KNOWN_KEYWORDS = frozenset(
    {
        # core, applicator, unevaluated, validation, format, content and meta-data vocabularies (2020-12)
        *("$schema", "$id", "$ref", "$defs", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment"),
        *("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "prefixItems", "items"),
        *("contains", "properties", "patternProperties", "additionalProperties", "propertyNames"),
        *("unevaluatedItems", "unevaluatedProperties"),
        *("type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"),
        *("maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains"),
        *("maxProperties", "minProperties", "required", "dependentRequired", "format"),
        *("contentEncoding", "contentMediaType", "contentSchema"),
        *("title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples"),
        # earlier drafts and provider dialects that schemas in the wild carry on purpose
        *("definitions", "dependencies", "additionalItems", "nullable", "propertyOrdering", "enumNames"),
    }
)
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = (
    *("items", "additionalItems", "additionalProperties", "not", "if", "then", "else", "contains"),
    *("propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"),
)


def parameter_keyword_warnings(document: Document, pointer: str, parameters: Mapping[str, Any]) -> list[Problem]:
    """Warnings for keywords JSON Schema does not know inside `parameters` (a typo like `requird`
    silently constrains nothing). `x-...` extension keywords are legitimate."""
    found: list[Problem] = []
    stack: list[tuple[str, Any]] = [(pointer, parameters)]
    while stack:
        where, node = stack.pop()
        if not isinstance(node, Mapping):
            continue
        for key, value in node.items():
            here = child_pointer(where, key)
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                stack.extend((child_pointer(here, name), sub) for name, sub in value.items())
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                stack.extend((child_pointer(here, index), sub) for index, sub in enumerate(value))
            elif key in _SCHEMA_ONE:
                stack.append((here, value))
            elif key not in _KNOWN_KEYWORDS and not key.startswith("x-"):
                close = _close_matches(key, sorted(_KNOWN_KEYWORDS), cutoff=0.6)
                hint = f"; did you mean '{close[0]}'?" if close else " (extension keywords start with 'x-')"
                message = f"unknown JSON Schema keyword '{key}' is ignored by validators and providers{hint}"
                line, column = document.locate(here)
                found.append(Problem(document.name, line, column, here, message, "warning"))
    return found


def describe_value(value: Any) -> str:
    """A short phrase for what was found: `a string ('foo')`, `a list`, `null`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _problem(document: Document, pointer: str, message: str) -> Problem:
    line, column = document.locate(pointer)
    return Problem(document.name, line, column, pointer, message)


def _explain(kind: str, data: Any) -> Iterator[tuple[str, str]]:
    import jsonschema
    import referencing

    resources = [(schema(n)["$id"], referencing.Resource.from_contents(schema(n))) for n in SCHEMA_NAMES]
    registry: referencing.Registry[Any] = referencing.Registry().with_resources(resources)
    validator = jsonschema.Draft202012Validator(schema(kind), registry=registry)
    seen: set[tuple[str, str]] = set()
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        for pointer, message in _messages(error):
            if (pointer, message) not in seen:
                seen.add((pointer, message))
                yield pointer, message


def _pointer(base: str, path: Any) -> str:
    pointer = base
    for part in path:
        pointer = child_pointer(pointer, part)
    return pointer


def _messages(error: Any) -> Iterator[tuple[str, str]]:
    pointer = _pointer("", error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        for key in error.instance:
            if key in allowed:
                continue
            hint = _close_matches(key, allowed)
            suggestion = f"; did you mean '{hint[0]}'?" if hint else f"; expected one of: {', '.join(allowed)}"
            yield child_pointer(pointer, key), f"unknown key '{key}'{suggestion}"
        return
    if error.validator in ("oneOf", "anyOf") and error.context:
        handler = _handler_message(error)
        if handler:
            yield pointer, handler
            return
        branch_errors = _intended_branch_errors(error)
        if branch_errors:
            for branch in branch_errors:
                yield from _messages(branch)
            return
    if error.validator == "not" and not isinstance(error.instance, dict):
        return  # the root's own type error says it better
    yield pointer, _message(error)


def _intended_branch_errors(error: Any) -> list[Any]:
    """Among a oneOf/anyOf's branch errors, those of the branch the author most likely meant.

    A branch whose top-level `type`/`const`/`enum` does not fit was not meant; of the rest, the branch
    with the deepest error is the most specific. [] when no branch stands out (the generic message is
    then used).
    """
    depth = len(error.absolute_path)
    meant = [
        e for e in error.context if not (len(e.absolute_path) == depth and e.validator in ("type", "const", "enum"))
    ]
    if not meant:
        return []
    deepest = max(meant, key=lambda e: len(e.absolute_path))
    branch = deepest.relative_schema_path[0] if deepest.relative_schema_path else None
    return [e for e in meant if e.relative_schema_path and e.relative_schema_path[0] == branch] or [deepest]


def _handler_message(error: Any) -> str | None:
    instance = error.instance
    if not (isinstance(instance, dict) and "python" in error.schema.get("properties", {})):
        return None
    kinds = [k for k in ("python", "argv", "shell", "host") if k in instance]
    if len(kinds) != 1:
        found = ", ".join(kinds) if kinds else "none"
        return f"a handler needs exactly one of python, argv, shell, host (found: {found})"
    only = {
        "python": "blocking",
        "argv": "cwd, env, stdin",
        "shell": "shell_path, cwd, env, stdin",
        "host": "no other key",
    }[kinds[0]]
    extra = sorted(set(instance) - {kinds[0]})
    return f"a {kinds[0]} handler takes {only}; remove {', '.join(extra)}"


_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "boolean": "true or false",
    "integer": "an integer",
    "number": "a number",
    "null": "null",
}


def _branch_word(branch: Any) -> str:
    if isinstance(branch, dict) and isinstance(branch.get("$ref"), str):
        branch = _local_def(branch["$ref"]) or branch
    if isinstance(branch, dict) and isinstance(branch.get("enum"), list):
        return " or ".join(repr(v) if isinstance(v, str) else str(v) for v in branch["enum"])
    if isinstance(branch, dict):
        if "const" in branch:
            return str(branch["const"]).lower() if isinstance(branch["const"], bool) else repr(branch["const"])
        if isinstance(branch.get("type"), str):
            word = str(_TYPE_WORDS.get(branch["type"], branch["type"]))
            return word
    return "another form"


def _local_def(ref: str) -> Any:
    """The `$defs` entry a local `#/$defs/NAME` reference names, in any of the config schemas."""
    if not ref.startswith("#/$defs/"):
        return None
    name = ref[len("#/$defs/") :]
    for schema_name in SCHEMA_NAMES:
        found = schema(schema_name).get("$defs", {}).get(name)
        if found is not None:
            return found
    return None


def _enum_values(branches: list[Any]) -> list[str]:
    values: list[str] = []
    for branch in branches:
        if isinstance(branch, dict) and isinstance(branch.get("$ref"), str):
            branch = _local_def(branch["$ref"]) or branch
        if isinstance(branch, dict) and isinstance(branch.get("enum"), list):
            values.extend(v for v in branch["enum"] if isinstance(v, str))
    return values


def _did_you_mean(value: Any, choices: list[str]) -> str:
    if not isinstance(value, str) or not choices:
        return ""
    close = _close_matches(value, choices, cutoff=0.5)
    return f"; did you mean '{close[0]}'?" if close else ""


def _type_hint(error: Any) -> str:
    """The fix for a common wrong type: a bare model pattern where a selector mapping belongs."""
    instance, properties = error.instance, error.schema.get("properties", {})
    if error.validator_value == "object" and isinstance(instance, str) and "model" in properties:
        return f'; write {{model: "{instance}"}} to match model ids (or {{group: NAME}} for a model group)'
    return ""


def _message(error: Any) -> str:
    """The plain-words message for one schema error (jsonschema's own when no better one applies)."""
    explain = _EXPLAINERS.get(error.validator)
    message = explain(error) if explain is not None else None
    return message if message is not None else str(error.message)


def _field(error: Any) -> Any:
    """The key or index the error is at (None at the document's root)."""
    return error.absolute_path[-1] if error.absolute_path else None


def _one_of_message(error: Any) -> str | None:
    value, instance = error.validator_value, error.instance
    if not isinstance(value, list):
        return None
    forms = " or ".join(dict.fromkeys(_branch_word(b) for b in value))
    return f"expected {forms}, found {describe_value(instance)}{_did_you_mean(instance, _enum_values(value))}"


def _type_message(error: Any) -> str:
    value = error.validator_value
    expected = value if isinstance(value, str) else " or ".join(value)
    expected = _TYPE_WORDS.get(expected, expected)
    return f"expected {expected}, found {describe_value(error.instance)}{_type_hint(error)}"


def _required_message(error: Any) -> str:
    value, instance = error.validator_value, error.instance
    missing = [name for name in value if isinstance(instance, dict) and name not in instance]
    return f"missing required key '{missing[0] if missing else value[0]}'"


def _pattern_message(error: Any) -> str:
    instance, pattern = error.instance, error.schema.get("pattern", "")
    if _field(error) in ("id", "overrides") or pattern.startswith("^[a-zA-Z_][a-zA-Z0-9_-]{0,63}"):
        return f"{instance!r} is not a valid tool id: {_ID_HINT}"
    if ":" in pattern and "A-Za-z_" in pattern:
        return f"{instance!r} is not of the form 'package.module:function'{_import_path_hint(instance)}"
    return f"{describe_value(instance)} does not match the pattern {error.validator_value!r}"


def _import_path_hint(instance: Any) -> str:
    """The fix for a dotted path where `package.module:function` belongs."""
    if not (isinstance(instance, str) and ":" not in instance and "." in instance):
        return ""
    module, function = instance.rsplit(".", 1)
    return f"; did you mean '{module}:{function}'?"


def _min_length_message(error: Any) -> str | None:
    if error.validator_value != 1:
        return None
    field = _field(error)
    return f"'{field}' is empty" if field is not None else "empty string"


def _enum_message(error: Any) -> str:
    value, instance = error.validator_value, error.instance
    choices = [v for v in value if isinstance(v, str)]
    listed = ", ".join(map(str, value))
    return f"{describe_value(instance)} is not one of: {listed}{_did_you_mean(instance, choices)}"


def _const_message(error: Any) -> str | None:
    if error.validator_value != "object":
        return None
    return f"the root of 'parameters' must be 'type: object', found {describe_value(error.instance)}"


def _not_message(error: Any) -> str | None:
    instance = error.instance
    if isinstance(instance, dict) and {"description", "description_file"} <= set(instance):
        return "give either 'description' or 'description_file', not both"
    return None


def _not_empty_message(error: Any) -> str:
    field = _field(error)
    return f"'{field}' must not be empty" if field is not None else "must not be empty"


def _minimum_message(error: Any) -> str:
    bound = ">" if error.validator == "exclusiveMinimum" else ">="
    return f"{describe_value(error.instance)} is too small (must be {bound} {error.validator_value})"


_EXPLAINERS: dict[str, Callable[[Any], str | None]] = {
    "oneOf": _one_of_message,
    "anyOf": _one_of_message,
    "type": _type_message,
    "required": _required_message,
    "pattern": _pattern_message,
    "minLength": _min_length_message,
    "enum": _enum_message,
    "const": _const_message,
    "not": _not_message,
    "minItems": _not_empty_message,
    "minProperties": _not_empty_message,
    "exclusiveMinimum": _minimum_message,
    "minimum": _minimum_message,
}
"""Validator keyword → its message, or None where jsonschema's own says it better."""


def _close_matches(word: str, choices: list[str], *, cutoff: float = 0.6) -> list[str]:
    """The closest of `choices` to a misspelt `word` (at most one), for a "did you mean" hint; difflib is
    imported when a file has a key to suggest for (most builds have none)."""
    import difflib

    return difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
