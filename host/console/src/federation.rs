//! The console's federation pages (scope `federation:manage`), one file
//! each under `federation/`:
//!
//! - `overview`: this cluster's identity, the link to each peer, forget;
//! - `pair`: mint a join token (shown once), join a peer with its token;
//! - `peer`: one peer: request access, what it shares with this cluster
//!   (browse shared resources), inspect an operation;
//! - `managed`: managed services on a peer under an `inference:manage`
//!   grant, each change with an operation id shown before it is sent;
//! - `offers`: share local resources (publish, withdraw);
//! - `requests`: review access (approve exact resources, discard), and
//!   share unprompted; `grant_form` draws and reads the grant's terms;
//! - `grants`: the receipts; complete pairing, refresh, revoke, retire;
//! - `copies`: a granted model's manifest and verified copies with their
//!   progress (pause, resume, delete);
//! - `eligibility`: maintenance, drain and undrain of job ownership.
//!
//! Every form calls the API in-process as the session's key, so the
//! scopes, validation and error codes are the API's own.

mod copies;
mod eligibility;
mod grant_form;
mod grants;
mod managed;
mod offers;
mod overview;
mod pair;
mod peer;
mod requests;

use axum::Router;
use axum::http::StatusCode;
use maud::{Markup, html};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::ConsoleState;
use super::api::ApiFailure;
use super::session::form_urlencoded_component;

/// The scope every federation page needs.
pub const SCOPE: &str = "federation:manage";

/// The federation pages' routes.
pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .merge(overview::routes())
        .merge(pair::routes())
        .merge(peer::routes())
        .merge(managed::routes())
        .merge(offers::routes())
        .merge(requests::routes())
        .merge(grants::routes())
        .merge(copies::routes())
        .merge(eligibility::routes())
}

/// The federation pages, in the order the sub-navigation lists them.
const PAGES: [(&str, &str); 7] = [
    ("/console/federation", "Peers"),
    ("/console/federation/pair", "Pair a cluster"),
    ("/console/federation/offers", "Offers"),
    ("/console/federation/requests", "Requests"),
    ("/console/federation/grants", "Grants"),
    ("/console/federation/copies", "Model copies"),
    ("/console/federation/eligibility", "Job ownership"),
];

/// The federation pages' own navigation; `current` is the page shown.
pub fn subnav(current: &str) -> Markup {
    html! {
        nav.subnav aria-label="Federation" {
            ul {
                @for (path, name) in PAGES {
                    li {
                        @if path == current {
                            a href=(path) aria-current="page" { (name) }
                        } @else {
                            a href=(path) { (name) }
                        }
                    }
                }
            }
        }
    }
}

/// A refusal the console makes itself, before calling the API (a field it
/// could not read), shown as the API's are.
pub fn invalid(message: impl Into<String>) -> ApiFailure {
    ApiFailure {
        status: StatusCode::BAD_REQUEST,
        code: "invalid_request".into(),
        message: message.into(),
        body: Value::Null,
    }
}

/// `text` as one path segment.
pub fn segment(text: &str) -> String {
    form_urlencoded_component(text)
}

/// A public key's fingerprint for people to compare out of band: the
/// first 16 bytes of its SHA-256, in groups of four hex digits.
pub fn fingerprint(public_key_hex: &str) -> String {
    let bytes = hex::decode(public_key_hex).unwrap_or_else(|_| public_key_hex.as_bytes().to_vec());
    let digest = hex::encode(&Sha256::digest(&bytes)[..16]);
    digest
        .as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A state as a badge (`up`, `active`, `revoked`...), coloured by the
/// stylesheet's `state` classes.
pub fn badge(state: &str) -> Markup {
    let class = match state {
        "up" | "verified" | "active" | "complete" | "eligible" => "state ok",
        "connecting" | "offered" | "inactive" | "pending" | "running" | "waiting" | "paused"
        | "draining" | "maintenance" => "state pending",
        "down" | "revoked" | "expired" | "stopped" | "interrupted" | "identity_missing"
        | "identity_mismatch" => "state failed",
        _ => "state",
    };
    html! { span class=(class) { (state) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_is_eight_groups_of_four_hex_digits() {
        let print = fingerprint(&"ab".repeat(32));
        let groups: Vec<&str> = print.split(' ').collect();
        assert_eq!(groups.len(), 8);
        assert!(groups.iter().all(|g| g.len() == 4));
        assert_ne!(print, fingerprint(&"cd".repeat(32)));
    }
}
