//! Usage metering where an answer ends: every answer that reached an
//! engine, whole or streamed, yields one [`UsageEvent`] with the tokens the
//! engine reported in its `usage`, the time to its first byte and its
//! duration. Streams are asked for their usage (`stream_options.
//! include_usage`) when the client did not ask, and the usage-only chunk
//! is then taken out again, so the client sees what it asked for.
//!
//! Events go to a bounded queue ([`UsageMeter`]) that a writer drains in
//! batches (the server's `usage` task); a full queue drops the event and
//! counts it, so metering never holds a request back.

use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use futures::Stream;
use futures::stream::BoxStream;
use serde_json::Value;
use switchyard_protocol::answer::{Answer, AnswerBody};
use switchyard_protocol::usage::UsageEvent;
use tokio::sync::mpsc;

/// Events a replica holds for its writer before it drops them.
pub const QUEUE: usize = 16_384;

/// The most of a non-streamed body kept to read its `usage` from (a
/// larger one, an embedding of a long input, is metered without tokens).
const MAX_WHOLE_READ: usize = 4 << 20;

/// The most of one SSE event held while it is incomplete.
const MAX_EVENT: usize = 1 << 20;

/// The queue of events and what was lost from it.
#[derive(Debug)]
pub struct UsageMeter {
    sender: mpsc::Sender<UsageEvent>,
    receiver: Mutex<Option<mpsc::Receiver<UsageEvent>>>,
    queued: AtomicU64,
    dropped: AtomicU64,
    written: AtomicU64,
    failed: AtomicU64,
}

impl Default for UsageMeter {
    fn default() -> Self {
        Self::new(QUEUE)
    }
}

impl UsageMeter {
    /// A queue of `capacity` events.
    pub fn new(capacity: usize) -> Self {
        let (sender, receiver) = mpsc::channel(capacity);
        Self {
            sender,
            receiver: Mutex::new(Some(receiver)),
            queued: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// The queue's reading end, for the one writer.
    pub fn take_receiver(&self) -> Option<mpsc::Receiver<UsageEvent>> {
        self.receiver.lock().expect("usage receiver lock").take()
    }

    /// Events dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Counts a batch the writer wrote (`ok`) or lost.
    pub fn written(&self, events: u64, ok: bool) {
        let counter = if ok { &self.written } else { &self.failed };
        counter.fetch_add(events, Ordering::Relaxed);
    }

    /// The counters as Prometheus text.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        for (name, help, value) in [
            (
                "switchyard_usage_events_queued_total",
                "Usage events queued for writing.",
                &self.queued,
            ),
            (
                "switchyard_usage_events_dropped_total",
                "Usage events dropped because the writer's queue was full.",
                &self.dropped,
            ),
            (
                "switchyard_usage_events_written_total",
                "Usage events written to the database.",
                &self.written,
            ),
            (
                "switchyard_usage_events_failed_total",
                "Usage events lost because their batch failed to write.",
                &self.failed,
            ),
        ] {
            let n = value.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {n}"
            );
        }
    }

    fn record(&self, event: UsageEvent) {
        match self.sender.try_send(event) {
            Ok(()) => self.queued.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.dropped.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// Who asked, for what, and what served it: the event's fixed part.
#[derive(Debug, Clone)]
pub struct Metering {
    /// The caller's key id, or `peer:<label>`.
    pub caller: String,
    /// The model as the client named it.
    pub model: String,
    /// The replica, or `<peer>/<service>`.
    pub served_by: String,
    /// The replica's node.
    pub node: String,
    /// When the request came in.
    pub started: Instant,
    /// Take the usage-only chunk out of the stream (the client did not ask for it).
    pub strip_usage: bool,
    /// The request's span: the answer's tokens and times go on it, and it
    /// ends with the answer.
    pub trace: Option<crate::trace::RequestTrace>,
}

/// The tokens of an engine's `usage` object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tokens {
    /// `prompt_tokens`.
    pub prompt: u64,
    /// `completion_tokens` (0 for embeddings).
    pub completion: u64,
    /// `prompt_tokens_details.cached_tokens`.
    pub cached: u64,
}

/// The `usage` of an answer's JSON (a whole answer or one SSE chunk), if
/// it carries a non-null one.
pub fn tokens(json: &Value) -> Option<Tokens> {
    let usage = json.get("usage").filter(|u| u.is_object())?;
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    Some(Tokens {
        prompt: n(usage.get("prompt_tokens")),
        completion: n(usage.get("completion_tokens")),
        cached: n(usage.pointer("/prompt_tokens_details/cached_tokens")),
    })
}

/// An engine's `usage` object, read without the rest of its answer.
#[derive(Debug, Default, serde::Deserialize)]
struct UsageJson {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<Details>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct Details {
    #[serde(default)]
    cached_tokens: u64,
}

/// The `usage` in a JSON text, found by its key and read alone: an answer
/// is not parsed whole for it. `None` when there is none, it is `null`,
/// or the text holds `"usage"` only inside a string (then the whole text
/// is parsed, as it must be to tell).
pub fn find_tokens(json: &[u8]) -> Option<Tokens> {
    let mut from = 0;
    // The key is the first `"usage"` followed by a colon (the word may
    // come before as a value).
    let rest = loop {
        let at = from + find(&json[from..], b"\"usage\"")?;
        from = at + 7;
        if let Some(rest) = json[from..].trim_ascii_start().strip_prefix(b":") {
            break rest.trim_ascii_start();
        }
    };
    if rest.starts_with(b"null") {
        return None;
    }
    let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<UsageJson>();
    match values.next() {
        Some(Ok(usage)) => Some(Tokens {
            prompt: usage.prompt_tokens,
            completion: usage.completion_tokens,
            cached: usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
        }),
        _ => serde_json::from_slice::<Value>(json)
            .ok()
            .and_then(|v| tokens(&v)),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// A streamed request's body asking for usage: `Some` (the new body) when
/// the client did not ask for it itself. A body without `stream_options`
/// gets it spliced in after its opening brace; one with them is rebuilt.
pub fn ask_for_usage(body: &[u8]) -> Option<Bytes> {
    if find(body, b"\"stream_options\"").is_none() {
        let open = body.iter().position(|b| !b.is_ascii_whitespace())?;
        if body[open] != b'{' {
            return None;
        }
        let rest = &body[open + 1..];
        let empty = rest.trim_ascii_start().starts_with(b"}");
        let mut asked = Vec::with_capacity(body.len() + 48);
        asked.extend_from_slice(&body[..=open]);
        asked.extend_from_slice(b"\"stream_options\":{\"include_usage\":true}");
        if !empty {
            asked.push(b',');
        }
        asked.extend_from_slice(rest);
        return Some(Bytes::from(asked));
    }
    let mut json: serde_json::Map<String, Value> = serde_json::from_slice(body).ok()?;
    let options = json
        .entry("stream_options")
        .or_insert_with(|| Value::Object(Default::default()));
    let options = options.as_object_mut()?;
    if options.get("include_usage").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    options.insert("include_usage".into(), Value::Bool(true));
    serde_json::to_vec(&json).ok().map(Bytes::from)
}

/// The answer, metered: its body is watched as it goes to the client and
/// the event recorded when it ends (or the client drops it).
///
/// `charge`, the request's place in the usage counters, is settled then
/// with the engine's tokens: an error answer without them counts none, a
/// success without them keeps the estimate.
pub fn meter(
    meter: std::sync::Arc<UsageMeter>,
    answer: Answer,
    metering: Metering,
    charge: Option<crate::counters::Charge>,
) -> Answer {
    let status = answer.status;
    let sse = answer
        .headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("content-type") && v.starts_with("text/event-stream"));
    let watch = Watch {
        meter,
        metering,
        charge,
        status,
        sse,
        first_byte: None,
        tokens: None,
        held: BytesMut::new(),
        ended: false,
    };
    let body = match answer.body {
        AnswerBody::Whole(bytes) => {
            let mut watch = watch;
            watch.first_byte = Some(Instant::now());
            watch.held.extend_from_slice(&bytes);
            watch.end(false);
            AnswerBody::Whole(bytes)
        }
        AnswerBody::Streaming(inner) => AnswerBody::Streaming(Box::pin(Metered {
            inner,
            watch,
            finished: false,
        })),
    };
    Answer {
        status,
        headers: answer.headers,
        body,
    }
}

/// What is known of an answer while its body goes by.
struct Watch {
    meter: std::sync::Arc<UsageMeter>,
    metering: Metering,
    charge: Option<crate::counters::Charge>,
    status: u16,
    sse: bool,
    first_byte: Option<Instant>,
    tokens: Option<Tokens>,
    /// A whole body so far (to read its usage at the end), or the SSE event
    /// not yet complete.
    held: BytesMut,
    ended: bool,
}

impl Watch {
    /// Looks at a chunk; answers what the client gets of it.
    fn chunk(&mut self, chunk: Bytes) -> Bytes {
        self.first_byte.get_or_insert_with(Instant::now);
        if !self.sse {
            if self.held.len() + chunk.len() <= MAX_WHOLE_READ {
                self.held.extend_from_slice(&chunk);
            }
            return chunk;
        }
        let aligned = self.held.is_empty();
        self.held.extend_from_slice(&chunk);
        let mut out = BytesMut::new();
        let mut kept_all = true;
        while let Some(end) = find_event_end(&self.held) {
            let event = self.held.split_to(end);
            if self.event(&event) {
                out.extend_from_slice(&event);
            } else {
                kept_all = false;
            }
        }
        if self.held.len() > MAX_EVENT {
            // Not an event stream we can read: hand it on as it is.
            out.extend_from_slice(&self.held.split());
        }
        // The client gets the chunk itself unless an event was taken out
        // of it or it ends (or begins) inside an event.
        let whole = aligned && kept_all && self.held.is_empty();
        if self.metering.strip_usage && !whole {
            out.freeze()
        } else {
            chunk
        }
    }

    /// Reads one complete SSE event; whether the client gets it.
    fn event(&mut self, event: &[u8]) -> bool {
        let Some(data) = event
            .split(|b| *b == b'\n')
            .find_map(|line| line.strip_prefix(b"data:"))
        else {
            return true;
        };
        let Some(tokens) = find_tokens(data) else {
            return true;
        };
        self.tokens = Some(tokens);
        if !self.metering.strip_usage {
            return true;
        }
        // The usage-only chunk has no choices; engines write it compact.
        let usage_only = find(data, b"\"choices\":[]").is_some()
            || serde_json::from_slice::<Value>(data.trim_ascii())
                .ok()
                .and_then(|json| json.get("choices")?.as_array().map(Vec::is_empty))
                .unwrap_or(false);
        !usage_only
    }

    /// Records the event once: at the body's end, or when it is dropped
    /// before (`cut`: the client went away).
    fn end(&mut self, cut: bool) {
        if self.ended {
            return;
        }
        self.ended = true;
        if !self.sse && self.tokens.is_none() {
            self.tokens = find_tokens(&self.held);
        }
        let now = Instant::now();
        let since = |t: Instant| {
            u64::try_from(t.duration_since(self.metering.started).as_millis()).unwrap_or(u64::MAX)
        };
        let tokens = self.tokens.unwrap_or_default();
        if let Some(trace) = self.metering.trace.take() {
            self.trace_end(&trace, cut, now);
        }
        if let Some(charge) = self.charge.take() {
            match (self.tokens, self.status) {
                (Some(t), _) => charge.settle(t.prompt + t.completion),
                (None, 200..=299) => drop(charge),
                (None, _) => charge.refund(),
            }
        }
        let at_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.meter.record(UsageEvent {
            at_unix_ms,
            caller: self.metering.caller.clone(),
            model: self.metering.model.clone(),
            served_by: self.metering.served_by.clone(),
            node: self.metering.node.clone(),
            prompt_tokens: tokens.prompt,
            completion_tokens: tokens.completion,
            cached_tokens: tokens.cached,
            reported: self.tokens.is_some(),
            status: if cut { 499 } else { self.status },
            stream: self.sse,
            first_byte_ms: self.first_byte.map_or(since(now), since),
            duration_ms: since(now),
        });
    }
}

impl Watch {
    /// The span gets GenAI's usage, the time to the first token and the
    /// status, then ends.
    fn trace_end(&self, trace: &crate::trace::RequestTrace, cut: bool, now: Instant) {
        if let Some(t) = self.tokens {
            trace.set("gen_ai.usage.input_tokens", t.prompt);
            trace.set("gen_ai.usage.output_tokens", t.completion);
        }
        let first = self.first_byte.unwrap_or(now);
        let ttft = first.duration_since(self.metering.started).as_secs_f64();
        trace.set("gen_ai.server.time_to_first_token", ttft);
        trace.set("gen_ai.response.model", self.metering.served_by.clone());
        trace.end(
            if cut { 499 } else { self.status },
            cut.then_some("client_closed"),
        );
    }
}

/// The end of the first complete event (after its blank line: `\n\n`
/// or `\r\n\r\n`), if any; one pass over the line ends.
fn find_event_end(held: &[u8]) -> Option<usize> {
    memchr::memchr_iter(b'\n', held).find_map(|at| match held.get(at + 1) {
        Some(b'\n') => Some(at + 2),
        Some(b'\r') if held.get(at + 2) == Some(&b'\n') => Some(at + 3),
        _ => None,
    })
}

/// A streamed body watched by its [`Watch`].
struct Metered {
    inner: BoxStream<'static, Result<Bytes, std::io::Error>>,
    watch: Watch,
    /// The inner stream ended (it is not polled again).
    finished: bool,
}

impl Stream for Metered {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.finished {
            return Poll::Ready(None);
        }
        loop {
            return match self.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    let out = self.watch.chunk(chunk);
                    if out.is_empty() {
                        continue;
                    }
                    Poll::Ready(Some(Ok(out)))
                }
                Poll::Ready(None) => {
                    self.finished = true;
                    self.watch.end(false);
                    // What is held of an unfinished last event when the
                    // client gets whole events only.
                    let rest = match self.watch.sse && self.watch.metering.strip_usage {
                        true => self.watch.held.split().freeze(),
                        false => Bytes::new(),
                    };
                    if rest.is_empty() {
                        Poll::Ready(None)
                    } else {
                        Poll::Ready(Some(Ok(rest)))
                    }
                }
                other => other,
            };
        }
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        self.watch.end(true);
    }
}

#[cfg(test)]
mod tests;
