"""The truncation step: output past the limits is cut, the full text saved, and the cut says how to read on."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

from ..result import ToolResult
from ..truncate import cleanup_outputs, truncate_output
from .active import ActiveCall

__all__ = ["truncate_result"]


def truncate_result(call: ActiveCall, result: ToolResult) -> ToolResult:
    """`result` cut to the tool's (or the project's) limits, unless the handler truncated it itself."""
    tool, snapshot = call.tool, call.snapshot
    spec = tool.definition.truncate
    if spec is None or "truncated" in result.metadata or result.error is not None:
        return result
    defaults = snapshot.resolved.values.truncate
    max_lines = spec.max_lines or defaults.max_lines
    max_bytes = spec.max_bytes or defaults.max_bytes
    output = result.output
    if len(output) <= max_bytes // 4 and output.count("\n") < max_lines:
        return result  # certainly within both limits: skip the exact walk
    # The hint names the task tool only when the model was given it (and may use it); else grep and read.
    delegate = snapshot.permissions.ruleset(call.agent).evaluate("task", "*") if "task" in call.toolset else None
    truncated = truncate_output(
        output,
        output_dir=snapshot.truncation_dir,
        max_lines=max_lines,
        max_bytes=max_bytes,
        direction=spec.direction or defaults.direction or "head",
        delegate_hint=delegate is not None and delegate.action != "deny",
        saved_path=Path(result.metadata["outputPath"]) if "outputPath" in result.metadata else None,
    )
    cleaned = call.services.cleaned
    if snapshot.truncation_dir not in cleaned:
        # Saved outputs older than 7 days go, once per directory per Runtime (OpenCode's hourly job).
        cleaned.add(snapshot.truncation_dir)
        cleanup_outputs(snapshot.truncation_dir)
    if not truncated.truncated:
        return result
    metadata = dict(result.metadata)
    metadata["truncated"] = True
    if truncated.output_path is not None:
        metadata["outputPath"] = str(truncated.output_path)
    return replace(result, output=truncated.content, metadata=MappingProxyType(metadata))
