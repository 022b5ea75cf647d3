//! The decision log's recorder: what each judged request leaves behind.
//!
//! Recording never slows or fails a request: the judging thread pushes a
//! record onto a bounded queue and moves on (a full queue drops the record
//! and counts it); [`write`] takes batches off the queue (every
//! [`FLUSH`] or [`BATCH`] records, one statement each) and prunes the log
//! by count and age every [`DecisionLogConfig::prune_every`].
//!
//! Which answers are recorded, one record per policy step: every deny,
//! patch and error, every monitor-mode deny or patch (recorded though the
//! chain allowed), and one allow in the binding's `allow_sample`. Every
//! step is counted in `switchyard_admission_decisions_total` whether
//! recorded or not. A `deploy` answer is about a placement, which the
//! scheduler judges again on every pass while a deployment waits: one
//! placement answered the same way by the same generation is recorded once
//! (see [`Placements`]), so a refused deployment cannot fill the log.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use switchyard_protocol::decisions::RecordedDecision;
use switchyard_runtime::admission::{
    AdmissionPoint, AdmissionRequest, Chain, Decision, Mode, Verdict,
};
use switchyard_store::Store;
use switchyard_store::admission_decisions::NewDecision;
use tokio::sync::{mpsc, watch};

/// Records waiting for the writer. At ~100 bytes of fields each this is
/// about a megabyte; a database that stalls for longer than it takes to
/// fill costs records (counted as dropped), never request latency.
const QUEUE: usize = 10_000;

/// The most records one INSERT carries (13 arrays of this length).
const BATCH: usize = 500;

/// How long the writer gathers records after the first before it writes:
/// a record is readable within about this long.
pub const FLUSH: Duration = Duration::from_millis(200);

/// Retention of the decision log (`serve --decisions-keep`, `--decisions-max-age-hours`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecisionLogConfig {
    /// Records kept, newest first, across all points [default: 100000].
    pub keep: u64,
    /// Records older than this are deleted [default: 7 days].
    pub max_age: Duration,
    /// How often a replica prunes [default: 60 s]; one at a time does.
    pub prune_every: Duration,
}

impl Default for DecisionLogConfig {
    fn default() -> Self {
        Self {
            keep: 100_000,
            max_age: Duration::from_secs(7 * 24 * 3600),
            prune_every: Duration::from_secs(60),
        }
    }
}

const DECISIONS: [RecordedDecision; 6] = [
    RecordedDecision::Allow,
    RecordedDecision::Deny,
    RecordedDecision::Patch,
    RecordedDecision::Error,
    RecordedDecision::Throttle,
    RecordedDecision::Flag,
];
const MODES: [Mode; 2] = [Mode::Enforce, Mode::Monitor];
const COUNTERS: usize = AdmissionPoint::ALL.len() * DECISIONS.len() * MODES.len();

/// The queue's sending side and the counters; one per replica, in [`super::Admission`].
pub struct Recorder {
    queue: mpsc::Sender<NewDecision>,
    /// Taken once by [`write`].
    receiver: Mutex<Option<mpsc::Receiver<NewDecision>>>,
    /// By point, decision and mode (see [`counter`]).
    decisions: [AtomicU64; COUNTERS],
    dropped: AtomicU64,
    written: AtomicU64,
    failed: AtomicU64,
    placements: Placements,
}

/// The last recorded answer of each placement (deployment and node): the
/// generation, the policy and what it said. Bounded: forgotten wholesale
/// past [`Placements::MAX`] (a placement then records once more).
#[derive(Default)]
struct Placements(Mutex<std::collections::HashMap<(String, String), String>>);

impl Placements {
    const MAX: usize = 10_000;

    /// Whether this answer differs from the placement's last recorded one
    /// (and remembers it).
    fn is_new(&self, request: &AdmissionRequest, answer: String) -> bool {
        let AdmissionRequest::Deploy(placement) = request else {
            return true;
        };
        let key = (placement.deployment.clone(), placement.node.clone());
        let mut last = self.0.lock().expect("placements lock");
        if last.get(&key) == Some(&answer) {
            return false;
        }
        if last.len() >= Self::MAX {
            last.clear();
        }
        last.insert(key, answer);
        true
    }
}

impl Default for Recorder {
    fn default() -> Self {
        let (queue, receiver) = mpsc::channel(QUEUE);
        Self {
            queue,
            receiver: Mutex::new(Some(receiver)),
            decisions: std::array::from_fn(|_| AtomicU64::new(0)),
            dropped: AtomicU64::new(0),
            written: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            placements: Placements::default(),
        }
    }
}

fn counter(point: AdmissionPoint, decision: RecordedDecision, mode: Mode) -> usize {
    let p = AdmissionPoint::ALL.iter().position(|x| *x == point);
    let d = DECISIONS.iter().position(|x| *x == decision);
    let m = MODES.iter().position(|x| *x == mode);
    (p.unwrap_or(0) * DECISIONS.len() + d.unwrap_or(0)) * MODES.len() + m.unwrap_or(0)
}

impl Recorder {
    /// Counts each step of a verdict and queues the ones that matter.
    /// `request` is the record as it reached the chain (before patches).
    /// Runs on the judging thread: no I/O, no wait.
    pub fn observe(&self, chain: &Chain, request: &AdmissionRequest, verdict: &Verdict) {
        let at = SystemTime::now();
        let mut sha: Option<(String, serde_json::Value)> = None;
        for (entry, step) in chain.entries.iter().zip(&verdict.steps) {
            let (decision, code) = match (&step.decision, &step.error) {
                (_, Some(error)) => (RecordedDecision::Error, Some(error.kind.to_string())),
                (Some(Decision::Deny(denial)), _) => {
                    (RecordedDecision::Deny, Some(denial.code.clone()))
                }
                (Some(Decision::Patch { .. }), _) => (RecordedDecision::Patch, None),
                (Some(Decision::Throttle(t)), _) => {
                    (RecordedDecision::Throttle, Some(t.denial.code.clone()))
                }
                (Some(Decision::Flag(flag)), _) => {
                    (RecordedDecision::Flag, Some(flag.code.clone()))
                }
                _ => (RecordedDecision::Allow, None),
            };
            self.decisions[counter(chain.point, decision, step.mode)]
                .fetch_add(1, Ordering::Relaxed);
            let sample = entry.log.allow_sample;
            let keep = match decision {
                RecordedDecision::Allow => sample > 0 && rand::random_ratio(1, sample),
                _ => true,
            };
            if !keep
                || !self.placements.is_new(
                    request,
                    format!(
                        "{}\0{}\0{decision}\0{code:?}",
                        verdict.generation, step.plugin
                    ),
                )
            {
                continue;
            }
            let (request_sha256, record) = sha.get_or_insert_with(|| {
                let record = serde_json::to_value(request).unwrap_or_default();
                (request_sha256(&record), record)
            });
            let (plugin, version) = step.plugin.rsplit_once('@').unwrap_or((&step.plugin, ""));
            let new = NewDecision {
                at,
                point: chain.point.as_str(),
                generation: verdict.generation,
                plugin: plugin.to_string(),
                version: version.to_string(),
                mode: step.mode,
                monitor: step.mode == Mode::Monitor
                    && matches!(
                        decision,
                        RecordedDecision::Deny
                            | RecordedDecision::Patch
                            | RecordedDecision::Throttle
                    ),
                decision,
                code,
                key_id: key_id(request),
                request_sha256: request_sha256.clone(),
                request: entry.log.log_requests.then(|| record.clone()),
            };
            if self.queue.try_send(new).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The counters as Prometheus text.
    pub fn render(&self, out: &mut String) {
        let name = "switchyard_admission_decisions_total";
        let _ = writeln!(
            out,
            "# HELP {name} Policy answers by point, decision and binding mode (every one, recorded or not).\n# TYPE {name} counter"
        );
        for point in AdmissionPoint::ALL {
            for decision in DECISIONS {
                for mode in MODES {
                    let n = self.decisions[counter(point, decision, mode)].load(Ordering::Relaxed);
                    let _ = writeln!(
                        out,
                        "{name}{{point=\"{point}\",decision=\"{decision}\",mode=\"{mode}\"}} {n}"
                    );
                }
            }
        }
        for (name, help, value) in [
            (
                "switchyard_admission_decision_records_dropped_total",
                "Decision records dropped because the writer's queue was full.",
                &self.dropped,
            ),
            (
                "switchyard_admission_decision_records_written_total",
                "Decision records written to the database.",
                &self.written,
            ),
            (
                "switchyard_admission_decision_records_failed_total",
                "Decision records lost because their batch failed to write.",
                &self.failed,
            ),
        ] {
            let n = value.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {n}"
            );
        }
    }
}

/// Who asked: the API key id, `scheduler` for placements, `peer:<label>`
/// for a peer's calls. Never a token: records carry ids only.
fn key_id(request: &AdmissionRequest) -> String {
    match request {
        AdmissionRequest::Inference(r) => r.caller.key_id.clone(),
        AdmissionRequest::Deploy(r) => r.caller.key_id.clone(),
        AdmissionRequest::Transfer(r) => r.caller.key_id.clone(),
        AdmissionRequest::Federation(r) => format!("peer:{}", r.peer),
    }
}

/// Hex SHA-256 of a record's canonical JSON: object keys sorted, no
/// whitespace, so that anyone holding the record can check it.
pub fn request_sha256(record: &serde_json::Value) -> String {
    let mut text = String::new();
    canonical(record, &mut text);
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn canonical(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::from(key.as_str()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The writer: batches off the queue into the database until `stop`, then
/// what is left; prunes every `config.prune_every`.
pub async fn write(
    recorder: std::sync::Arc<Recorder>,
    store: Store,
    replica: String,
    config: DecisionLogConfig,
    stop: watch::Receiver<bool>,
) {
    let Some(queue) = recorder.receiver.lock().expect("recorder lock").take() else {
        return;
    };
    let batching = switchyard_store::batched::Batching {
        batch: BATCH,
        flush: FLUSH,
        prune_every: config.prune_every,
    };
    let keep = i64::try_from(config.keep).unwrap_or(i64::MAX);
    let (store, recorder) = (&store, &recorder);
    let write = |batch: Vec<NewDecision>| {
        let replica = replica.clone();
        async move { flush(recorder, store, &replica, &batch).await }
    };
    let prune = || async move {
        match store
            .prune_decisions(keep, config.max_age.as_secs_f64())
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::info!(deleted = n, "decision log pruned"),
            Err(e) => tracing::warn!(error = %e, "could not prune the decision log"),
        }
    };
    switchyard_store::batched::write_batched(queue, batching, stop, write, prune).await;
}

async fn flush(recorder: &Recorder, store: &Store, replica: &str, batch: &[NewDecision]) {
    let n = batch.len() as u64;
    match store.insert_decisions(replica, batch).await {
        Ok(_) => recorder.written.fetch_add(n, Ordering::Relaxed),
        Err(e) => {
            tracing::warn!(error = %e, records = n, "could not write decision records");
            recorder.failed.fetch_add(n, Ordering::Relaxed)
        }
    };
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_request_hash_is_over_sorted_keys_without_spaces() {
        let a = json!({"b": 1, "a": {"y": [1, "x"], "x": null}});
        let b: serde_json::Value =
            serde_json::from_str(r#"{ "a": {"x": null, "y": [1, "x"]}, "b": 1 }"#).unwrap();
        assert_eq!(request_sha256(&a), request_sha256(&b));
        let mut text = String::new();
        canonical(&a, &mut text);
        assert_eq!(text, r#"{"a":{"x":null,"y":[1,"x"]},"b":1}"#);
        assert_eq!(
            request_sha256(&a),
            hex::encode(Sha256::digest(text.as_bytes()))
        );
    }

    #[test]
    fn every_point_decision_and_mode_has_a_counter_of_its_own() {
        let mut seen = std::collections::HashSet::new();
        for point in AdmissionPoint::ALL {
            for decision in DECISIONS {
                for mode in MODES {
                    assert!(seen.insert(counter(point, decision, mode)));
                }
            }
        }
        assert_eq!(seen.len(), COUNTERS);
        assert!(seen.iter().all(|i| *i < COUNTERS));
    }

    #[test]
    fn a_placement_answered_the_same_way_again_is_recorded_once() {
        let deploy = |node: &str| {
            let mut record: serde_json::Value =
                serde_json::from_str(include_str!("../../../../sdk/test_data/deploy.json"))
                    .unwrap();
            record["node"] = json!(node);
            AdmissionRequest::from_json(AdmissionPoint::Deploy, record).unwrap()
        };
        let placements = Placements::default();
        let refused = |generation: i64| format!("{generation}\0guard@1\0deny\0Some(\"too_big\")");
        assert!(placements.is_new(&deploy("node-a"), refused(3)));
        assert!(
            !placements.is_new(&deploy("node-a"), refused(3)),
            "the next pass repeats it"
        );
        assert!(
            placements.is_new(&deploy("node-b"), refused(3)),
            "another node is another placement"
        );
        assert!(
            placements.is_new(&deploy("node-a"), refused(4)),
            "a new generation answers anew"
        );
        assert!(!placements.is_new(&deploy("node-a"), refused(4)));

        let inference = AdmissionRequest::from_json(
            AdmissionPoint::Inference,
            serde_json::from_str(include_str!("../../../../sdk/test_data/inference.json")).unwrap(),
        )
        .unwrap();
        assert!(placements.is_new(&inference, refused(3)));
        assert!(
            placements.is_new(&inference, refused(3)),
            "every request counts"
        );
    }
}
