"""The low-level MCP server of `toolrt serve` over one `McpFace`: its handlers registered (tools, resources,
skills, logging, subscriptions, tasks), the request-state boundary, and the capabilities it advertises."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import mcp_types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary

from ..api import Runtime
from ..scope import CallScope
from .serve_client import RequestContext, state_security
from .serve_face import McpFace
from .serve_limits import ServeLimits
from .serve_listing import ShapedListing
from .serve_skills import EXTENSION, GetSkillParams, ReadDirectoryParams
from .serve_tasks import register as serve_tasks

_CallResult = types.CallToolResult | types.InputRequiredResult


class _ToolrtServer(Server[Any]):
    """Advertises `tools.listChanged` on every transport (HTTP builds its own initialization options)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True, resources_changed=True),
            experimental_capabilities,
            extensions,
        )


def build_server(
    rt: Runtime, scope: CallScope, limits: ServeLimits | None = None, *, offer_unaskable: bool = False
) -> tuple[Server[Any], McpFace]:
    """The low-level MCP server over `rt` and its handlers (for in-process use and tests)."""
    face = McpFace(rt, scope, limits, offer_unaskable=offer_unaskable)
    notice = face.unasked_notice()
    server = _ToolrtServer(
        "toolrt",
        version=_version(),
        instructions=f"Tools of the toolrt project at {rt.root}." + (f"\n\n{notice}" if notice else ""),
        get_tool_input_schema=face.input_schema,
        # The listing is cached in wire form: a mapping, which the SDK shapes for the protocol version.
        on_list_tools=cast(
            "Callable[[RequestContext, types.PaginatedRequestParams | None], Awaitable[types.ListToolsResult]]",
            face.list_tools,
        ),
        # A task handle (`serve_tasks`) is a mapping: the SDK passes a result of an extension's resultType as is.
        on_call_tool=cast(
            "Callable[[RequestContext, types.CallToolRequestParams], Awaitable[_CallResult]]", face.call_tool
        ),
        on_subscriptions_listen=face.listen,
        on_list_resources=face.skills.list_resources,
        on_read_resource=face.skills.read_resource,
        on_list_resource_templates=face.skills.list_resource_templates,
    )
    server.extensions[EXTENSION] = {"directoryRead": True}
    server.add_request_handler("skills/list", types.PaginatedRequestParams, face.skills.list_skills)
    server.add_request_handler("skills/get", GetSkillParams, face.skills.get_skill)
    server.add_request_handler("resources/directory/read", ReadDirectoryParams, face.skills.read_directory)
    server.middleware.append(
        RequestStateBoundary(state_security(rt.snapshot.data_dir, rt.store), default_audience="toolrt")
    )
    serve_tasks(server, face.tasks)
    server.middleware.append(ShapedListing(face.shaped_listing, server.cache_hints))
    server.add_notification_handler("notifications/initialized", types.NotificationParams, face.remember_session)
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, face.set_log_level)
    return server, face


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolrt")
    except PackageNotFoundError:
        return "0"
