//! What `/v1` did, for `/metrics`: requests by model and answer status, and
//! how long the answer's head took (admission, routing, the carrier and the
//! engine's first bytes), as a Prometheus histogram.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the head-latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];

/// The `model` label of a `/v1` answer for a model no deployment serves.
/// The label's values must be a set the operator controls: the model a
/// client asks for is any string, and one label value per string would grow
/// the exposition (and Prometheus's series) without bound.
pub const OTHER_MODEL: &str = "other";

/// The `model` label of an answer: the model asked for when a deployment
/// serves it (`is_served`), else [`OTHER_MODEL`].
pub fn model_label(asked: Option<&str>, is_served: impl FnOnce(&str) -> bool) -> &str {
    match asked {
        Some(model) if is_served(model) => model,
        _ => OTHER_MODEL,
    }
}

/// Counters since the start of this replica.
#[derive(Debug, Default)]
pub struct InferenceMetrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    head: Mutex<Histogram>,
}

#[derive(Debug, Default)]
struct Histogram {
    /// Per bucket of [`BUCKETS`], then `+Inf`.
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
}

impl InferenceMetrics {
    /// One answer: its model's label ([`model_label`]) and status.
    pub fn answered(&self, model: &str, status: u16) {
        *self
            .requests
            .lock()
            .expect("metrics lock")
            .entry((model.to_string(), status))
            .or_default() += 1;
    }

    /// Every answer so far, and those with a status of 400 or more.
    pub fn totals(&self) -> (u64, u64) {
        let requests = self.requests.lock().expect("metrics lock");
        requests
            .iter()
            .fold((0, 0), |(all, failed), ((_, status), n)| {
                (all + n, if *status >= 400 { failed + n } else { failed })
            })
    }

    /// The time from the request to the engine's answer head.
    pub fn head_after(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BUCKETS.len());
        let mut head = self.head.lock().expect("metrics lock");
        head.counts[bucket] += 1;
        head.sum += seconds;
    }

    /// Appends the Prometheus text.
    pub fn render(&self, out: &mut String) {
        let name = "switchyard_inference_requests_total";
        let _ = writeln!(
            out,
            "# HELP {name} /v1 requests by model and answer status.\n# TYPE {name} counter"
        );
        for ((model, status), n) in self.requests.lock().expect("metrics lock").iter() {
            let model = escape(model);
            let _ = writeln!(out, "{name}{{model=\"{model}\",status=\"{status}\"}} {n}");
        }
        let name = "switchyard_inference_head_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} From a /v1 request to the engine's answer head.\n# TYPE {name} histogram"
        );
        let head = self.head.lock().expect("metrics lock");
        let mut cumulative = 0;
        for (bound, n) in BUCKETS.iter().zip(head.counts) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        cumulative += head.counts[BUCKETS.len()];
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        let _ = writeln!(out, "{name}_sum {}", head.sum);
        let _ = writeln!(out, "{name}_count {cumulative}");
    }
}

/// A label value as Prometheus reads it.
pub fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_served_models_are_labels() {
        let served = |m: &str| m == "demo";
        assert_eq!(model_label(Some("demo"), served), "demo");
        assert_eq!(model_label(Some("x-random-123"), served), OTHER_MODEL);
        assert_eq!(model_label(None, served), OTHER_MODEL);
    }

    #[test]
    fn counts_and_buckets_render_cumulatively() {
        let metrics = InferenceMetrics::default();
        metrics.answered("demo", 200);
        metrics.answered("demo", 200);
        metrics.answered("a\"b", 429);
        metrics.head_after(Duration::from_micros(300));
        metrics.head_after(Duration::from_millis(20));
        metrics.head_after(Duration::from_secs(60));
        let mut out = String::new();
        metrics.render(&mut out);
        assert!(
            out.contains("switchyard_inference_requests_total{model=\"demo\",status=\"200\"} 2\n")
        );
        assert!(
            out.contains(
                "switchyard_inference_requests_total{model=\"a\\\"b\",status=\"429\"} 1\n"
            )
        );
        assert!(out.contains("switchyard_inference_head_seconds_bucket{le=\"0.0005\"} 1\n"));
        assert!(out.contains("switchyard_inference_head_seconds_bucket{le=\"0.025\"} 2\n"));
        assert!(out.contains("switchyard_inference_head_seconds_bucket{le=\"30\"} 2\n"));
        assert!(out.contains("switchyard_inference_head_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(out.contains("switchyard_inference_head_seconds_count 3\n"));
    }
}
