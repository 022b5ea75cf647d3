//! `switchyard model fetch`: the server downloads one file by URL and
//! registers it as a revision; the CLI asks for the streamed answer and
//! draws its progress lines as a bar, then prints the manifest.

use anyhow::{Context, bail};
use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use switchyard_protocol::admin::{ErrorDetail, FetchLine, FetchModel};

use super::progress::Progress;
use crate::client::Client;

/// The media type of the server's streamed answer.
const NDJSON: &str = "application/x-ndjson";

/// Asks the server to fetch; returns the registered manifest.
pub async fn fetch(client: &Client, fetch: FetchModel) -> anyhow::Result<Value> {
    let label = format!(
        "fetching {}",
        fetch
            .name
            .clone()
            .or_else(|| fetch.url.rsplit('/').next().map(str::to_string))
            .unwrap_or_default()
    );
    let request = client
        .request(Method::POST, "/api/models/fetch")
        .header(ACCEPT, format!("{NDJSON}, application/json"))
        .json(&fetch);
    let response = request.send().await.context("cannot reach the server")?;
    let streamed = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|t| t.to_str().ok())
        .is_some_and(|t| t.starts_with(NDJSON));
    if !streamed {
        // No download (the library held the bytes), or refused before one.
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        return outcome(status, answer);
    }
    let mut progress: Option<Progress> = None;
    let mut end = None;
    let mut pending = Vec::new();
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        pending.extend_from_slice(&chunk.context("the server's answer broke off")?);
        while let Some(at) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=at).collect();
            match serde_json::from_slice(&line).context("the server's progress line is not one")? {
                FetchLine::Progress { received, total } => progress
                    .get_or_insert_with(|| Progress::new(&label, total.unwrap_or(0)))
                    .set(received),
                FetchLine::Outcome {
                    status,
                    model,
                    error,
                } => end = Some((status, model, error)),
            }
        }
    }
    let (status, model, error) = end.context("the server's answer ended before the outcome")?;
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let model = model.map_or(Value::Null, |m| {
        serde_json::to_value(m).unwrap_or(Value::Null)
    });
    if let Some(mut progress) = progress {
        if status.is_success() {
            progress.set(model["files"][0]["size"].as_u64().unwrap_or(0));
            progress.finish("verified");
        } else {
            progress.finish("failed");
        }
    }
    match error {
        Some(ErrorDetail { code, message }) => bail!("{status} {code}: {message}"),
        None => outcome(status, model),
    }
}

/// The manifest of a 2xx answer, or the API's error as an error.
fn outcome(status: StatusCode, answer: Value) -> anyhow::Result<Value> {
    if !status.is_success() {
        return Err(crate::client::api_error(status, answer));
    }
    Ok(answer)
}
