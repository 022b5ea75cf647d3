//! The usage counters shared across the cluster's frontend replicas: each
//! replica sends its changes as they happen, at most one message every
//! [`COUNTS_SYNC_MS`], with `pg_notify` on [`COUNTS_CHANNEL`], and adds
//! everyone else's, so that a rate limit or a budget a policy judges holds
//! for the cluster, not per replica. At start the day's and the month's
//! tokens come from the usage events already written.
//!
//! The error this leaves: another replica's admissions are seen at most one
//! sync interval plus a notification's delivery (about a millisecond) late,
//! so a limit can be passed by what the other replicas admit in that time;
//! events still queued in a replica's meter when this one starts are missed
//! by its day and month.

use std::sync::Arc;
use std::time::Duration;

use switchyard_inference::counters::UsageCounters;
use switchyard_protocol::usage::{COUNTS_CHANNEL, COUNTS_SYNC_MS, CountsMessage};
use switchyard_store::Store;
use tokio::sync::{mpsc, watch};

/// Notifications held for the reader before they are dropped.
const QUEUE: usize = 4096;

/// A notification's payload must stay under PostgreSQL's 8000 bytes.
const MAX_PAYLOAD: usize = 7000;

/// How long to wait before listening again after the connection broke.
const RELISTEN: Duration = Duration::from_secs(1);

/// How often requests in flight are said again with no change (others
/// forget them after 3 s).
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Shares `counters` with the other replicas until `stop`.
pub(super) async fn share(
    counters: Arc<UsageCounters>,
    store: Store,
    replica: String,
    mut stop: watch::Receiver<bool>,
) {
    // Listening first: a change sent while the totals load is not missed.
    let mut incoming = listen(&store).await;
    seed(&counters, &store).await;
    let gap = Duration::from_millis(COUNTS_SYNC_MS);
    let mut last_sent = tokio::time::Instant::now() - gap;
    let mut heartbeat = tokio::time::interval(HEARTBEAT);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            payload = recv(&mut incoming) => match payload {
                Some(payload) => apply(&counters, &replica, &payload),
                None => {
                    tracing::warn!("usage counters: the LISTEN connection ended; listening again");
                    tokio::time::sleep(RELISTEN).await;
                    incoming = listen(&store).await;
                }
            },
            _ = counters.changed() => {
                // Changes made while this waits go in the same message.
                tokio::time::sleep_until(last_sent + gap).await;
                last_sent = tokio::time::Instant::now();
                send(&counters, &store, &replica).await;
            }
            _ = heartbeat.tick() => send(&counters, &store, &replica).await,
        }
    }
    // What this replica counted last still reaches the others.
    send(&counters, &store, &replica).await;
}

/// The listening connection (kept alive with its receiver), or `None`.
type Incoming = Option<(tokio_postgres::Client, mpsc::Receiver<String>)>;

async fn listen(store: &Store) -> Incoming {
    match store.listen_queued(COUNTS_CHANNEL, QUEUE).await {
        Ok(listening) => Some(listening),
        Err(e) => {
            tracing::warn!(error = %e, "usage counters: cannot LISTEN; other replicas' counts are not seen");
            None
        }
    }
}

async fn recv(incoming: &mut Incoming) -> Option<String> {
    match incoming {
        Some((_, receiver)) => receiver.recv().await,
        // Not listening: wait for a tick, then try again.
        None => {
            tokio::time::sleep(RELISTEN).await;
            None
        }
    }
}

fn apply(counters: &UsageCounters, replica: &str, payload: &str) {
    match serde_json::from_str::<CountsMessage>(payload) {
        Ok(message) if message.replica != replica => counters.apply(&message),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "usage counters: a message that does not parse"),
    }
}

async fn seed(counters: &UsageCounters, store: &Store) {
    match store.usage_totals().await {
        Ok(totals) => {
            for t in totals {
                counters.seed(&t.subject, t.today, t.this_month);
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "usage counters: cannot read today's and this month's tokens; they start at zero")
        }
    }
}

async fn send(counters: &UsageCounters, store: &Store, replica: &str) {
    let Some(message) = counters.take_outbox(replica) else {
        return;
    };
    for payload in payloads(message) {
        if let Err(e) = store.notify_usage_counts(&payload).await {
            tracing::warn!(error = %e, "usage counters: cannot send this replica's counts");
        }
    }
}

/// The message cut into payloads that each fit one notification.
fn payloads(message: CountsMessage) -> Vec<String> {
    let mut out = Vec::new();
    let mut part = CountsMessage {
        replica: message.replica.clone(),
        counts: Vec::new(),
    };
    let mut size = 0;
    for delta in message.counts {
        let entry = serde_json::to_string(&delta).map_or(0, |s| s.len() + 1);
        if size + entry > MAX_PAYLOAD && !part.counts.is_empty() {
            out.extend(serde_json::to_string(&part).ok());
            part.counts.clear();
            size = 0;
        }
        size += entry;
        part.counts.push(delta);
    }
    if !part.counts.is_empty() {
        out.extend(serde_json::to_string(&part).ok());
    }
    out
}

#[cfg(test)]
mod tests {
    use switchyard_protocol::usage::CountsDelta;

    use super::*;

    #[test]
    fn a_large_message_is_cut_into_notifications_that_fit() {
        let counts = (0..500)
            .map(|i| CountsDelta {
                subject: format!("key:{i:040}"),
                requests: 1,
                tokens: 1000,
                in_flight: 1,
            })
            .collect();
        let payloads = payloads(CountsMessage {
            replica: "r1".into(),
            counts,
        });
        assert!(payloads.len() > 1);
        let mut seen = 0;
        for payload in &payloads {
            assert!(payload.len() < 8000, "{}", payload.len());
            seen += serde_json::from_str::<CountsMessage>(payload)
                .unwrap()
                .counts
                .len();
        }
        assert_eq!(seen, 500);
    }
}
