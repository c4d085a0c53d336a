"""The OpenTelemetry SDK for `toolrt call`, `serve` and `chat`, configured from the standard `OTEL_*` variables
when the `otel` extra is installed (`pip install 'toolrt[otel]'`); `toolrt.telemetry` then has a provider.

Configured only when a variable asks for an exporter (`OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER`,
`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`),
and never with `OTEL_SDK_DISABLED=true`. Exporters: `otlp` (OTLP over HTTP/protobuf, the default once
asked; the exporter reads its own `OTEL_EXPORTER_OTLP_*` variables), `console`, `none`. The resource
comes from `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` (service name `toolrt` by default). The
returned function flushes and shuts the providers down: the command calls it before it exits.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["configure"]

_ASKING = (
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


def _nothing() -> None:
    return None


def configure() -> Callable[[], None]:
    """Set the global tracer and meter providers from the environment; the function that flushes them."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return _nothing
    if not any(os.environ.get(name) for name in _ASKING):
        return _nothing
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:  # the `otel` extra is not installed: the API's no-op providers stay
        return _nothing
    resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "toolrt"})
    shutdowns: list[Callable[[], Any]] = []
    span_exporter = _span_exporter(os.environ.get("OTEL_TRACES_EXPORTER", "otlp"))
    if span_exporter is not None:
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        trace.set_tracer_provider(tracer_provider)
        shutdowns.append(tracer_provider.shutdown)
    metric_exporter = _metric_exporter(os.environ.get("OTEL_METRICS_EXPORTER", "otlp"))
    if metric_exporter is not None:
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        meter_provider = MeterProvider(
            resource=resource, metric_readers=[PeriodicExportingMetricReader(metric_exporter)]
        )
        metrics.set_meter_provider(meter_provider)
        shutdowns.append(meter_provider.shutdown)

    def shutdown() -> None:
        for each in shutdowns:
            each()  # flushes what is batched, then stops

    return shutdown


def _span_exporter(name: str) -> Any:
    name = name.strip().lower()
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    return None


def _metric_exporter(name: str) -> Any:
    name = name.strip().lower()
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter()
    if name == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter()
    return None
