//! What a heartbeat reports of the carriers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use switchyard_protocol::carrier::Attachment;

use super::lanes::Probe;

#[derive(Default)]
pub(super) struct StatusInner {
    pub(super) running: Vec<(String, Probe)>,
    pub(super) epoch_seen: Option<i64>,
    pub(super) cannot_follow: BTreeMap<String, String>,
}

/// What a heartbeat reports of the carriers, read without waiting for the
/// link (which may be fetching or connecting): connected is looked at when
/// the heartbeat is sent.
#[derive(Clone, Default)]
pub struct LinkStatus(pub(super) Arc<Mutex<StatusInner>>);

impl std::fmt::Debug for LinkStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LinkStatus")
            .field(&self.attachment())
            .finish()
    }
}

impl LinkStatus {
    /// The sets attached and connected now (by name, each once), the epoch
    /// of the news last acted on, and the sets this worker cannot follow.
    pub fn attachment(&self) -> Attachment {
        let inner = self.0.lock().expect("status lock");
        let attached: BTreeSet<String> = inner
            .running
            .iter()
            .filter(|(_, probe)| probe.connected())
            .map(|(name, _)| name.clone())
            .collect();
        Attachment {
            attached: attached.into_iter().collect(),
            epoch_seen: inner.epoch_seen,
            cannot_follow: inner.cannot_follow.clone(),
        }
    }
}
