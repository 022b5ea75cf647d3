//! The console's client of the API: the same router the network reaches,
//! called in-process with the session's caller as a request extension
//! ([`ActingAs`]), so the API checks scopes, validates and refuses exactly
//! as it does for a key.

use std::net::SocketAddr;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode, header};
use axum::response::Response;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tower::ServiceExt;

use switchyard_server::auth::{ActingAs, Caller};

/// The most of an API answer a page reads (a page of a list, a status).
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// The API's refusal, as a page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFailure {
    /// The HTTP status.
    pub status: StatusCode,
    /// The API's stable error code.
    pub code: String,
    /// The API's message.
    pub message: String,
    /// The whole error body (some carry more than code and message, e.g.
    /// the blockers of a carrier change).
    pub body: Value,
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code,
            self.status.as_u16(),
            self.message
        )
    }
}

/// The API as the session's caller.
#[derive(Clone)]
pub struct Api {
    router: Router,
    caller: Caller,
    remote: Option<ConnectInfo<SocketAddr>>,
}

impl Api {
    /// Calls `router` as `caller`.
    pub fn new(router: Router, caller: Caller) -> Self {
        Self {
            router,
            caller,
            remote: None,
        }
    }

    /// The same, its calls carrying the browser's address (the API's
    /// audit trail records it).
    pub fn from(mut self, remote: Option<ConnectInfo<SocketAddr>>) -> Self {
        self.remote = remote;
        self
    }

    /// `GET path`: the JSON it answered, or its refusal.
    pub async fn get(&self, path: &str) -> Result<Value, ApiFailure> {
        self.call(Method::GET, path, None).await
    }

    /// `GET path`, read as `T` ([`typed`]).
    pub async fn get_as<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiFailure> {
        typed(self.get(path).await?)
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> Result<Value, ApiFailure> {
        self.call(Method::POST, path, Some(body)).await
    }

    /// `method path`, with a JSON body if given: a 2xx answer's JSON (null
    /// when empty), or its refusal.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, ApiFailure> {
        let mut request = Request::builder().method(method).uri(path);
        let body = match body {
            Some(value) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(serde_json::to_vec(&value).expect("a JSON value serialises"))
            }
            None => Body::empty(),
        };
        let request = request.body(body).map_err(|e| ApiFailure {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_request".into(),
            message: format!("not a request: {e}"),
            body: Value::Null,
        })?;
        let response = self.send(request).await;
        read_json(response).await
    }

    /// Sends a request as it is (a streamed answer, an upload): the
    /// response as the API made it.
    pub async fn send(&self, mut request: Request<Body>) -> Response {
        request
            .extensions_mut()
            .insert(ActingAs(self.caller.clone()));
        if let Some(remote) = self.remote {
            request.extensions_mut().insert(remote);
        }
        match self.router.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

/// An API answer read as `T`; an answer of another shape is a failure of
/// its own (`unexpected_answer`), never a panic.
pub fn typed<T: DeserializeOwned>(value: Value) -> Result<T, ApiFailure> {
    serde_json::from_value(value).map_err(|e| ApiFailure {
        status: StatusCode::BAD_GATEWAY,
        code: "unexpected_answer".into(),
        message: format!("the API answered in a shape the console does not read: {e}"),
        body: Value::Null,
    })
}

/// A 2xx answer's JSON, or the refusal in its `{"error": {code, message}}`.
pub async fn read_json(response: Response) -> Result<Value, ApiFailure> {
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), MAX_ANSWER_BYTES)
        .await
        .unwrap_or_default();
    let value: Value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    };
    if status.is_success() {
        return Ok(value);
    }
    let error = &value["error"];
    Err(ApiFailure {
        status,
        code: error["code"].as_str().unwrap_or("error").to_string(),
        message: error["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("failed").to_string()),
        body: value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_of_another_shape_is_a_refusal() {
        let failure = typed::<Vec<String>>(serde_json::json!({"a": 1})).unwrap_err();
        assert_eq!(failure.code, "unexpected_answer");
    }
}
