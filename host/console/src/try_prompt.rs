//! Try prompt: a chat completion streamed token by token into the page, as
//! the session's key, through the same `/v1` path clients use. Cancelling
//! aborts the browser's request; the stream's end cancels the engine's work.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::html;
use serde_json::{Value, json};

use super::ConsoleState;
use super::page;
use super::session::Session;

/// The largest prompt request the page sends.
const MAX_BODY: usize = 256 << 10;

/// The Try prompt routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route("/console/try", get(form))
        .route("/console/try/stream", post(stream))
}

async fn form(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require("inference") {
        return forbidden;
    }
    let models = session.api(&console).get("/v1/models").await;
    let body = match &models {
        Err(failure) => page::failure(failure),
        Ok(models) => {
            let ids: Vec<String> = models["data"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m["id"].as_str().map(str::to_string))
                .collect();
            if ids.is_empty() {
                page::empty(
                    "No model is being served yet.",
                    html! { "Create a deployment on the " a href="/console/deployments" { "Deployments" } " page; its model appears here once a replica is ready." },
                )
            } else {
                html! {
                    form.stack #try method="post" action="/console/try/stream" data-stream {
                        label for="try-model" { "Model" }
                        select #try-model name="model" {
                            @for id in &ids { option value=(id) { (id) } }
                        }
                        label for="try-prompt" { "Prompt" }
                        textarea #try-prompt name="prompt" required maxlength="100000" { "Say hello in five words." }
                        label for="try-max-tokens" { "Max tokens" }
                        input #try-max-tokens type="number" name="max_tokens" min="1" max="4096" value="64";
                        div {
                            button type="submit" { "Send" } " "
                            button.secondary type="button" data-cancel { "Cancel" }
                        }
                    }
                    h2 { "Answer" }
                    p #stream-status role="status" aria-live="polite" { "Nothing sent yet." }
                    div #output aria-live="off" {}
                }
            }
        }
    };
    page::render(&session, "Try prompt", body)
}

/// The page's request, sent to `/v1/chat/completions` with `stream: true`;
/// the answer passes through as the API made it (the SSE events, or the
/// API's error JSON).
async fn stream(
    State(console): State<ConsoleState>,
    session: Session,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let given = headers
        .get("x-csrf-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !session.csrf_matches(given) {
        return json_error(
            StatusCode::FORBIDDEN,
            "csrf_mismatch",
            "reload the page and try again",
        );
    }
    if body.len() > MAX_BODY {
        return json_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "the prompt is too large",
        );
    }
    let Ok(mut request) = serde_json::from_slice::<Value>(&body) else {
        return json_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the body must be a JSON object",
        );
    };
    let Some(fields) = request.as_object_mut() else {
        return json_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the body must be a JSON object",
        );
    };
    fields.insert("stream".into(), json!(true));
    let request = Request::builder()
        .method(Method::POST)
        .uri("/v1/chat/completions")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(
            serde_json::to_vec(&request).expect("JSON serialises"),
        ))
        .expect("a fixed request");
    let answer = session.api(&console).send(request).await;
    let (parts, body) = answer.into_parts();
    let mut response = Response::new(body);
    *response.status_mut() = parts.status;
    if let Some(kind) = parts.headers.get(header::CONTENT_TYPE) {
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, kind.clone());
    }
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

fn json_error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}
