"""OTLP ingest against a real `sluice serve`, with the official OpenTelemetry Python SDK and
its gRPC and HTTP/protobuf exporters, `curl` with an OTLP/JSON file, and raw requests for
the refusals; rows read back with Python `deltalake` and `polars` and checked field by field.

Contracts under test: tables made by `sluice table create NAME --otlp traces|logs|metrics`;
an export answered SUCCESS is durable and lands in Delta once (also across a SIGKILL before
any flush); spans with events and links, logs with structured bodies and every metric type
(summary hand-built: the Python SDK never emits one); OTLP partial success for items that do
not fit; a 10 000-span trace across 50 services queried back by trace_id; every refusal class
gets its status, and nothing of a refused request is written.
"""

import gzip
import json
import os
import subprocess
import time

import grpc
import polars as pl
import pytest
import requests
from deltalake import DeltaTable
from opentelemetry import trace as trace_api
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (InMemoryLogRecordExporter, LogRecordExportResult,
                                             SimpleLogRecordProcessor)

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult
from opentelemetry.sdk.metrics.view import ExponentialBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conftest import CLIENT_ID, CLIENT_SECRET, Server
from test_cluster import cluster  # noqa: F401 (the fixture)

SPANS = "main.otel.spans"
LOGS = "main.otel.logs"
METRICS = "main.otel.metrics"
TABLE_HEADER = "x-databricks-zerobus-table-name"


def sluice(url, *args):
    binary = os.environ.get("SLUICE_BIN", "target/debug/sluice")
    env = dict(os.environ, SLUICE_CLIENT_ID=CLIENT_ID, SLUICE_CLIENT_SECRET=CLIENT_SECRET)
    return subprocess.run([binary, *args, "--server", url], env=env, capture_output=True,
                          text=True, timeout=60)


def create_otlp(server, name, signal):
    """Creates the table with the CLI; returns its location."""
    out = sluice(server.url, "table", "create", name, "--otlp", signal)
    assert out.returncode == 0, out.stderr
    return server.api("GET", "/" + name)["storage_location"]


def rows(location, expect, timeout=30, filters=None):
    """The table's rows as a polars frame, polled until `expect` rows are there."""
    deadline = time.time() + timeout
    while True:
        try:
            df = pl.from_arrow(DeltaTable(location).to_pyarrow_table(filters=filters))
        except Exception:  # no commit yet
            df = None
        if df is not None and (len(df) >= expect or time.time() > deadline):
            return df
        if df is None and time.time() > deadline:
            raise AssertionError("the table has no rows")
        time.sleep(0.2)


def headers(token, table=None):
    h = {"authorization": "Bearer " + token}
    if table:
        h[TABLE_HEADER] = table
    return h


def grpc_target(server):
    return f"127.0.0.1:{server.port}"


def hex_id(n, width):
    return format(n, f"0{width}x")


def make_spans():
    """Spans from the SDK: a server span with attributes, two events and a status, a child
    with a link to a third span."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(
        {"service.name": "checkout", "deployment.environment": "test"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("shop.tracer", "1.4.2")
    with tracer.start_as_current_span("other") as other:
        pass
    with tracer.start_as_current_span("GET /cart", kind=trace_api.SpanKind.SERVER,
                                      attributes={"http.status": 503, "ratio": 0.25, "ok": False,
                                                  "tags": ["a", "b"]}) as root:
        root.add_event("cache.miss", {"key": "cart:7", "tries": 3})
        root.add_event("retry")
        with tracer.start_as_current_span("db.query", kind=trace_api.SpanKind.CLIENT,
                                          links=[trace_api.Link(other.get_span_context(),
                                                                {"why": "batch"})]):
            pass
        root.set_status(trace_api.Status(trace_api.StatusCode.ERROR, "upstream down"))
    return memory.get_finished_spans()


def check_span_row(row, span):
    ctx = span.context
    assert row["trace_id"] == hex_id(ctx.trace_id, 32)
    assert row["span_id"] == hex_id(ctx.span_id, 16)
    assert row["parent_span_id"] == (hex_id(span.parent.span_id, 16) if span.parent else None)
    assert row["name"] == span.name
    assert row["kind"] == "SPAN_KIND_" + span.kind.name
    assert row["start_time_unix_nano"] == span.start_time
    assert row["end_time_unix_nano"] == span.end_time
    assert row["time"].timestamp() * 1e6 == pytest.approx(span.start_time // 1000, abs=1)
    assert row["date"].isoformat() == time.strftime("%Y-%m-%d", time.gmtime(span.start_time / 1e9))
    assert json.loads(row["attributes"]) == {k: (list(v) if isinstance(v, tuple) else v)
                                            for k, v in span.attributes.items()}
    assert row["service_name"] == "checkout"
    resource = json.loads(row["resource"]["attributes"])
    assert resource["service.name"] == "checkout"
    assert resource["deployment.environment"] == "test"
    assert row["instrumentation_scope"]["name"] == "shop.tracer"
    assert row["instrumentation_scope"]["version"] == "1.4.2"
    events = row["events"]
    assert [e["name"] for e in events] == [e.name for e in span.events]
    for got, want in zip(events, span.events):
        assert got["time_unix_nano"] == want.timestamp
        assert json.loads(got["attributes"]) == dict(want.attributes)
    assert [(lk["trace_id"], lk["span_id"]) for lk in row["links"]] == [
        (hex_id(lk.context.trace_id, 32), hex_id(lk.context.span_id, 16)) for lk in span.links]
    for got, want in zip(row["links"], span.links):
        assert json.loads(got["attributes"]) == dict(want.attributes)
    status = span.status.status_code.name
    assert row["status"]["code"] == "STATUS_CODE_" + status
    assert row["status"]["message"] == (span.status.description or "")


def test_sdk_grpc_and_http_exporters_traces_with_events_and_links(server):
    location = create_otlp(server, SPANS, "traces")
    token = server.token()
    spans = make_spans()
    assert len(spans) == 3
    grpc_exporter = GrpcSpanExporter(endpoint=grpc_target(server), insecure=True,
                                     headers=headers(token, SPANS), compression=grpc.Compression.Gzip)
    assert grpc_exporter.export(spans) == SpanExportResult.SUCCESS
    http_exporter = HttpSpanExporter(endpoint=server.url + "/v1/traces",
                                     headers=headers(token, SPANS), compression=HttpCompression.Gzip)
    assert http_exporter.export(spans) == SpanExportResult.SUCCESS
    df = rows(location, 6)
    assert len(df) == 6 and df["record_id"].n_unique() == 6
    by_span = {}
    for row in df.iter_rows(named=True):
        by_span.setdefault(row["span_id"], []).append(row)
    for span in spans:
        got = by_span[hex_id(span.context.span_id, 16)]
        assert len(got) == 2  # once per exporter
        for row in got:
            check_span_row(row, span)
    root = by_span[hex_id(spans[2].context.span_id, 16)][0]
    assert root["name"] == "GET /cart" and len(root["events"]) == 2 and root["dropped_events_count"] == 0
    child = by_span[hex_id(spans[1].context.span_id, 16)][0]
    assert child["name"] == "db.query" and len(child["links"]) == 1


def test_sdk_logs_with_structured_bodies_and_a_default_table(tmp_path):
    server = Server(tmp_path, extra=["--otlp-logs-table", LOGS])
    try:
        location = create_otlp(server, LOGS, "logs")
        token = server.token()
        memory = InMemoryLogRecordExporter()
        provider = LoggerProvider(resource=Resource.create({"service.name": "auth"}))
        provider.add_log_record_processor(SimpleLogRecordProcessor(memory))
        logger = provider.get_logger("auth.audit", "2.0")
        tracer = TracerProvider().get_tracer("t")
        body = {"user": {"id": 7, "roles": ["admin", "ops"]}, "ok": True, "score": 0.5}
        with tracer.start_as_current_span("login") as span:
            logger.emit(body=body, severity_number=SeverityNumber.WARN, severity_text="WARN",
                        attributes={"ip": "10.0.0.1", "attempt": 2}, event_name="user.login",
                        timestamp=1_700_000_000_123_456_789)
        logger.emit(body="plain text line", severity_number=SeverityNumber.INFO,
                    severity_text="INFO")
        records = memory.get_finished_logs()
        assert len(records) == 2
        grpc_exporter = GrpcLogExporter(endpoint=grpc_target(server), insecure=True,
                                        headers=headers(token, LOGS))
        assert grpc_exporter.export(records) == LogRecordExportResult.SUCCESS
        # No table header: the pod's --otlp-logs-table.
        http_exporter = HttpLogExporter(endpoint=server.url + "/v1/logs", headers=headers(token))
        assert http_exporter.export(records) == LogRecordExportResult.SUCCESS
        df = rows(location, 4).sort("time_unix_nano")
    finally:
        server.stop()
    assert len(df) == 4
    structured = df.filter(pl.col("event_name") == "user.login")
    plain = df.filter(pl.col("severity_text") == "INFO")
    assert len(structured) == 2 and len(plain) == 2
    for row in structured.iter_rows(named=True):
        assert json.loads(row["body"]) == body
        assert row["severity_number"] == SeverityNumber.WARN.value
        assert json.loads(row["attributes"]) == {"ip": "10.0.0.1", "attempt": 2}
        assert row["time_unix_nano"] == 1_700_000_000_123_456_789
        assert row["observed_time_unix_nano"] > 0
        assert row["time"].timestamp() == pytest.approx(1_700_000_000.123456, abs=1e-6)
        assert row["date"].isoformat() == "2023-11-14"
        assert row["trace_id"] == hex_id(span.get_span_context().trace_id, 32)
        assert row["span_id"] == hex_id(span.get_span_context().span_id, 16)
        assert row["service_name"] == "auth"
        assert row["instrumentation_scope"]["name"] == "auth.audit"
        assert row["instrumentation_scope"]["version"] == "2.0"
    for row in plain.iter_rows(named=True):
        assert json.loads(row["body"]) == "plain text line"
        assert row["trace_id"] is None and row["span_id"] is None
        assert row["time_unix_nano"] == 0
        assert row["time"].timestamp() * 1e9 == pytest.approx(row["observed_time_unix_nano"], abs=2000)


def summary_request():
    """An OTLP summary (the Python SDK never emits one), built with the official protobuf
    classes."""
    point = metrics_pb2.SummaryDataPoint(
        start_time_unix_nano=1_700_000_000_000_000_000, time_unix_nano=1_700_000_060_000_000_000,
        count=42, sum=1234.5,
        quantile_values=[metrics_pb2.SummaryDataPoint.ValueAtQuantile(quantile=0.5, value=20.0),
                         metrics_pb2.SummaryDataPoint.ValueAtQuantile(quantile=0.99, value=95.5)])
    point.attributes.add(key="route").value.string_value = "/pay"
    metric = metrics_pb2.Metric(name="rpc.latency.summary", unit="ms",
                                summary=metrics_pb2.Summary(data_points=[point]))
    request = metrics_service_pb2.ExportMetricsServiceRequest()
    rm = request.resource_metrics.add()
    rm.resource.attributes.add(key="service.name").value.string_value = "payments"
    rm.scope_metrics.add().metrics.append(metric)
    return request


def test_sdk_metrics_every_type_over_grpc_and_http(server):
    location = create_otlp(server, METRICS, "metrics")
    token = server.token()
    reader = InMemoryMetricReader()
    provider = MeterProvider(
        resource=Resource.create({"service.name": "payments"}), metric_readers=[reader],
        views=[View(instrument_name="latency.exp", aggregation=ExponentialBucketHistogramAggregation())])
    meter = provider.get_meter("payments.meter", "0.9")
    meter.create_counter("orders", unit="1", description="orders placed").add(5, {"route": "/a"})
    meter.create_up_down_counter("queue.depth").add(-2)
    meter.create_gauge("temperature", unit="C").set(21.5, {"room": "lab"})
    hist = meter.create_histogram("latency", unit="ms")
    for v in (3.0, 7.0, 250.0):
        hist.record(v)
    exp = meter.create_histogram("latency.exp", unit="ms")
    for v in (1.0, 2.0, 4.0, 1000.0):
        exp.record(v)
    data = reader.get_metrics_data()
    grpc_exporter = GrpcMetricExporter(endpoint=grpc_target(server), insecure=True,
                                       headers=headers(token, METRICS))
    assert grpc_exporter.export(data) == MetricExportResult.SUCCESS
    http_exporter = HttpMetricExporter(endpoint=server.url + "/v1/metrics",
                                       headers=headers(token, METRICS))
    assert http_exporter.export(data) == MetricExportResult.SUCCESS
    r = requests.post(server.url + "/v1/metrics", data=summary_request().SerializeToString(),
                      headers={**headers(token, METRICS), "Content-Type": "application/x-protobuf"},
                      timeout=10)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/x-protobuf"
    answer = metrics_service_pb2.ExportMetricsServiceResponse.FromString(r.content)
    assert not answer.HasField("partial_success")

    df = rows(location, 11)
    assert len(df) == 11  # 5 points twice, the summary once
    kinds = {row["name"]: row["metric_type"] for row in df.iter_rows(named=True)}
    assert kinds == {"orders": "sum", "queue.depth": "sum", "temperature": "gauge",
                     "latency": "histogram", "latency.exp": "exponential_histogram",
                     "rpc.latency.summary": "summary"}
    for row in df.iter_rows(named=True):
        assert row["service_name"] == "payments"
        if row["name"] != "rpc.latency.summary":
            assert row["instrumentation_scope"]["name"] == "payments.meter"
        assert row["time"].timestamp() * 1e9 == pytest.approx(row["time_unix_nano"], abs=2000)
    one = {row["name"]: row for row in df.iter_rows(named=True)}
    orders = one["orders"]
    assert orders["value"] == 5.0 and orders["is_monotonic"] is True
    assert orders["aggregation_temporality"] == "AGGREGATION_TEMPORALITY_CUMULATIVE"
    assert json.loads(orders["attributes"]) == {"route": "/a"}
    assert orders["unit"] == "1" and orders["description"] == "orders placed"
    assert orders["histogram"] is None and orders["summary"] is None
    assert one["queue.depth"]["value"] == -2.0 and one["queue.depth"]["is_monotonic"] is False
    temp = one["temperature"]
    assert temp["value"] == 21.5 and temp["aggregation_temporality"] is None
    assert json.loads(temp["attributes"]) == {"room": "lab"}
    h = one["latency"]["histogram"]
    assert h["count"] == 3 and h["sum"] == 260.0 and h["min"] == 3.0 and h["max"] == 250.0
    assert len(h["bucket_counts"]) == len(h["explicit_bounds"]) + 1
    assert sum(h["bucket_counts"]) == 3 and h["explicit_bounds"][:3] == [0.0, 5.0, 10.0]
    assert one["latency"]["value"] is None
    e = one["latency.exp"]["exponential_histogram"]
    assert e["count"] == 4 and e["sum"] == 1007.0 and e["min"] == 1.0 and e["max"] == 1000.0
    assert sum(e["positive_bucket_counts"]) == 4 and e["zero_count"] == 0
    assert isinstance(e["scale"], int) and isinstance(e["positive_offset"], int)
    s = one["rpc.latency.summary"]
    assert s["summary"]["count"] == 42 and s["summary"]["sum"] == 1234.5
    assert s["summary"]["quantile_values"] == [{"quantile": 0.5, "value": 20.0},
                                               {"quantile": 0.99, "value": 95.5}]
    assert s["start_time_unix_nano"] == 1_700_000_000_000_000_000
    assert json.loads(s["attributes"]) == {"route": "/pay"}
    assert s["date"].isoformat() == "2023-11-14"


OTLP_JSON = {
    "resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "curl-svc"}}]},
        "scopeSpans": [{
            "scope": {"name": "curl"},
            "spans": [
                {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174",
                 "parentSpanId": "eee19b7ec3c1b173", "name": "json-span", "kind": 2,
                 "startTimeUnixNano": "1544712660000000000", "endTimeUnixNano": "1544712661000000000",
                 "attributes": [{"key": "n", "value": {"intValue": "42"}},
                                {"key": "big", "value": {"intValue": "9007199254740993"}},
                                {"key": "bytes", "value": {"bytesValue": "AP8="}},
                                {"key": "nested", "value": {"kvlistValue": {"values": [
                                    {"key": "x", "value": {"arrayValue": {"values": [
                                        {"boolValue": True}, {"doubleValue": 1.5}]}}}]}}}],
                 "events": [{"timeUnixNano": "1544712660500000000", "name": "ev",
                             "attributes": [{"key": "k", "value": {"stringValue": "v"}}]}],
                 "status": {"code": 2, "message": "bad"}},
                {"traceId": "abcd", "spanId": "eee19b7ec3c1b175", "name": "short trace id"},
            ]}]}]}


def test_curl_posts_an_otlp_json_file_with_partial_success(server, tmp_path):
    location = create_otlp(server, SPANS, "traces")
    token = server.token()
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(OTLP_JSON))
    out = subprocess.run(
        ["curl", "-sS", "-w", "\n%{http_code}", "-X", "POST", server.url + "/v1/traces",
         "-H", "Content-Type: application/json", "-H", "Authorization: Bearer " + token,
         "-H", f"{TABLE_HEADER}: {SPANS}", "--data-binary", f"@{path}"],
        capture_output=True, text=True, check=True, timeout=30)
    body, status = out.stdout.rsplit("\n", 1)
    assert status == "200", body
    answer = json.loads(body)["partialSuccess"]
    assert int(answer["rejectedSpans"]) == 1
    assert "span 1: trace_id has 2 bytes, expected 16" in answer["errorMessage"]
    df = rows(location, 1)
    assert len(df) == 1
    row = df.row(0, named=True)
    assert row["trace_id"] == "5b8efff798038103d269b633813fc60c"
    assert row["span_id"] == "eee19b7ec3c1b174" and row["parent_span_id"] == "eee19b7ec3c1b173"
    assert row["kind"] == "SPAN_KIND_SERVER" and row["service_name"] == "curl-svc"
    assert row["start_time_unix_nano"] == 1544712660000000000
    assert json.loads(row["attributes"]) == {"n": 42, "big": 9007199254740993, "bytes": "AP8=",
                                             "nested": {"x": [True, 1.5]}}
    assert row["events"][0]["time_unix_nano"] == 1544712660500000000
    assert row["status"] == {"message": "bad", "code": "STATUS_CODE_ERROR"}
    assert row["date"].isoformat() == "2018-12-13"


def test_a_trace_of_10000_spans_across_50_services_is_queried_back_by_trace_id(server):
    location = create_otlp(server, SPANS, "traces")
    token = server.token()
    exporter = HttpSpanExporter(endpoint=server.url + "/v1/traces", headers=headers(token, SPANS))
    providers = []
    for i in range(50):
        memory = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": f"svc-{i:02}"}))
        provider.add_span_processor(SimpleSpanProcessor(memory))
        providers.append((provider.get_tracer("load"), memory))
    root_tracer, root_memory = providers[0]
    with root_tracer.start_as_current_span("root") as root:
        ctx = trace_api.set_span_in_context(root)
        for n in range(9_999):
            tracer, _ = providers[n % 50]
            tracer.start_span(f"op-{n}", context=ctx).end()
    other = providers[1][0].start_span("another trace")
    other.end()
    total = 0
    for _, memory in providers:
        spans = memory.get_finished_spans()
        for i in range(0, len(spans), 1000):
            assert exporter.export(spans[i:i + 1000]) == SpanExportResult.SUCCESS
        total += len(spans)
    assert total == 10_001
    trace_id = hex_id(root.get_span_context().trace_id, 32)
    df = rows(location, 10_000, filters=[("trace_id", "=", trace_id)])
    assert len(df) == 10_000
    assert df["span_id"].n_unique() == 10_000
    assert df["service_name"].n_unique() == 50
    assert df.filter(pl.col("parent_span_id").is_null())["name"].to_list() == ["root"]
    root_id = hex_id(root.get_span_context().span_id, 16)
    assert (df.filter(pl.col("parent_span_id").is_not_null())["parent_span_id"] == root_id).all()
    assert len(rows(location, 10_001)) == 10_001


def test_acked_spans_survive_a_sigkill_before_any_flush(tmp_path):
    first = Server(tmp_path, flush_interval="1h")
    location = create_otlp(first, SPANS, "traces")
    token = first.token()
    spans = make_spans()
    exporter = HttpSpanExporter(endpoint=first.url + "/v1/traces", headers=headers(token, SPANS))
    for _ in range(4):
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    first.proc.kill()  # SIGKILL: only the WAL holds the rows
    first.proc.wait()
    first.log.close()
    assert DeltaTable(location).to_pyarrow_table().num_rows == 0  # nothing was flushed
    second = Server(tmp_path)
    try:
        df = rows(location, 12)
        time.sleep(1)  # a second (wrong) replay commit would show up by now
        df = rows(location, 12)
    finally:
        second.stop()
    assert len(df) == 12 and df["record_id"].n_unique() == 12
    for span in spans:
        got = df.filter(pl.col("span_id") == hex_id(span.context.span_id, 16))
        assert len(got) == 4
        check_span_row(got.row(0, named=True), span)


def test_refusals_have_their_status_and_nothing_is_written(tmp_path):
    server = Server(tmp_path, extra=["--max-request-bytes", "65536", "--max-record-bytes", "65536"])
    try:
        spans_at = create_otlp(server, SPANS, "traces")
        create_otlp(server, LOGS, "logs")
        server.api("POST", "", {"name": "main.otel.plain", "columns": [
            {"name": "id", "type_text": "bigint", "type_name": "LONG", "nullable": False}]})
        token = server.token()
        good = trace_service_pb2.ExportTraceServiceRequest()
        span = good.resource_spans.add().scope_spans.add().spans.add()
        span.trace_id, span.span_id, span.name = bytes(range(16)), bytes(range(8)), "ok"
        proto = {"Content-Type": "application/x-protobuf"}

        def post(body, token=token, table=SPANS, extra=None, path="/v1/traces"):
            h = {**headers(token, table), **proto, **(extra or {})}
            return requests.post(server.url + path, data=body, headers=h, timeout=30)

        def refused(resp, status, *words):
            assert resp.status_code == status, resp.text
            if resp.headers["content-type"] == "application/x-protobuf":
                # google.rpc.Status: field 2 is the message; decode it by hand.
                text = resp.content.decode("utf-8", "replace")
            else:
                body = resp.json()
                text = body["message"]
                assert body["error_code"], body
            for w in words:
                assert w in text, text

        refused(post(b"\x0a\xff\xff\xff"), 400, "does not decode")
        refused(post(b"{\"resourceSpans\": [", extra={"Content-Type": "application/json"}),
                400, "OTLP/JSON request does not decode")
        refused(post(good.SerializeToString(), extra={"Content-Type": "text/plain"}), 415,
                "OTLP/HTTP takes application/x-protobuf or application/json")
        big = trace_service_pb2.ExportTraceServiceRequest()
        scope = big.resource_spans.add().scope_spans.add()
        for i in range(2000):
            s = scope.spans.add()
            s.trace_id, s.span_id, s.name = bytes(16), bytes(8), "x" * 40
        refused(post(big.SerializeToString()), 413, "over the limit")
        bomb = gzip.compress(b"\x00" * (8 << 20))
        assert len(bomb) < 65536
        refused(post(bomb, extra={"Content-Encoding": "gzip"}), 413, "once decompressed")
        refused(post(good.SerializeToString(), table="main.otel.nope"), 404, "does not exist")
        refused(post(good.SerializeToString(), token=""), 401)
        refused(post(good.SerializeToString(), token="not-a-token"), 401)
        refused(post(good.SerializeToString(), table=LOGS), 400, "is an OTLP logs table")
        refused(post(good.SerializeToString(), table="main.otel.plain"), 400, "not an OTLP table")
        refused(post(good.SerializeToString(), table=None), 400, "no table")
        grpc_no_table = list(headers(token).items())
        refused(requests.post(server.url + "/v1/traces", data=good.SerializeToString(),
                              headers={**headers(token, SPANS), "Content-Type": "application/json"},
                              timeout=10), 400, "OTLP/JSON")

        # The same classes over gRPC, with the raw bytes of a unary call.
        channel = grpc.insecure_channel(grpc_target(server))
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                                     request_serializer=None, response_deserializer=None)

        def grpc_refused(body, code, *words, meta=None, compression=None):
            with pytest.raises(grpc.RpcError) as err:
                export(body, metadata=meta or list(headers(token, SPANS).items()), timeout=10,
                       compression=compression)
            assert err.value.code() == code, err.value.details()
            for w in words:
                assert w in err.value.details(), err.value.details()

        grpc_refused(b"\x0a\xff\xff\xff", grpc.StatusCode.INTERNAL, "decode")
        grpc_refused(big.SerializeToString(), grpc.StatusCode.OUT_OF_RANGE, "too large")
        grpc_bomb = trace_service_pb2.ExportTraceServiceRequest()
        grpc_bomb.resource_spans.add().scope_spans.add().spans.add().name = "x" * (8 << 20)
        grpc_refused(grpc_bomb.SerializeToString(), grpc.StatusCode.RESOURCE_EXHAUSTED,
                     "size limit, of 65536 bytes, exceeded while decompressing",
                     compression=grpc.Compression.Gzip)
        grpc_refused(good.SerializeToString(), grpc.StatusCode.UNAUTHENTICATED,
                     meta=[(TABLE_HEADER, SPANS)])
        grpc_refused(good.SerializeToString(), grpc.StatusCode.UNAUTHENTICATED,
                     meta=[("authorization", "Bearer nope"), (TABLE_HEADER, SPANS)])
        grpc_refused(good.SerializeToString(), grpc.StatusCode.NOT_FOUND, "does not exist",
                     meta=list(headers(token, "main.otel.nope").items()))
        grpc_refused(good.SerializeToString(), grpc.StatusCode.INVALID_ARGUMENT,
                     "is an OTLP logs table", meta=list(headers(token, LOGS).items()))
        grpc_refused(good.SerializeToString(), grpc.StatusCode.INVALID_ARGUMENT, "no table",
                     meta=grpc_no_table)
        # Every refusal answered by the exporter service (not by tonic's decoding before it:
        # INTERNAL, OUT_OF_RANGE and the decompression limit) is counted by its gRPC code.
        text = requests.get(server.url + "/metrics", timeout=10).text
        counted = {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith('sluice_refusals_total{code="')}
        assert counted == {"InvalidArgument": 7 + 2, "ResourceExhausted": 2, "NotFound": 1 + 1,
                           "Unauthenticated": 2 + 2}, text
        # Control: the same request is accepted over both, so the refusals above were theirs.
        assert post(good.SerializeToString()).status_code == 200
        assert export(good.SerializeToString(), metadata=list(headers(token, SPANS).items()),
                      timeout=10) == b""
        channel.close()
    finally:
        server.stop()
    assert len(rows(spans_at, 2)) == 2


def test_otlp_grpc_and_http_through_the_router(cluster):
    url, pods = cluster
    out = sluice(url, "table", "create", SPANS, "--otlp", "traces")
    assert out.returncode == 0, out.stderr
    location = pods[0].api("GET", "/" + SPANS)["storage_location"]
    token = pods[0].token()
    spans = make_spans()
    grpc_exporter = GrpcSpanExporter(endpoint=url.removeprefix("http://"), insecure=True,
                                     headers=headers(token, SPANS))
    http_exporter = HttpSpanExporter(endpoint=url + "/v1/traces", headers=headers(token, SPANS))
    for _ in range(2):
        assert grpc_exporter.export(spans) == SpanExportResult.SUCCESS
        assert http_exporter.export(spans) == SpanExportResult.SUCCESS
    r = requests.get(url + "/v1/traces", timeout=10)
    assert (r.status_code, r.headers["Allow"]) == (405, "POST")
    for pod in pods:
        pod.stop()
    df = rows(location, 12)
    assert len(df) == 12 and df["record_id"].n_unique() == 12
    for span in spans:
        assert len(df.filter(pl.col("span_id") == hex_id(span.context.span_id, 16))) == 4
