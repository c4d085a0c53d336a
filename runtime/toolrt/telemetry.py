"""OpenTelemetry: spans and metrics by the semantic conventions for GenAI tools and MCP, when the host has a
tracer (or meter) provider; nothing, at the cost of a dictionary lookup, when it has none.

- every `rt.call` is an `execute_tool {gen_ai.tool.name}` span (`gen_ai.operation.name`,
  `gen_ai.tool.name`, `gen_ai.tool.call.id`, `error.type` for a call that did not end `ok`), a child of
  whatever span is current (`toolrt serve`: the MCP SDK's server span, whose parent is the request's
  `_meta.traceparent`), with child spans `permission` (the action and the deciding rule),
  `sandbox spawn`, `process` and `audit write`;
- a process toolrt starts gets `TRACEPARENT` in its environment (`with_traceparent`);
- metrics: `toolrt.call.duration` (seconds, by tool and outcome), `toolrt.asks` (by outcome),
  `toolrt.sessions.active` and `toolrt.reload.generation` (observed, `observe`).

Only `opentelemetry-api` is used, and only once the process has imported it: a host that set a provider
has, and the MCP SDK does in `toolrt serve`; `toolrt call`, `serve` and `chat` configure the SDK from the
standard `OTEL_*` variables when the `otel` extra is installed (`faces.otel`). A provider that is the
API's proxy or no-op, or the SDK's with `OTEL_SDK_DISABLED=true`, counts as none.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = [
    "call_span",
    "count_ask",
    "enrich_request_span",
    "observe",
    "record_call",
    "span",
    "tracer",
    "with_traceparent",
]

_NAME = "toolrt"
_tracers: dict[int, Any] = {}
"""id(tracer provider) → its tracer, or None for a provider that records nothing."""
_instruments: dict[int, dict[str, Any] | None] = {}
"""id(meter provider) → the instruments made from it, or None for one that records nothing."""
_ABSENT = object()
_variables: dict[str, bool] = {}
"""Whether `OTEL_PYTHON_TRACER_PROVIDER` / `OTEL_PYTHON_METER_PROVIDER` is set, looked up once."""
_providers: list[Any] = []
"""The providers keyed above, kept alive so that an id is never reused by another."""


def _global(api: Any, name: str, variable: str, get: str) -> Any:
    """The provider `api` holds in its global `name`, or None when none is set (and `variable` names no
    provider to load). The global is read first: `get_tracer_provider()` looks the variable up in
    `os.environ` on every call while none is set, which costs more than the rest of this module's work."""
    provider = getattr(api, name, _ABSENT)
    if provider is None:
        if variable not in _variables:
            _variables[variable] = variable in os.environ
        if not _variables[variable]:
            return None
    return getattr(api, get)()


def tracer() -> Any:
    """The tracer spans go to, or None when the process has no tracer provider that records."""
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return None
    provider = _global(api, "_TRACER_PROVIDER", "OTEL_PYTHON_TRACER_PROVIDER", "get_tracer_provider")
    if provider is None:
        return None
    key = id(provider)
    if key not in _tracers:
        made = provider.get_tracer(_NAME)
        silent = isinstance(provider, (api.ProxyTracerProvider, api.NoOpTracerProvider))
        _tracers[key] = None if silent or isinstance(made, api.NoOpTracer) else made
        _providers.append(provider)
    return _tracers[key]


def _meters() -> dict[str, Any] | None:
    api = sys.modules.get("opentelemetry.metrics._internal")
    if api is None:
        return None
    provider = _global(api, "_METER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER", "get_meter_provider")
    if provider is None:
        return None
    key = id(provider)
    if key not in _instruments:
        _providers.append(provider)
        meter = provider.get_meter(_NAME)
        if type(provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider") or isinstance(meter, api.NoOpMeter):
            _instruments[key] = None
        else:
            _instruments[key] = {
                "meter": meter,
                "duration": meter.create_histogram(
                    "toolrt.call.duration", unit="s", description="Duration of rt.call, by tool and outcome"
                ),
                "asks": meter.create_counter("toolrt.asks", description="Permission asks, by outcome"),
            }
    return _instruments[key]


@contextmanager
def call_span(tool: str) -> Iterator[Any]:
    """The `execute_tool` span of one call (None without a tracer); its end attributes come from `record_call`."""
    traced = tracer()
    if traced is None:
        yield None
        return
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    with traced.start_as_current_span(f"execute_tool {tool}", attributes=attributes) as current:
        yield current


@contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
    """A child span of the current one (None without a tracer)."""
    traced = tracer()
    if traced is None:
        yield None
        return
    with traced.start_as_current_span(name, attributes=attributes) as current:
        yield current


def record_call(
    current: Any, *, tool: str, call_id: str, agent: str, principal: str | None, status: str, seconds: float
) -> None:
    """A finished call: the attributes of its span `current` (when traced), and its duration metric."""
    if current is not None:
        current.set_attribute("gen_ai.tool.name", tool)
        current.set_attribute("gen_ai.tool.call.id", call_id)
        current.set_attribute("toolrt.agent", agent)
        current.set_attribute("toolrt.call.outcome", status)
        if principal is not None:
            current.set_attribute("enduser.id", principal)
        if status != "ok":
            current.set_attribute("error.type", status)
            current.set_status(_error_status(status))
    meters = _meters()
    if meters is not None:
        meters["duration"].record(seconds, {"gen_ai.tool.name": tool, "toolrt.call.outcome": status})


def _error_status(description: str) -> Any:
    from opentelemetry.trace import Status, StatusCode

    return Status(StatusCode.ERROR, description)


def count_ask(outcome: str) -> None:
    """One permission ask ended: `once`, `always`, `reject`, or `unanswered` (nobody could be asked)."""
    meters = _meters()
    if meters is not None:
        meters["asks"].add(1, {"toolrt.ask.outcome": outcome})


def observe(sessions: Callable[[], int], generation: Callable[[], int]) -> None:
    """Report the active sessions and the reload generation whenever metrics are collected."""
    meters = _meters()
    if meters is None:
        return
    from opentelemetry.metrics import Observation

    meter = meters["meter"]
    meter.create_observable_gauge(
        "toolrt.sessions.active",
        callbacks=[lambda options: [Observation(sessions())]],
        description="Sessions held (approvals, read stamps, todos)",
    )
    meter.create_observable_gauge(
        "toolrt.reload.generation",
        callbacks=[lambda options: [Observation(generation())]],
        description="The configuration generation served (1 at start, one more per reload)",
    )


def enrich_request_span(session: str, principal: str | None, agent: str | None) -> None:
    """Name the session (an id, never its token), the caller and its agent on the current span: in
    `toolrt serve`, the MCP SDK's server span of the request (`{mcp.method.name} {gen_ai.tool.name}`)."""
    if tracer() is None:
        return
    from opentelemetry.trace import get_current_span

    current = get_current_span()
    current.set_attribute("mcp.session.id", session)
    if principal is not None:
        current.set_attribute("enduser.id", principal)
    if agent is not None:
        current.set_attribute("toolrt.agent", agent)


def with_traceparent(env: Mapping[str, str]) -> Mapping[str, str]:
    """`env` with `TRACEPARENT` (and `TRACESTATE`) of the current span, when one is being traced."""
    if tracer() is None:
        return env
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    parent = carrier.get("traceparent")
    if parent is None:
        return env
    added = {**env, "TRACEPARENT": parent}
    if carrier.get("tracestate"):
        added["TRACESTATE"] = carrier["tracestate"]
    return added
