//! A console session: a random id in an HttpOnly, SameSite=Strict cookie
//! scoped to `/console`, looked up by its SHA-256 in PostgreSQL on every
//! page (so any replica serves it, and revoking the key ends it). A page
//! that is not signed in sends the browser to the sign-in form.

use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::ConsoleState;
use super::api::Api;
use super::page;
use switchyard_server::auth::Caller;

/// The session cookie's name.
pub const COOKIE: &str = "switchyard_console";
/// The one-shot message a form leaves for the page it redirects to.
pub const FLASH_COOKIE: &str = "switchyard_console_flash";
/// How long a session lasts from signing in.
pub const LIFETIME: Duration = Duration::from_secs(8 * 3600);
/// Live sessions one key may hold; signing in once more closes its oldest.
/// A person's browsers and devices, with room for a few forgotten ones; a
/// script signing in in a loop would otherwise add a row every time, each
/// living [`LIFETIME`].
pub const MAX_SESSIONS_PER_KEY: usize = 16;
/// The form field (and `x-csrf-token` header) that carries the token.
pub const CSRF_FIELD: &str = "csrf";

/// A signed-in browser: who it acts as, its CSRF token, and the message a
/// form left it (shown once).
#[derive(Debug, Clone)]
pub struct Session {
    /// The API key the session acts as, with its scopes.
    pub caller: Caller,
    /// The token every form and script request of this session carries.
    pub csrf: String,
    /// The message the last form left, if any.
    pub flash: Option<page::Flash>,
    /// The path asked for (for the navigation's current page).
    pub path: String,
    /// Whether the connection reached us as https (behind a proxy).
    pub secure: bool,
    /// The browser's address, carried to the API for its audit trail.
    pub remote: Option<axum::extract::ConnectInfo<std::net::SocketAddr>>,
}

impl Session {
    /// Whether the key holds `scope` (or `admin`).
    pub fn can(&self, scope: &str) -> bool {
        self.caller.require(scope).is_ok()
    }

    /// The console's 403 page unless the key holds `scope`.
    // The error is the page itself, returned by the handler at once; boxing
    // it would only add a step to every call.
    #[allow(clippy::result_large_err)]
    pub fn require(&self, scope: &str) -> Result<(), Response> {
        if self.can(scope) {
            Ok(())
        } else {
            Err(page::forbidden(self, scope))
        }
    }

    /// The API as this session's key.
    pub fn api(&self, console: &ConsoleState) -> Api {
        Api::new(console.api.clone(), self.caller.clone()).from(self.remote)
    }

    /// Whether `given` is this session's CSRF token (constant time).
    pub fn csrf_matches(&self, given: &str) -> bool {
        bool::from(given.as_bytes().ct_eq(self.csrf.as_bytes()))
    }
}

impl FromRequestParts<ConsoleState> for Session {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &ConsoleState,
    ) -> Result<Self, Response> {
        let path = parts.uri.path().to_string();
        let to_sign_in = || {
            let next = form_urlencoded_component(&path);
            Redirect::to(&format!("/console/sign-in?next={next}")).into_response()
        };
        let Some(id) = cookie(&parts.headers, COOKIE) else {
            return Err(to_sign_in());
        };
        let found = console
            .app
            .store
            .console_session(&digest(id))
            .await
            .map_err(|e| page::server_error(&e.to_string()))?;
        let Some(found) = found else {
            return Err(to_sign_in());
        };
        switchyard_server::edge::ThisConnection::of(parts).prove();
        Ok(Session {
            caller: Caller {
                key_id: found.key_id,
                scopes: found.scopes,
                team: None,
            },
            csrf: found.csrf_token,
            flash: cookie(&parts.headers, FLASH_COOKIE).and_then(page::Flash::decode),
            path,
            secure: is_https(&parts.headers),
            remote: parts.extensions.get().copied(),
        })
    }
}

/// Opens a session for `caller`: the cookie to set.
pub async fn open(
    console: &ConsoleState,
    caller: &Caller,
    secure: bool,
) -> Result<HeaderValue, switchyard_store::StoreError> {
    let id = random_hex(32);
    let csrf = random_hex(32);
    console
        .app
        .store
        .open_console_session(
            &digest(&id),
            &caller.key_id,
            &csrf,
            LIFETIME,
            MAX_SESSIONS_PER_KEY,
        )
        .await?;
    Ok(set_cookie(COOKIE, &id, Some(LIFETIME), secure))
}

/// Ends the session the headers carry, if any: the cookie that clears it.
pub async fn close(console: &ConsoleState, headers: &HeaderMap) -> HeaderValue {
    if let Some(id) = cookie(headers, COOKIE) {
        // A store that cannot be reached leaves the row to expire; the
        // browser forgets the cookie either way.
        let _ = console.app.store.close_console_session(&digest(id)).await;
    }
    set_cookie(COOKIE, "", Some(Duration::ZERO), is_https(headers))
}

/// A `Set-Cookie` for the console's path: HttpOnly, SameSite=Strict, and
/// Secure when the browser came over https.
pub fn set_cookie(name: &str, value: &str, max_age: Option<Duration>, secure: bool) -> HeaderValue {
    let mut cookie = format!("{name}={value}; Path=/console; HttpOnly; SameSite=Strict");
    if let Some(age) = max_age {
        cookie.push_str(&format!("; Max-Age={}", age.as_secs()));
    }
    if secure {
        cookie.push_str("; Secure");
    }
    HeaderValue::from_str(&cookie).expect("cookie values are URL-safe")
}

/// The value of the cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

/// Whether a proxy in front says the browser used https.
pub fn is_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

fn digest(id: &str) -> Vec<u8> {
    Sha256::digest(id.as_bytes()).to_vec()
}

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// `text` as a query value.
pub fn form_urlencoded_component(text: &str) -> String {
    serde_urlencoded::to_string([("", text)])
        .map(|s| s.trim_start_matches('=').to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others_and_is_http_only_and_strict() {
        let mut headers = HeaderMap::new();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; switchyard_console=abc"),
        );
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("switchyard_console_flash=ok:x"),
        );
        assert_eq!(cookie(&headers, COOKIE), Some("abc"));
        assert_eq!(cookie(&headers, FLASH_COOKIE), Some("ok:x"));
        assert_eq!(cookie(&headers, "missing"), None);
        let set = set_cookie(COOKIE, "abc", Some(LIFETIME), false);
        let set = set.to_str().unwrap();
        for part in [
            "Path=/console",
            "HttpOnly",
            "SameSite=Strict",
            "Max-Age=28800",
        ] {
            assert!(set.contains(part), "{set}");
        }
        assert!(!set.contains("Secure"));
        assert!(
            set_cookie(COOKIE, "abc", None, true)
                .to_str()
                .unwrap()
                .ends_with("; Secure")
        );
    }
}
