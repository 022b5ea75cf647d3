//! A span while it is open, and the record it becomes.

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::TraceContext;

/// OTLP's span kinds (the numbers are the protobuf enum's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// Work inside a process (a policy call).
    Internal = 1,
    /// An incoming request (the frontend's `/v1`, the worker's stream).
    Server = 2,
    /// An outgoing request (the worker's call to its engine).
    Client = 3,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string (a constant one is not copied).
    Str(Cow<'static, str>),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
}

impl From<&'static str> for Value {
    fn from(s: &'static str) -> Self {
        Value::Str(Cow::Borrowed(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(Cow::Owned(s))
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<f64> for Value {
    fn from(n: f64) -> Self {
        Value::Float(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// A finished span, as exported.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    /// Its trace and id.
    pub context: TraceContext,
    /// The span it sits under, if any.
    pub parent: Option<[u8; 8]>,
    /// What it is (`POST /v1/chat/completions`).
    pub name: String,
    /// Server, client or internal.
    pub kind: SpanKind,
    /// Unix nanoseconds.
    pub start_ns: u64,
    /// Unix nanoseconds.
    pub end_ns: u64,
    /// Its attributes.
    pub attributes: Vec<(&'static str, Value)>,
    /// Whether it ended in an error.
    pub error: bool,
}

/// An open span: attributes are added as they are known, then it is
/// finished once, into a [`crate::Tracer`].
#[derive(Debug, Clone)]
pub struct Span {
    record: SpanRecord,
}

impl Span {
    /// A span starting now, under `parent` (a remote or local parent
    /// context), with a context of its own.
    pub fn start(name: impl Into<String>, kind: SpanKind, parent: Option<&TraceContext>) -> Self {
        let context = parent.map_or_else(TraceContext::root, TraceContext::child);
        Self::start_as(name, kind, context, parent.map(|p| p.span_id))
    }

    /// A span starting now with the given context (when the context was
    /// made before the span, to hand to someone else first).
    pub fn start_as(
        name: impl Into<String>,
        kind: SpanKind,
        context: TraceContext,
        parent: Option<[u8; 8]>,
    ) -> Self {
        Self {
            record: SpanRecord {
                context,
                parent,
                name: name.into(),
                kind,
                start_ns: now_ns(),
                end_ns: 0,
                attributes: Vec::new(),
                error: false,
            },
        }
    }

    /// This span's context: its children's parent.
    pub fn context(&self) -> &TraceContext {
        &self.record.context
    }

    /// Moves the start (a span recorded after the fact, a policy call).
    pub fn started_at(mut self, start_ns: u64) -> Self {
        self.record.start_ns = start_ns;
        self
    }

    /// Sets an attribute.
    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        self.record.attributes.push((key, value.into()));
    }

    /// Marks the span as failed.
    pub fn fail(&mut self) {
        self.record.error = true;
    }

    /// The record, ended now.
    pub fn end(self) -> SpanRecord {
        self.end_at(now_ns())
    }

    /// The record, ended at `end_ns`.
    pub fn end_at(mut self, end_ns: u64) -> SpanRecord {
        self.record.end_ns = end_ns.max(self.record.start_ns);
        self.record
    }
}

/// The wall clock in Unix nanoseconds.
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
