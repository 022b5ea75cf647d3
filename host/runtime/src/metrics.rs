//! Per-plugin counters and latency histograms, lock-free on the call path.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::CallError;

/// Upper bounds of the latency buckets, in microseconds (Prometheus `le`).
const BUCKETS_US: [u64; 12] = [
    1, 2, 5, 10, 25, 50, 100, 250, 1_000, 10_000, 100_000, 1_000_000,
];

/// What one plugin (`name@version`) has done since this process started.
#[derive(Debug, Default)]
pub struct PluginMetrics {
    calls: AtomicU64,
    denials: AtomicU64,
    errors: AtomicU64,
    traps: AtomicU64,
    timeouts: AtomicU64,
    memory_limits: AtomicU64,
    buckets: [AtomicU64; BUCKETS_US.len()],
    latency_sum_ns: AtomicU64,
}

/// A point-in-time copy of [`PluginMetrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PluginCounts {
    /// Calls made (evaluations and settings validations).
    pub calls: u64,
    /// Evaluations that answered deny.
    pub denials: u64,
    /// Calls that failed for any reason.
    pub errors: u64,
    /// Calls that trapped.
    pub traps: u64,
    /// Calls interrupted by their deadline.
    pub timeouts: u64,
    /// Calls stopped by the memory cap.
    pub memory_limits: u64,
}

impl PluginMetrics {
    /// Records one finished call.
    pub(crate) fn record(&self, elapsed: Duration, outcome: Result<(), &CallError>) {
        self.calls.fetch_add(1, Relaxed);
        let us = elapsed.as_micros() as u64;
        if let Some(i) = BUCKETS_US.iter().position(|&b| us <= b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.latency_sum_ns
            .fetch_add(elapsed.as_nanos() as u64, Relaxed);
        if let Err(e) = outcome {
            self.errors.fetch_add(1, Relaxed);
            match e {
                CallError::Timeout(_) => &self.timeouts,
                CallError::MemoryLimit(_) => &self.memory_limits,
                CallError::Trap(_) | CallError::FuelExhausted => &self.traps,
                CallError::InvalidAnswer(_) => return,
            }
            .fetch_add(1, Relaxed);
        }
    }

    /// Records a deny answer.
    pub(crate) fn record_denial(&self) {
        self.denials.fetch_add(1, Relaxed);
    }

    /// The counters now.
    pub fn counts(&self) -> PluginCounts {
        PluginCounts {
            calls: self.calls.load(Relaxed),
            denials: self.denials.load(Relaxed),
            errors: self.errors.load(Relaxed),
            traps: self.traps.load(Relaxed),
            timeouts: self.timeouts.load(Relaxed),
            memory_limits: self.memory_limits.load(Relaxed),
        }
    }
}

/// A counter's name, help text and how to read it.
type Counter = (&'static str, &'static str, fn(&PluginCounts) -> u64);

/// Every plugin's metrics, kept across generations so counters do not reset on a swap.
#[derive(Debug, Default)]
pub struct MetricsRegistry {
    plugins: Mutex<BTreeMap<String, Arc<PluginMetrics>>>,
}

impl MetricsRegistry {
    /// The metrics of `name@version`, created on first use.
    pub fn plugin(&self, name: &str, version: &str) -> Arc<PluginMetrics> {
        self.plugins
            .lock()
            .expect("metrics lock")
            .entry(format!("{name}@{version}"))
            .or_default()
            .clone()
    }

    /// Prometheus text for every plugin.
    pub fn render_prometheus(&self, out: &mut String) {
        let plugins = self.plugins.lock().expect("metrics lock");
        let counters: [Counter; 6] = [
            (
                "switchyard_plugin_calls_total",
                "Calls into a plugin.",
                |c| c.calls,
            ),
            ("switchyard_plugin_denials_total", "Deny answers.", |c| {
                c.denials
            }),
            ("switchyard_plugin_errors_total", "Failed calls.", |c| {
                c.errors
            }),
            (
                "switchyard_plugin_traps_total",
                "Calls that trapped.",
                |c| c.traps,
            ),
            (
                "switchyard_plugin_timeouts_total",
                "Calls past their deadline.",
                |c| c.timeouts,
            ),
            (
                "switchyard_plugin_memory_limits_total",
                "Calls stopped by the memory cap.",
                |c| c.memory_limits,
            ),
        ];
        for (name, help, get) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (plugin, m) in plugins.iter() {
                let _ = writeln!(out, "{name}{{plugin=\"{plugin}\"}} {}", get(&m.counts()));
            }
        }
        let name = "switchyard_plugin_call_duration_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Latency of plugin calls.\n# TYPE {name} histogram"
        );
        for (plugin, m) in plugins.iter() {
            let mut cumulative = 0;
            for (i, bound) in BUCKETS_US.iter().enumerate() {
                cumulative += m.buckets[i].load(Relaxed);
                let le = *bound as f64 / 1e6;
                let _ = writeln!(
                    out,
                    "{name}_bucket{{plugin=\"{plugin}\",le=\"{le}\"}} {cumulative}"
                );
            }
            let count = m.calls.load(Relaxed);
            let sum = m.latency_sum_ns.load(Relaxed) as f64 / 1e9;
            let _ = writeln!(
                out,
                "{name}_bucket{{plugin=\"{plugin}\",le=\"+Inf\"}} {count}"
            );
            let _ = writeln!(out, "{name}_sum{{plugin=\"{plugin}\"}} {sum}");
            let _ = writeln!(out, "{name}_count{{plugin=\"{plugin}\"}} {count}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_counted_by_kind() {
        let m = PluginMetrics::default();
        m.record(Duration::from_micros(1), Ok(()));
        m.record(Duration::from_millis(100), Err(&CallError::Timeout(100)));
        m.record(Duration::from_micros(3), Err(&CallError::Trap("x".into())));
        m.record_denial();
        let c = m.counts();
        assert_eq!(
            (c.calls, c.errors, c.timeouts, c.traps, c.denials),
            (3, 2, 1, 1, 1)
        );
    }

    #[test]
    fn prometheus_histogram_is_cumulative() {
        let registry = MetricsRegistry::default();
        let m = registry.plugin("p", "1");
        m.record(Duration::from_micros(1), Ok(()));
        m.record(Duration::from_micros(40), Ok(()));
        let mut out = String::new();
        registry.render_prometheus(&mut out);
        assert!(
            out.contains(
                "switchyard_plugin_call_duration_seconds_bucket{plugin=\"p@1\",le=\"0.000001\"} 1"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "switchyard_plugin_call_duration_seconds_bucket{plugin=\"p@1\",le=\"0.00005\"} 2"
            ),
            "{out}"
        );
        assert!(
            out.contains("switchyard_plugin_calls_total{plugin=\"p@1\"} 2"),
            "{out}"
        );
    }
}
