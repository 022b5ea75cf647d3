//! Streams to a worker whose session another replica holds. The replica
//! that was asked dials the holder's `GET /api/cluster/relay` over a
//! websocket with the cluster's relay secret; the holder opens the stream
//! on its own session and pipes it.
//!
//! On the relay websocket: the holder's first message is text, `ok` or
//! `refused <kind> <message>` (kind: `unknown`, `refused`, `overloaded`,
//! `undelivered`); then binary messages carry data both ways, the text
//! message `fin` ends one direction, and a close ends both.

use std::sync::Arc;

use futures::StreamExt;
use switchyard_carrier::streams::{Lane, Relay};
use switchyard_carrier::{Refusal, Stream};
use switchyard_store::Store;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use switchyard_carrier::framed;
use switchyard_carrier::tunnel::websocket;

/// The header carrying the relay secret.
pub const RELAY_HEADER: &str = "x-switchyard-relay";

/// Lets through only a replica of this cluster: one that sends the
/// cluster's relay secret (compared in constant time). `refused` says what
/// the route serves, for the 401.
pub async fn require_replica(
    store: &Store,
    headers: &axum::http::HeaderMap,
    refused: &'static str,
) -> Result<(), crate::error::ApiError> {
    use subtle::ConstantTimeEq;
    let secret = store.relay_secret().await?;
    let given = headers
        .get(RELAY_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if bool::from(given.ct_eq(secret.as_bytes())) {
        return Ok(());
    }
    Err(crate::error::ApiError::new(
        axum::http::StatusCode::UNAUTHORIZED,
        "unauthorized",
        refused,
    ))
}

/// The relay this replica uses for nodes it does not hold.
pub async fn relay(store: Store, instance_id: String) -> anyhow::Result<Relay> {
    let secret: Arc<str> = store.relay_secret().await?.into();
    Ok(Arc::new(
        move |node: String, lane: Lane, service: String| {
            let (store, secret, instance_id) = (store.clone(), secret.clone(), instance_id.clone());
            Box::pin(async move {
                let owner = store
                    .connection_owner(&node, lane.as_str())
                    .await
                    .map_err(|e| {
                        Refusal::NotDelivered(format!("looking up the session holder: {e}"))
                    })?;
                let owner = owner.ok_or_else(|| {
                    Refusal::NotDelivered(format!("node {node} has no {} session", lane.as_str()))
                })?;
                if owner.instance_id == instance_id {
                    return Err(Refusal::NotDelivered(format!(
                        "node {node}'s {} session was here and has ended",
                        lane.as_str()
                    )));
                }
                let address = owner.address.ok_or_else(|| {
                    Refusal::NotDelivered(format!("replica {} has no address", owner.instance_id))
                })?;
                dial(&address, &secret, &node, lane, &service).await
            })
        },
    ))
}

async fn dial(
    address: &str,
    secret: &str,
    node: &str,
    lane: Lane,
    service: &str,
) -> Result<Stream, Refusal> {
    let url = format!(
        "{}/api/cluster/relay?node={node}&lane={}&service={service}",
        address.replacen("http", "ws", 1),
        lane.as_str()
    );
    let mut request = url
        .into_client_request()
        .map_err(|e| Refusal::NotDelivered(format!("relay request: {e}")))?;
    request.headers_mut().insert(
        RELAY_HEADER,
        secret
            .parse()
            .map_err(|_| Refusal::NotDelivered("relay secret is not a header value".into()))?,
    );
    let (websocket, _) = tokio_tungstenite::connect_async_with_config(
        request,
        Some(switchyard_carrier::tunnel::websocket::config()),
        true,
    )
    .await
    .map_err(|e| Refusal::NotDelivered(format!("relay to {address}: {e}")))?;
    let mut websocket = websocket;
    let verdict = match websocket.next().await {
        Some(Ok(Message::Text(text))) => text.to_string(),
        other => {
            return Err(Refusal::NotDelivered(format!(
                "the holding replica answered {other:?}"
            )));
        }
    };
    parse_verdict(&verdict)?;
    let (incoming, outgoing) = websocket::frames(websocket, websocket::tungstenite());
    Ok(framed::stream(incoming, outgoing))
}

/// The holder's first message for an open's outcome.
pub fn verdict(outcome: Result<(), &Refusal>) -> String {
    match outcome {
        Ok(()) => "ok".into(),
        Err(Refusal::UnknownService) => "refused unknown".into(),
        Err(Refusal::ServiceRefused(message)) => format!("refused refused {message}"),
        Err(Refusal::Overloaded) => "refused overloaded".into(),
        Err(Refusal::NotDelivered(message)) => format!("refused undelivered {message}"),
    }
}

fn parse_verdict(text: &str) -> Result<(), Refusal> {
    if text == "ok" {
        return Ok(());
    }
    let rest = text.strip_prefix("refused ").unwrap_or(text);
    let (kind, message) = rest.split_once(' ').unwrap_or((rest, ""));
    Err(match kind {
        "unknown" => Refusal::UnknownService,
        "refused" => Refusal::ServiceRefused(message.to_string()),
        "overloaded" => Refusal::Overloaded,
        _ => Refusal::NotDelivered(format!("via the holding replica: {message}")),
    })
}
