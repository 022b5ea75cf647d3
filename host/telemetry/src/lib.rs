//! Traces over OTLP/HTTP: a request's W3C trace context (`traceparent`)
//! carried from the client through the frontend, the carrier and the
//! worker to the engine (and across a federation link), and the spans each
//! process records exported in batches to `--otlp-endpoint`.
//!
//! Written by hand rather than with the OpenTelemetry SDK: a span here is a
//! plain record finished once, the wire format is a handful of protobuf
//! messages, and the SDK with its exporter would add a few hundred crates
//! to a build that already holds wasmtime.
//!
//! # Layout
//! - `context.rs`: [`TraceContext`], parsed from and written to `traceparent`.
//! - `span.rs`: [`Span`] (open) and [`SpanRecord`] (finished), attribute values.
//! - `otlp.rs`: the protobuf encoding of `ExportTraceServiceRequest`.
//! - `export.rs`: [`Tracer`]: the bounded queue and the batching exporter.

mod context;
mod export;
mod otlp;
mod span;

pub use context::{TRACEPARENT, TraceContext};
pub use export::{Tracer, TracerConfig};
pub use otlp::export_request as encode;
pub use span::{Span, SpanKind, SpanRecord, Value, now_ns};
