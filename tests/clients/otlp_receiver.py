"""An OTLP/HTTP trace receiver for the tracing suite.

Usage: otlp_receiver.py

Listens on a free loopback port and prints `listening <port>` first; then,
for every span a POST /v1/traces (protobuf) carried, one JSON line:
{"service", "trace_id", "span_id", "parent", "name", "kind", "status",
"attributes": {key: value}}. Bodies are decoded with OpenTelemetry's own
protobuf types (the opentelemetry-proto package), so a span that reads
here is one a real collector reads.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

PRINT = threading.Lock()


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length)
        if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
            self.send_response(415)
            self.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            resource = {kv.key: value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    line = json.dumps(
                        {
                            "service": resource.get("service.name"),
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "status": span.status.code,
                            "start": span.start_time_unix_nano,
                            "end": span.end_time_unix_nano,
                            "attributes": {kv.key: value(kv.value) for kv in span.attributes},
                        }
                    )
                    with PRINT:
                        print(line, flush=True)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    with PRINT:
        print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
