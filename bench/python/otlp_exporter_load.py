"""OTLP load from the official OpenTelemetry Python SDK, for `otlp-bench`: `--processes`
processes each run a TracerProvider with a BatchSpanProcessor (batches of 512) and the
official OTLP exporter (`grpc` or `http`, protobuf), create server spans (8 attributes, one
event) as fast as they can for `--seconds`, then shut down (flushing every queued span).
Prints one JSON line: spans exported with SUCCESS, spans dropped or failed, and the wall
time including the flush.
"""

import argparse
import json
import multiprocessing
import time


def worker(args, index, results):
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
    from opentelemetry.trace import SpanKind

    headers = {"authorization": "Bearer " + args.token,
               "x-databricks-zerobus-table-name": args.table}
    if args.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        inner = OTLPSpanExporter(endpoint=args.grpc_endpoint, insecure=True, headers=headers)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        inner = OTLPSpanExporter(endpoint=args.http_endpoint + "/v1/traces", headers=headers)

    counts = {"ok": 0, "failed": 0}

    def export(spans):
        result = type(inner).export(inner, spans)
        counts["ok" if result == SpanExportResult.SUCCESS else "failed"] += len(spans)
        return result

    inner.export = export
    provider = TracerProvider(resource=Resource.create({"service.name": f"py-{index}"}))
    provider.add_span_processor(BatchSpanProcessor(inner, max_queue_size=65536,
                                                   max_export_batch_size=512,
                                                   schedule_delay_millis=100))
    tracer = provider.get_tracer("bench.python")
    attrs = {"http.request.method": "GET", "http.route": "/api/v1/items/{id}",
             "http.response.status_code": 200, "client.address": "10.1.2.3",
             "user_agent.original": "bench/1.0 (linux)", "db.system": "postgresql",
             "cache.hit": True, "payload.ratio": 0.25}
    started = time.time()
    deadline = started + args.seconds
    created = 0
    while time.time() < deadline:
        for _ in range(100):
            span = tracer.start_span("GET /api/v1/items/{id}", kind=SpanKind.SERVER,
                                     attributes=attrs)
            span.add_event("db.query.done", {"db.rows": 12})
            span.end()
        created += 100
    provider.shutdown()
    results.put({"created": created, "ok": counts["ok"], "failed": counts["failed"],
                 "seconds": time.time() - started})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--protocol", choices=["grpc", "http"], required=True)
    parser.add_argument("--grpc-endpoint", required=True)
    parser.add_argument("--http-endpoint", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    results = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker, args=(args, i, results))
             for i in range(args.processes)]
    for p in procs:
        p.start()
    outs = [results.get() for _ in procs]
    for p in procs:
        p.join()
    print(json.dumps({"created": sum(o["created"] for o in outs),
                      "spans": sum(o["ok"] for o in outs),
                      "failed": sum(o["failed"] for o in outs),
                      "seconds": max(o["seconds"] for o in outs)}))


if __name__ == "__main__":
    main()
