//! A small client of the admin API for the CLI.

use anyhow::Context;
use reqwest::{Method, RequestBuilder};
use serde_json::Value;
use switchyard_protocol::admin::{ErrorBody, ErrorDetail};

use crate::cli::ApiArgs;

/// The admin API at one server, with one token.
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    pub fn new(api: &ApiArgs) -> Self {
        let token = api
            .token
            .clone()
            .or_else(|| std::env::var("SWITCHYARD_ADMIN_TOKEN").ok());
        Self {
            http: reqwest::Client::new(),
            base: api.server.trim_end_matches('/').to_string(),
            token,
        }
    }

    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// Sends and returns the JSON body of a 2xx answer, or the API's error as an error.
    pub async fn send(&self, request: RequestBuilder) -> anyhow::Result<Value> {
        let (status, body) = self.answer(request).await?;
        if !status.is_success() {
            return Err(api_error(status, body));
        }
        Ok(body)
    }

    /// [`Client::send`], the answer read as `T` (a `host/protocol` type).
    pub async fn send_as<T: serde::de::DeserializeOwned>(
        &self,
        request: RequestBuilder,
    ) -> anyhow::Result<T> {
        let body = self.send(request).await?;
        serde_json::from_value(body).with_context(|| {
            format!(
                "{} answered in a shape this CLI does not read ({})",
                self.base,
                std::any::type_name::<T>()
            )
        })
    }

    /// Sends and returns the status and JSON body of any answer (`null`
    /// when it has none), for a command that reads more of an error than
    /// its code ([`api_error`] still says it).
    pub async fn answer(
        &self,
        request: RequestBuilder,
    ) -> anyhow::Result<(reqwest::StatusCode, Value)> {
        let response = request
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.base))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        Ok((status, body))
    }

    /// [`Client::send`] with a JSON body.
    pub async fn send_json(
        &self,
        method: Method,
        path: &str,
        body: &impl serde::Serialize,
    ) -> anyhow::Result<Value> {
        self.send(self.request(method, path).json(body)).await
    }
}

/// A non-2xx answer as an error: the API's `{"error": {code, message}}`
/// when it sent one.
pub fn api_error(status: reqwest::StatusCode, body: Value) -> anyhow::Error {
    match serde_json::from_value::<ErrorBody>(body) {
        Ok(ErrorBody {
            error: ErrorDetail { code, message },
        }) => anyhow::anyhow!("{status} {code}: {message}"),
        Err(_) => anyhow::anyhow!("{status} error: "),
    }
}
