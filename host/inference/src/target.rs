//! Where an admitted request is carried, and its answer brought back.
//!
//! A [`Target`] is a replica of this cluster, reached over the streams
//! seam on the inference lane (an [`InferenceHead`] line, then the body),
//! or a peer cluster's service, reached over the federation link. Either
//! answers an [`AnswerHead`] line, then the engine's body as it comes; the
//! handler does not tell them apart.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use switchyard_carrier::stream_seam::Lane;
use switchyard_carrier::{StreamError, StreamReader};
use switchyard_protocol::limits::MAX_HEAD;
use switchyard_protocol::stream::{AnswerHead, INFERENCE, InferenceHead};

use switchyard_federation::inflight::Revocation;

use super::Inference;
use super::{Answer, AnswerBody, InferenceError};
use switchyard_scheduler::routing::{Lease, Routing};

/// The header naming the replica that answered.
const REPLICA_HEADER: &str = "x-switchyard-replica";

/// Where a request goes.
#[derive(Debug)]
pub enum Target {
    /// A replica of this cluster; the lease holds its slot until the
    /// answer's body ends.
    Replica(Lease),
    /// A peer's service, under a grant this cluster holds; the owner
    /// judges and counts the call.
    Peer(switchyard_federation::RemoteTarget),
}

impl Target {
    /// The least-loaded ready replica serving `model`.
    pub fn route(routing: &Routing, model: &str) -> Result<Self, InferenceError> {
        routing
            .route(model)
            .map(Target::Replica)
            .map_err(|why| InferenceError::NoRoute {
                why,
                model: model.to_owned(),
            })
    }

    /// The replica's id (the answer's `x-switchyard-replica`), or the
    /// remote model's name.
    pub fn replica(&self) -> &str {
        match self {
            Target::Replica(lease) => &lease.replica,
            Target::Peer(remote) => &remote.model,
        }
    }

    /// What serves a request, and on which node, as usage names them: the
    /// replica and its node, or the peer's service and no node.
    pub fn served_by(&self) -> (String, String) {
        match self {
            Target::Replica(lease) => (lease.replica.clone(), lease.node.clone()),
            Target::Peer(remote) => (remote.model.clone(), String::new()),
        }
    }

    /// Sends `body` to `path`; answers with the status and headers the
    /// engine sent as soon as they arrive, the body streaming behind them.
    ///
    /// `traceparent` (the request's span) goes with it: in the stream's
    /// head to the worker, in the link's call to a peer.
    pub async fn send(
        self,
        core: &Inference,
        path: &str,
        body: Bytes,
        tokens: u64,
        traceparent: Option<&str>,
    ) -> Result<Answer, InferenceError> {
        let (mut reader, lease, revocation) = match self {
            Target::Replica(lease) => {
                let cluster = core.carriers.as_ref().ok_or(InferenceError::NoCarrier)?;
                let message = request(&lease.replica, path, &body, traceparent)?;
                let reader = cluster
                    .streams
                    .active()
                    .call(&lease.node, Lane::Inference, INFERENCE, message)
                    .await?;
                (reader, Some(lease), None)
            }
            Target::Peer(remote) => {
                let federation = core.federation.as_ref().ok_or_else(|| {
                    InferenceError::Federation(switchyard_federation::FederationError::unavailable(
                        "this replica runs no federation",
                    ))
                })?;
                // Entered before it is sent: the grant's revocation (the
                // owner tells this cluster) ends the call from here on.
                let revocation = federation.inflight().enter(&remote.grant);
                let reader = federation
                    .send_inference(&remote, path, tokens, &body, traceparent)
                    .await
                    .map_err(InferenceError::Federation)?;
                (reader, None, Some((revocation, remote.grant)))
            }
        };
        let head = async {
            reader
                .read_line(MAX_HEAD)
                .await
                .map_err(|e| InferenceError::Broken(e.to_string()))
        };
        let (head, first) = match revocation.clone() {
            Some((mut revocation, grant)) => tokio::select! {
                head = head => head?,
                () = revocation.revoked() => return Err(revoked(&grant)),
            },
            None => head.await?,
        };
        let head: AnswerHead = serde_json::from_slice(&head)
            .map_err(|e| InferenceError::Broken(format!("the worker's answer head: {e}")))?;
        let keepalive = head
            .header("content-type")
            .is_some_and(|v| v.starts_with("text/event-stream"))
            .then_some(core.sse_keepalive);
        let mut headers = Vec::with_capacity(head.headers.len() + 1);
        if let Some(lease) = &lease {
            headers.push((REPLICA_HEADER.to_string(), lease.replica.clone()));
        }
        headers.extend(
            head.headers
                .into_iter()
                .filter(|(name, value)| valid_header(name, value)),
        );
        let events = keepalive.is_some();
        let body = answer_body(reader, lease, first, keepalive);
        let body = match revocation {
            Some((revocation, grant)) => until_revoked(body, revocation, grant, events).boxed(),
            None => body.boxed(),
        };
        let body = AnswerBody::Streaming(body);
        Ok(Answer {
            status: status(head.status),
            headers,
            body,
        })
    }
}

/// The stream's request: the head line, then the body, in one buffer
/// sized once (the carrier sends it with the open where it can).
fn request(
    replica: &str,
    path: &str,
    body: &[u8],
    traceparent: Option<&str>,
) -> Result<Bytes, InferenceError> {
    let mut headers = vec![("content-type".into(), "application/json".into())];
    if let Some(traceparent) = traceparent {
        headers.push((switchyard_telemetry::TRACEPARENT.into(), traceparent.into()));
    }
    let head = InferenceHead {
        replica: replica.to_owned(),
        method: "POST".into(),
        path: path.to_owned(),
        headers,
    };
    // A head is a few hundred bytes; the reserve saves a regrowth.
    let mut message = BytesMut::with_capacity(256 + body.len()).writer();
    serde_json::to_writer(&mut message, &head).map_err(InferenceError::internal)?;
    let mut message = message.into_inner();
    message.put_u8(b'\n');
    message.extend_from_slice(body);
    Ok(message.freeze())
}

/// The status an answer head names; 502 for one that is not an HTTP
/// status.
fn status(code: u16) -> u16 {
    if (100..1000).contains(&code) {
        code
    } else {
        502
    }
}

/// The engine's answer as the worker streams it; the lease lives as long.
/// With `keepalive`, an SSE answer silent that long between events gets a
/// comment line (clients ignore it; proxies see the connection alive).
fn answer_body(
    reader: StreamReader,
    lease: Option<Lease>,
    first: Bytes,
    keepalive: Option<Duration>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let between_events = first.is_empty() || first.ends_with(b"\n\n");
    let first = futures::stream::iter((!first.is_empty()).then_some(Ok(first)));
    let rest = futures::stream::unfold(
        (reader, lease, between_events),
        move |(mut reader, lease, mut between_events)| async move {
            let chunk = loop {
                let Some(every) = keepalive else {
                    break reader.read().await?;
                };
                match tokio::time::timeout(every, reader.read()).await {
                    Ok(chunk) => break chunk?,
                    Err(_) if between_events => {
                        let comment = Ok(Bytes::from_static(b": keep-alive\n\n"));
                        return Some((comment, (reader, lease, between_events)));
                    }
                    // Mid-event: a comment here would split it.
                    Err(_) => continue,
                }
            };
            if let Ok(bytes) = &chunk
                && !bytes.is_empty()
            {
                between_events = bytes.ends_with(b"\n\n");
            }
            let chunk = chunk.map_err(|e: StreamError| std::io::Error::other(e.to_string()));
            Some((chunk, (reader, lease, between_events)))
        },
    );
    first.chain(rest)
}

/// A remote call's refusal when its grant was revoked before it answered.
fn revoked(grant: &str) -> InferenceError {
    InferenceError::Federation(switchyard_federation::FederationError::new(
        403,
        "grant_revoked",
        format!("grant {grant} was revoked; the call was ended"),
    ))
}

/// A remote answer's body until its grant is revoked: a streamed answer
/// then ends with an error event, any other is cut.
fn until_revoked(
    body: impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
    revocation: Revocation,
    grant: String,
    events: bool,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let body = Box::pin(body);
    futures::stream::unfold(Some((body, revocation)), move |running| {
        let grant = grant.clone();
        async move {
            let (mut body, mut revocation) = running?;
            tokio::select! {
                chunk = body.next() => chunk.map(|chunk| (chunk, Some((body, revocation)))),
                () = revocation.revoked() => {
                    let last = match events {
                        true => Ok(switchyard_federation::revoked_event(&grant)),
                        false => Err(std::io::Error::other(format!("grant {grant} was revoked"))),
                    };
                    Some((last, None))
                }
            }
        }
    })
}

/// Whether `name: value` can be sent as an HTTP header.
fn valid_header(name: &str, value: &str) -> bool {
    http::HeaderName::from_bytes(name.as_bytes()).is_ok()
        && http::HeaderValue::from_str(value).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_status_that_is_not_an_http_status_is_a_bad_gateway() {
        assert_eq!(status(201), 201);
        assert_eq!(status(42), 502);
        // 65736 does not fit the head's u16 at all: the head is refused,
        // so the worker's garbage never reads as a truncated 200.
        assert!(serde_json::from_str::<AnswerHead>(r#"{"status": 65736}"#).is_err());
        assert!(serde_json::from_str::<AnswerHead>(r#"{"status": "200"}"#).is_err());
    }

    #[test]
    fn the_request_is_the_head_line_then_the_body_unchanged() {
        let body = br#"{"model": "demo",  "messages": []}"#;
        let message = request("rep_1", "/v1/chat/completions", body, None).unwrap();
        let (head, rest) = message.split_at(message.iter().position(|b| *b == b'\n').unwrap());
        let head: InferenceHead = serde_json::from_slice(head).unwrap();
        assert_eq!(head.replica, "rep_1");
        assert_eq!(
            (head.method.as_str(), head.path.as_str()),
            ("POST", "/v1/chat/completions")
        );
        assert_eq!(&rest[1..], body);
    }
}
