"""Lifting root-level `allOf`/`anyOf`/`oneOf` into one plain object, for providers that refuse them.

Anthropic (and OpenAI outside strict mode) want the root of the parameters to be a plain
`type: object`. A single `allOf` entry merges without loss. Several alternatives become one object
with the union of their properties, required only where every alternative requires them (all of
them for `allOf`), and the alternatives themselves are written into the tool description.
"""

from __future__ import annotations

from typing import Any

from .core import Schema, merge, note
from .model import SpecWarning
from .refs import RefIndex

__all__ = ["lift_root"]

COMBINATORS = ("allOf", "anyOf", "oneOf")


def lift_root(schema: Schema, *, format: str, label: str) -> tuple[Schema, list[str], list[SpecWarning]]:
    """The root as a plain object, the notes for the tool description, and the warnings.

    `schema` is not mutated, but the result shares its untouched subschemas: pass a private copy.
    """
    refs = RefIndex(schema)
    # Shallow: only the root and its `properties` change; the result may share subschemas with `schema`.
    out = dict(schema)
    warnings: list[SpecWarning] = []
    if "$ref" in out:
        # A root that is only a reference to its real shape loses nothing by being resolved.
        out = _merged(_resolved(out, refs), {k: v for k, v in out.items() if k != "$ref"}, format, label, warnings)
    all_of = out.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        rest = {k: v for k, v in out.items() if k != "allOf"}
        out = _merged(_resolved(all_of[0], refs), rest, format, label, warnings)
    notes: list[str] = []
    for keyword in COMBINATORS:
        if keyword not in out:
            continue
        declared = out.pop(keyword)
        branches = [_resolved(b, refs) for b in declared] if isinstance(declared, list) else []
        _lift(out, keyword, branches)
        notes.append(note(keyword, declared))
        warnings.append(
            SpecWarning(
                format,
                keyword,
                "",
                f"{label} does not accept '{keyword}' at the top level; its alternatives were lifted into one "
                "object and described in the tool description",
            )
        )
    out["type"] = "object"
    return out, notes, warnings


def _lift(out: Schema, keyword: str, branches: list[Schema]) -> None:
    declared_properties = out.get("properties")
    properties = out["properties"] = dict(declared_properties) if isinstance(declared_properties, dict) else {}
    required_sets: list[list[str]] = []
    for branch in branches:
        for name, sub in (branch.get("properties") or {}).items():
            properties.setdefault(name, sub)
        required = branch.get("required")
        required_sets.append([r for r in required if isinstance(r, str)] if isinstance(required, list) else [])
    if keyword == "allOf":
        lifted = [name for names in required_sets for name in names]
    else:
        # An alternative only makes a property mandatory when every alternative does.
        lifted = [name for name in (required_sets[0] if required_sets else []) if all(name in s for s in required_sets)]
    declared = out.get("required")
    declared = declared if isinstance(declared, list) else []
    required = list(dict.fromkeys([*declared, *lifted]))
    if required:
        out["required"] = required


def _resolved(branch: Any, refs: RefIndex) -> Schema:
    if not isinstance(branch, dict):
        return {} if branch is True else {"not": {}}
    found = refs.resolve(branch.get("$ref")) if "$ref" in branch else None
    if found is None:
        return branch
    merged, _ = merge(found[0], {k: v for k, v in branch.items() if k != "$ref"})
    return merged


def _merged(base: Schema, overlay: Schema, format: str, label: str, warnings: list[SpecWarning]) -> Schema:
    merged, conflicts = merge(base, overlay)
    warnings.extend(
        SpecWarning(format, key, "", f"{label}: the root schema and the schema it refers to disagree on '{key}'")
        for key in conflicts
    )
    return merged
