//! The `inference` stream's head, parsed once into a [`ValidHead`] before
//! anything reaches an engine.
//!
//! The head is appended to the engine's `http://127.0.0.1:<port>` URL, so a
//! path that is not an absolute `/v1/...` path could name another host
//! (`@evil/`), another scheme or leave the API (`/v1/../admin`). A reverse
//! proxy such as Envoy or nginx normalises or rejects such request targets
//! in the same way before routing them upstream.

use switchyard_protocol::stream::InferenceHead;

/// The longest request path accepted.
const MAX_PATH: usize = 2048;
/// The most headers a head may carry (the frontend sends one).
const MAX_HEADERS: usize = 32;
/// The longest header value.
const MAX_HEADER_VALUE: usize = 8 * 1024;
/// The methods the OpenAI routes use.
const METHODS: &[&str] = &["GET", "POST"];
/// Headers the worker's own HTTP client sets: a head may not choose them.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
];

/// A head that is safe to send to an engine on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidHead {
    /// The replica (engine id) it is for.
    pub replica: String,
    /// `GET` or `POST`.
    pub method: reqwest::Method,
    /// An absolute path under `/v1/`.
    pub path: String,
    /// Headers with sane names and values.
    pub headers: Vec<(String, String)>,
}

fn valid_path(path: &str) -> Result<(), String> {
    let refused = |why: &str| Err(format!("path `{path:.64}` {why}"));
    if path.len() > MAX_PATH {
        return refused("is too long");
    }
    if !path.starts_with("/v1/") {
        return refused("must start with /v1/");
    }
    // Visible ASCII only: no spaces, controls or bytes a client may decode.
    if !path.bytes().all(|b| b.is_ascii_graphic()) {
        return refused("has characters outside visible ASCII");
    }
    if path.contains('@') || path.contains('\\') || path.contains('#') {
        return refused("may not hold `@`, `\\` or `#`");
    }
    // `//` would start an authority, `://` a scheme.
    if path.contains("//") {
        return refused("may not hold `//`");
    }
    // `..` and its percent-encoded forms, segment by segment.
    let lower = path.to_ascii_lowercase();
    if lower.contains("..") || lower.contains("%2e") || lower.contains("%2f") {
        return refused("may not leave /v1/");
    }
    Ok(())
}

fn valid_header(name: &str, value: &str) -> Result<(), String> {
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || name.len() > 128 || !name.bytes().all(token) {
        return Err(format!("header name `{name:.64}` is not a token"));
    }
    if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(format!("header `{name}` is the worker's to set"));
    }
    if value.len() > MAX_HEADER_VALUE || value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(format!("header `{name}` has a bad value"));
    }
    Ok(())
}

/// Parses and checks the head line.
pub fn parse(line: &[u8]) -> Result<ValidHead, String> {
    let raw: InferenceHead = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    valid_path(&raw.path)?;
    let method = METHODS
        .iter()
        .find(|m| **m == raw.method)
        .ok_or_else(|| format!("method `{:.16}` is not one of {METHODS:?}", raw.method))?;
    if raw.headers.len() > MAX_HEADERS {
        return Err(format!("at most {MAX_HEADERS} headers"));
    }
    for (name, value) in &raw.headers {
        valid_header(name, value)?;
    }
    Ok(ValidHead {
        replica: raw.replica,
        method: reqwest::Method::from_bytes(method.as_bytes()).expect("a listed method"),
        path: raw.path,
        headers: raw.headers,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn head(method: &str, path: &str, headers: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(
            &json!({"replica": "r1", "method": method, "path": path, "headers": headers}),
        )
        .unwrap()
    }

    #[test]
    fn the_frontends_head_passes() {
        let valid = parse(&head(
            "POST",
            "/v1/chat/completions",
            json!([["content-type", "application/json"]]),
        ))
        .unwrap();
        assert_eq!(valid.method, reqwest::Method::POST);
        assert_eq!(valid.path, "/v1/chat/completions");
        assert!(parse(&head("GET", "/v1/models?limit=1", json!([]))).is_ok());
    }

    #[test]
    fn a_path_that_could_leave_the_engine_is_refused() {
        for path in [
            "@evil.example/v1/chat/completions",
            "/v1/@evil",
            "v1/chat/completions",
            "/health",
            "/v1/../admin",
            "/v1/%2e%2e/admin",
            "/v1/%2F/x",
            "//evil.example/v1/",
            "/v1//evil.example",
            "/v1/chat completions",
            "/v1/x\r\nHost: evil",
            "/v1/x#frag",
            "/v1/x\\y",
            "http://evil.example/v1/",
        ] {
            assert!(
                parse(&head("POST", path, json!([]))).is_err(),
                "{path} passed"
            );
        }
        assert!(
            parse(&head(
                "POST",
                &format!("/v1/{}", "a".repeat(MAX_PATH)),
                json!([])
            ))
            .is_err()
        );
    }

    #[test]
    fn other_methods_and_odd_headers_are_refused() {
        for method in ["DELETE", "CONNECT", "post", "PATCH", ""] {
            assert!(parse(&head(method, "/v1/completions", json!([]))).is_err());
        }
        for headers in [
            json!([["host", "evil.example"]]),
            json!([["Transfer-Encoding", "chunked"]]),
            json!([["bad name", "x"]]),
            json!([["x-ok", "a\r\nHost: evil"]]),
            json!([["", "x"]]),
        ] {
            assert!(
                parse(&head("POST", "/v1/completions", headers.clone())).is_err(),
                "{headers}"
            );
        }
    }
}
