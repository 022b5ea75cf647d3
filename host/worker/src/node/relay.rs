//! The `inference` stream service: the head line checked, the engine
//! asked over HTTP, its answer relayed onto the stream as it comes. With a
//! tracer, the stream gets a span under the frontend's (the head's
//! `traceparent`) and the engine call one beneath it, whose context the
//! engine gets as its own `traceparent`.

use std::sync::Arc;

use bytes::BytesMut;
use futures::{FutureExt, StreamExt};
use switchyard_carrier::{Stream, StreamWriter};
use switchyard_protocol::stream::{AnswerHead, ENGINE_MS_HEADER};
use switchyard_telemetry::{Span, SpanKind, TRACEPARENT, TraceContext, Tracer};

use super::answer::{error_answer, head_into};
use super::{Node, head, read_head};

/// The most of an engine's answer gathered into one stream write.
const COALESCE_LIMIT: usize = 64 * 1024;

impl Node {
    /// Answers one `inference` stream: the head checked, the engine asked,
    /// its answer relayed as it comes.
    pub(super) async fn serve_inference(self: Arc<Self>, stream: Stream) {
        let Stream {
            mut reader,
            mut writer,
        } = stream;
        let (head, rest) = match read_head(&mut reader).await {
            Ok(head) => head,
            Err(e) => {
                let _ = writer.write(error_answer(400, "invalid_request", e)).await;
                return writer.finish();
            }
        };
        let head = match head::parse(&head) {
            Ok(head) => head,
            Err(e) => {
                let _ = writer.write(error_answer(400, "invalid_request", e)).await;
                return writer.finish();
            }
        };
        let Some(engine) = self.engine(&head.replica) else {
            let _ = writer
                .write(error_answer(
                    503,
                    "replica_unavailable",
                    format!("no replica {} here", head.replica),
                ))
                .await;
            return writer.finish();
        };
        let Some(_in_flight) = engine.admit() else {
            let message = format!("replica {} is {}", head.replica, engine.state().name());
            let _ = writer
                .write(error_answer(503, "replica_unavailable", message))
                .await;
            return writer.finish();
        };
        // The request body arrives whole before the engine is asked (OpenAI
        // requests are small); the answer streams.
        let mut body = BytesMut::from(&rest[..]);
        while let Some(chunk) = reader.read().await {
            match chunk {
                Ok(chunk) => body.extend_from_slice(&chunk),
                Err(_) => return,
            }
        }
        let mut spans = self
            .tracer
            .get()
            .map(|tracer| Spans::start(tracer, &head.headers, &head.path, &head.replica));
        let mut request = self
            .http
            .request(head.method, engine.url_of(&head.path))
            .body(body.freeze());
        for (name, value) in &head.headers {
            // The engine's parent is the worker's call, not the frontend.
            if spans.is_none() || !name.eq_ignore_ascii_case(TRACEPARENT) {
                request = request.header(name, value);
            }
        }
        if let Some(spans) = &spans {
            request = request.header(TRACEPARENT, spans.engine.context().header());
        }
        let asked = std::time::Instant::now();
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => {
                if let Some(spans) = spans.take() {
                    spans.end(502);
                }
                let _ = writer
                    .write(error_answer(502, "engine_failed", e.to_string()))
                    .await;
                return writer.finish();
            }
        };
        let mut head = answer_head(&response);
        // How long the engine took to its answer's head, for the frontend's
        // `x-switchyard-overhead-ms` (it takes the header out again).
        head.headers.push((
            ENGINE_MS_HEADER.to_string(),
            format!("{:.3}", asked.elapsed().as_secs_f64() * 1e3),
        ));
        relay_answer(&head, response, writer).await;
        if let Some(spans) = spans {
            spans.end(head.status);
        }
    }
}

/// The stream's span and its engine call's, open until the answer ends.
struct Spans {
    tracer: Arc<Tracer>,
    stream: Span,
    engine: Span,
}

impl Spans {
    fn start(
        tracer: &Arc<Tracer>,
        headers: &[(String, String)],
        path: &str,
        replica: &str,
    ) -> Self {
        let parent = headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(TRACEPARENT))
            .and_then(|(_, value)| TraceContext::parse(value));
        let mut stream = Span::start(format!("worker {path}"), SpanKind::Server, parent.as_ref());
        stream.set("switchyard.replica", replica.to_string());
        let mut engine = Span::start(
            format!("engine POST {path}"),
            SpanKind::Client,
            Some(stream.context()),
        );
        engine.set("http.request.method", "POST");
        engine.set("url.path", path.to_string());
        Self {
            tracer: tracer.clone(),
            stream,
            engine,
        }
    }

    fn end(mut self, status: u16) {
        self.engine
            .set("http.response.status_code", u64::from(status));
        if status >= 500 {
            self.engine.fail();
            self.stream.fail();
        }
        self.tracer.record(self.engine.end());
        self.tracer.record(self.stream.end());
    }
}

/// The engine's answer onto the stream: its head, then its body as it
/// comes; dropping the response (the frontend went away) cancels the
/// engine's work.
async fn relay_answer(head: &AnswerHead, response: reqwest::Response, mut writer: StreamWriter) {
    let mut out = BytesMut::with_capacity(512);
    head_into(head, &mut out);
    let mut body = response.bytes_stream();
    loop {
        // What the engine has ready goes in one message: the head with
        // the first bytes, and tokens that came together.
        let mut ended = false;
        while out.len() < COALESCE_LIMIT {
            match body.next().now_or_never() {
                Some(Some(Ok(chunk))) => out.extend_from_slice(&chunk),
                Some(Some(Err(_))) => return writer.reset(),
                Some(None) => {
                    ended = true;
                    break;
                }
                None => break,
            }
        }
        // The frontend went away: dropping the response cancels the engine's work.
        if !out.is_empty() && writer.write(out.split().freeze()).await.is_err() {
            return;
        }
        if ended {
            break;
        }
        match body.next().await {
            Some(Ok(chunk)) => out.extend_from_slice(&chunk),
            Some(Err(_)) => return writer.reset(),
            None => break,
        }
    }
    writer.finish();
}

/// The engine's status and headers, as the answer's head: hop-by-hop
/// headers and the length left out (the frontend frames its own answer).
fn answer_head(response: &reqwest::Response) -> AnswerHead {
    let headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter(|(name, _)| {
            // Hop-by-hop and length: the frontend frames its own answer.
            !matches!(
                name.as_str(),
                "content-length" | "transfer-encoding" | "connection"
            )
        })
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_string())))
        .collect();
    AnswerHead {
        status: response.status().as_u16(),
        headers,
    }
}
