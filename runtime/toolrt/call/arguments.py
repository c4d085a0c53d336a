"""The arguments step: parse, apply schema defaults, validate with the validator compiled per snapshot.

Only a failing call pays for the detailed message, which names every bad field by JSON pointer in
OpenCode's form, so the model can rewrite its call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..build.compiled import CompiledTool, import_ref, project_root_of
from ..errors import InvalidArgumentsError
from ..specs.nulls import strip_strict_nulls

__all__ = ["parse_arguments"]


def parse_arguments(tool: CompiledTool, raw: Any, root: Path | None = None) -> dict[str, Any]:
    """Parse (a JSON string), apply schema defaults, validate with the compiled validator."""
    if raw is None:
        args: Any = {}
    elif isinstance(raw, str):
        try:
            args = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise InvalidArgumentsError(
                _invalid_text(tool, f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})")
            ) from None
        except RecursionError:  # the parser ran out of stack: the text nests about a thousand deep
            raise InvalidArgumentsError(_invalid_text(tool, f"\n- (root): {_TOO_DEEP}")) from None
    else:
        args = raw
    if type(args) is not dict and not isinstance(args, Mapping):  # the common case without the ABC check
        raise InvalidArgumentsError(
            _invalid_text(tool, f"expected a JSON object of arguments, got {type(args).__name__}")
        )
    args = dict(args)
    if None in args.values():
        # OpenAI strict mode sends null for an optional argument the model leaves out: such a null
        # means "use the default". A property declared nullable keeps its null.
        args = strip_strict_nulls(args, tool.definition.parameters)
    for name, default in tool.defaults.items():
        args.setdefault(name, default)
    if tool.validator.is_valid(args):
        return args  # type: ignore[no-any-return]  # a dict of JSON values
    deep = _too_deep(args)
    if deep is not None:  # before anything walks it: the validator cannot report an error that deep
        raise InvalidArgumentsError(_invalid_text(tool, f"\n- /{deep}: {_TOO_DEEP}"))
    stripped = strip_strict_nulls(args, tool.definition.parameters)
    if stripped != args and tool.validator.is_valid(stripped):
        return stripped  # nulls inside nested objects, left out the same way
    errors = list(tool.validator.iter_errors(args))
    lines = [f"- {_pointer(e.instance_path)}: {_message(e)}" for e in errors]
    default_text = _invalid_text(tool, "\n" + "\n".join(lines))
    hook = tool.definition.format_validation_error
    if hook:
        raise InvalidArgumentsError(_formatted(hook, tool, root, errors, default_text))
    raise InvalidArgumentsError(default_text)


MAX_DEPTH = 200
"""How deeply the lists and objects of arguments that fail validation may nest before they are refused
as such: the validator cannot report an error in a value 256 levels deep (it raises `ValueError`), and
json's parser runs out of stack near 1,000. No tool's arguments need a tenth of it."""
_TOO_DEEP = f"nested more than {MAX_DEPTH} deep (lists and objects), which no tool's arguments need"


def _too_deep(args: Mapping[str, Any]) -> str | None:
    """The name of the first argument whose lists and objects nest deeper than `MAX_DEPTH`, else None.
    Walked with a stack of its own, not by recursion, as the value may nest as deep as the parser let it."""
    for name, value in args.items():
        stack: list[tuple[Any, int]] = [(value, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_DEPTH:
                return str(name)
            if isinstance(node, Mapping):
                stack.extend((child, depth + 1) for child in node.values())
            elif isinstance(node, (list, tuple)):
                stack.extend((child, depth + 1) for child in node)
    return None


def _formatted(hook: str, tool: CompiledTool, root: Path | None, errors: list[Any], default_text: str) -> str:
    """The project's `format_validation_error` message; toolrt's own when the hook cannot give one."""
    try:
        formatter: Callable[[str, list[Any]], str] = import_ref(
            hook, project_root_of(tool.definition, root) if root is not None else None
        )
        text = formatter(tool.id, errors)
    except Exception:  # project code: its failure must not turn a bad call into a crash
        import logging  # imported when a hook fails (`toolrt validate` imports this module)

        logging.getLogger("toolrt.call").exception(
            "format_validation_error hook %s failed; using the default message", hook
        )
        return default_text
    return text if isinstance(text, str) and text else default_text


def _invalid_text(tool: CompiledTool, detail: str) -> str:
    return (
        f"The {tool.id} tool was called with invalid arguments: {detail}.\n"
        "Please rewrite the input so it satisfies the expected schema."
    )


def _message(error: Any) -> str:
    """The validator's message, except that an enum error names every allowed value (the validator
    shortens long lists to "or N other candidates", which leaves the model guessing)."""
    options = getattr(error.kind, "options", None)
    if type(error.kind).__name__ == "Enum" and isinstance(options, list):
        allowed = ", ".join(json.dumps(option) for option in options)
        return f"{json.dumps(error.instance)} is not one of the allowed values: {allowed}"
    return str(error.message)


def _pointer(path: Sequence[Any]) -> str:
    return "/" + "/".join(str(p) for p in path) if path else "(root)"
