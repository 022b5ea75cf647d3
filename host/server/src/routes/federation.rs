//! Federation's API: this cluster's identity and join token, the link
//! endpoint, peers (join, list, forget), offers and status. Requests and
//! grants are in `federation_grants`, managed services and operations in
//! `federation_services`, the evaluator in `federation_evaluator`. Reads
//! need `federation:manage`, identity and peers `admin`; the link is
//! authenticated by its key handshake alone.

use std::sync::Arc;

use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::net::SocketAddr;
use switchyard_carrier::stream_seam::Lane;
use switchyard_carrier::tunnel::WEBSOCKET_BUFFER;
use switchyard_federation::Joined;
use switchyard_federation::gate::Busy;
use switchyard_protocol::federation::{
    FederationStatus, Identity, JoinPeer, JoinToken, NewJoinToken, NewOffer, Offer, Peer,
};

use crate::auth::{Admin, Authorized, FederationManage};
use crate::error::{ApiError, FedResult, federation};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::state::AppState;
use switchyard_protocol::lists::{Offers, Peers};

/// This cluster's identity: its id, label and public key.
#[utoipa::path(get, path = "/api/federation/identity", tag = "federation",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "`{cluster_id, label, public_key}`", body = Identity),
        (status = 403, description = "`forbidden`: the key lacks `federation:manage`"),
    ))]
pub async fn identity(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
) -> FedResult<Json<Identity>> {
    Ok(Json(federation(&state)?.identity()))
}

/// Makes the key file this replica was given the cluster's key: after a
/// backup restore (the private key is never in the database) or a lost
/// key. Peers paired with the old key refuse the new one: forget and join
/// each again.
#[utoipa::path(post, path = "/api/federation/identity/adopt", tag = "federation",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "the identity with the adopted public key", body = Identity),
        (status = 403, description = "`forbidden`: the key lacks `admin`"),
        (status = 409, description = "`identity_missing`: this replica has no key file to adopt"),
    ))]
pub async fn adopt(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
) -> FedResult<Json<Identity>> {
    let identity = federation(&state)?.adopt_key().await?;
    tracing::warn!(by = %caller.key_id, "a new federation key was adopted");
    Ok(Json(identity))
}

/// A new join token, shown once; the previous one stops working. It
/// expires (a day unless `ttl_s` says otherwise) and admits one join
/// unless `uses` says more.
#[utoipa::path(post, path = "/api/federation/join-token", tag = "federation",
    security(("bearer" = [])),
    request_body(content = Option<NewJoinToken>, description = "optional: `{ttl_s, uses}`"),
    responses(
        (status = 201, description = "`{join_token, expires_in_s, uses}`, shown once", body = JoinToken),
        (status = 400, description = "`invalid_request`: `ttl_s` outside 60 s to 30 days, `uses` outside 1 to 128, or an unknown field"),
        (status = 403, description = "`forbidden`: the key lacks `admin`"),
        (status = 503, description = "`identity_missing` or `identity_mismatch`: federation is suspended here"),
    ))]
pub async fn join_token(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    body: Bytes,
) -> FedResult<(StatusCode, Json<JoinToken>)> {
    // The body is optional: the CLI sends none, the console `{}`.
    let spec: NewJoinToken = match body.iter().all(u8::is_ascii_whitespace) {
        true => NewJoinToken::default(),
        false => serde_json::from_slice(&body).map_err(|e| {
            ApiError::invalid_request(format!("the body is {{\"ttl_s\", \"uses\"}}: {e}"))
        })?,
    };
    let made = federation(&state)?.rotate_join_token(&spec).await?;
    tracing::info!(by = %caller.key_id, expires_in_s = made.expires_in_s, uses = made.uses, "federation join token rotated");
    Ok((StatusCode::CREATED, Json(made)))
}

/// The link's lane.
#[derive(Debug, Deserialize)]
pub struct LinkParams {
    /// `inference` (default) or `bulk`.
    lane: Option<String>,
}

/// The link: a websocket opened by the key handshake (and, to join, the
/// join token), then the tunnel's streams both ways. Anonymous: the
/// handshake is its authentication; the dialer's `hello` must come within
/// 2 s, and one remote address holds at most 2 handshakes at once.
#[utoipa::path(get, path = "/api/federation/link", tag = "federation",
    params(("lane" = Option<String>, Query, description = "`inference` (default) or `bulk`")),
    responses(
        (status = 101, description = "the websocket; the handshake follows in text messages"),
        (status = 400, description = "`invalid_request`: not a websocket upgrade, or an unknown lane"),
        (status = 503, description = "`too_many_handshakes`: this replica's, or this address's, handshakes are all in progress; `identity_missing`, `identity_mismatch`, or no tunnel component"),
    ))]
pub async fn link(
    State(state): State<Arc<AppState>>,
    ApiQuery(params): ApiQuery<LinkParams>,
    connection: crate::edge::ThisConnection,
    remote: Option<Extension<ConnectInfo<SocketAddr>>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> FedResult<Response> {
    let federation = federation(&state)?.clone();
    federation.cluster().key()?;
    let lane_name = params.lane.as_deref().unwrap_or("inference");
    let lane = Lane::parse(lane_name).ok_or_else(|| {
        ApiError::invalid_request(format!(
            "lane must be 'inference' or 'bulk', got '{lane_name}'"
        ))
    })?;
    let upgrade = upgrade
        .map_err(|_| ApiError::invalid_request("the link endpoint takes a websocket upgrade"))?;
    let address = remote.map(|Extension(ConnectInfo(address))| address.ip());
    let permit = federation.handshake_permit(address).map_err(|busy| {
        let message = match busy {
            Busy::Replica => "too many link handshakes are in progress; try again",
            Busy::Address => {
                "too many link handshakes from this address are in progress; try again"
            }
        };
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_handshakes",
            message,
        )
    })?;
    // The peer proves its key in the handshake, after the upgrade; the
    // link is kept as a proven connection from here, since the handshake
    // permits bound how many unproven ones can be here at once, and a
    // failed handshake closes the socket.
    connection.prove();
    Ok(upgrade
        .write_buffer_size(WEBSOCKET_BUFFER)
        .max_write_buffer_size(8 * WEBSOCKET_BUFFER)
        .max_message_size(WEBSOCKET_BUFFER)
        .max_frame_size(WEBSOCKET_BUFFER)
        .on_upgrade(move |socket| {
            federation.accept_link(
                socket,
                crate::carriers::axum_codec::axum_codec(),
                lane,
                permit,
            )
        }))
}

/// Joins the cluster at `url` with its join token: both keys are proved
/// and each side registers the other. Joining grants nothing.
#[utoipa::path(post, path = "/api/federation/peers", tag = "federation",
    security(("bearer" = [])),
    request_body = JoinPeer,
    responses(
        (status = 201, description = "joined and linked; `Location` names the peer", body = Peer),
        (status = 200, description = "the same identity at the same URL was already a peer", body = Peer),
        (status = 400, description = "`invalid_request`"),
        (status = 401, description = "`invalid_join_token`: the peer refused the token (wrong, expired or used up)"),
        (status = 409, description = "`identity_conflict`: a known label or URL shows another key (the peer on record is untouched); `self_join`: the URL leads back to this cluster (nothing is registered); `limit_reached`"),
        (status = 429, description = "`join_rate_limited`: the peer refuses joins from this address for a while after too many wrong tokens"),
        (status = 503, description = "`NODE_UNAVAILABLE`: no Switchyard cluster answered at the URL (one answer whatever the cause; the cause is logged); `identity_missing` / `identity_mismatch`"),
    ))]
pub async fn join(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiJson(request): ApiJson<JoinPeer>,
) -> FedResult<Response> {
    let joined = federation(&state)?.join(request).await?;
    let (status, peer) = match joined {
        Joined::Created(peer) => (StatusCode::CREATED, peer),
        Joined::Existing(peer) => (StatusCode::OK, peer),
    };
    tracing::info!(peer = %peer.label, by = %caller.key_id, "federation peer joined");
    let location = HeaderValue::from_str(&format!("/api/federation/peers/{}", peer.id)).ok();
    let mut response = (status, Json(peer)).into_response();
    if let (StatusCode::CREATED, Some(location)) = (status, location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

/// Every peer with its link.
#[utoipa::path(get, path = "/api/federation/peers", tag = "federation",
    security(("bearer" = [])),
    responses((status = 200, body = Peers, description = "Every peer with its link")))]
pub async fn peers(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
) -> FedResult<Json<Peers>> {
    let peers = federation(&state)?.peers().await?;
    Ok(Json(Peers { peers }))
}

/// One peer (by id or label).
#[utoipa::path(get, path = "/api/federation/peers/{peer}", tag = "federation",
    security(("bearer" = [])),
    params(("peer" = String, Path, description = "the peer's id or label")),
    responses((status = 200, body = Peer), (status = 404, description = "`not_found`")))]
pub async fn peer(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(peer): ApiPath<String>,
) -> FedResult<Json<Peer>> {
    Ok(Json(federation(&state)?.peer(&peer).await?))
}

/// Forgets a peer: its link closes; its requests, grants and operation
/// receipts are deleted. Managed services it created stay.
#[utoipa::path(delete, path = "/api/federation/peers/{peer}", tag = "federation",
    security(("bearer" = [])),
    params(("peer" = String, Path, description = "the peer's id or label")),
    responses((status = 204, description = "forgotten"), (status = 404, description = "`not_found`")))]
pub async fn forget(
    caller: Authorized<Admin>,
    State(state): State<Arc<AppState>>,
    ApiPath(peer): ApiPath<String>,
) -> FedResult<StatusCode> {
    federation(&state)?.forget(&peer).await?;
    tracing::info!(peer, by = %caller.key_id, "federation peer forgotten");
    Ok(StatusCode::NO_CONTENT)
}

/// The identity's state, each peer's link and grants, and the bounds.
#[utoipa::path(get, path = "/api/federation/status", tag = "federation",
    security(("bearer" = [])),
    responses((status = 200, body = FederationStatus)))]
pub async fn status(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
) -> FedResult<Json<FederationStatus>> {
    Ok(Json(federation(&state)?.status().await?))
}

/// Publishes an offer: a deployment as a service, a model revision, a
/// node, or a runtime for managed services.
#[utoipa::path(post, path = "/api/federation/offers", tag = "federation",
    security(("bearer" = [])),
    request_body = NewOffer,
    responses(
        (status = 201, body = Offer),
        (status = 400, description = "`invalid_request`: the resource does not exist here"),
        (status = 409, description = "`offer_exists`; `limit_reached` (256 offers)"),
    ))]
pub async fn publish(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiJson(offer): ApiJson<NewOffer>,
) -> FedResult<(StatusCode, Json<Offer>)> {
    let offer = federation(&state)?.publish(offer).await?;
    Ok((StatusCode::CREATED, Json(offer)))
}

/// Every offer.
#[utoipa::path(get, path = "/api/federation/offers", tag = "federation",
    security(("bearer" = [])),
    responses((status = 200, body = Offers, description = "Every offer")))]
pub async fn offers(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
) -> FedResult<Json<Offers>> {
    let offers = federation(&state)?.offers().await?;
    Ok(Json(Offers { offers }))
}

/// Withdraws an offer.
#[utoipa::path(delete, path = "/api/federation/offers/{id}", tag = "federation",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "the offer's id")),
    responses((status = 204, description = "withdrawn"), (status = 404, description = "`not_found`")))]
pub async fn withdraw(
    _caller: Authorized<FederationManage>,
    State(state): State<Arc<AppState>>,
    ApiPath(id): ApiPath<String>,
) -> FedResult<StatusCode> {
    federation(&state)?.withdraw(&id).await?;
    Ok(StatusCode::NO_CONTENT)
}
