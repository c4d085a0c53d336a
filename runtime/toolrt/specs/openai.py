"""OpenAI function specs (chat completions and responses), strict whenever the schema allows it.

Strict mode wants every object closed (`additionalProperties: false`) with every property in
`required`; optional properties become nullable instead. Keywords outside the strict subset move
into the description of their node. A schema that strict mode cannot express at all (an open
dict, an untyped value, several `allOf` entries, a root `anyOf`, the size limits) makes this one
tool fall back to `strict: false`, with its schema only minimally cleaned.

`title` is dropped without a warning: pydantic puts one on every field, where it only repeats the
property name. `default` and `examples` do reach the model, as notes in the description.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from .core import SILENT_KEYWORDS, Schema, descendant_pointer, inferred_type, thaw, type_names, with_notes
from .lift import lift_root
from .model import CompiledSpec, SpecWarning
from .rewriter import Rewriter

__all__ = ["STRICT_FORMATS", "STRICT_KEYWORDS", "compile_openai"]

STRICT_KEYWORDS = frozenset(
    {
        "type",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "definitions",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)
"""Every keyword a strict schema may contain."""
STRICT_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
MAX_OBJECT_DEPTH = 10
MAX_PROPERTIES = 5000
MAX_ENUM_VALUES = 1000
_LOOKAROUND = re.compile(r"\(\?<?[=!]")
# Handled by the object, array and combinator steps rather than copied.
_STRUCTURAL = frozenset({"properties", "required", "additionalProperties", "items", "anyOf", "oneOf", "title"})


class NotStrict(Exception):
    """The schema cannot be made strict; `pointer` names the node that prevents it."""

    def __init__(self, pointer: str, reason: str) -> None:
        super().__init__(reason)
        self.pointer = pointer
        self.reason = reason


def nullable(schema: Schema) -> Schema:
    """`schema` that also accepts `null`: how strict mode says a property is optional."""
    if "$ref" in schema:
        return {"anyOf": [schema, {"type": "null"}]}
    if isinstance(schema.get("anyOf"), list):
        if {"type": "null"} in schema["anyOf"]:
            return schema
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    types = type_names(schema)
    if not types or "null" in types:
        return schema
    out = {**schema, "type": [*types, "null"]}
    if "const" in out:
        out["enum"] = [out.pop("const"), None]
    elif isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


class StrictRewriter(Rewriter):
    """Rewrites a schema into OpenAI's strict subset or raises `NotStrict`."""

    label = "OpenAI strict mode"
    # OpenAI follows recursive references itself; only a reference with siblings is inlined, once.
    recursion_limit: ClassVar[int] = 1

    def __init__(self, root: Schema, format: str) -> None:
        super().__init__(root, format)
        self._depth = 0
        self._properties = 0
        self._enum_values = 0

    def run(self) -> Schema:
        out = super().run()
        if self._properties > MAX_PROPERTIES:
            raise NotStrict("", f"it has {self._properties} properties (at most {MAX_PROPERTIES})")
        if self._enum_values > MAX_ENUM_VALUES:
            raise NotStrict("", f"it has {self._enum_values} enum values (at most {MAX_ENUM_VALUES})")
        return out

    def inline_ref(self, schema: Schema) -> bool:
        return any(key != "$ref" and key not in SILENT_KEYWORDS for key in schema)

    def unresolved(self, schema: Schema, pointer: str) -> Any:
        raise NotStrict(pointer, f"'$ref' {schema['$ref']!r} does not point inside the schema")

    def cut(self, schema: Schema, target: Schema, pointer: str, why: str) -> Any:
        self.warn("$ref", pointer, f"OpenAI strict mode does not allow keywords beside '$ref'; dropped them ({why})")
        return {"$ref": schema["$ref"]}

    def multi_all_of(self, schema: Schema, pointer: str) -> None:
        raise NotStrict(pointer, "'allOf' has several entries, which strict mode cannot merge safely")

    def rewrite(self, schema: Schema, pointer: str, *, root: bool) -> Any:
        if "$ref" in schema:
            return self._ref(schema, pointer, root)
        notes: list[str] = []
        out: Schema = {}
        self._type(schema, out, pointer)
        if isinstance(schema.get("description"), str):
            out["description"] = schema["description"]
        for key, value in schema.items():
            if key in SILENT_KEYWORDS or key in _STRUCTURAL or key in ("type", "description"):
                continue
            self._keyword(key, value, out, pointer, notes)
        self._combinators(schema, out, pointer, root)
        types = type_names(out)
        if "object" in types or "properties" in schema:
            self._object(schema, out, pointer, root)
        if "array" in types or "items" in schema:
            self._array(schema, out, pointer)
        for key in ("$defs", "definitions"):
            # Definitions read best after the properties that use them.
            if key in out:
                out[key] = out.pop(key)
        return self.describe(out, notes, root=root)

    def _ref(self, schema: Schema, pointer: str, root: bool) -> Any:
        """A `$ref` node, kept as the bare reference (strict mode allows nothing beside it)."""
        if root:
            raise NotStrict(pointer, "the root schema must be an object, not a '$ref'")
        if self.refs.resolve(schema["$ref"]) is None:
            self.unresolved(schema, pointer)
        return {"$ref": schema["$ref"]}

    def _type(self, schema: Schema, out: Schema, pointer: str) -> None:
        """`out`'s type: the declared one, else the one its keywords imply (none for a combinator)."""
        if "type" in schema:
            out["type"] = thaw(schema["type"])
            return
        if "anyOf" in schema or "oneOf" in schema:
            return
        inferred = inferred_type(schema)
        if inferred is None:
            raise NotStrict(pointer, "a schema without 'type' (any value) cannot be strict")
        out["type"] = inferred

    def _keyword(self, key: str, value: Any, out: Schema, pointer: str, notes: list[str]) -> None:
        """Copies one keyword strict mode keeps into `out`, or drops it with a note."""
        if key in ("$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: self.node(sub, descendant_pointer(pointer, key, name)) for name, sub in value.items()}
        elif key == "format" and value not in STRICT_FORMATS:
            self.drop(key, value, pointer, notes, f" {value!r}")
        elif key == "pattern" and isinstance(value, str) and _LOOKAROUND.search(value):
            self.drop(key, value, pointer, notes, " with lookaround")
        elif key in STRICT_KEYWORDS:
            out[key] = thaw(value)
            if key == "enum" and isinstance(value, list):
                self._enum_values += len(value)
        else:
            self.drop(key, value, pointer, notes)

    def _combinators(self, schema: Schema, out: Schema, pointer: str, root: bool) -> None:
        any_of, one_of = schema.get("anyOf"), schema.get("oneOf")
        if any_of is not None and one_of is not None:
            raise NotStrict(pointer, "'anyOf' and 'oneOf' on the same node cannot be expressed with 'anyOf' alone")
        if one_of is not None:
            self.warn("oneOf", pointer, "OpenAI strict mode does not support 'oneOf'; rewritten as 'anyOf'")
        keyword, branches = ("oneOf", one_of) if one_of is not None else ("anyOf", any_of)
        if branches is None:
            return
        if root:
            raise NotStrict(pointer, f"the root schema cannot use '{keyword}'")
        if not isinstance(branches, list) or not branches:
            raise NotStrict(pointer, f"'{keyword}' must be a non-empty list of schemas")
        out["anyOf"] = [self.node(b, descendant_pointer(pointer, keyword, i)) for i, b in enumerate(branches)]

    def _object(self, schema: Schema, out: Schema, pointer: str, root: bool) -> None:
        extra = schema.get("additionalProperties", False)
        if extra is not False:
            raise NotStrict(pointer, "'additionalProperties' lets the object take any key (an open dict)")
        properties = schema.get("properties")
        if properties is None and not root and "additionalProperties" not in schema:
            raise NotStrict(pointer, "an object without 'properties' takes any key (an open dict)")
        properties = properties if isinstance(properties, dict) else {}
        declared = schema.get("required")
        required = set(declared) if isinstance(declared, list) else set()
        self._depth += 1
        try:
            if self._depth > MAX_OBJECT_DEPTH:
                raise NotStrict(pointer, f"objects are nested more than {MAX_OBJECT_DEPTH} levels deep")
            rewritten: Schema = {}
            for name, sub in properties.items():
                child = self.node(sub, descendant_pointer(pointer, "properties", name))
                rewritten[name] = child if name in required else nullable(child)
        finally:
            self._depth -= 1
        self._properties += len(properties)
        out["properties"] = rewritten
        out["required"] = list(properties)
        out["additionalProperties"] = False
        if "type" not in out:
            out["type"] = "object"

    def _array(self, schema: Schema, out: Schema, pointer: str) -> None:
        items = schema.get("items")
        if not isinstance(items, (dict, bool)):
            raise NotStrict(pointer, "an array needs one 'items' schema (untyped and tuple arrays cannot be strict)")
        out["items"] = self.node(items, descendant_pointer(pointer, "items"))


def _fallback(parameters: Schema, format: str, error: NotStrict) -> tuple[Schema, list[str], list[SpecWarning]]:
    cleaned = {k: v for k, v in parameters.items() if k not in SILENT_KEYWORDS}
    schema, notes, warnings = lift_root(cleaned, format=format, label="OpenAI")
    reason = SpecWarning(format, "strict", error.pointer, f"OpenAI strict mode is off for this tool: {error.reason}")
    return schema, notes, [reason, *warnings]


def compile_openai(format: str, *, name: str, description: str, parameters: Schema) -> CompiledSpec:
    """The `openai` (chat completions) or `openai-responses` spec of one tool."""
    rewriter = StrictRewriter(parameters, format)
    try:
        schema = rewriter.run()
        notes, warnings, strict = rewriter.root_notes, list(rewriter.warnings), True
    except NotStrict as error:
        schema, notes, warnings = _fallback(parameters, format, error)
        strict = False
    text = with_notes(description, notes) or ""
    if format == "openai":
        function = {"name": name, "description": text, "parameters": schema, "strict": strict}
        return CompiledSpec({"type": "function", "function": function}, tuple(warnings))
    spec = {"type": "function", "name": name, "description": text, "parameters": schema, "strict": strict}
    return CompiledSpec(spec, tuple(warnings))
