//! Pair a cluster: mint a join token for another cluster's operator (shown
//! once, on the answer to the form and nowhere else), or join another
//! cluster with its URL and token. Joining proves both keys and grants
//! nothing; access is asked for and granted afterwards.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::Response;
use axum::routing::{get, post};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::json;
use switchyard_protocol::federation::{Identity, JoinToken, MAX_NAME, Peer};

use super::super::ConsoleState;
use super::super::api::ApiFailure;
use super::super::api::typed;
use super::super::form::{Posted, redirect_with};
use super::super::page::{self, Flash, csrf_field};
use super::super::session::{Session, is_https};
use super::{SCOPE, fingerprint, segment, subnav};

/// The longest peer URL the form takes.
const MAX_URL: usize = 2048;

pub fn routes() -> Router<ConsoleState> {
    Router::new()
        .route("/console/federation/pair", get(show))
        .route("/console/federation/pair/token", post(mint))
        .route("/console/federation/pair/join", post(join))
}

/// What the join form carries (kept when the join is refused, but the token).
#[derive(Debug, Default, Deserialize)]
struct JoinForm {
    #[serde(default)]
    url: String,
    #[serde(default)]
    join_token: String,
    #[serde(default)]
    label: String,
}

/// What the page shows besides its forms.
#[derive(Default)]
struct Shown<'a> {
    /// A token just minted, with the command the other side runs.
    minted: Option<(String, String)>,
    /// The join form as posted, and why it was refused.
    join: Option<(&'a JoinForm, ApiFailure)>,
}

async fn show(State(console): State<ConsoleState>, session: Session) -> Response {
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let identity = session
        .api(&console)
        .get_as::<Identity>("/api/federation/identity")
        .await;
    page::render(
        &session,
        "Pair a cluster",
        pair_page(&session, &identity, Shown::default()),
    )
}

fn pair_page(
    session: &Session,
    identity: &Result<Identity, ApiFailure>,
    shown: Shown<'_>,
) -> Markup {
    let (posted, refused) = match &shown.join {
        Some((form, failure)) => (Some(*form), Some(failure)),
        None => (None, None),
    };
    html! {
        (subnav("/console/federation/pair"))
        @if !session.can("admin") {
            p.flash.warn role="status" { "Minting a join token and joining a cluster need the " code { "admin" } " scope; this key lacks it." }
        }
        div.cards.wide {
            section.card aria-labelledby="invite-title" {
                h2 #invite-title { "Let another cluster join this one" }
                p { "Mint a join token and give it, with this cluster's URL, to the other cluster's operator. "
                    "A new token replaces the previous one." }
                @if let Ok(identity) = identity {
                    p { "They should see this key fingerprint: " code { (identity.public_key.as_deref().map(fingerprint).unwrap_or_default()) } }
                }
                @if let Some((token, command)) = &shown.minted {
                    div.created role="status" {
                        p { strong { "Join token minted: copy it now." } " It is shown this once; the cluster keeps only its digest." }
                        p { label for="join-token-minted" { "New join token" } br;
                            input #join-token-minted type="text" readonly size="60" value=(token); }
                        p { label for="join-command" { "The other cluster's operator runs" } br;
                            textarea #join-command readonly rows="3" { (command) } }
                    }
                }
                form.stack method="post" action="/console/federation/pair/token" {
                    (csrf_field(session))
                    button type="submit" { "Mint a join token" }
                }
            }
            section.card aria-labelledby="join-title" {
                h2 #join-title { "Join another cluster" }
                p { "Its operator gives you its URL and a join token they minted. Both keys are proved; joining grants nothing." }
                @if let Some(failure) = refused { (page::failure(failure)) }
                form.stack method="post" action="/console/federation/pair/join" {
                    (csrf_field(session))
                    label for="peer-url" { "Peer URL" }
                    input #peer-url type="url" name="url" required maxlength=(MAX_URL)
                        placeholder="http://beta.example:8080" value=[posted.map(|p| p.url.as_str())];
                    label for="peer-token" { "Join token" }
                    input #peer-token type="password" name="join_token" required autocomplete="off";
                    label for="peer-label" { "Label for the peer" }
                    input #peer-label type="text" name="label" required maxlength=(MAX_NAME)
                        placeholder="beta"
                        value=[posted.map(|p| p.label.as_str())];
                    span.hint { "Letters, digits, '-', '_' or '.'; the name this cluster gives the peer." }
                    button type="submit" { "Join" }
                }
            }
        }
    }
}

async fn mint(
    State(console): State<ConsoleState>,
    headers: HeaderMap,
    posted: Posted<Vec<(String, String)>>,
) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let api = session.api(&console);
    let minted = match api.post("/api/federation/join-token", json!({})).await {
        Ok(value) => typed::<JoinToken>(value),
        Err(failure) => Err(failure),
    };
    let identity = api.get_as::<Identity>("/api/federation/identity").await;
    match minted {
        // Rendered on the answer itself: the token never goes into a
        // cookie, a URL or a log.
        Ok(minted) => {
            let label = identity
                .as_ref()
                .map(|i| i.label.clone())
                .unwrap_or_else(|_| "this-cluster".into());
            let command = format!(
                "switchyard federation join --url {} --token {} --label {label}",
                own_url(&headers),
                minted.join_token
            );
            let shown = Shown {
                minted: Some((minted.join_token, command)),
                join: None,
            };
            page::render(
                session,
                "Pair a cluster",
                pair_page(session, &identity, shown),
            )
        }
        Err(failure) => redirect_with(session, "/console/federation/pair", Flash::failed(&failure)),
    }
}

async fn join(State(console): State<ConsoleState>, posted: Posted<JoinForm>) -> Response {
    let session = &posted.session;
    if let Err(forbidden) = session.require(SCOPE) {
        return forbidden;
    }
    let form = &posted.fields;
    let api = session.api(&console);
    let body = json!({
        "url": form.url.trim(),
        "join_token": form.join_token.trim(),
        "label": form.label.trim(),
    });
    let joined = match api.post("/api/federation/peers", body).await {
        Ok(value) => typed::<Peer>(value),
        Err(failure) => Err(failure),
    };
    match joined {
        Ok(peer) => redirect_with(
            session,
            &format!("/console/federation/peers/{}", segment(&peer.label)),
            Flash::done(format!(
                "Joined {}: both keys are proved. Ask it for access below, or share with it on Grants.",
                peer.label
            )),
        ),
        Err(failure) => {
            let identity = api.get_as::<Identity>("/api/federation/identity").await;
            let status = failure.status;
            let shown = Shown {
                minted: None,
                join: Some((form, failure)),
            };
            page::render_status(
                session,
                status,
                "Pair a cluster",
                pair_page(session, &identity, shown),
            )
        }
    }
}

/// This cluster's URL as the browser reached it: what the other side dials.
fn own_url(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("this-cluster:8080");
    let scheme = if is_https(headers) { "https" } else { "http" };
    format!("{scheme}://{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_join_command_names_the_url_the_browser_used() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "alpha:8080".parse().unwrap());
        assert_eq!(own_url(&headers), "http://alpha:8080");
        headers.insert("x-forwarded-proto", "https".parse().unwrap());
        assert_eq!(own_url(&headers), "https://alpha:8080");
    }
}
