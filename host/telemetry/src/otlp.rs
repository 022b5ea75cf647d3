//! `ExportTraceServiceRequest` in protobuf, the body of an OTLP/HTTP
//! `POST /v1/traces` (`opentelemetry/proto/collector/trace/v1`). Only the
//! fields Switchyard sets are written; field numbers are the proto's.

use crate::span::{SpanRecord, Value};

/// One request: one resource (this process), one scope, the spans.
///
/// Each message's length is computed before it is written, so the body is
/// written once into one buffer (no nested buffers per attribute: a span
/// has a dozen).
pub fn export_request(service: &str, spans: &[SpanRecord]) -> Vec<u8> {
    let service = Value::Str(service.to_string().into());
    let resource_len = kv_field_len(1, "service.name", &service);
    let scope_len = string_len(1, "switchyard") + string_len(2, env!("CARGO_PKG_VERSION"));
    let span_lens: Vec<usize> = spans.iter().map(span_len).collect();
    let scope_spans_len =
        nested_len(1, scope_len) + span_lens.iter().map(|&n| nested_len(2, n)).sum::<usize>();
    let resource_spans_len = nested_len(1, resource_len) + nested_len(2, scope_spans_len);
    let mut out = Vec::with_capacity(nested_len(1, resource_spans_len));
    header(&mut out, 1, resource_spans_len);
    header(&mut out, 1, resource_len);
    key_value(&mut out, 1, "service.name", &service);
    header(&mut out, 2, scope_spans_len);
    header(&mut out, 1, scope_len);
    string(&mut out, 1, "switchyard");
    string(&mut out, 2, env!("CARGO_PKG_VERSION"));
    for (span, len) in spans.iter().zip(span_lens) {
        header(&mut out, 2, len);
        encode_span(&mut out, span);
    }
    out
}

/// A span's fields, in field order.
fn encode_span(out: &mut Vec<u8>, span: &SpanRecord) {
    bytes(out, 1, &span.context.trace_id);
    bytes(out, 2, &span.context.span_id);
    if let Some(parent) = &span.parent {
        bytes(out, 4, parent);
    }
    string(out, 5, &span.name);
    tag(out, 6, 0);
    varint(out, span.kind as u64);
    tag(out, 7, 1);
    out.extend_from_slice(&span.start_ns.to_le_bytes());
    tag(out, 8, 1);
    out.extend_from_slice(&span.end_ns.to_le_bytes());
    for (key, value) in &span.attributes {
        key_value(out, 9, key, value);
    }
    if span.error {
        // Status { code = STATUS_CODE_ERROR (2) }
        header(out, 15, 2);
        tag(out, 3, 0);
        varint(out, 2);
    }
}

fn span_len(span: &SpanRecord) -> usize {
    let mut n = bytes_len(1, 16) + bytes_len(2, 8) + string_len(5, &span.name);
    if span.parent.is_some() {
        n += bytes_len(4, 8);
    }
    n += 1 + varint_len(span.kind as u64) + 2 * (1 + 8);
    n += span
        .attributes
        .iter()
        .map(|(key, value)| kv_field_len(9, key, value))
        .sum::<usize>();
    if span.error {
        n += nested_len(15, 2);
    }
    n
}

/// `KeyValue { key = 1; AnyValue value = 2 }` as field `field`.
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &Value) {
    let any = any_len(value);
    header(out, field, string_len(1, key) + nested_len(2, any));
    string(out, 1, key);
    header(out, 2, any);
    match value {
        Value::Str(s) => string(out, 1, s),
        Value::Bool(b) => {
            tag(out, 2, 0);
            varint(out, u64::from(*b));
        }
        Value::Int(n) => {
            tag(out, 3, 0);
            // int64 is written as its two's complement, ten bytes when negative.
            varint(out, *n as u64);
        }
        Value::Float(x) => {
            tag(out, 4, 1);
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
}

fn kv_field_len(field: u32, key: &str, value: &Value) -> usize {
    nested_len(field, string_len(1, key) + nested_len(2, any_len(value)))
}

fn any_len(value: &Value) -> usize {
    match value {
        Value::Str(s) => string_len(1, s),
        Value::Bool(b) => 1 + varint_len(u64::from(*b)),
        Value::Int(n) => 1 + varint_len(*n as u64),
        Value::Float(_) => 1 + 8,
    }
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

fn varint_len(n: u64) -> usize {
    (64 - (n | 1).leading_zeros() as usize).div_ceil(7)
}

/// The tag and length of a length-delimited field whose content follows.
fn header(out: &mut Vec<u8>, field: u32, len: usize) {
    tag(out, field, 2);
    varint(out, len as u64);
}

fn bytes(out: &mut Vec<u8>, field: u32, value: &[u8]) {
    header(out, field, value.len());
    out.extend_from_slice(value);
}

fn string(out: &mut Vec<u8>, field: u32, value: &str) {
    bytes(out, field, value.as_bytes());
}

/// The encoded size of a length-delimited field with `len` bytes of content.
fn nested_len(field: u32, len: usize) -> usize {
    varint_len(u64::from(field) << 3) + varint_len(len as u64) + len
}

fn bytes_len(field: u32, len: usize) -> usize {
    nested_len(field, len)
}

fn string_len(field: u32, value: &str) -> usize {
    nested_len(field, value.len())
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
        for n in [0, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            out.clear();
            varint(&mut out, n);
            assert_eq!(out.len(), varint_len(n), "{n}");
        }
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
        let mut encoded = Vec::new();
        encode_span(&mut encoded, &span);
        assert_eq!(encoded.len(), span_len(&span));
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
        let request = export_request("svc", &[span.clone(), span]);
        assert!(request.windows(3).any(|w| w == b"svc"));
        // The lengths computed first are the lengths written.
        assert_eq!(request.capacity(), request.len());
    }
}
