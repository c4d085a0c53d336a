"""OpenTelemetry (issue 30): `rt.call`'s `execute_tool` span and its children, `TRACEPARENT` in a process's
environment, the metrics, the MCP SDK's server span enriched by `toolrt serve`, nothing without a provider;
checked with the SDK's in-memory exporter and reader, and once through a real OTLP/HTTP receiver on
loopback that decodes what `toolrt call` exported with the exporter's own protobuf package."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_helpers import Installed, installed_providers
from serve_http import serving

from toolrt import telemetry
from toolrt.api import Runtime
from toolrt.store.model import session_id

MARK = """\
id: mark
description: "Writes its environment to ran.env."
parameters: {type: object, properties: {}}
handler: {shell: "env > ran.env; echo marked"}
"""
NOPE = """\
id: nope
description: "Denied by the project's rules for the target `prod`."
parameters: {type: object, properties: {target: {type: string}}, required: [target]}
handler: {shell: "env > nope.env"}
permission: {key: nope, patterns: ["{{ target }}"]}
"""
PERMISSIONS = "permission:\n  mark: allow\n  nope: {'*': allow, prod: deny}\n"


def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "tools.d").mkdir(parents=True)
    (root / "tools.d" / "mark.yaml").write_text(MARK, encoding="utf-8")
    (root / "tools.d" / "nope.yaml").write_text(NOPE, encoding="utf-8")
    (root / "toolrt.yaml").write_text("builtin_tools: false\n", encoding="utf-8")
    (root / "permissions.yaml").write_text(PERMISSIONS, encoding="utf-8")
    return root


@pytest.fixture
def installed() -> Iterator[Installed]:
    with installed_providers() as made:
        yield made


def by_name(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


def test_a_call_is_an_execute_tool_span_with_its_steps_as_children_and_the_process_continues_the_trace(
    tmp_path: Path, installed: Installed
) -> None:
    with Runtime.load(project(tmp_path), settings={"data_dir": tmp_path / "data"}) as rt:
        result = rt.call_sync("mark", {}, call_id="call_7")
        assert result.error is None and result.output == "marked\n"
        spans = by_name(installed.finished())
        assert set(spans) == {"execute_tool mark", "permission", "sandbox spawn", "process", "audit write"}
        call = spans["execute_tool mark"]
        assert call.attributes is not None and call.context is not None
        assert (
            dict(call.attributes).items()
            >= {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "mark",
                "gen_ai.tool.call.id": "call_7",
                "toolrt.call.outcome": "ok",
            }.items()
        )
        assert "error.type" not in call.attributes
        for child in ("permission", "sandbox spawn", "process", "audit write"):
            parent = spans[child].parent
            assert parent is not None and parent.span_id == call.context.span_id, child
        permission = spans["permission"].attributes or {}
        assert permission["toolrt.permission.action"] == "allow"
        assert "mark" in str(permission["toolrt.permission.rule"])
        assert (spans["sandbox spawn"].attributes or {})["process.executable.name"] in ("sh", "bash")
        environment = (rt.root / "ran.env").read_text(encoding="utf-8")
        trace_id = format(call.context.trace_id, "032x")
        assert f"TRACEPARENT=00-{trace_id}-{format(call.context.span_id, '016x')}-0" in environment  # sampled

        installed.spans.clear()
        denied = rt.call_sync("nope", {"target": "prod"})
        assert denied.error is not None and "denied" in denied.error.lower()
        spans = by_name(installed.finished())
        assert set(spans) == {"execute_tool nope", "permission", "audit write"}  # no process started
        attributes = spans["execute_tool nope"].attributes or {}
        assert attributes["error.type"] == "denied"
        assert spans["execute_tool nope"].status.status_code == trace.StatusCode.ERROR
        permission = spans["permission"].attributes or {}
        assert permission["toolrt.permission.action"] == "deny"
        assert "nope" in str(permission["toolrt.permission.rule"])
        assert not (rt.root / "nope.env").exists()

    durations = {
        (labels["gen_ai.tool.name"], labels["toolrt.call.outcome"]): point.count
        for labels, point in installed.points("toolrt.call.duration")
    }
    assert durations == {("mark", "ok"): 1, ("nope", "denied"): 1}
    asks = {labels["toolrt.ask.outcome"]: point.value for labels, point in installed.points("toolrt.asks")}
    assert asks == {}


def test_an_ask_nobody_can_answer_is_counted(tmp_path: Path, installed: Installed) -> None:
    root = project(tmp_path)
    (root / "permissions.yaml").write_text("permission:\n  mark: ask\n", encoding="utf-8")
    with Runtime.load(root, settings={"data_dir": tmp_path / "data"}) as rt:
        assert rt.call_sync("mark", {}).error is not None
    asks = {labels["toolrt.ask.outcome"]: point.value for labels, point in installed.points("toolrt.asks")}
    assert asks == {"unanswered": 1}
    assert not (root / "ran.env").exists()


def test_without_a_tracer_provider_nothing_is_traced_and_no_process_gets_a_traceparent(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    unused = TracerProvider()  # made, never installed
    unused.add_span_processor(SimpleSpanProcessor(exporter))
    assert telemetry.tracer() is None
    with Runtime.load(project(tmp_path), settings={"data_dir": tmp_path / "data"}) as rt:
        assert rt.call_sync("mark", {}).error is None
        assert "TRACEPARENT" not in (rt.root / "ran.env").read_text(encoding="utf-8")
    assert not exporter.get_finished_spans()


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def test_serve_enriches_the_sdks_server_span_which_continues_the_requests_traceparent(
    tmp_path: Path, installed: Installed
) -> None:
    rt = Runtime.load(project(tmp_path), settings={"data_dir": tmp_path / "data"})
    sessions: list[str] = []

    async def main() -> None:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "mark", "arguments": {}, "_meta": {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}},
        }
        with anyio.fail_after(60):
            async with serving(rt, whole_app=True) as url, httpx.AsyncClient(timeout=30) as http:
                opened = await http.post(url, json=init, headers=headers)
                mcp_session = opened.headers["mcp-session-id"]
                sessions.append(mcp_session)
                headers |= {"mcp-session-id": mcp_session, "mcp-protocol-version": "2025-11-25"}
                await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
                answered = await http.post(url, json=call, headers=headers)
                assert answered.status_code == 200 and "marked" in answered.text, answered.text

    try:
        anyio.run(main)
    finally:
        rt.close()
    spans = by_name(installed.finished())
    server = spans["tools/call mark"]
    assert server.kind == trace.SpanKind.SERVER and server.context is not None
    assert format(server.context.trace_id, "032x") == TRACE_ID
    assert server.parent is not None and format(server.parent.span_id, "016x") == PARENT_ID
    attributes = server.attributes or {}
    assert attributes["mcp.session.id"] == session_id(f"mcp:{sessions[0]}")  # an id, not the session itself
    assert sessions[0] not in str(dict(attributes))
    call = spans["execute_tool mark"]
    assert call.parent is not None and call.parent.span_id == server.context.span_id
    assert "TRACEPARENT=00-" + TRACE_ID in (rt.root / "ran.env").read_text(encoding="utf-8")
    assert (
        "execute_tool mark" in spans
        and len([s for s in installed.finished() if s.name.startswith("execute_tool")]) == 1
    )


class _Receiver(BaseHTTPRequestHandler):
    bodies: dict[str, list[bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.bodies.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


@pytest.mark.slow
def test_toolrt_call_exports_its_spans_and_metrics_to_an_otlp_http_receiver_before_it_exits(tmp_path: Path) -> None:
    root = project(tmp_path)
    bodies: dict[str, list[bytes]] = {}
    handler = type("Receiver", (_Receiver,), {"bodies": bodies})
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    try:
        env = {name: value for name, value in os.environ.items() if not name.startswith(("OTEL_", "TOOLRT_"))}
        env |= {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_port}",
            "OTEL_SERVICE_NAME": "toolrt-test",
            "TOOLRT_DATA_DIR": str(tmp_path / "data"),
        }
        done = subprocess.run(
            [sys.executable, "-m", "toolrt", "call", "--root", str(root), "mark"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        disabled = subprocess.run(
            [sys.executable, "-m", "toolrt", "call", "--root", str(root), "mark"],
            env=env | {"OTEL_SDK_DISABLED": "true"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert disabled.returncode == 0, disabled.stderr
    finally:
        receiver.shutdown()
        receiver.server_close()
    names: list[str] = []
    services: set[str] = set()
    for body in bodies.get("/v1/traces", []):
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            services |= {a.value.string_value for a in resource.resource.attributes if a.key == "service.name"}
            names += [span.name for scoped in resource.scope_spans for span in scoped.spans]
    assert sorted(names) == sorted(["execute_tool mark", "permission", "sandbox spawn", "process", "audit write"])
    assert services == {"toolrt-test"}
    metric_names: set[str] = set()
    for body in bodies.get("/v1/metrics", []):
        exported = ExportMetricsServiceRequest()
        exported.ParseFromString(body)
        metric_names |= {m.name for r in exported.resource_metrics for s in r.scope_metrics for m in s.metrics}
    assert "toolrt.call.duration" in metric_names


def test_serve_reports_its_active_sessions_and_reload_generation_when_metrics_are_collected(
    tmp_path: Path, installed: Installed
) -> None:
    with Runtime.load(project(tmp_path), settings={"data_dir": tmp_path / "data"}) as rt:
        telemetry.observe(lambda: len(rt.sessions), lambda: rt.status().generation)
        rt.call_sync("mark", {}, session="one")
        rt.call_sync("mark", {}, session="two")
        assert [point.value for _, point in installed.points("toolrt.sessions.active")] == [2]
        assert [point.value for _, point in installed.points("toolrt.reload.generation")] == [1]
