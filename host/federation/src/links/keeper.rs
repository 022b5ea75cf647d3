//! The keeper: one loop per replica that rereads the identity (closing
//! and recording down every link while federation is suspended), releases
//! the slots of replicas that died, and, on the replica holding the
//! dialler lock, dials the links this cluster dials, with backoff.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_carrier::stream_seam::Lane;
use switchyard_protocol::federation::{LinkState, Peer};
use switchyard_protocol::link::LinkPurpose;
use switchyard_store::federation::DiallerLock;
use tokio::sync::watch;

use super::{LANES, LinkPeer};
use crate::Federation;
use crate::handshake::Refusal;

/// The first wait before a link is dialled again; doubled after each
/// failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between two dials of a link.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How often the keeper looks at the identity and the links.
const TICK: Duration = Duration::from_secs(1);
/// How often a replica that does not dial tries the dialler lock.
const LOCK_RETRY: Duration = Duration::from_secs(5);
/// A replica silent this long has its concurrency slots released.
const DEAD_REPLICA: Duration = Duration::from_secs(15);

/// The keeper: rereads the identity, dials the links this cluster dials
/// (with backoff), and releases the slots of replicas that died.
pub(crate) async fn keep(federation: Arc<Federation>, mut stop: watch::Receiver<bool>) {
    let mut dials: HashMap<(String, Lane), Redial> = HashMap::new();
    let mut last_sweep = Instant::now();
    let mut dialler: Option<DiallerLock> = None;
    let mut last_try: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tokio::time::sleep(TICK) => {}
        }
        match federation.cluster.refresh(&federation.store).await {
            Ok(_) => {
                if let Err(suspended) = federation.cluster.key() {
                    federation.suspend_links(&suspended.code).await;
                    continue;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "federation: the identity was not read");
                continue;
            }
        }
        if last_sweep.elapsed() > DEAD_REPLICA {
            last_sweep = Instant::now();
            if let Err(e) = federation.store.release_dead_slots(DEAD_REPLICA).await {
                tracing::warn!(error = %e, "federation: dead replicas' slots not released");
            }
        }
        // One replica dials each peer: the one holding the dialler lock.
        if !dialler.as_ref().is_some_and(DiallerLock::is_held)
            && last_try.is_none_or(|at| at.elapsed() >= LOCK_RETRY)
        {
            last_try = Some(Instant::now());
            dialler = match federation.store.try_dialler_lock().await {
                Ok(lock) => lock,
                Err(e) => {
                    tracing::warn!(error = %e, "federation: the dialler lock was not tried");
                    None
                }
            };
        }
        if !dialler.as_ref().is_some_and(DiallerLock::is_held) {
            continue;
        }
        let peers = match federation.store.peers().await {
            Ok(peers) => peers,
            Err(e) => {
                tracing::warn!(error = %e, "federation: peers not read");
                continue;
            }
        };
        dials.retain(|(peer, _), _| peers.iter().any(|p| &p.id == peer));
        let joining = federation.joining.lock().expect("joining lock").clone();
        let dialled_here = |p: &&Peer| p.url.as_ref().is_some_and(|url| !joining.contains(url));
        for peer in peers.iter().filter(dialled_here) {
            for lane in LANES {
                let redial = dials.entry((peer.id.clone(), lane)).or_default();
                if federation.links.session(&peer.id, lane).is_some()
                    || redial.dialling.as_ref().is_some_and(|t| !t.is_finished())
                    || redial.next.is_some_and(|next| Instant::now() < next)
                {
                    continue;
                }
                // The bulk lane follows the inference lane.
                if lane == Lane::Bulk && !federation.links.is_up(&peer.id) {
                    continue;
                }
                redial.dialling = Some(tokio::spawn(dial_once(
                    federation.clone(),
                    peer.clone(),
                    lane,
                    redial.failures,
                )));
                redial.next = Some(Instant::now() + backoff(redial.failures));
                redial.failures += 1;
            }
        }
        // A lane that came up resets its backoff.
        for ((peer, lane), redial) in dials.iter_mut() {
            if federation.links.session(peer, *lane).is_some() {
                redial.failures = 0;
                redial.next = None;
            }
        }
    }
    federation.suspend_links("shutting_down").await;
}

/// One dial of a peer's lane.
async fn dial_once(federation: Arc<Federation>, peer: Peer, lane: Lane, failures: u32) {
    let Some(url) = peer.url.clone() else {
        return;
    };
    if lane == Lane::Inference && failures == 0 {
        federation
            .link_state(&peer.id, lane, LinkState::Connecting, None)
            .await;
    }
    let expected = peer.public_key.clone();
    let dialled = federation
        .dial(&url, lane, LinkPurpose::Link, None, |listener| {
            std::future::ready(if listener.public_key == expected {
                Ok(())
            } else {
                Err(Refusal::new(
                    "identity_conflict",
                    "the peer answered with another key than the one it paired with",
                ))
            })
        })
        .await;
    let failed = match dialled {
        Ok((_, dialled)) => match federation.hold(&LinkPeer::from(&peer), dialled).await {
            Ok(_) => return,
            Err(e) => e,
        },
        Err(e) => e.to_string(),
    };
    tracing::debug!(peer = %peer.label, lane = lane.as_str(), error = %failed, "link dial failed");
    federation
        .link_state(&peer.id, lane, LinkState::Down, Some(&failed))
        .await;
}

/// The wait before the `failures + 1`th dial.
fn backoff(failures: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1u32 << failures.min(5))
        .min(MAX_BACKOFF)
}

#[derive(Default)]
struct Redial {
    dialling: Option<tokio::task::JoinHandle<()>>,
    next: Option<Instant>,
    failures: u32,
}
