//! API keys and scopes: `Authorization: Bearer <token>`; anonymous is 401,
//! a key without the scope is 403. The `admin` scope implies every other.
//! A route states its scope in its signature (`Authorized<ModelsManage>`).

use subtle::ConstantTimeEq;
use switchyard_store::StoreError;
use switchyard_store::keys::token_digest;

/// The caller a request authenticated as (its type is protocol's: the
/// inference core and the console check scopes with it too).
pub use switchyard_protocol::keys::{Caller, MissingScope};

use crate::state::AppState;

/// Why a caller was not let in. Every credential failure of one kind says
/// the same thing, so a caller cannot tell an unknown key from a revoked
/// one, or an unknown node from a wrong credential.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No bearer token.
    #[error("an API key is required (Authorization: Bearer <token>)")]
    MissingKey,
    /// A token no live key has.
    #[error("unknown or revoked API key")]
    UnknownKey,
    /// The key lacks the scope (and `admin`).
    #[error(transparent)]
    MissingScope(#[from] MissingScope),
    /// No node id, or not that node's credential.
    #[error("a node id and its credential are required")]
    NodeUnauthorized,
    /// A request only the cluster's replicas may make, without the
    /// cluster's relay secret; says what the route serves.
    #[error("{0}")]
    NotAReplica(&'static str),
    /// The key or the relay secret could not be looked up.
    #[error("looking the credential up: {0}")]
    Lookup(#[from] StoreError),
    /// The node's credential could not be looked up.
    #[error("looking the node's credential up: {0}")]
    NodeLookup(#[source] StoreError),
}

/// Every scope a key can hold.
pub const SCOPES: [&str; 8] = [
    "admin",
    "inference",
    "models:manage",
    "nodes:manage",
    "federation:manage",
    "federation:invoke",
    "metrics:read",
    "usage:read",
];

/// A scope a route needs, as a type: [`Authorized`] checks it while the
/// request's head is extracted, before any body is read or parsed.
pub trait Scope {
    /// The scope's name in [`SCOPES`].
    const NAME: &'static str;
}

macro_rules! scopes {
    ($($(#[$doc:meta])* $ty:ident = $name:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $ty;
        impl Scope for $ty {
            const NAME: &'static str = $name;
        }
    )*};
}

scopes! {
    /// `admin`: keys, plugins, admission.
    Admin = "admin";
    /// `inference`: the `/v1` API.
    Inference = "inference";
    /// `models:manage`: the library and deployments.
    ModelsManage = "models:manage";
    /// `nodes:manage`: workers and the cluster's carrier.
    NodesManage = "nodes:manage";
    /// `metrics:read`: `/metrics` when the replica is started with `--metrics-auth`.
    MetricsRead = "metrics:read";
    /// `federation:manage`: peers, offers, requests and grants.
    FederationManage = "federation:manage";
}

/// A caller holding the scope `S` (or `admin`). As the first extractor of a
/// handler it answers 401/403 before the path, query or body is looked at,
/// so a key without the scope learns nothing of the route's schema (the
/// extractor is in [`crate::extract`]).
#[derive(Debug, Clone)]
pub struct Authorized<S>(pub Caller, pub(crate) std::marker::PhantomData<S>);

impl<S> std::ops::Deref for Authorized<S> {
    type Target = Caller;

    fn deref(&self) -> &Caller {
        &self.0
    }
}

/// The caller an API key authenticated, as a handler's extractor (the
/// extractor is in [`crate::extract`]): 401 without a key or with an
/// unknown one.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Caller);

/// A caller the web console already authenticated (its session), set as a
/// request extension on the console's in-process calls to the API. Only
/// code in this process can set an extension, so a request from the network
/// never carries one; the API checks the caller's scopes as for a key.
#[derive(Debug, Clone)]
pub struct ActingAs(pub Caller);

/// Lets through only a replica of this cluster: one that sends the
/// cluster's relay secret (compared in constant time). `refused` says what
/// the route serves, for [`AuthError::NotAReplica`].
pub async fn require_replica(
    store: &switchyard_store::Store,
    headers: &axum::http::HeaderMap,
    refused: &'static str,
) -> Result<(), AuthError> {
    let secret = store.relay_secret().await?;
    let given = headers
        .get(switchyard_protocol::carrier::RELAY_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if bool::from(given.ct_eq(secret.as_bytes())) {
        return Ok(());
    }
    Err(AuthError::NotAReplica(refused))
}

/// The header that names the node presenting its credential.
pub const NODE_HEADER: &str = "x-switchyard-node";

/// The bearer token of a request, if any. The scheme's name is matched in
/// any case (`bearer`, `BEARER`): RFC 7235 makes auth schemes
/// case-insensitive, and proxies and clients do rewrite it.
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Authenticates a node by `X-Switchyard-Node` and its own credential:
/// [`AuthError::NodeUnauthorized`] for every failure of the credential.
pub async fn authenticate_node(
    state: &AppState,
    headers: &axum::http::HeaderMap,
) -> Result<(String, switchyard_store::nodes::NodeCredential), AuthError> {
    let token = bearer(headers).ok_or(AuthError::NodeUnauthorized)?;
    let node_id = headers
        .get(NODE_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or(AuthError::NodeUnauthorized)?;
    let digest = token_digest(token);
    let credential = state
        .store
        .node_credential(node_id)
        .await
        .map_err(AuthError::NodeLookup)?;
    match credential {
        Some(c) if bool::from(c.credential_sha256.as_slice().ct_eq(&digest)) => {
            Ok((node_id.to_string(), c))
        }
        _ => Err(AuthError::NodeUnauthorized),
    }
}

/// The caller whose API key the headers carry: [`AuthError::MissingKey`]
/// without one, [`AuthError::UnknownKey`] with an unknown or revoked one.
pub async fn authenticate(
    state: &AppState,
    headers: &axum::http::HeaderMap,
) -> Result<Caller, AuthError> {
    let token = bearer(headers).ok_or(AuthError::MissingKey)?;
    let digest = token_digest(token);
    if let Some(caller) = state.keys.get(&digest) {
        return Ok(caller);
    }
    let principal = state.store.principal(&digest).await?;
    match principal {
        Some(p) if bool::from(p.token_sha256.as_slice().ct_eq(&digest)) => {
            let caller = Caller {
                key_id: p.key_id,
                scopes: p.scopes,
                team: p.team,
            };
            state.keys.put(digest, caller.clone());
            Ok(caller)
        }
        _ => Err(AuthError::UnknownKey),
    }
}

/// How long a replica trusts a key it looked up: every `/v1` request would
/// otherwise wait for the database. A key revoked on this replica is
/// forgotten at once; on another replica it works for at most this long.
pub const KEY_CACHE_TTL: std::time::Duration = std::time::Duration::from_secs(2);

/// Keys this replica looked up lately, by their digest (never the token).
#[derive(Debug, Default)]
pub struct KeyCache {
    entries: std::sync::Mutex<std::collections::HashMap<Vec<u8>, (Caller, std::time::Instant)>>,
}

impl KeyCache {
    /// The caller of a digest looked up within the TTL.
    pub fn get(&self, digest: &[u8]) -> Option<Caller> {
        let entries = self.entries.lock().expect("key cache lock");
        entries
            .get(digest)
            .filter(|(_, at)| at.elapsed() < KEY_CACHE_TTL)
            .map(|(caller, _)| caller.clone())
    }

    /// Remembers a valid key.
    pub fn put(&self, digest: Vec<u8>, caller: Caller) {
        let mut entries = self.entries.lock().expect("key cache lock");
        entries.retain(|_, (_, at)| at.elapsed() < KEY_CACHE_TTL);
        entries.insert(digest, (caller, std::time::Instant::now()));
    }

    /// Forgets everything (a key was revoked).
    pub fn clear(&self) {
        self.entries.lock().expect("key cache lock").clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_authorization(value: &str) -> axum::http::HeaderMap {
        let mut headers = axum::http::HeaderMap::new();
        headers.insert(
            axum::http::header::AUTHORIZATION,
            value.parse().expect("a header value"),
        );
        headers
    }

    #[test]
    fn the_bearer_scheme_is_matched_in_any_case() {
        for value in ["Bearer sy_x", "bearer sy_x", "BEARER sy_x", "bEaReR  sy_x "] {
            assert_eq!(bearer(&with_authorization(value)), Some("sy_x"), "{value}");
        }
        for value in ["Basic sy_x", "Bearer", "Bearer   ", "Bearersy_x", "sy_x"] {
            assert_eq!(bearer(&with_authorization(value)), None, "{value}");
        }
    }
}
