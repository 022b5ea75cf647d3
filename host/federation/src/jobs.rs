//! Batch jobs across clusters, both sides of the link.
//!
//! The caller (a cluster that received a request for a peer's job) sends a
//! [`JobCall`] on a fresh stream of [`JOBS_SERVICE`] and reads the owner's
//! answer as its own `/v1` route would have given it. The owner checks the
//! call crossed one link only, that it is eligible for a new job, and that
//! the grant covers every service the job's lines name (judged and charged
//! as the calls they are); the server then acts, answering the peer only
//! about jobs that peer made ([`crate::Host::job`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use switchyard_carrier::stream_seam::Lane;
use switchyard_carrier::{Stream, StreamWriter};
use switchyard_protocol::federation::Operation;
use switchyard_protocol::jobs::{Eligibility, JOBS_SERVICE, JobAction, JobCall};
use switchyard_protocol::limits::MAX_HEAD;
use switchyard_protocol::stream::AnswerHead;
use switchyard_runtime::grant::FederatedCall;
use switchyard_store::federation::Cost;

use crate::incoming::{Unread, read_call};
use crate::links::LinkPeer;
use crate::remote::write_denied;
use crate::{Denied, FedResult, Federation, FederationError};
use switchyard_protocol::answer::{Answer, AnswerBody};

/// The largest input file a creation carries (as `/v1/files` takes).
pub const MAX_JOB_INPUT: usize = 64 * 1024 * 1024;
/// The most services one job's lines may name.
const MAX_SERVICES: usize = 16;
/// How long the owner may take to start answering.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A job call a peer's grant admitted, or a question about a job the peer
/// made, for the server to act on.
#[derive(Debug, Clone)]
pub struct LocalJob {
    /// The peer's id here: it sees only the jobs it made.
    pub peer_id: String,
    /// The peer's label here.
    pub peer: String,
    /// What it asks (a creation's grant is judged already).
    pub action: JobAction,
    /// A creation's input file.
    pub input: Bytes,
    /// A creation's services, each with the model its deployment serves:
    /// the lines are run against those.
    pub models: BTreeMap<String, String>,
}

impl Federation {
    /// Sends a job call to the owner `peer_id`; answers its answer as it
    /// comes (status and headers, the body streaming). A link that is down
    /// answers 503 `NODE_UNAVAILABLE`, and nothing is queued.
    pub async fn job_call(
        &self,
        peer_id: &str,
        action: JobAction,
        input: Bytes,
    ) -> FedResult<Answer> {
        let head = JobCall {
            hops: vec![
                self.cluster
                    .key()
                    .map(|_| self.cluster.identity().cluster_id)?,
            ],
            action,
        };
        let mut message = BytesMut::with_capacity(256 + input.len()).writer();
        serde_json::to_writer(&mut message, &head).map_err(FederationError::internal)?;
        let mut message = message.into_inner();
        message.put_u8(b'\n');
        message.extend_from_slice(&input);
        let exchange = async {
            let mut reader = self
                .open_call(peer_id, Lane::Inference, JOBS_SERVICE, message.freeze())
                .await?;
            let (head, first) = reader.read_line(MAX_HEAD).await.map_err(|e| {
                FederationError::unavailable(format!(
                    "the link broke before the owner answered: {e}"
                ))
            })?;
            let head: AnswerHead = serde_json::from_slice(&head).map_err(|e| {
                FederationError::new(502, "peer_error", format!("the owner's answer: {e}"))
            })?;
            Ok::<_, FederationError>((head, first, reader))
        };
        let (head, first, reader) = tokio::time::timeout(ANSWER_TIMEOUT, exchange)
            .await
            .map_err(|_| FederationError::unavailable("the owner did not answer in time"))??;
        let first = futures::stream::iter((!first.is_empty()).then_some(Ok(first)));
        let rest = futures::stream::unfold(reader, |mut reader| async move {
            let chunk = reader.read().await?;
            Some((chunk.map_err(std::io::Error::other), reader))
        });
        Ok(Answer {
            status: head.status,
            headers: head.headers,
            body: AnswerBody::Streaming(first.chain(rest).boxed()),
        })
    }

    /// Whether peers may choose this cluster as a job's owner now.
    async fn check_eligible(&self) -> Result<(), Denied> {
        let eligibility = self.store.eligibility().await.map_err(internal)?;
        match eligibility.state {
            Eligibility::Eligible => Ok(()),
            state => Err(Denied {
                status: 409,
                code: "owner_not_eligible".into(),
                message: format!(
                    "this cluster takes no new jobs from peers ({state}{})",
                    match eligibility.reason.is_empty() {
                        true => String::new(),
                        false => format!(": {}", eligibility.reason),
                    }
                ),
            }),
        }
    }

    /// The owner judges a creation: every service its lines name under
    /// the grant (the evaluator, the `federation` chain, the counters: one
    /// call per line). Answers each service's model.
    async fn admit_job(
        &self,
        peer: &LinkPeer,
        grant: &str,
        input: &[u8],
    ) -> Result<BTreeMap<String, String>, Denied> {
        let (services, lines) = services_named(input)?;
        let mut models = BTreeMap::new();
        for service in &services {
            let (model, managed) = self.service_model(grant, service).await?;
            let judged = FederatedCall {
                peer: peer.label.clone(),
                operation: Operation::Inference.as_str().into(),
                service: (!managed).then(|| service.clone()),
                model: None,
                machines: Vec::new(),
                model_bytes: 0,
                tokens: 0,
            };
            // The slot is a creation's own: the lines run as the owner's work.
            let _slot = self.admit_call(&peer.id, grant, judged).await?;
            self.ports
                .local
                .admit(peer.label.clone(), grant.to_string(), service.clone(), None)
                .await?;
            models.insert(service.clone(), model);
        }
        // Each line is a call: the ones the judgement did not charge yet.
        let rest = lines.saturating_sub(services.len() as u64);
        if rest > 0 {
            let cost = Cost {
                requests: rest,
                concurrent: 0,
                model_bytes: 0,
                tokens: 0,
            };
            let charged = self
                .store
                .charge_grant(grant, &peer.id, cost, &self.config.instance_id)
                .await
                .map_err(internal)?;
            if let Err(refused) = charged {
                return Err(Denied {
                    status: 403,
                    code: refused.code().to_string(),
                    message: format!(
                        "the job's {lines} lines are outside grant {grant}: {}",
                        refused.code()
                    ),
                });
            }
        }
        Ok(models)
    }

    /// The owner answers one job call.
    async fn serve_job(
        &self,
        peer: &LinkPeer,
        call: JobCall,
        input: Bytes,
    ) -> Result<Answer, Denied> {
        // A job call names this cluster's own job: one crossing, never forwarded.
        if call.hops.len() > 1 {
            return Err(Denied {
                status: 508,
                code: "loop_detected".into(),
                message: "the job call crossed more than one link".into(),
            });
        }
        self.cluster.key().map_err(denied)?;
        let models = match &call.action {
            JobAction::Create { grant, .. } => {
                self.check_eligible().await?;
                let _revocation = self.inflight.enter(grant);
                self.admit_job(peer, grant, &input).await?
            }
            _ => BTreeMap::new(),
        };
        self.ports
            .local
            .job(LocalJob {
                peer_id: peer.id.clone(),
                peer: peer.label.clone(),
                action: call.action,
                input,
                models,
            })
            .await
    }
}

/// The distinct services (`body.model`) a job's lines name, and how many
/// lines it has; the server checks each line in full.
fn services_named(input: &[u8]) -> Result<(Vec<String>, u64), Denied> {
    let invalid = |message: String| Denied {
        status: 400,
        code: "invalid_request".into(),
        message,
    };
    let mut services = Vec::new();
    let mut lines = 0u64;
    for (n, line) in input.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        lines += 1;
        let value: serde_json::Value =
            serde_json::from_slice(line).map_err(|e| invalid(format!("line {}: {e}", n + 1)))?;
        let service = value["body"]["model"]
            .as_str()
            .ok_or_else(|| invalid(format!("line {}: no body.model", n + 1)))?;
        if !services.iter().any(|s| s == service) {
            if services.len() == MAX_SERVICES {
                return Err(invalid(format!(
                    "a job's lines name at most {MAX_SERVICES} services"
                )));
            }
            services.push(service.to_string());
        }
    }
    if lines == 0 {
        return Err(invalid("the input file has no lines".into()));
    }
    Ok((services, lines))
}

fn denied(e: FederationError) -> Denied {
    Denied {
        status: e.status,
        code: e.code,
        message: e.message,
    }
}

fn internal(e: switchyard_store::StoreError) -> Denied {
    denied(e.into())
}

/// The owner answers one job call a peer opened a stream for.
pub(crate) async fn answer(federation: Arc<Federation>, peer: LinkPeer, stream: Stream) {
    let Stream { mut reader, writer } = stream;
    let (call, input) = match read_call::<JobCall>(&mut reader, MAX_JOB_INPUT, "job call").await {
        Ok(call) => call,
        Err(Unread::Refused(denied)) => return write_denied(writer, denied).await,
        Err(Unread::Broken) => return,
    };
    match federation.serve_job(&peer, call, input).await {
        Ok(answer) => pump(writer, answer).await,
        Err(denied) => {
            tracing::info!(code = %denied.code, "a job call was refused");
            write_denied(writer, denied).await
        }
    }
}

/// Streams the server's answer back over the link.
async fn pump(mut writer: StreamWriter, answer: Answer) {
    let mut line = serde_json::to_vec(&answer.head()).unwrap_or_default();
    line.push(b'\n');
    if writer.write(Bytes::from(line)).await.is_err() {
        return;
    }
    let mut body = answer.body.into_stream();
    while let Some(chunk) = body.next().await {
        let written = match chunk {
            Ok(chunk) => writer.write(chunk).await.is_ok(),
            Err(_) => false,
        };
        if !written {
            writer.reset();
            return;
        }
    }
    writer.finish();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_services_a_job_names_are_counted_once() {
        let input = br#"{"custom_id":"a","body":{"model":"chat"}}
{"custom_id":"b","body":{"model":"chat"}}

{"custom_id":"c","body":{"model":"embed"}}
"#;
        let (services, lines) = services_named(input).unwrap();
        assert_eq!(services, ["chat", "embed"]);
        assert_eq!(lines, 3);
    }

    #[test]
    fn a_line_without_a_model_or_json_is_refused() {
        let refused = services_named(b"{\"body\":{}}\n").unwrap_err();
        assert_eq!(
            (refused.status, refused.code.as_str()),
            (400, "invalid_request")
        );
        assert!(services_named(b"not json\n").is_err());
        assert!(services_named(b"\n\n").is_err());
    }
}
