//! The console's stylesheet and script, compiled into the binary.

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

const STYLESHEET: &str = include_str!("assets/console.css");
const SCRIPT: &str = include_str!("assets/console.js");

/// `/console/assets/{file}`: `console.css` or `console.js`.
pub async fn serve(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "console.css" => (STYLESHEET, "text/css; charset=utf-8"),
        "console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        _ => return super::page::not_found().await,
    };
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    // Short: a new binary's assets reach a browser within minutes.
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=300"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}
