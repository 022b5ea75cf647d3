//! Streaming a completion as server-sent events.
//!
//! Tokens are generated as the body is polled, so each one is written as soon
//! as it exists, and a client that goes away drops the body, which stops the
//! generation and counts the request as cancelled.

use std::convert::Infallible;

use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::concurrency::InFlight;
use crate::decode::{Decoder, FinishReason};
use crate::openai::response::Usage;

/// How one endpoint writes its chunks.
pub trait ChunkFormat: Send + 'static {
    /// The chunk type.
    type Chunk: Serialize;
    /// A chunk sent once the prompt is processed, before any token
    /// (chat's `role`); `None` for none.
    fn opening(&self) -> Option<Self::Chunk>;
    /// A chunk carrying one token.
    fn token(&self, text: String) -> Self::Chunk;
    /// The chunk carrying `finish_reason`.
    fn finish(&self, reason: FinishReason) -> Self::Chunk;
    /// The usage chunk (`stream_options.include_usage`).
    fn usage(&self, usage: Usage) -> Self::Chunk;
}

/// A `text/event-stream` answer: the opening chunk, one chunk per token, the
/// finish chunk, the usage chunk if asked, then `data: [DONE]`.
pub fn respond<F: ChunkFormat>(
    decoder: Decoder,
    format: F,
    prompt_tokens: u32,
    include_usage: bool,
    in_flight: InFlight,
) -> Response {
    let stream = Streaming {
        decoder,
        format,
        prompt_tokens,
        include_usage,
        in_flight: Some(in_flight),
        phase: Phase::Opening,
    };
    let events = futures::stream::unfold(stream, |mut stream| async move {
        let event = stream.next_event().await?;
        Some((Ok::<_, Infallible>(event), stream))
    });
    Sse::new(events).into_response()
}

struct Streaming<F> {
    decoder: Decoder,
    format: F,
    prompt_tokens: u32,
    include_usage: bool,
    /// Taken and completed when the stream ends; dropped with the stream
    /// (a cancellation) otherwise.
    in_flight: Option<InFlight>,
    phase: Phase,
}

enum Phase {
    Opening,
    Tokens,
    Usage,
    Done,
    Ended,
}

impl<F: ChunkFormat> Streaming<F> {
    async fn next_event(&mut self) -> Option<Event> {
        loop {
            match self.phase {
                Phase::Opening => {
                    self.phase = Phase::Tokens;
                    self.decoder.prefill().await;
                    if let Some(chunk) = self.format.opening() {
                        return Some(data(&chunk));
                    }
                }
                Phase::Tokens => {
                    if let Some(token) = self.decoder.next_token().await {
                        return Some(data(&self.format.token(token)));
                    }
                    self.phase = if self.include_usage {
                        Phase::Usage
                    } else {
                        Phase::Done
                    };
                    let reason = self.decoder.finish_reason().unwrap_or(FinishReason::Length);
                    return Some(data(&self.format.finish(reason)));
                }
                Phase::Usage => {
                    self.phase = Phase::Done;
                    let usage = Usage::new(self.prompt_tokens, self.decoder.produced());
                    return Some(data(&self.format.usage(usage)));
                }
                Phase::Done => {
                    self.phase = Phase::Ended;
                    return Some(Event::default().data("[DONE]"));
                }
                Phase::Ended => {
                    if let Some(in_flight) = self.in_flight.take() {
                        in_flight.complete();
                    }
                    return None;
                }
            }
        }
    }
}

fn data(chunk: &impl Serialize) -> Event {
    Event::default()
        .json_data(chunk)
        .expect("chunks are plain structs of strings and numbers")
}
