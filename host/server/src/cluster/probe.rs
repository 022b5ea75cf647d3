//! The probe: `POST /api/cluster/probe` publishes a broadcast every replica
//! hears and submits a unit exactly one replica handles; `GET` shows what
//! this replica heard and handled. An operator's (and the end-to-end
//! suite's) proof that fan-out and the work queue cross processes.

use std::sync::{Arc, Mutex};

use super::Cluster;

/// The subject probe broadcasts travel on.
pub const PROBE_SUBJECT: &str = "cache.probe";
/// The kind of probe units.
pub const PROBE_KIND: &str = "probe";
/// How many probe ids a replica remembers.
const KEPT: usize = 1000;

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
    let mut list = list.lock().expect("probe lock");
    if list.len() >= KEPT {
        list.remove(0);
    }
    list.push(id);
}

/// Subscribes to probe broadcasts and consumes probe units.
pub async fn listen(cluster: Arc<Cluster>) -> anyhow::Result<()> {
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
