//! `ExportTraceServiceRequest` in protobuf, the body of an OTLP/HTTP
//! `POST /v1/traces` (`opentelemetry/proto/collector/trace/v1`). Only the
//! fields Switchyard sets are written; field numbers are the proto's.

use crate::span::{SpanRecord, Value};

/// One request: one resource (this process), one scope, the spans.
pub(crate) fn export_request(service: &str, spans: &[SpanRecord]) -> Vec<u8> {
    let mut resource = Vec::new();
    key_value(
        &mut resource,
        1,
        "service.name",
        &Value::Str(service.to_string()),
    );
    let mut scope = Vec::new();
    string(&mut scope, 1, "switchyard");
    string(&mut scope, 2, env!("CARGO_PKG_VERSION"));
    let mut scope_spans = Vec::new();
    message(&mut scope_spans, 1, &scope);
    for span in spans {
        message(&mut scope_spans, 2, &encode_span(span));
    }
    let mut resource_spans = Vec::new();
    message(&mut resource_spans, 1, &resource);
    message(&mut resource_spans, 2, &scope_spans);
    let mut request = Vec::new();
    message(&mut request, 1, &resource_spans);
    request
}

fn encode_span(span: &SpanRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    bytes(&mut out, 1, &span.context.trace_id);
    bytes(&mut out, 2, &span.context.span_id);
    if let Some(parent) = &span.parent {
        bytes(&mut out, 4, parent);
    }
    string(&mut out, 5, &span.name);
    tag(&mut out, 6, 0);
    varint(&mut out, span.kind as u64);
    tag(&mut out, 7, 1);
    out.extend_from_slice(&span.start_ns.to_le_bytes());
    tag(&mut out, 8, 1);
    out.extend_from_slice(&span.end_ns.to_le_bytes());
    for (key, value) in &span.attributes {
        key_value(&mut out, 9, key, value);
    }
    if span.error {
        // Status { code = STATUS_CODE_ERROR (2) }
        let mut status = Vec::new();
        tag(&mut status, 3, 0);
        varint(&mut status, 2);
        message(&mut out, 15, &status);
    }
    out
}

fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &Value) {
    let mut any = Vec::new();
    match value {
        Value::Str(s) => string(&mut any, 1, s),
        Value::Bool(b) => {
            tag(&mut any, 2, 0);
            varint(&mut any, u64::from(*b));
        }
        Value::Int(n) => {
            tag(&mut any, 3, 0);
            // int64 is written as its two's complement, ten bytes when negative.
            varint(&mut any, *n as u64);
        }
        Value::Float(x) => {
            tag(&mut any, 4, 1);
            any.extend_from_slice(&x.to_le_bytes());
        }
    }
    let mut kv = Vec::new();
    string(&mut kv, 1, key);
    message(&mut kv, 2, &any);
    message(out, field, &kv);
}

fn tag(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire_type));
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    tag(out, field, 2);
    varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn string(out: &mut Vec<u8>, field: u32, value: &str) {
    bytes(out, field, value.as_bytes());
}

fn message(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    bytes(out, field, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SpanKind, TraceContext};

    #[test]
    fn varints_are_little_endian_groups_of_seven() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        out.clear();
        varint(&mut out, u64::MAX);
        assert_eq!(out.len(), 10);
    }

    #[test]
    fn a_span_is_written_with_its_ids_times_and_attributes() {
        let context =
            TraceContext::parse("00-0102030405060708090a0b0c0d0e0f10-1112131415161718-01").unwrap();
        let span = SpanRecord {
            context,
            parent: None,
            name: "n".into(),
            kind: SpanKind::Server,
            start_ns: 1,
            end_ns: 2,
            attributes: vec![("k", Value::Int(-1))],
            error: false,
        };
        let encoded = encode_span(&span);
        // trace_id: field 1, 16 bytes.
        assert_eq!(&encoded[..2], [0x0a, 16]);
        assert_eq!(&encoded[2..18], &context.trace_id);
        // span_id: field 2, 8 bytes; name: field 5; kind: field 6 = 2.
        assert_eq!(&encoded[18..20], [0x12, 8]);
        assert_eq!(&encoded[28..31], [0x2a, 1, b'n']);
        assert_eq!(&encoded[31..33], [0x30, 2]);
        // start: field 7, fixed64.
        assert_eq!(encoded[33], 0x39);
        assert_eq!(&encoded[34..42], &1u64.to_le_bytes());
        let request = export_request("svc", &[span]);
        assert!(request.windows(3).any(|w| w == b"svc"));
    }
}
