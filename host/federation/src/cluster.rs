//! This replica's identity: the key in its file against the public key
//! the database stored for the cluster. Anything but a match suspends
//! federation on this replica (`identity_missing`, `identity_mismatch`),
//! which is also what a restored backup sees: the database never holds
//! the private key, so a restore cannot bring it back.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use sha2::{Digest, Sha256};
use switchyard_protocol::federation::{
    DEFAULT_JOIN_TOKEN_TTL_S, Identity, JoinToken, MAX_JOIN_TOKEN_TTL_S, MAX_JOIN_TOKEN_USES,
    NewJoinToken,
};
use switchyard_store::Store;

use crate::identity::{ClusterKey, IdentityState, KeyError, identity_state};
use crate::{FedResult, FederationConfig, FederationError};

/// The key and what it proves, as this replica last read them.
pub struct Cluster {
    path: std::path::PathBuf,
    now: RwLock<Now>,
}

struct Now {
    key: Option<Arc<ClusterKey>>,
    identity: Identity,
    state: IdentityState,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("path", &self.path)
            .field("state", &self.state())
            .finish()
    }
}

/// A new join token: 32 random bytes, hex, with a prefix that says what it is.
fn new_join_token() -> String {
    let mut bytes = [0u8; 32];
    rand::RngCore::fill_bytes(&mut rand::rng(), &mut bytes);
    format!("syj_{}", hex::encode(bytes))
}

/// A join token's SHA-256, as stored.
pub fn join_token_sha256(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

impl Cluster {
    /// Reads the key and the stored identity. On a new cluster (no
    /// identity stored yet, no key file) makes both, and the first join
    /// token, which it answers (shown once).
    pub async fn load(
        store: &Store,
        config: &FederationConfig,
    ) -> FedResult<(Self, Option<String>)> {
        let (mut identity, made) = store.ensure_federation_identity(&config.label).await?;
        let key = match ClusterKey::load_file(&config.key_path) {
            Ok(key) => Some(key),
            // Only a cluster that never had a key makes one: a missing
            // key on a cluster that had one is a restore or a mistake,
            // and a new key would silently become the cluster's.
            Err(KeyError::Missing { .. }) if identity.public_key.is_none() => {
                match ClusterKey::init_file(&config.key_path) {
                    Ok(key) => Some(key),
                    // Another replica sharing the file made it meanwhile.
                    Err(KeyError::Exists { .. }) => Some(
                        ClusterKey::load_file(&config.key_path)
                            .map_err(FederationError::internal)?,
                    ),
                    Err(e) => return Err(FederationError::internal(e)),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "federation suspended: the cluster key cannot be used");
                None
            }
        };
        if let (Some(key), None) = (&key, &identity.public_key) {
            identity.public_key = store.claim_federation_public_key(&key.public_key()).await?;
        }
        let state = identity_state(key.as_ref(), identity.public_key.as_deref());
        if state != IdentityState::Verified {
            tracing::warn!(state = %state, "federation suspended on this replica");
        }
        let token = match made {
            true => Some(
                rotate_join_token(store, &NewJoinToken::default())
                    .await?
                    .join_token,
            ),
            false => None,
        };
        let cluster = Self {
            path: config.key_path.clone(),
            now: RwLock::new(Now {
                key: key.map(Arc::new),
                identity,
                state,
            }),
        };
        Ok((cluster, token))
    }

    /// Reads the key file and the stored identity again (a removed or
    /// swapped file suspends federation at once); answers whether the
    /// state changed.
    pub async fn refresh(&self, store: &Store) -> FedResult<bool> {
        let Some(identity) = store.federation_identity().await? else {
            return Ok(false);
        };
        let key = ClusterKey::load_file(&self.path).ok();
        let mut now = self.now.write().expect("identity lock");
        // The same key stays the same Arc (links signed with it go on).
        let key = match (key, &now.key) {
            (Some(read), Some(held)) if read.public_key() == held.public_key() => {
                Some(held.clone())
            }
            (read, _) => read.map(Arc::new),
        };
        let state = identity_state(key.as_deref(), identity.public_key.as_deref());
        let changed = state != now.state;
        if changed {
            tracing::warn!(from = %now.state, to = %state, "federation identity changed");
        }
        *now = Now {
            key,
            identity,
            state,
        };
        Ok(changed)
    }

    /// Makes the key in this replica's file the cluster's (a restored
    /// backup, a lost key): the stored public key is replaced. Peers paired
    /// with the old key refuse the new one, so each must be forgotten and
    /// joined again, explicitly; nothing of the old key comes back.
    pub async fn adopt(&self, store: &Store) -> FedResult<()> {
        let key = ClusterKey::load_file(&self.path).map_err(|e| {
            FederationError::new(409, "identity_missing", format!("no key to adopt: {e}"))
        })?;
        store
            .replace_federation_public_key(&key.public_key())
            .await?;
        self.refresh(store).await?;
        tracing::warn!("a new cluster key was adopted; every peer must pair again");
        Ok(())
    }

    /// The key, when it is the cluster's; otherwise 503 with the state as
    /// the code.
    pub fn key(&self) -> FedResult<Arc<ClusterKey>> {
        let now = self.now.read().expect("identity lock");
        match (&now.key, now.state) {
            (Some(key), IdentityState::Verified) => Ok(key.clone()),
            (_, state) => Err(FederationError::new(
                503,
                state.as_str(),
                match state {
                    IdentityState::Missing => {
                        "federation is suspended: this replica has no cluster key (configure it with --federation-key)"
                    }
                    _ => {
                        "federation is suspended: this replica's cluster key is not the one this cluster paired with; configure that key, or pair again"
                    }
                },
            )),
        }
    }

    /// This cluster's identity as stored.
    pub fn identity(&self) -> Identity {
        self.now.read().expect("identity lock").identity.clone()
    }

    /// Whether this replica may serve federation.
    pub fn state(&self) -> IdentityState {
        self.now.read().expect("identity lock").state
    }
}

/// Makes a new join token; the previous one stops working. Answers the
/// token (shown once: only its SHA-256 is kept) with its lifetime and uses.
pub async fn rotate_join_token(store: &Store, spec: &NewJoinToken) -> FedResult<JoinToken> {
    let ttl_s = spec.ttl_s.unwrap_or(DEFAULT_JOIN_TOKEN_TTL_S);
    let uses = spec.uses.unwrap_or(1);
    if !(60..=MAX_JOIN_TOKEN_TTL_S).contains(&ttl_s) {
        return Err(FederationError::invalid(format!(
            "ttl_s must be 60 to {MAX_JOIN_TOKEN_TTL_S}"
        )));
    }
    if !(1..=MAX_JOIN_TOKEN_USES).contains(&uses) {
        return Err(FederationError::invalid(format!(
            "uses must be 1 to {MAX_JOIN_TOKEN_USES}"
        )));
    }
    let token = new_join_token();
    store
        .set_join_token(&join_token_sha256(&token), Duration::from_secs(ttl_s), uses)
        .await?;
    Ok(JoinToken {
        join_token: token,
        expires_in_s: ttl_s,
        uses,
    })
}

/// Whether `token` is the current join token, not expired or used up,
/// compared in constant time.
pub async fn join_token_matches(store: &Store, token: &str) -> FedResult<bool> {
    use subtle::ConstantTimeEq;
    let Some(stored) = store.join_token_sha256().await? else {
        return Ok(false);
    };
    Ok(bool::from(join_token_sha256(token).ct_eq(&stored)))
}

/// Spends one use of `token` (already matched); `false` when it expired or
/// was used up since.
pub async fn use_join_token(store: &Store, token: &str) -> FedResult<bool> {
    Ok(store.use_join_token(&join_token_sha256(token)).await?)
}
