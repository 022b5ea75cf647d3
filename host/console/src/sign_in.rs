//! Signing in (the admin token or an API key, checked as the API checks a
//! bearer token) and out.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Extension;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use super::ConsoleState;
use super::page;
use super::session;
use super::sign_in_limit;
use switchyard_server::auth::{AuthError, Caller};
use switchyard_server::edge::ThisConnection;
use switchyard_server::error::ApiError;

/// The longest token the form takes (ours are 67 characters).
const MAX_TOKEN: usize = 512;

/// `/console` → the overview.
pub async fn to_overview() -> Redirect {
    Redirect::to("/console/")
}

#[derive(Debug, Default, Deserialize)]
pub struct Next {
    #[serde(default)]
    next: String,
}

/// The sign-in form.
pub async fn form(Query(next): Query<Next>) -> Response {
    sign_in_page(StatusCode::OK, &next.next, None)
}

fn sign_in_page(status: StatusCode, next: &str, refused: Option<(&str, &str)>) -> Response {
    page::render_bare(
        status,
        "Sign in",
        html! {
            @if let Some((code, message)) = refused {
                p.flash.error role="alert" { code { (code) } " " (message) }
            }
            form.stack method="post" action="/console/sign-in" {
                input type="hidden" name="next" value=(safe_next(next));
                label for="token" { "Admin token or API key" }
                input #token type="password" name="token" autocomplete="current-password"
                    required autofocus spellcheck="false" maxlength=(MAX_TOKEN);
                p.hint { "The session lasts 8 hours and acts with the key's scopes; pages the key may not use are not shown." }
                button type="submit" { "Sign in" }
            }
        },
    )
}

#[derive(Debug, Deserialize)]
pub struct SignIn {
    token: String,
    #[serde(default)]
    next: String,
}

/// Checks the token and opens a session. An address that failed too often,
/// or a key that signed in too often, waits ([`sign_in_limit`]); a key's
/// oldest session closes when it holds [`session::MAX_SESSIONS_PER_KEY`].
pub async fn submit(
    State(console): State<ConsoleState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    connection: ThisConnection,
    headers: HeaderMap,
    body: Result<axum::body::Bytes, BytesRejection>,
) -> Response {
    // No session yet, so no CSRF token: a form posted from another site is
    // refused by its Origin (browsers send it on every POST).
    if !same_origin(&headers) {
        return sign_in_page(
            StatusCode::FORBIDDEN,
            "",
            Some(("csrf_mismatch", "the form was posted from another site")),
        );
    }
    let address = peer.map(|Extension(ConnectInfo(peer))| sign_in_limit::client_of(peer.ip()));
    if let Some(wait) = address.and_then(|a| console.sign_ins.addresses.check(&a).err()) {
        return too_many(wait, "too many failed sign-ins from this address");
    }
    let body = match body {
        Ok(body) => body,
        Err(rejection) => return page::body_refused(None, &rejection),
    };
    let Ok(form) = serde_urlencoded::from_bytes::<SignIn>(&body) else {
        return sign_in_page(
            StatusCode::BAD_REQUEST,
            "",
            Some(("invalid_request", "the form needs a token")),
        );
    };
    let caller = match authenticate(&console, form.token.trim()).await {
        Ok(caller) => caller,
        Err(failure) => {
            // A lookup that failed on our side is no guess.
            if let (Some(address), true) = (address, failure.status.is_client_error()) {
                console.sign_ins.addresses.record(address);
            }
            return sign_in_page(
                failure.status,
                &form.next,
                Some((failure.code, &failure.message)),
            );
        }
    };
    if let Err(wait) = console.sign_ins.keys.check(&caller.key_id) {
        return too_many(wait, "this key signed in too often lately");
    }
    console.sign_ins.keys.record(caller.key_id.clone());
    if let Some(address) = address {
        console.sign_ins.addresses.forget(&address);
    }
    let cookie = match session::open(&console, &caller, session::is_https(&headers)).await {
        Ok(cookie) => cookie,
        Err(e) => return page::server_error(&e.to_string()),
    };
    connection.prove();
    tracing::info!(key = %caller.key_id, "console session opened");
    let mut response = Redirect::to(&safe_next(&form.next)).into_response();
    response.headers_mut().append(header::SET_COOKIE, cookie);
    response
}

/// The key a token names, checked as the API checks a bearer token; a
/// malformed token is refused as an unknown one.
async fn authenticate(console: &ConsoleState, token: &str) -> Result<Caller, ApiError> {
    let unknown = || ApiError::from(AuthError::UnknownKey);
    if token.is_empty() || token.len() > MAX_TOKEN || token.chars().any(char::is_control) {
        return Err(unknown());
    }
    let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| unknown())?;
    let mut bearer = HeaderMap::new();
    bearer.insert(header::AUTHORIZATION, value);
    Ok(switchyard_server::auth::authenticate(&console.app, &bearer).await?)
}

/// 429 `too_many_sign_in_attempts`, with when to come back.
fn too_many(wait: Duration, why: &str) -> Response {
    let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
    let message = format!("{why}; try again in {seconds} s");
    let mut response = sign_in_page(
        StatusCode::TOO_MANY_REQUESTS,
        "",
        Some(("too_many_sign_in_attempts", &message)),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// Ends the session (its CSRF token checked) and forgets the cookie.
pub async fn sign_out(
    State(console): State<ConsoleState>,
    headers: HeaderMap,
    posted: super::form::Posted<std::collections::HashMap<String, String>>,
) -> Response {
    let clear = session::close(&console, &headers).await;
    tracing::info!(key = %posted.session.caller.key_id, "console session closed");
    let mut response = Redirect::to("/console/sign-in").into_response();
    response.headers_mut().append(header::SET_COOKIE, clear);
    response
}

/// A `next` that stays inside the console (never another site, never
/// another path of this one): its dot segments resolved as a browser
/// resolves them (`%2e` included), then kept only if it is still under
/// `/console/`.
fn safe_next(next: &str) -> String {
    const HOME: &str = "/console/";
    if !next.starts_with('/')
        || next.starts_with("//")
        || next.contains('\\')
        || next.chars().any(char::is_control)
    {
        return HOME.into();
    }
    let split = next.find(['?', '#']).unwrap_or(next.len());
    let (path, rest) = next.split_at(split);
    let mut kept: Vec<&str> = Vec::new();
    let mut ends_in_dots = false;
    for segment in path.split('/').skip(1) {
        let dots = segment.to_ascii_lowercase().replace("%2e", ".");
        ends_in_dots = dots == "." || dots == "..";
        match dots.as_str() {
            "." => {}
            ".." => {
                kept.pop();
            }
            _ => kept.push(segment),
        }
    }
    let mut resolved = format!("/{}", kept.join("/"));
    if ends_in_dots && !resolved.ends_with('/') {
        resolved.push('/');
    }
    if resolved.starts_with(HOME) {
        resolved + rest
    } else {
        HOME.into()
    }
}

/// Whether the request's `Origin` (when the browser sent one) is this host.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_never_leaves_the_console() {
        assert_eq!(safe_next("/console/nodes"), "/console/nodes");
        assert_eq!(safe_next("/console/a/../nodes?x=1"), "/console/nodes?x=1");
        assert_eq!(safe_next("/console/./keys/."), "/console/keys/");
        for bad in [
            "/console/../../x",
            "/console/..",
            "/console/%2e%2e/api/keys",
            "/console/%2E./x",
            "/console/a/../../x",
            "/console",
            "https://evil.example/",
            "//evil.example/console/",
            "/api/keys",
            "/console/\\x",
            "",
        ] {
            assert_eq!(safe_next(bad), "/console/", "{bad}");
        }
    }

    #[test]
    fn a_form_from_another_origin_is_refused() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8080"),
        );
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://evil.example"),
        );
        assert!(!same_origin(&headers));
    }
}
