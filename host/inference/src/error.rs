//! Every way an inference request fails before the engine's answer, and
//! the one mapping of each to the answer a client gets: a status, a stable
//! code and the API's `{"error":{"code","message"}}` body (a denial's code
//! is the policy's own; a retryable answer has `Retry-After`). The `/v1`
//! routes answer it (and add OpenAI's `type` and `param` to every error,
//! `routes::openai::error_shape`); a batch line records it; a peer gets it
//! over the link.

use bytes::Bytes;
use serde_json::json;
use switchyard_carrier::Refusal;
use switchyard_runtime::admission::POLICY_ERROR_CODE;

use super::Answer;
use switchyard_protocol::keys::MissingScope;
use switchyard_scheduler::routing::NoRoute;

/// The message a client gets when a policy failed (trapped, ran out of
/// time or memory) under fail-closed.
pub const POLICY_FAILED_MESSAGE: &str = "the request was refused because an admission policy failed; the operator can find why in the server log";

/// Seconds a client is told to wait while a model loads.
const LOADING_RETRY_AFTER: u32 = 5;
/// Seconds a client is told to wait for a free slot or a route.
const BUSY_RETRY_AFTER: u32 = 1;

/// Why an inference request got no answer from an engine.
#[derive(Debug, thiserror::Error)]
pub enum InferenceError {
    /// The caller's key lacks the scope (403 `forbidden`).
    #[error(transparent)]
    Forbidden(#[from] MissingScope),
    /// The body cannot be admitted (400 `invalid_request`).
    #[error("{0}")]
    Invalid(String),
    /// A field the frontend reads has the wrong type or range (400
    /// `invalid_request`, with the field as OpenAI's `param`).
    #[error("{message}")]
    InvalidField {
        /// The field, as the client named it.
        param: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The `inference` chain said no (403, the policy's code).
    #[error("{message}")]
    Denied {
        /// The policy's code, or [`POLICY_ERROR_CODE`].
        code: String,
        /// What the client is told.
        message: String,
    },
    /// A policy's rate limit or budget said not now (429, the policy's
    /// code, OpenAI's `x-ratelimit-*` headers and `Retry-After`).
    #[error("{}", .0.denial.message)]
    Throttled(Box<switchyard_runtime::admission::Throttle>),
    /// No replica was chosen.
    #[error("{why:?} for model `{model}`")]
    NoRoute {
        /// Why.
        why: NoRoute,
        /// The model asked for.
        model: String,
    },
    /// This replica has no carrier set (503 `carrier_unavailable`).
    #[error("no carrier set")]
    NoCarrier,
    /// The carrier could not open the stream, or the worker refused it.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The stream broke before the answer's head (502 `stream_reset`).
    #[error("{0}")]
    Broken(String),
    /// A remote model's call did not go ahead on this side: no grant, the
    /// link down (503 `NODE_UNAVAILABLE`), federation suspended.
    #[error("{}", .0.message)]
    Federation(switchyard_federation::FederationError),
    /// A bug here (500 `internal`; the detail goes to the log).
    #[error("{0}")]
    Internal(String),
}

impl InferenceError {
    /// An internal error from anything displayable.
    pub fn internal(error: impl std::fmt::Display) -> Self {
        Self::Internal(error.to_string())
    }

    /// A denial. A policy's own denial is its business answer and goes to
    /// the client as the policy wrote it; a failed policy's details (a
    /// trap's backtrace, the plugin's name and limits) are the operator's,
    /// so they go to the log and the client gets the stable code with a
    /// generic message.
    pub fn denied(code: String, message: String, key_id: &str) -> Self {
        if code != POLICY_ERROR_CODE {
            return Self::Denied { code, message };
        }
        tracing::warn!(key = %key_id, detail = %message, "inference refused: an admission policy failed");
        Self::Denied {
            code,
            message: POLICY_FAILED_MESSAGE.into(),
        }
    }

    /// The stable code the client gets (also a span's `outcome`).
    pub fn code(&self) -> &str {
        match self {
            // The extractor answered a missing or unknown key before the
            // core ran.
            Self::Forbidden(_) => "forbidden",
            Self::Invalid(_) | Self::InvalidField { .. } => "invalid_request",
            Self::Denied { code, .. } => code,
            Self::Throttled(t) => &t.denial.code,
            Self::NoRoute { why, .. } => match why {
                NoRoute::UnknownModel => "model_not_found",
                NoRoute::Cold => "model_loading",
                NoRoute::Busy => "replicas_busy",
            },
            Self::NoCarrier => "carrier_unavailable",
            // The carrier's answers stay apart from the worker's: no route
            // to the worker (503, try again), the worker at its stream limit
            // (429), or the worker's own refusal (502).
            Self::Refused(Refusal::NotDelivered(_)) => "replica_unreachable",
            // During a carrier change: the worker is attached to no set
            // this replica runs yet (503, try again).
            Self::Refused(Refusal::NoRoute(_)) => "no_route",
            Self::Refused(Refusal::Overloaded) => "worker_overloaded",
            Self::Refused(Refusal::UnknownService | Refusal::ServiceRefused(_)) => "worker_refused",
            Self::Broken(_) => "stream_reset",
            Self::Federation(e) => &e.code,
            Self::Internal(_) => "internal",
        }
    }

    /// The HTTP status the client gets.
    pub fn http_status(&self) -> u16 {
        match self {
            Self::Internal(_) => 500,
            other => other.status().0,
        }
    }

    /// The status, and the seconds of a `Retry-After` when trying again helps.
    fn status(&self) -> (u16, Option<u32>) {
        match self {
            Self::Forbidden(_) => (403, None),
            Self::Internal(_) => (500, None),
            Self::Invalid(_) | Self::InvalidField { .. } => (400, None),
            Self::Denied { .. } => (403, None),
            Self::Throttled(t) => (429, Some(retry_after_seconds(t.limits.retry_after_ms))),
            Self::NoRoute { why, .. } => match why {
                NoRoute::UnknownModel => (404, None),
                NoRoute::Cold => (503, Some(LOADING_RETRY_AFTER)),
                NoRoute::Busy => (429, Some(BUSY_RETRY_AFTER)),
            },
            Self::NoCarrier => (503, None),
            Self::Refused(Refusal::NotDelivered(_) | Refusal::NoRoute(_)) => {
                (503, Some(BUSY_RETRY_AFTER))
            }
            Self::Refused(Refusal::Overloaded) => (429, Some(BUSY_RETRY_AFTER)),
            Self::Refused(_) | Self::Broken(_) => (502, None),
            // A peer's status that is not an HTTP status is a bad gateway.
            Self::Federation(e) => (
                if (100..1000).contains(&e.status) {
                    e.status
                } else {
                    502
                },
                None,
            ),
        }
    }

    /// What the client reads.
    fn message(&self) -> String {
        match self {
            Self::NoRoute { why, model } => match why {
                NoRoute::UnknownModel => format!("no deployment serves `{model}`"),
                NoRoute::Cold => "the model is deployed but no replica is ready yet".into(),
                NoRoute::Busy => "every replica of this model is at its concurrency limit".into(),
            },
            other => other.to_string(),
        }
    }

    /// The answer a client gets instead of the engine's.
    pub fn answer(self) -> Answer {
        let limits = match &self {
            Self::Throttled(t) => Some(t.limits),
            _ => None,
        };
        let mut answer = self.answer_without_limits();
        if let Some(limits) = limits {
            answer.headers.extend(rate_limit_headers(&limits));
        }
        answer
    }

    fn answer_without_limits(self) -> Answer {
        let (status, code, message, param, retry_after) = match self {
            Self::Internal(detail) => {
                // The detail is the operator's: logged, never answered.
                tracing::error!(error = %detail, "internal error");
                (
                    500,
                    "internal".to_string(),
                    switchyard_protocol::openai::INTERNAL_MESSAGE.to_string(),
                    None,
                    None,
                )
            }
            other => {
                let (status, retry_after) = other.status();
                let param = match &other {
                    Self::InvalidField { param, .. } => Some(*param),
                    _ => None,
                };
                (
                    status,
                    other.code().to_string(),
                    other.message(),
                    param,
                    retry_after,
                )
            }
        };
        let mut error = json!({"code": code, "message": message});
        if let Some(param) = param {
            error["param"] = json!(param);
        }
        let body = Bytes::from(json!({ "error": error }).to_string());
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        if let Some(seconds) = retry_after {
            headers.push(("retry-after".into(), seconds.to_string()));
        }
        Answer::whole(status, headers, body)
    }
}

/// Whole seconds of a `Retry-After`, rounded up, at least 1.
fn retry_after_seconds(ms: u64) -> u32 {
    u32::try_from(ms.div_ceil(1000).max(1)).unwrap_or(u32::MAX)
}

/// OpenAI's rate-limit headers for the limits a policy named; a limit it
/// left out is not shown.
pub fn rate_limit_headers(
    limits: &switchyard_runtime::admission::RateLimit,
) -> Vec<(String, String)> {
    let numbers = [
        ("x-ratelimit-limit-requests", limits.limit_requests),
        ("x-ratelimit-remaining-requests", limits.remaining_requests),
        ("x-ratelimit-limit-tokens", limits.limit_tokens),
        ("x-ratelimit-remaining-tokens", limits.remaining_tokens),
    ];
    let durations = [
        ("x-ratelimit-reset-requests", limits.reset_requests_ms),
        ("x-ratelimit-reset-tokens", limits.reset_tokens_ms),
    ];
    let numbers = numbers
        .into_iter()
        .filter_map(|(name, n)| n.map(|n| (name.to_string(), n.to_string())));
    let durations = durations
        .into_iter()
        .filter_map(|(name, ms)| ms.map(|ms| (name.to_string(), duration_text(ms))));
    numbers.chain(durations).collect()
}

/// A duration as OpenAI writes its resets: `250ms`, `1s`, `6m0s`, `1h2m3s`.
fn duration_text(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let seconds = ms.div_ceil(1000);
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_runtime::admission::{RateLimit, Throttle};
    use switchyard_runtime::bindings::Denial;

    #[test]
    fn a_throttle_is_a_429_with_openais_headers() {
        let throttle = Throttle {
            denial: Denial {
                code: "rate_limit_exceeded".into(),
                message: "tokens per minute: 100 of 100 used".into(),
            },
            limits: RateLimit {
                limit_requests: None,
                remaining_requests: None,
                reset_requests_ms: None,
                limit_tokens: Some(100),
                remaining_tokens: Some(0),
                reset_tokens_ms: Some(61_500),
                retry_after_ms: 1_200,
            },
        };
        let answer = InferenceError::Throttled(Box::new(throttle)).answer();
        assert_eq!(answer.status, 429);
        let header = |name: &str| {
            answer
                .headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(header("retry-after"), Some("2"));
        assert_eq!(header("x-ratelimit-limit-tokens"), Some("100"));
        assert_eq!(header("x-ratelimit-remaining-tokens"), Some("0"));
        assert_eq!(header("x-ratelimit-reset-tokens"), Some("1m2s"));
        assert_eq!(header("x-ratelimit-limit-requests"), None);
    }

    #[test]
    fn durations_read_as_openai_writes_them() {
        assert_eq!(duration_text(250), "250ms");
        assert_eq!(duration_text(1_000), "1s");
        assert_eq!(duration_text(360_000), "6m0s");
        assert_eq!(duration_text(3_723_000), "1h2m3s");
    }
}
