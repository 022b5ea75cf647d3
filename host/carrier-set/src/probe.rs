//! The probe: `POST /api/cluster/probe` publishes a broadcast every replica
//! hears and submits a unit exactly one replica handles; `GET` shows what
//! this replica heard and handled. An operator's (and the end-to-end
//! suite's) proof that fan-out and the work queue cross processes.

use std::sync::{Arc, Mutex};

use super::Carriers;

/// The subject probe broadcasts travel on.
pub const PROBE_SUBJECT: &str = "cache.probe";
/// The kind of probe units.
pub const PROBE_KIND: &str = "probe";
/// How many probe ids a replica remembers.
const KEPT: usize = 1000;
/// Longest probe id: a probe is a label an operator types (`p1`,
/// `after-upgrade`). With [`KEPT`] ids per list, a replica keeps at most
/// about 256 KB of them, whatever is published on the probe subject.
pub const MAX_PROBE_ID: usize = 128;

/// Whether `id` may be a probe's id: a [`switchyard_protocol::valid::is_name`] of at most
/// [`MAX_PROBE_ID`] bytes.
pub fn valid_probe_id(id: &str) -> bool {
    id.len() <= MAX_PROBE_ID && switchyard_protocol::valid::is_name(id)
}

/// What this replica heard and handled.
#[derive(Debug, Default)]
pub struct Probe {
    heard: Mutex<Vec<String>>,
    handled: Mutex<Vec<String>>,
}

impl Probe {
    /// Probe ids heard as broadcasts, oldest first.
    pub fn heard(&self) -> Vec<String> {
        self.heard.lock().expect("probe lock").clone()
    }

    /// Probe units this replica handled, oldest first.
    pub fn handled(&self) -> Vec<String> {
        self.handled.lock().expect("probe lock").clone()
    }
}

fn keep(list: &Mutex<Vec<String>>, id: String) {
    // Anything may be published on the subject or queued under the kind (an
    // older replica, another tool): what is kept stays bounded regardless.
    if !valid_probe_id(&id) {
        tracing::debug!(len = id.len(), "a probe with an invalid id was not kept");
        return;
    }
    let mut list = list.lock().expect("probe lock");
    if list.len() >= KEPT {
        list.remove(0);
    }
    list.push(id);
}

/// Subscribes to probe broadcasts and consumes probe units.
pub async fn listen(cluster: Arc<Carriers>) -> anyhow::Result<()> {
    let mut broadcasts = cluster.fanout.subscribe(PROBE_SUBJECT, None).await?;
    let mut units = cluster.queue.consume(PROBE_KIND).await?;
    let holder = cluster.clone();
    let heard = cluster.clone();
    let hearing = tokio::spawn(async move {
        while let Some(message) = broadcasts.recv().await {
            keep(
                &heard.probe.heard,
                String::from_utf8_lossy(&message.payload).into_owned(),
            );
        }
    });
    let handling = tokio::spawn(async move {
        while let Some(unit) = units.next().await {
            keep(&cluster.probe.handled, unit.id.clone());
            if let Err(e) = unit.done().await {
                tracing::warn!(error = %e, "a probe unit was not acknowledged");
            }
        }
    });
    let mut tasks = holder.tasks.lock().expect("tasks lock");
    tasks.push(hearing);
    tasks.push(handling);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_kept_is_bounded_in_count_and_size() {
        let list = Mutex::new(Vec::new());
        keep(&list, "x".repeat(1 << 20));
        keep(&list, "p\0".into());
        assert!(list.lock().unwrap().is_empty(), "invalid ids are not kept");
        for i in 0..KEPT + 10 {
            keep(&list, format!("p{i}"));
        }
        let list = list.lock().unwrap();
        assert_eq!(list.len(), KEPT);
        assert_eq!(list[0], "p10", "the oldest go first");
        assert!(valid_probe_id(&"a".repeat(MAX_PROBE_ID)));
        assert!(!valid_probe_id(&"a".repeat(MAX_PROBE_ID + 1)));
    }
}
