//! The admin audit trail's writer: a layer over the API that appends one
//! record (`switchyard_store::audit`) for every call that may change state
//! (any method but GET, HEAD and OPTIONS under `/api/`) made by an
//! authenticated key, refused or not. Who is known once the route's
//! [`Authorized`](crate::auth::Authorized) extractor has run: it leaves the
//! caller in the request's [`AuditActor`]; a call no key authenticated
//! (a worker's heartbeat, an anonymous probe) leaves no record.
//!
//! The record is written before the answer leaves, so a client that saw
//! its change answered finds it in `GET /api/audit`. Admin changes are
//! rare; a write that fails is logged and the answer goes out as it was.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use axum::body::{Body, HttpBody as _};
use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, RawPathParams, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value;
use switchyard_store::audit::NewAuditRecord;

use crate::auth::Caller;
use crate::state::AppState;

/// The largest JSON body summarised field by field; a larger one is
/// recorded by its size and type.
const MAX_SUMMARISED_BODY: usize = 16 << 10;

/// The longest summary kept.
const MAX_SUMMARY: usize = 2048;

/// The largest answer read for the id a create named.
const MAX_ANSWER_READ: usize = 64 << 10;

/// What a value under a field with one of these in its name becomes.
const REDACTED: &str = "[redacted]";

/// Field names whose values are secrets, matched as parts of a name.
const SECRET_NAMES: [&str; 8] = [
    "token",
    "secret",
    "password",
    "passphrase",
    "credential",
    "private",
    "authorization",
    "api_key",
];

/// Where the caller's extractor leaves who is calling.
#[derive(Debug, Clone, Default)]
pub struct AuditActor(Arc<OnceLock<Caller>>);

impl AuditActor {
    /// Records `caller` as the one acting (the first call wins).
    pub fn set(&self, caller: &Caller) {
        let _ = self.0.set(caller.clone());
    }
}

/// Whether a call may change state and so is recorded.
pub fn is_change(method: &Method, path: &str) -> bool {
    path.starts_with("/api/") && !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The layer: records the call after its route answered.
pub async fn record(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if !is_change(request.method(), request.uri().path()) {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let actor = AuditActor::default();
    parts.extensions.insert(actor.clone());
    let method = parts.method.to_string();
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map_or_else(|| parts.uri.path().to_string(), |m| m.as_str().to_string());
    let remote = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.to_string());
    let params = RawPathParams::from_request_parts(&mut parts, &())
        .await
        .ok()
        .map(|p| {
            p.iter()
                .map(|(_, v)| v.to_string())
                .collect::<Vec<_>>()
                .join("/")
        })
        .filter(|p| !p.is_empty());
    let (summary, body) = summarise(&parts.headers, body).await;
    let response = next.run(Request::from_parts(parts, body)).await;
    let Some(caller) = actor.0.get() else {
        return response;
    };
    let (object, response) = match params {
        Some(params) => (Some(params), response),
        None => created_object(response).await,
    };
    let new = NewAuditRecord {
        actor: caller.key_id.clone(),
        remote,
        method,
        route,
        object,
        summary,
        status: response.status().as_u16(),
    };
    if let Err(e) = state.store.append_audit(&new).await {
        tracing::error!(error = %e, route = %new.route, actor = %new.actor, "could not append to the audit trail");
    }
    response
}

/// The body's summary, and the body to hand on: a small JSON body with its
/// secrets redacted, else its size and type.
async fn summarise(headers: &HeaderMap, body: Body) -> (String, Body) {
    let kind = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    // The body's own size when it knows it (an in-process call from the
    // console has no Content-Length), else the header's.
    let length = body
        .size_hint()
        .exact()
        .and_then(|n| usize::try_from(n).ok())
        .or_else(|| {
            headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<usize>().ok())
        });
    let json = kind.starts_with("application/json") || kind.contains("+json");
    match length {
        Some(0) | None if kind.is_empty() => ("no body".into(), body),
        Some(n) if json && n <= MAX_SUMMARISED_BODY => {
            match axum::body::to_bytes(body, MAX_SUMMARISED_BODY).await {
                Ok(bytes) => (redacted_json(&bytes), Body::from(bytes)),
                Err(_) => ("an unreadable body".into(), Body::empty()),
            }
        }
        Some(n) => (format!("{n} bytes of {}", shown_type(&kind)), body),
        None => (format!("a streamed body of {}", shown_type(&kind)), body),
    }
}

fn shown_type(kind: &str) -> String {
    let kind: String = kind.chars().filter(|c| !c.is_control()).take(100).collect();
    if kind.is_empty() {
        "no stated type".into()
    } else {
        kind
    }
}

/// A JSON body as text with every secret field's value replaced.
pub fn redacted_json(bytes: &[u8]) -> String {
    let Ok(mut value) = serde_json::from_slice::<Value>(bytes) else {
        return format!("{} bytes that are not JSON", bytes.len());
    };
    redact(&mut value);
    bounded(value.to_string())
}

fn redact(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                let name = name.to_ascii_lowercase();
                if SECRET_NAMES.iter().any(|s| name.contains(s)) {
                    *field = Value::String(REDACTED.into());
                } else {
                    redact(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        Value::String(text) if looks_secret(text) => *text = REDACTED.into(),
        _ => {}
    }
}

/// A Switchyard token, or a URL that carries a user and password.
fn looks_secret(text: &str) -> bool {
    text.starts_with("sy_")
        || text.split_once("://").is_some_and(|(_, rest)| {
            rest.split('/')
                .next()
                .is_some_and(|host| host.contains('@'))
        })
}

fn bounded(mut text: String) -> String {
    if text.len() > MAX_SUMMARY {
        let mut end = MAX_SUMMARY;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// The id (or name) a create's JSON answer named, and the answer rebuilt.
async fn created_object(response: Response) -> (Option<String>, Response) {
    // A handler's JSON answer is a whole body that knows its size (the
    // Content-Length header is added later, by the connection).
    let small = response
        .body()
        .size_hint()
        .exact()
        .is_some_and(|n| n <= MAX_ANSWER_READ as u64);
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(response.status().is_success() && small && json) {
        return (None, response);
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ANSWER_READ).await else {
        return (None, Response::from_parts(parts, Body::empty()));
    };
    let object = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| named(&v));
    (object, Response::from_parts(parts, Body::from(bytes)))
}

/// `id` or `name` at the top of an answer, or in the first object under it
/// (`{"key": {"id": ...}, "token": ...}`).
fn named(value: &Value) -> Option<String> {
    let fields = value.as_object()?;
    let own = ["id", "name"]
        .iter()
        .find_map(|k| fields.get(*k).and_then(Value::as_str));
    own.map(|s| bounded(s.to_string()))
        .or_else(|| fields.values().filter(|v| v.is_object()).find_map(named))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_leave_the_summary_and_the_rest_stays() {
        let body = br#"{"name":"app","scopes":["inference"],"token":"sy_abc",
            "nested":{"client_secret":"x","url":"https://u:p@example.com/m.gguf"},
            "list":["sy_def","plain"]}"#;
        let summary = redacted_json(body);
        assert!(
            !summary.contains("sy_abc") && !summary.contains("sy_def"),
            "{summary}"
        );
        assert!(!summary.contains("u:p@"), "{summary}");
        assert!(!summary.contains("\"x\""), "{summary}");
        assert!(
            summary.contains("\"name\":\"app\"") && summary.contains("plain"),
            "{summary}"
        );
    }

    #[test]
    fn a_long_body_is_cut_on_a_character() {
        let text = format!("{{\"name\":\"{}\"}}", "é".repeat(3000));
        let summary = redacted_json(text.as_bytes());
        assert!(summary.len() <= MAX_SUMMARY + '…'.len_utf8());
        assert!(summary.ends_with('…'));
    }

    #[test]
    fn a_create_answer_names_its_object() {
        let created: Value =
            serde_json::from_str(r#"{"key":{"id":"key_1","name":"app"},"token":"sy_x"}"#).unwrap();
        assert_eq!(named(&created).as_deref(), Some("key_1"));
        let team: Value = serde_json::from_str(r#"{"name":"research","keys":0}"#).unwrap();
        assert_eq!(named(&team).as_deref(), Some("research"));
        assert_eq!(named(&Value::Null), None);
    }

    #[test]
    fn only_changes_under_the_api_are_recorded() {
        assert!(is_change(&Method::POST, "/api/keys"));
        assert!(is_change(&Method::DELETE, "/api/keys/key_1"));
        assert!(!is_change(&Method::GET, "/api/keys"));
        assert!(!is_change(&Method::POST, "/v1/chat/completions"));
    }
}
