"""Gemini FunctionDeclarations: the OpenAPI subset of `google.ai.generativelanguage.v1beta.Schema`.

Gemini takes no references, no type arrays, no `oneOf`/`allOf` and only string enums. References
are inlined (recursion cut after a few levels), `[T, "null"]` becomes `nullable`, several types
become an `anyOf`, `const` becomes a one-value enum, and every other keyword outside the allowed
fields moves into the description of its node. A tool without parameters declares none, since
Gemini refuses an object without properties. `title` is dropped without a warning, as for OpenAI.
"""

from __future__ import annotations

from typing import Any

from .core import (
    SILENT_KEYWORDS,
    Schema,
    as_json,
    descendant_pointer,
    inferred_type,
    thaw,
    type_names,
    with_notes,
)
from .lift import lift_root
from .model import CompiledSpec
from .rewriter import Rewriter

__all__ = ["GEMINI_FIELDS", "compile_gemini"]

GEMINI_FIELDS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    }
)
"""The fields of Gemini's `Schema` message; anything else is refused with HTTP 400."""
GEMINI_FORMATS = {"string": ("enum", "date-time"), "number": ("float", "double"), "integer": ("int32", "int64")}
# Which keywords follow each type when a type array is split into `anyOf` branches.
TYPE_KEYWORDS = {
    "string": ("minLength", "maxLength", "pattern", "format", "contentEncoding", "contentMediaType"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"),
    "integer": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format"),
    "array": ("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains", "minContains", "maxContains"),
    "object": (
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
    ),
}
_TYPED = frozenset(k for keys in TYPE_KEYWORDS.values() for k in keys)
# Handled by dedicated steps rather than copied or moved.
_HANDLED = frozenset(
    {"type", "nullable", "const", "enum", "oneOf", "anyOf", "title", "required", "$defs", "definitions"}
)


class GeminiRewriter(Rewriter):
    """Rewrites a schema into Gemini's `Schema` subset."""

    label = "Gemini"

    def rewrite(self, schema: Schema, pointer: str, *, root: bool) -> Any:
        types = list(type_names(schema))
        nullable = schema.get("nullable") is True or "null" in types
        types = [t for t in types if t != "null"]
        if len(types) > 1:
            return self._split(schema, types, nullable, pointer, root)
        notes: list[str] = []
        out: Schema = {"type": types[0]} if types else {}
        if isinstance(schema.get("description"), str):
            out["description"] = schema["description"]
        type_name = types[0] if types else ""
        for key, value in schema.items():
            if key in SILENT_KEYWORDS or key in _HANDLED or key == "description":
                continue
            self._keyword(key, value, out, pointer, notes, type_name)
        nullable = self._alternatives(schema, out, pointer, notes) or nullable
        nullable = self._enum(schema, out, pointer, notes) or nullable
        self._required(schema, out, pointer)
        self._implied_type(out, pointer, root)
        if nullable:
            out["nullable"] = True
        return self.describe(out, notes, root=root)

    def _keyword(self, key: str, value: Any, out: Schema, pointer: str, notes: list[str], type_name: str) -> None:
        """Copies one keyword Gemini keeps into `out` (`type_name`: the node's one type, or ""), or drops it."""
        if self._nested(key, value, out, pointer):
            return
        if key == "additionalProperties":
            if value is not False:
                self.drop(key, value, pointer, notes, " (an object that takes any key)")
        elif key == "examples" and isinstance(value, list) and value:
            out["example"] = thaw(value[0])
            if len(value) > 1:
                self.drop(key, value, pointer, notes, " (only one 'example')")
        elif key == "format" and value not in GEMINI_FORMATS.get(type_name, ()):
            self.drop(key, value, pointer, notes, f" {value!r} here")
        elif key in GEMINI_FIELDS:
            out[key] = thaw(value)
        else:
            self.drop(key, value, pointer, notes)

    def _nested(self, key: str, value: Any, out: Schema, pointer: str) -> bool:
        """Rewrites `properties` or `items` into `out`; False for any other keyword (or form)."""
        if key == "properties" and isinstance(value, dict):
            here = descendant_pointer(pointer, key)
            out[key] = {name: self.node(sub, descendant_pointer(here, name)) for name, sub in value.items()}
            return True
        if key == "items" and isinstance(value, (dict, bool)):
            out[key] = self.node(value, descendant_pointer(pointer, key))
            return True
        return False

    def _implied_type(self, out: Schema, pointer: str, root: bool) -> None:
        """The type `properties` or `items` imply when none was declared; a warning for an open object."""
        if "properties" in out:
            out.setdefault("type", "object")
        elif "items" in out:
            out.setdefault("type", "array")
        if out.get("type") == "object" and not out.get("properties") and not root:
            self.warn("properties", pointer, "Gemini may refuse an object without 'properties' (an open dict)")

    def _split(self, schema: Schema, types: list[str], nullable: bool, pointer: str, root: bool) -> Any:
        """A type array as an `anyOf` of one branch per type, each with the keywords of its type."""
        outer = {k: v for k, v in schema.items() if k not in _TYPED and k not in ("type", "anyOf", "oneOf")}
        if nullable:
            outer["nullable"] = True
        out = self.rewrite(outer, pointer, root=root)
        # The branches exist only in the output, so their warnings name the declaring node.
        branches = [{"type": t, **{k: schema[k] for k in TYPE_KEYWORDS.get(t, ()) if k in schema}} for t in types]
        out["anyOf"] = [self.node(branch, pointer) for branch in branches]
        return out

    def _alternatives(self, schema: Schema, out: Schema, pointer: str, notes: list[str]) -> bool:
        """Rewrites `anyOf`/`oneOf` into `out`; True when one alternative was `null`."""
        keyword = "anyOf" if "anyOf" in schema else "oneOf"
        branches = schema.get(keyword)
        if keyword == "anyOf" and "oneOf" in schema:
            self.drop("oneOf", schema["oneOf"], pointer, notes, " beside 'anyOf'")
        elif keyword in schema and keyword == "oneOf":
            self.warn("oneOf", pointer, "Gemini does not support 'oneOf'; rewritten as 'anyOf'")
        if not isinstance(branches, list):
            return False
        kept = [
            self.node(b, descendant_pointer(pointer, keyword, i))
            for i, b in enumerate(branches)
            if not (isinstance(b, dict) and type_names(b) == ("null",))
        ]
        if len(kept) == 1 and isinstance(kept[0], dict) and out.get("type", kept[0].get("type")) == kept[0].get("type"):
            # One alternative left (the other was null): it is the node itself, so both sides'
            # properties and required names hold together.
            for key, value in kept[0].items():
                if key == "description" and "description" in out:
                    continue
                if key == "properties" and isinstance(out.get(key), dict) and isinstance(value, dict):
                    out[key] = {**value, **out[key]}
                elif key == "required" and isinstance(out.get(key), list) and isinstance(value, list):
                    out[key] = [*out[key], *(name for name in value if name not in out[key])]
                else:
                    out.setdefault(key, value)
        elif kept:
            out["anyOf"] = kept
        return len(kept) < len(branches)

    def _enum(self, schema: Schema, out: Schema, pointer: str, notes: list[str]) -> bool:
        """Writes `const`/`enum` as Gemini's string enum; True when `null` was one of the values."""
        keyword = "const" if "const" in schema else "enum"
        if keyword == "const":
            values: Any = [schema["const"]]
        else:
            values = schema.get("enum")
        if not isinstance(values, list):
            return False
        has_null = None in values
        values = [v for v in values if v is not None]
        declared = out.get("type") or inferred_type({"enum": values})
        if not all(isinstance(v, str) for v in values):
            if declared in ("integer", "number", "boolean"):
                # Strings here would make the model send "1" where the arguments must hold 1.
                out["type"] = declared
                self.drop(keyword, schema[keyword], pointer, notes, " for a non-string type")
                return has_null
            self.warn(keyword, pointer, f"Gemini accepts only string '{keyword}' values; they were turned into strings")
            values = [v if isinstance(v, str) else as_json(v) for v in values]
        strings = [v for v in values if v != ""]
        if len(strings) < len(values):
            self.warn(keyword, pointer, f"Gemini does not accept an empty string in '{keyword}'; it was removed")
        if strings:
            out["enum"] = strings
            out["type"] = "string"
        return has_null

    def _required(self, schema: Schema, out: Schema, pointer: str) -> None:
        declared = schema.get("required")
        if not isinstance(declared, list):
            return
        properties = out.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        kept = [name for name in declared if name in properties]
        missing = [name for name in declared if name not in properties]
        if missing:
            self.warn(
                "required",
                pointer,
                f"Gemini requires 'required' to name existing properties; removed {as_json(missing)}",
            )
        if kept:
            out["required"] = kept


def compile_gemini(*, name: str, description: str, parameters: Schema) -> CompiledSpec:
    """The Gemini FunctionDeclaration of one tool."""
    lifted, notes, warnings = lift_root(parameters, format="gemini", label="Gemini")
    rewriter = GeminiRewriter(lifted, "gemini")
    schema = rewriter.run()
    spec: Schema = {"name": name, "description": with_notes(description, [*notes, *rewriter.root_notes]) or ""}
    if schema.get("properties"):
        spec["parameters"] = schema
    return CompiledSpec(spec, (*warnings, *rewriter.warnings))
