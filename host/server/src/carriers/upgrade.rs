//! A worker's websocket upgrade at this frontend: the request's checks and
//! the 101 answer, with the upgraded connection handed to the tunnel's own
//! framing (`switchyard_carrier::tunnel::websocket::wire`) rather than to
//! axum's websocket, whose library copies every byte it writes.

use std::future::Future;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use switchyard_carrier::tunnel::websocket::handshake::{accept_key, is_upgrade};

/// The connection once upgraded.
pub type UpgradedSocket = TokioIo<Upgraded>;

/// A websocket upgrade request, checked.
pub struct WebsocketUpgrade {
    key: HeaderValue,
    on_upgrade: OnUpgrade,
}

/// The request asks for no websocket (or hyper cannot upgrade it).
#[derive(Debug)]
pub struct NotAnUpgrade;

impl IntoResponse for NotAnUpgrade {
    fn into_response(self) -> Response {
        (StatusCode::BAD_REQUEST, "a websocket upgrade is expected").into_response()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for WebsocketUpgrade {
    type Rejection = NotAnUpgrade;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, NotAnUpgrade> {
        let value = |name| parts.headers.get(name).map(HeaderValue::as_bytes);
        let asks = parts.method == Method::GET
            && is_upgrade(
                value(header::CONNECTION),
                value(header::UPGRADE),
                value(header::SEC_WEBSOCKET_VERSION),
            );
        let key = parts
            .headers
            .get(header::SEC_WEBSOCKET_KEY)
            .filter(|_| asks)
            .cloned()
            .ok_or(NotAnUpgrade)?;
        let on_upgrade = parts.extensions.remove::<OnUpgrade>().ok_or(NotAnUpgrade)?;
        Ok(Self { key, on_upgrade })
    }
}

impl WebsocketUpgrade {
    /// Answers 101 and runs `serve` on the connection once hyper hands it
    /// over (bytes the client sent past its request are read from it first).
    pub fn on_upgrade<F, Fut>(self, serve: F) -> Response
    where
        F: FnOnce(UpgradedSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let accept = accept_key(self.key.as_bytes());
        let on_upgrade = self.on_upgrade;
        tokio::spawn(async move {
            match on_upgrade.await {
                Ok(upgraded) => serve(TokioIo::new(upgraded)).await,
                Err(e) => tracing::debug!(error = %e, "a websocket upgrade did not complete"),
            }
        });
        Response::builder()
            .status(StatusCode::SWITCHING_PROTOCOLS)
            .header(header::CONNECTION, "upgrade")
            .header(header::UPGRADE, "websocket")
            .header(header::SEC_WEBSOCKET_ACCEPT, accept)
            .body(Body::empty())
            .expect("a valid response")
    }
}
