//! What an inference request gets: the engine's status, headers and body
//! as they come (SSE included), or a refusal in the same shape. One type
//! from the engine to whoever asked: the inference core makes it, the
//! `/v1` routes answer it over HTTP, a batch line reads it whole, and
//! federation sends it to the peer that called (its head as an
//! [`AnswerHead`] line, then the body) and reads a peer's back into one.

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;

use crate::stream::AnswerHead;

/// An answer's body.
pub enum AnswerBody {
    /// Known whole (a refusal): its length is said up front.
    Whole(Bytes),
    /// Chunks as the engine sends them.
    Streaming(BoxStream<'static, Result<Bytes, std::io::Error>>),
}

impl AnswerBody {
    /// The body as chunks, whichever it is.
    pub fn into_stream(self) -> BoxStream<'static, Result<Bytes, std::io::Error>> {
        match self {
            Self::Whole(bytes) => futures::stream::once(async move { Ok(bytes) }).boxed(),
            Self::Streaming(stream) => stream,
        }
    }
}

/// An answer, its body streaming behind its head.
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// Headers, each a valid HTTP header name and value: this side's
    /// (`x-switchyard-replica`, `retry-after`), then the engine's.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: AnswerBody,
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answer")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

/// Why a body was not read whole.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It broke off.
    #[error("{0}")]
    Broken(#[from] std::io::Error),
    /// It is larger than the reader takes.
    #[error("the answer is over {0} bytes")]
    TooLarge(usize),
}

impl Answer {
    /// An answer whose body is already whole.
    pub fn whole(status: u16, headers: Vec<(String, String)>, body: Bytes) -> Self {
        Self {
            status,
            headers,
            body: AnswerBody::Whole(body),
        }
    }

    /// Its status and headers, as they cross a link ahead of the body.
    pub fn head(&self) -> AnswerHead {
        AnswerHead {
            status: self.status,
            headers: self.headers.clone(),
        }
    }

    /// A header's value (the first of that name, case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Reads the body whole, up to `limit` bytes.
    pub async fn read(self, limit: usize) -> Result<Bytes, ReadError> {
        let mut body = match self.body {
            AnswerBody::Whole(bytes) if bytes.len() > limit => {
                return Err(ReadError::TooLarge(limit));
            }
            AnswerBody::Whole(bytes) => return Ok(bytes),
            AnswerBody::Streaming(stream) => stream,
        };
        let mut whole = bytes::BytesMut::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            if whole.len() + chunk.len() > limit {
                return Err(ReadError::TooLarge(limit));
            }
            whole.extend_from_slice(&chunk);
        }
        Ok(whole.freeze())
    }
}
