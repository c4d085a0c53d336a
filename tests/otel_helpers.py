"""The OpenTelemetry SDK's providers with in-memory exporters, installed as the process's global ones for
one test (the API lets a process set them once: reset as OpenTelemetry's own test utilities do)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

__all__ = ["Installed", "installed_providers"]


class Installed:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        data = self.reader.get_metrics_data()
        found = []
        for resource in data.resource_metrics if data is not None else ():
            for scoped in resource.scope_metrics:
                for metric in scoped.metrics:
                    if metric.name == name:
                        found += [(dict(point.attributes or {}), point) for point in metric.data.data_points]
        return found


@contextmanager
def installed_providers() -> Iterator[Installed]:
    """The providers installed while the block runs; the API's proxies again after it."""
    made = Installed()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(made.spans))
    meter_provider = MeterProvider(metric_readers=[made.reader])
    trace_api: Any = trace
    metrics_api: Any = sys.modules["opentelemetry.metrics._internal"]
    saved = (trace_api._TRACER_PROVIDER, metrics_api._METER_PROVIDER)
    trace_api._TRACER_PROVIDER_SET_ONCE = Once()
    metrics_api._METER_PROVIDER_SET_ONCE = Once()
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    try:
        yield made
    finally:
        trace_api._TRACER_PROVIDER_SET_ONCE = Once()
        metrics_api._METER_PROVIDER_SET_ONCE = Once()
        trace_api._TRACER_PROVIDER, metrics_api._METER_PROVIDER = saved
        for module in list(sys.modules.values()):  # a proxy tracer made at import (the MCP SDK's) lets go too
            proxy = getattr(module, "_tracer", None)
            if isinstance(proxy, trace.ProxyTracer):
                proxy._real_tracer = None
        tracer_provider.shutdown()
        meter_provider.shutdown()
