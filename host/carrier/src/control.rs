//! The control seam: a request and its answer to one node (`ping`,
//! `install`, `start`, ...), with a deadline and a typed refusal.
//!
//! Two ways to carry it, one wire meaning:
//! - [`StreamControl`]: a stream to the node's `control` service (the
//!   `tunnel` set; the stream travels on the inference lane);
//! - [`CarrierControl`]: a request on `node.<id>.control` naming the verb in
//!   the `switchyard-verb` header (the `nats` set; verbs such as
//!   `files.status` hold dots, which subjects cannot), answered with the
//!   `switchyard-control` header.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::future::BoxFuture;

use crate::Refusal;
use crate::client::Carrier;
use crate::message::SendError;
use crate::stream::Stream;
use crate::stream_seam::{Lane, StreamsSeam};

/// The worker service control calls open on the streams seam.
pub const CONTROL_SERVICE: &str = "control";
/// The header of a control answer on a carrier: `ok` or `refused:<code>`.
pub const CONTROL_HEADER: &str = "switchyard-control";
/// The header naming a control request's verb on a carrier.
pub const VERB_HEADER: &str = "switchyard-verb";
/// The largest control request or answer.
pub const MAX_CONTROL_BYTES: usize = 16 * 1024 * 1024;

/// A worker's typed refusal of a control call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ControlRefusal {
    /// Stable, machine-readable (`unknown_verb`, `invalid_request`, ...).
    pub code: String,
    /// For the operator.
    pub message: String,
}

impl ControlRefusal {
    /// A refusal with `code`.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// Why a control call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// The worker answered with a refusal.
    #[error("refused by the worker: {0}")]
    Refused(ControlRefusal),
    /// No answer before the deadline (the worker may have acted).
    #[error("no answer before the deadline")]
    Timeout,
    /// The call never reached the worker.
    #[error("not delivered: {0}")]
    NotDelivered(String),
    /// During a carrier change, the worker is attached to no set this
    /// replica runs. Nothing was sent.
    #[error("no route: {0}")]
    NoRoute(String),
    /// The call reached the worker but the answer was lost or garbled.
    #[error("control call failed: {0}")]
    Failed(String),
}

/// A worker's control verbs: verb and payload in, answer out.
pub type ControlHandler =
    Arc<dyn Fn(String, Bytes) -> BoxFuture<'static, Result<Bytes, ControlRefusal>> + Send + Sync>;

/// The control seam.
pub trait ControlSeam: Send + Sync {
    /// Calls `verb` on `node`; fails with [`ControlError::Timeout`] after `deadline`.
    fn call(
        &self,
        node: &str,
        verb: &str,
        payload: Bytes,
        deadline: Duration,
    ) -> BoxFuture<'static, Result<Bytes, ControlError>>;
}

/// Control over the streams seam.
pub struct StreamControl {
    streams: Arc<dyn StreamsSeam>,
}

impl StreamControl {
    /// Control calls as streams opened through `streams`.
    pub fn new(streams: Arc<dyn StreamsSeam>) -> Self {
        Self { streams }
    }
}

impl ControlSeam for StreamControl {
    fn call(
        &self,
        node: &str,
        verb: &str,
        payload: Bytes,
        deadline: Duration,
    ) -> BoxFuture<'static, Result<Bytes, ControlError>> {
        let streams = self.streams.clone();
        let (node, verb) = (node.to_string(), verb.to_string());
        Box::pin(async move {
            let call = async {
                let mut request = BytesMut::with_capacity(verb.len() + 1 + payload.len());
                request.extend_from_slice(verb.as_bytes());
                request.extend_from_slice(b"\n");
                request.extend_from_slice(&payload);
                let mut reader = streams
                    .call(&node, Lane::Inference, CONTROL_SERVICE, request.freeze())
                    .await
                    .map_err(|refusal| match refusal {
                        Refusal::NotDelivered(why) => ControlError::NotDelivered(why),
                        Refusal::NoRoute(why) => ControlError::NoRoute(why),
                        other => ControlError::Failed(other.to_string()),
                    })?;
                let answer = reader
                    .read_to_end(MAX_CONTROL_BYTES)
                    .await
                    .map_err(|e| ControlError::Failed(e.to_string()))?;
                decode_answer(&answer)
            };
            tokio::time::timeout(deadline, call)
                .await
                .unwrap_or(Err(ControlError::Timeout))
        })
    }
}

/// Serves one control stream on a worker: reads the request to the end,
/// runs the verb, answers, finishes.
pub async fn serve_control_stream(stream: Stream, handler: ControlHandler) {
    let Stream {
        mut reader,
        mut writer,
    } = stream;
    let answer = match reader.read_to_end(MAX_CONTROL_BYTES).await {
        Ok(request) => match request.iter().position(|b| *b == b'\n') {
            Some(split) => {
                let verb = String::from_utf8_lossy(&request[..split]).into_owned();
                let payload = Bytes::copy_from_slice(&request[split + 1..]);
                handler(verb, payload).await
            }
            None => Err(ControlRefusal::new(
                "invalid_request",
                "a control request starts with its verb and a newline",
            )),
        },
        Err(e) => Err(ControlRefusal::new("invalid_request", e.to_string())),
    };
    let _ = writer.write(encode_answer(&answer)).await;
    writer.finish();
}

/// `ok\n<payload>` or `refused <code>\n<message>`.
fn encode_answer(answer: &Result<Bytes, ControlRefusal>) -> Bytes {
    let mut out = BytesMut::new();
    match answer {
        Ok(payload) => {
            out.extend_from_slice(b"ok\n");
            out.extend_from_slice(payload);
        }
        Err(refusal) => {
            out.extend_from_slice(
                format!("refused {}\n{}", refusal.code, refusal.message).as_bytes(),
            );
        }
    }
    out.freeze()
}

fn decode_answer(answer: &[u8]) -> Result<Bytes, ControlError> {
    let split = answer
        .iter()
        .position(|b| *b == b'\n')
        .ok_or_else(|| ControlError::Failed("the worker's answer has no status line".into()))?;
    let status = String::from_utf8_lossy(&answer[..split]);
    let rest = &answer[split + 1..];
    match status.split_once(' ') {
        None if status == "ok" => Ok(Bytes::copy_from_slice(rest)),
        Some(("refused", code)) => Err(ControlError::Refused(ControlRefusal::new(
            code,
            String::from_utf8_lossy(rest),
        ))),
        _ => Err(ControlError::Failed(format!(
            "unknown status line `{status}`"
        ))),
    }
}

/// Control as carrier requests.
pub struct CarrierControl {
    carrier: Arc<Carrier>,
}

impl CarrierControl {
    /// Control calls as requests on `carrier`.
    pub fn new(carrier: Arc<Carrier>) -> Self {
        Self { carrier }
    }
}

/// The subject a node's control verbs are served on.
pub fn control_subject(node: &str) -> String {
    format!("node.{node}.control")
}

impl ControlSeam for CarrierControl {
    fn call(
        &self,
        node: &str,
        verb: &str,
        payload: Bytes,
        deadline: Duration,
    ) -> BoxFuture<'static, Result<Bytes, ControlError>> {
        let carrier = self.carrier.clone();
        let subject = control_subject(node);
        let headers = vec![(VERB_HEADER.to_string(), verb.to_string())];
        Box::pin(async move {
            let reply = carrier
                .request_with_headers(&subject, headers, payload, deadline)
                .await
                .map_err(|e| match e {
                    SendError::Timeout => ControlError::Timeout,
                    SendError::NoResponders | SendError::NotConnected => {
                        ControlError::NotDelivered(e.to_string())
                    }
                    other => ControlError::Failed(other.to_string()),
                })?;
            let status = reply
                .headers
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(CONTROL_HEADER))
                .map(|(_, value)| value.as_str())
                .unwrap_or_default();
            match status.split_once(':') {
                None if status == "ok" => Ok(reply.payload),
                Some(("refused", code)) => Err(ControlError::Refused(ControlRefusal::new(
                    code,
                    String::from_utf8_lossy(&reply.payload),
                ))),
                _ => Err(ControlError::Failed(format!(
                    "the answer's {CONTROL_HEADER} header is `{status}`"
                ))),
            }
        })
    }
}

/// Serves a node's control verbs on a carrier until the subscription ends.
pub async fn serve_control_on_carrier(
    carrier: Arc<Carrier>,
    node: &str,
    handler: ControlHandler,
) -> Result<(), SendError> {
    subscribe_control_on_carrier(carrier, node, handler)
        .await?
        .await;
    Ok(())
}

/// Subscribes to a node's control subject and gives back what serves its
/// verbs until the subscription ends (run it on a task): a worker that
/// attaches to a set says it is attached only once it is subscribed, or a
/// frontend's first call could find no responder.
pub async fn subscribe_control_on_carrier(
    carrier: Arc<Carrier>,
    node: &str,
    handler: ControlHandler,
) -> Result<BoxFuture<'static, ()>, SendError> {
    let (subscription, requests) = carrier.subscribe(&control_subject(node), None).await?;
    Ok(Box::pin(serve_control_requests(
        carrier,
        subscription,
        requests,
        handler,
    )))
}

async fn serve_control_requests(
    carrier: Arc<Carrier>,
    subscription: crate::client::Subscription,
    mut requests: tokio::sync::mpsc::Receiver<crate::message::Message>,
    handler: ControlHandler,
) {
    while let Some(request) = requests.recv().await {
        let Some(reply_to) = request.reply_to.clone() else {
            continue;
        };
        let verb = request
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(VERB_HEADER))
            .map(|(_, value)| value.clone())
            .unwrap_or_default();
        let (carrier, handler) = (carrier.clone(), handler.clone());
        tokio::spawn(async move {
            let (status, payload) = match handler(verb, request.payload).await {
                Ok(payload) => ("ok".to_string(), payload),
                Err(refusal) => (
                    format!("refused:{}", refusal.code),
                    Bytes::from(refusal.message),
                ),
            };
            let headers = vec![(CONTROL_HEADER.to_string(), status)];
            if let Err(e) = carrier
                .publish_with_headers(&reply_to, headers, payload)
                .await
            {
                tracing::warn!(error = %e, "a control answer was not sent");
            }
        });
    }
    drop(subscription);
}
