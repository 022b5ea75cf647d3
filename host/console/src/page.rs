//! The console's page shell (navigation for the key's scopes, the message a
//! form left, the sign-out button), its error pages, and the small pieces
//! every page draws with (an API refusal, an empty state, a progress bar).

use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use super::api::ApiFailure;
use super::session::{self, CSRF_FIELD, Session};

/// The browser may load nothing from anywhere but this host, and no page
/// may be framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// A console page: its path, its name in the navigation, the scope it needs.
pub struct Section {
    pub path: &'static str,
    pub name: &'static str,
    pub scope: Option<&'static str>,
}

/// The navigation, in order; a key sees the sections its scopes allow.
pub const SECTIONS: [Section; 12] = [
    Section {
        path: "/console/",
        name: "Overview",
        scope: None,
    },
    Section {
        path: "/console/nodes",
        name: "Nodes",
        scope: Some("nodes:manage"),
    },
    Section {
        path: "/console/models",
        name: "Models",
        scope: Some("models:manage"),
    },
    Section {
        path: "/console/deployments",
        name: "Deployments",
        scope: Some("models:manage"),
    },
    Section {
        path: "/console/admission",
        name: "Admission",
        scope: Some("admin"),
    },
    Section {
        path: "/console/plugins",
        name: "Plugins",
        scope: Some("admin"),
    },
    Section {
        path: "/console/keys",
        name: "API keys",
        scope: Some("admin"),
    },
    Section {
        path: "/console/usage",
        name: "Usage",
        scope: Some("usage:read"),
    },
    Section {
        path: "/console/audit",
        name: "Audit",
        scope: Some("admin"),
    },
    Section {
        path: "/console/carrier",
        name: "Carrier",
        scope: Some("admin"),
    },
    Section {
        path: "/console/federation",
        name: "Federation",
        scope: Some("federation:manage"),
    },
    Section {
        path: "/console/try",
        name: "Try prompt",
        scope: Some("inference"),
    },
];

/// A message a form leaves for the next page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    /// Whether it reports a refusal.
    pub failed: bool,
    /// What to show.
    pub text: String,
}

/// The longest flash message kept in its cookie.
const MAX_FLASH: usize = 600;

impl Flash {
    /// Something went as asked.
    pub fn done(text: impl Into<String>) -> Self {
        Self {
            failed: false,
            text: text.into(),
        }
    }

    /// The API refused: its code and message.
    pub fn failed(failure: &ApiFailure) -> Self {
        Self {
            failed: true,
            text: format!("{}: {}", failure.code, failure.message),
        }
    }

    /// For the cookie: `ok:` or `error:`, then the URL-encoded text.
    pub fn encode(&self) -> String {
        let mut text = self.text.clone();
        if text.len() > MAX_FLASH {
            let mut end = MAX_FLASH;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        let kind = if self.failed { "error" } else { "ok" };
        format!("{kind}:{}", session::form_urlencoded_component(&text))
    }

    /// What [`Flash::encode`] wrote (anything else is no message).
    pub fn decode(value: &str) -> Option<Self> {
        let (kind, text) = value.split_once(':')?;
        let failed = match kind {
            "ok" => false,
            "error" => true,
            _ => return None,
        };
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(&format!("t={text}")).ok()?;
        let text = pairs.into_iter().next()?.1;
        Some(Self { failed, text })
    }
}

/// A whole page for `session`, with the console's headers.
pub fn render(session: &Session, title: &str, body: Markup) -> Response {
    render_status(session, StatusCode::OK, title, body)
}

/// [`render`] with a status other than 200.
pub fn render_status(session: &Session, status: StatusCode, title: &str, body: Markup) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, Some(&session.csrf)))
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/console/" { "Switchyard" }
                    nav aria-label="Console" {
                        ul {
                            @for section in SECTIONS.iter().filter(|s| s.scope.is_none_or(|scope| session.can(scope))) {
                                li {
                                    @if is_current(&session.path, section.path) {
                                        a href=(section.path) aria-current="page" { (section.name) }
                                    } @else {
                                        a href=(section.path) { (section.name) }
                                    }
                                }
                            }
                        }
                    }
                    form.sign-out method="post" action="/console/sign-out" {
                        (csrf_field(session))
                        span.who { "key " code { (session.caller.key_id) } }
                        button type="submit" { "Sign out" }
                    }
                }
                main #main {
                    h1 { (title) }
                    @if let Some(flash) = &session.flash {
                        @if flash.failed {
                            p.flash.error role="alert" { (flash.text) }
                        } @else {
                            p.flash.ok role="status" { (flash.text) }
                        }
                    }
                    (body)
                }
            }
        }
    };
    let mut response = (status, markup).into_response();
    secure_headers(&mut response);
    if session.flash.is_some() {
        response.headers_mut().append(
            header::SET_COOKIE,
            session::set_cookie(
                session::FLASH_COOKIE,
                "",
                Some(std::time::Duration::ZERO),
                session.secure,
            ),
        );
    }
    response
}

/// A page for a browser that is not signed in (the sign-in form, errors).
pub fn render_bare(status: StatusCode, title: &str, body: Markup) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, None))
            body.bare {
                main #main {
                    p.brand { "Switchyard" }
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    let mut response = (status, markup).into_response();
    secure_headers(&mut response);
    response
}

fn head(title: &str, csrf: Option<&str>) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            @if let Some(csrf) = csrf {
                meta name="csrf-token" content=(csrf);
            }
            title { (title) " · Switchyard" }
            link rel="stylesheet" href="/console/assets/console.css";
            link rel="icon" href="data:,";
            script src="/console/assets/console.js" defer {}
        }
    }
}

/// The console's headers on every page: what the browser may load, no
/// caching of pages that show cluster state, no framing, no sniffing.
pub fn secure_headers(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
}

fn is_current(path: &str, section: &str) -> bool {
    if section == "/console/" {
        path == "/console/"
    } else {
        path == section || path.starts_with(&format!("{section}/"))
    }
}

/// The hidden field every form of a session carries.
pub fn csrf_field(session: &Session) -> Markup {
    html! { input type="hidden" name=(CSRF_FIELD) value=(session.csrf); }
}

/// The API's refusal, as a page shows it: its code and message.
pub fn failure(failure: &ApiFailure) -> Markup {
    html! {
        div.flash.error role="alert" {
            code { (failure.code) } " " (failure.message)
        }
    }
}

/// What to show where a list is empty, and what to do next.
pub fn empty(what: &str, next: Markup) -> Markup {
    html! {
        div.empty {
            p { (what) }
            p { (next) }
        }
    }
}

/// A progress bar with its label (`done` of `total`).
pub fn progress(label: &str, done: f64, total: f64) -> Markup {
    let percent = if total > 0.0 {
        (done / total * 100.0).clamp(0.0, 100.0)
    } else {
        0.0
    };
    html! {
        div.progress {
            progress max="100" value=(format!("{percent:.1}")) aria-label=(label) {}
            span { (format!("{percent:.0} %")) }
        }
    }
}

/// Bytes for people (`1.5 GiB`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The 403 page: the key lacks `scope`.
pub fn forbidden(session: &Session, scope: &str) -> Response {
    render_status(
        session,
        StatusCode::FORBIDDEN,
        "Not allowed",
        html! {
            p.flash.error role="alert" {
                code { "forbidden" } " This key lacks the " code { (scope) } " scope."
            }
            p { "Sign in with a key that holds it, or go back to the " a href="/console/" { "overview" } "." }
        },
    )
}

/// A form that did not carry this session's CSRF token.
pub fn csrf_refused(session: &Session) -> Response {
    render_status(
        session,
        StatusCode::FORBIDDEN,
        "Form refused",
        html! {
            p.flash.error role="alert" {
                code { "csrf_mismatch" } " The form did not come from this session's page. Reload the page and try again."
            }
        },
    )
}

/// A form whose fields could not be read.
pub fn bad_request(session: &Session, message: &str) -> Response {
    render_status(
        session,
        StatusCode::BAD_REQUEST,
        "Form refused",
        html! { p.flash.error role="alert" { code { "invalid_request" } " " (message) } },
    )
}

/// A form whose body could not be read: 408 `body_timeout` when it came
/// too slowly (the edge's body clocks), else the status of the failure
/// with `payload_too_large` or `invalid_request`. The console's page, as
/// for its other refusals, on the session's page when there is one.
pub fn body_refused(session: Option<&Session>, rejection: &BytesRejection) -> Response {
    let (status, code) = if switchyard_server::edge::BodyTimeout::is(rejection) {
        (StatusCode::REQUEST_TIMEOUT, "body_timeout")
    } else if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    } else {
        (rejection.status(), "invalid_request")
    };
    let body = html! {
        p.flash.error role="alert" { code { (code) } " " (rejection.body_text()) }
    };
    match session {
        Some(session) => render_status(session, status, "Form refused", body),
        None => render_bare(status, "Form refused", body),
    }
}

/// Something on our side failed (the store); says what, never a secret.
pub fn server_error(message: &str) -> Response {
    tracing::warn!(%message, "console page failed");
    render_bare(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Something failed",
        html! {
            p.flash.error role="alert" { code { "internal" } " The console could not read the cluster's state; try again." }
        },
    )
}

/// A console path that is not a page.
pub async fn not_found() -> Response {
    render_bare(
        StatusCode::NOT_FOUND,
        "No such page",
        html! { p { "Go to the " a href="/console/" { "overview" } "." } },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flash_survives_its_cookie_and_anything_else_is_no_message() {
        for flash in [
            Flash::done("Key key_1 revoked."),
            Flash {
                failed: true,
                text: "model_not_allowed: `gpt-4o`; é; a=b&c".into(),
            },
        ] {
            let encoded = flash.encode();
            assert!(
                encoded
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b';' && b != b','),
                "{encoded}"
            );
            assert_eq!(Flash::decode(&encoded), Some(flash));
        }
        assert_eq!(Flash::decode("weird:x"), None);
        assert_eq!(Flash::decode("no colon"), None);
        let long = Flash::done("é".repeat(MAX_FLASH));
        assert!(Flash::decode(&long.encode()).unwrap().text.len() <= MAX_FLASH);
    }

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(24 << 20), "24.0 MiB");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
    }
}
